#!/usr/bin/env python3
"""Wall-time benchmark: one simulation of burst, spaced and KIT with

  - batkube run --sync exact (batkube-scheduler),
  - batkube run --sync timeout --timeout 50ms (the 2020 setting),
  - real Batsim with a trivial native scheduler (batsched filler) when
    `batsim` and `batsched` are installed, else the built-in stand-in with
    FCFS (labelled as such),

next to the 2020 Batkube numbers (kube-scheduler, timeout 50 ms).

    python3 experiments/benchmark.py [--repeat 3]
Outputs: experiments/results/benchmark/benchmark.csv (no plotting needed)
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import time

import _common as c

OUT = c.RESULTS / "benchmark"
PAPER_2020 = {"burst": "~30", "spaced": "140-155", "KIT": "~40"}


def real_batsim(pf, wl, out):
    out.mkdir(parents=True, exist_ok=True)
    sched = subprocess.Popen(["batsched", "-v", "filler"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t = time.perf_counter()
        subprocess.run(["batsim", "-p", str(pf), "-w", str(wl), "-e", f"{out}/"], check=True,
                       capture_output=True)
        return time.perf_counter() - t
    finally:
        sched.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    bk = c.batkube()
    runnable = c.mode(bk) == "run"
    native = shutil.which("batsim") and shutil.which("batsched")
    native_label = "real Batsim + batsched filler" if native else "stand-in FCFS (Batsim not installed)"
    if not runnable:
        print("benchmark: `batkube run` or batkube-scheduler is not available; the batkube columns are empty",
              file=sys.stderr)
    rows = []
    for case, (wl, pf) in c.CASES.items():
        cols = {}
        for name, fn in (
            ("exact", lambda o: c.run_batkube(bk, pf, wl, o, ["--sync", "exact"])[0] if runnable else None),
            ("timeout_50ms", lambda o: c.run_batkube(bk, pf, wl, o, ["--sync", "timeout", "--timeout", "50ms"])[0]
             if runnable else None),
            ("native", lambda o: real_batsim(pf, wl, o) if native else c.run_standin(bk, pf, wl, o)),
        ):
            times = [fn(OUT / f"{case}_{name}_{i}") for i in range(a.repeat)]
            times = [t for t in times if t is not None]
            cols[name] = f"{statistics.median(times):.3f}" if times else "n/a"
        rows.append([case, cols["exact"], cols["timeout_50ms"], cols["native"], PAPER_2020[case]])
    header = ["workload", "batkube exact (s)", "batkube timeout 50ms (s)", f"{native_label} (s)",
              "Batkube 2020 (s)"]
    c.write_csv(OUT / "benchmark.csv", header, rows)
    print(f"median wall time of {a.repeat} runs; binary {bk}")
    c.print_table(header, rows)


if __name__ == "__main__":
    main()
