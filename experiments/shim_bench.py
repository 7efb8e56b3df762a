#!/usr/bin/env python3
"""Time shims side by side, in one run, medians of --repeat:

  - the cost of one clock read: linked (a load from the shared page),
    seccomp with the vDSO pointed at the page (the default: a load too),
    and seccomp with the vDSO hidden (a clock_gettime system call answered
    by the supervisor, TIMESHIM_SECCOMP_VDSO=hide), from
    timeshim's `clockloop` example under `simrun` ((wall(N) - wall(0)) / N);
  - burst and spaced wall time (and makespan / mean wait, which must not
    move) for batkube-scheduler linked, batkube-scheduler unmodified under
    --shim seccomp, and the upstream kube-scheduler under --shim seccomp
    (built from Go modules by schedulers/build-go.sh when missing).

  - the cost of `--deterministic`: the upstream kube-scheduler on burst,
    spaced and KIT with `--seed 1`, with and without the mode
    (`--no-deterministic`), run in interleaved pairs; the ratio of the
    medians, and how many distinct jobs.csv each side gave.

    python3 experiments/shim_bench.py [--repeat 5] [--reads 200000] [--load K]
        [--only-deterministic] [--cases burst,spaced,KIT]
Outputs: experiments/results/shim_bench/shim_bench.csv, and the table on stdout.
`--load K` keeps K CPU hogs busy beside the runs.
"""

import argparse
import csv
import hashlib
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common as c

OUT = c.RESULTS / "shim_bench"
KUBE_FLAGS = '--kubeconfig "$KUBECONFIG" --kube-api-content-type=application/json --leader-elect=false --secure-port=0'


def cargo_artifacts():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "batkube", "-p", "batkube-scheduler"],
                   cwd=c.ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "timeshim", "--examples"],
                   cwd=c.ROOT, check=True)
    rel = c.ROOT / "target" / "release"
    return rel / "batkube", rel / "batkube-scheduler", rel / "examples" / "simrun", rel / "examples" / "clockloop"


def kube_scheduler():
    path = c.ROOT / "target" / "go" / "kube-scheduler"
    print("[setup] schedulers/build-go.sh (a no-op when up to date)", file=sys.stderr)
    subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh")], check=True)
    if not path.is_file():
        sys.exit(f"shim_bench: {path} was not built")
    return path


def simrun_wall(simrun, clockloop, n, linked, env=None):
    cmd = [str(simrun)] + (["--linked"] if linked else []) + ["--", str(clockloop), str(n)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True,
                       env=dict(os.environ, **(env or {})))
    m = re.search(r"in ([0-9.]+) s of wall time", r.stderr)
    if not m:
        sys.exit(f"shim_bench: unexpected simrun output: {r.stderr}")
    return float(m.group(1))


def clock_read_ns(simrun, clockloop, reads, linked, repeat, env=None):
    per = []
    for _ in range(repeat):
        base = simrun_wall(simrun, clockloop, 0, linked, env)
        full = simrun_wall(simrun, clockloop, reads, linked, env)
        per.append(max(full - base, 0.0) / reads * 1e9)
    return statistics.median(per)


