#!/usr/bin/env python3
"""Wall-time benchmark: median of --repeat simulations of burst, spaced and
KIT with

  - batkube run --sync exact (batkube-scheduler under the time shim),
  - batkube run --sync timeout --timeout 50ms, the 2020 setting, under the
    shim (the 2020 model: scheduler on simulated time) and with
    --shim none (scheduler on wall-clock time),
  - real Batsim with a trivial native scheduler (batsched filler) when
    `batsim` and `batsched` are installed, else the built-in stand-in with
    FCFS (labelled as such),

next to the 2020 Batkube numbers (kube-scheduler, timeout 50 ms). A cell
shows the median wall time of the runs that completed every job; otherwise
it says how many failed and why.

    python3 experiments/benchmark.py [--repeat 5]
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


BATKUBE_COLUMNS = {
    "batkube exact": ("exact", ["--sync", "exact"]),
    "batkube timeout 50ms, shim": ("timeout_shim", ["--sync", "timeout", "--timeout", "50ms"]),
    "batkube timeout 50ms, --shim none": ("timeout_noshim",
                                          ["--shim", "none", "--sync", "timeout", "--timeout", "50ms"]),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    t0 = time.perf_counter()
    bk = c.batkube()
    m = c.mode(bk)
    runnable = m == "run"
    engine = c.engine_line(bk, m)
    native = shutil.which("batsim") and shutil.which("batsched")
    native_label = "real Batsim + batsched filler" if native else "stand-in FCFS (Batsim not installed)"
    if not runnable:
        print("benchmark: `batkube run` or batkube-scheduler is not available; the batkube columns are empty",
              file=sys.stderr)
    rows, failures, detail = [], {}, []
    for case, (wl, pf) in c.CASES.items():
        cells = [case]
        for name, (short, args) in BATKUBE_COLUMNS.items():
            if not runnable:
                cells.append("n/a")
                continue
            ok, bad = [], []
            for i in range(a.repeat):
                r = c.run_batkube_full(bk, pf, wl, OUT / f"{case}_{short}_{i}", args)
                detail.append([case, name, i, f"{r.wall:.3f}", r.rc, r.summary.get("jobs_succeeded", ""),
                               r.summary.get("makespan", ""), "" if r.ok else r.why()[:150]])
                (ok if r.ok else bad).append(r)
            if bad:
                failures.setdefault((case, name), (bad[0].why()[:150], " ".join(bad[0].cmd)))
            cell = f"{statistics.median(r.wall for r in ok):.2f}" if ok else ""
            ended = [r for r in bad if r.rc == 0 and r.summary.get("jobs")]
            if not ok and ended:
                # Ran to the end but rejected pods: the wall time, marked incomplete.
                done = statistics.median(r.summary["jobs_succeeded"] for r in ended)
                cell = f"{statistics.median(r.wall for r in ended):.2f} (incomplete: {done:g}/{ended[0].summary['jobs']} jobs ran)"
                bad = [r for r in bad if r not in ended]
            if bad:
                cell += f"{' ' if cell else ''}({len(bad)}/{a.repeat} failed)"
            cells.append(cell)
            print(f"[{case}] {name}: {cell}", file=sys.stderr)
        times = [real_batsim(pf, wl, OUT / f"{case}_native_{i}") if native else
                 c.run_standin(bk, pf, wl, OUT / f"{case}_native_{i}") for i in range(a.repeat)]
        cells += [f"{statistics.median(times):.3f}", PAPER_2020[case]]
        rows.append(cells)
    header = ["workload", *[f"{n} (s)" for n in BATKUBE_COLUMNS], f"{native_label} (s)", "Batkube 2020 (s)"]
    c.write_csv(OUT / "benchmark.csv", header, rows)
    c.write_csv(OUT / "runs.csv", ["workload", "column", "run", "wall_s", "exit_code", "jobs_succeeded",
                                    "makespan", "failure"], detail)
    print(engine)
    print(f"median wall time (process start to exit) of {a.repeat} runs")
    c.print_table(header, rows)
    for (case, name), (why, cmd) in failures.items():
        print(f"  {case} / {name}: {why}\n    e.g. {cmd}")
    print(f"wrote {OUT}/benchmark.csv, runs.csv; total {time.perf_counter() - t0:.1f} s wall")


if __name__ == "__main__":
    main()