def run_case(bk, case, scheduler, shim, out, extra=()):
    wl, pf = c.CASES[case]
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    r = subprocess.run([str(bk), "run", "--platform", str(pf), "--workload", str(wl),
                        "--scheduler", scheduler, "--shim", shim, "--standin", "--out", str(out),
                        *extra],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        return {"ok": False, "wall": wall, "error": r.stderr.strip().splitlines()[-1:]}
    s = json.loads((out / "summary.json").read_text())
    return {"ok": True, "wall": wall, "makespan": s["makespan"], "mean_wait": s["mean_wait"],
            "windows": s["windows"], "jobs": hashlib.sha256((out / "jobs.csv").read_bytes()).hexdigest()}


def hog():
    while True:
        pass


def deterministic_rows(bk, cases, repeat):
    """`--seed 1` with and without `--no-deterministic`, interleaved."""
    cmd = f"{kube_scheduler()} {KUBE_FLAGS}"
    rows = []
    for case in cases:
        side = {"off": [], "on": []}
        for i in range(repeat):
            for mode, extra in (("off", ["--seed", "1", "--no-deterministic"]), ("on", ["--seed", "1"])):
                print(f"[{case}] kube-scheduler --deterministic {mode} run {i + 1}/{repeat}", file=sys.stderr)
                r = run_case(bk, case, cmd, "seccomp", OUT / "runs" / f"{case}-det-{mode}-{i}", extra)
                if not r["ok"]:
                    sys.exit(f"shim_bench: {case} --deterministic {mode} failed: {r['error']}")
                side[mode].append(r)
        off = statistics.median(r["wall"] for r in side["off"])
        on = statistics.median(r["wall"] for r in side["on"])
        for mode, med in (("off", off), ("on", on)):
            rs = side[mode]
            rows.append([case, f"seccomp, --seed 1{' --no-deterministic' if mode == 'off' else ''}",
                         "kube-scheduler", f"{med:.2f} s" + (f" ({on / off:.2f}x)" if mode == "on" else ""),
                         " / ".join(sorted({f"{r['makespan']:.6f}" for r in rs})),
                         " / ".join(sorted({f"{r['mean_wait']:.6f}" for r in rs})),
                         f"{len({r['jobs'] for r in rs})} distinct jobs.csv of {len(rs)}"])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reads", type=int, default=200_000)
    ap.add_argument("--no-kube-scheduler", action="store_true", help="skip the upstream kube-scheduler rows")
    ap.add_argument("--only-deterministic", action="store_true", help="only the --deterministic rows")
    ap.add_argument("--cases", default="burst,spaced,KIT", help="cases of the --deterministic rows")
    ap.add_argument("--load", type=int, default=0, help="CPU hogs beside the runs")
    a = ap.parse_args()
    cases = [x.strip() for x in a.cases.split(",") if x.strip()]
    for k in cases:
        if k not in c.CASES:
            ap.error(f"unknown case {k!r} (known: {', '.join(c.CASES)})")
    bk, ours, simrun, clockloop = cargo_artifacts()
    hogs = [multiprocessing.Process(target=hog, daemon=True) for _ in range(a.load)]
    for h in hogs:
        h.start()
    try:
        rows = measure(a, cases, bk, ours, simrun, clockloop)
    finally:
        for h in hogs:
            h.terminate()
    OUT.mkdir(parents=True, exist_ok=True)
    header = ["measure", "shim", "scheduler", "median", "makespan (all runs)", "mean wait (all runs)", "windows, or distinct outcomes"]
    with open(OUT / "shim_bench.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    print(f"(load: {a.load} CPU hogs beside the runs)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


def measure(a, cases, bk, ours, simrun, clockloop):
    if a.only_deterministic:
        return deterministic_rows(bk, cases, a.repeat)
    rows = []
    print(f"[clock] {a.reads} reads x {a.repeat}", file=sys.stderr)
    linked_ns = clock_read_ns(simrun, clockloop, a.reads * 50, True, a.repeat)
    seccomp_ns = clock_read_ns(simrun, clockloop, a.reads * 50, False, a.repeat)
    hidden_ns = clock_read_ns(simrun, clockloop, a.reads, False, a.repeat,
                              {"TIMESHIM_SECCOMP_VDSO": "hide"})
    rows.append(["clock read", "linked", "", f"{linked_ns:.1f} ns", "", "", ""])
    rows.append(["clock read", "seccomp (vDSO patched)", "", f"{seccomp_ns:.1f} ns", "", "", ""])
    rows.append(["clock read", "seccomp (vDSO hidden)", "", f"{hidden_ns:.1f} ns", "", "", ""])
    variants = [("batkube-scheduler", "linked", str(ours)), ("batkube-scheduler", "seccomp", str(ours))]
    if not a.no_kube_scheduler:
        variants.append(("kube-scheduler", "seccomp", f"{kube_scheduler()} {KUBE_FLAGS}"))
    for case in ("burst", "spaced"):
        for name, shim, cmd in variants:
            res = []
            for i in range(a.repeat):
                print(f"[{case}] {name} --shim {shim} run {i + 1}/{a.repeat}", file=sys.stderr)
                res.append(run_case(bk, case, cmd, shim, OUT / "runs" / f"{case}-{name}-{shim}-{i}"))
            ok = [r for r in res if r["ok"]]
            if not ok:
                rows.append([case, shim, name, f"all {len(res)} failed: {res[0]['error']}", "", "", ""])
                continue
            walls = statistics.median(r["wall"] for r in ok)
            spans = sorted({f"{r['makespan']:.6f}" for r in ok})
            waits = sorted({f"{r['mean_wait']:.6f}" for r in ok})
            rows.append([case, shim, name, f"{walls:.2f} s", " / ".join(spans), " / ".join(waits),
                         f"{statistics.median(r['windows'] for r in ok):.0f}"
                         + ("" if len(ok) == len(res) else f" ({len(res) - len(ok)} failed)")])
    if not a.no_kube_scheduler:
        rows += deterministic_rows(bk, cases, a.repeat)
    return rows


if __name__ == "__main__":
    main()
