#!/usr/bin/env python3
"""Go's forced collection on simulated time: the same cases with and without it.

Under `--shim seccomp` the launcher sets each Go program's
`runtime.forcegcperiod` to never (timeshim/src/seccomp/gort.rs): no full
collection every two minutes of simulated time, and an idle program's
sysmon sleeps until its next timer rather than waking every simulated
minute. `TIMESHIM_GO_FORCED_GC=keep` in batkube's environment leaves the
period as it was. This runs each case twice, exactly (`--seed 1`, so the
Go programs are deterministic, and `--log-requests`): with the period kept
(`kept/`) and with the launcher's default (`never/`), then `batkube compare`
names the first difference in jobs.csv, pods.csv or any program's requests.
The cases are `elide_compare.py`'s (two tenants' parallel jobs on 16
machines, another seed per case), and optionally a prefix of the NASA trace.

Writes results/forced_gc_compare/forced_gc_compare.csv (one row per setup and
case: identical or the first difference, windows, wall and the programs' CPU
time of both runs) and prints a table.

    python3 experiments/forced_gc_compare.py [--setups volcano,kueue,coscheduling,batkube] [--cases 20]
        [--jobs 12] [--nasa-jobs K] [--elide RULES] [--reuse]
"""

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import time

import _common as c
import elide_compare
import queue_compare

OUT = c.RESULTS / "forced_gc_compare"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setups", default="volcano,kueue,coscheduling,batkube",
                    help="volcano, kueue (with kube-scheduler), yunikorn, coscheduling (kube-scheduler + "
                         "Coscheduling), batkube (linked: not a Go program, the control)")
    ap.add_argument("--cases", type=int, default=20, help="generated cases per setup (default 20)")
    ap.add_argument("--jobs", type=int, default=12, help="jobs per generated case (default 12)")
    ap.add_argument("--nasa-jobs", type=int, default=0, metavar="K",
                    help="also the first K jobs of the NASA iPSC parallel trace, on 128 nodes (default: none)")
    ap.add_argument("--elide", default="none", help="batkube run --elide for both runs (default none: exact)")
    ap.add_argument("--reuse", action="store_true", help="keep runs already made")
    ap.add_argument("--time-limit", type=float, default=900, metavar="SECONDS",
                    help="stop one run after this much wall time (default 900)")
    args = ap.parse_args()
    base = OUT if args.elide == "none" else OUT / f"elide-{args.elide.replace(',', '+').replace(':', '-')}"
    base.mkdir(parents=True, exist_ok=True)
    bk, chosen = elide_compare.setups(args.setups.split(","), base)
    cases = [(f"case-{i:02d}", elide_compare.case_workload(bk, base, i, args.jobs), c.PLATFORMS / "16-node.xml",
              queue_compare.CLUSTERS["generated"]) for i in range(args.cases)]
    if args.nasa_jobs:
        nasa_dir = base / f"nasa-{args.nasa_jobs}"
        cases.append((f"nasa-{args.nasa_jobs}", queue_compare.nasa_workload(nasa_dir, args.nasa_jobs, 1.0),
                      c.PLATFORMS / "128-node.xml", queue_compare.CLUSTERS["nasa"]))
    rows = []
    for setup, (cmd, flags) in chosen.items():
        for name, w, platform, cluster in cases:
            out = base / setup / name
            f = list(flags)
            if cluster is not queue_compare.CLUSTERS["generated"] and setup in ("kueue", "yunikorn"):
                f = queue_compare.schedulers([setup], out, cluster)[1][setup][2]
            for variant in ("kept", "never"):
                d = out / variant
                if args.reuse and (d / "summary.json").is_file():
                    continue
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                env = dict(os.environ)
                env.pop("TIMESHIM_GO_FORCED_GC", None)
                if variant == "kept":
                    env["TIMESHIM_GO_FORCED_GC"] = "keep"
                print(f"[run] {setup} {name} {variant}", file=sys.stderr)
                t0 = time.monotonic()
                try:
                    subprocess.run([bk, "run", "--platform", str(platform), "--workload", str(w),
                                    "--scheduler", cmd, "--out", str(d), *f, "--log-requests",
                                    *(["--elide", args.elide] if setup != "batkube" else []),
                                    *([] if setup == "batkube" else ["--seed", "1"])],
                                   stdout=subprocess.DEVNULL, stderr=open(d / "run.log", "w"), env=env,
                                   timeout=args.time_limit)
                except subprocess.TimeoutExpired:
                    print(f"[run] {setup} {name} {variant}: --time-limit reached", file=sys.stderr)
                (d / "wall_s").write_text(f"{time.monotonic() - t0:.1f}\n")
            cmp = subprocess.run([bk, "compare", str(out / "kept"), str(out / "never")],
                                 capture_output=True, text=True)
            (out / "compare.txt").write_text(cmp.stdout + cmp.stderr)
            first = next((line for line in cmp.stdout.splitlines() if line.startswith("first difference")), "")
            a, b = elide_compare.summary(out / "kept"), elide_compare.summary(out / "never")
            rows.append({
                "setup": setup, "case": name,
                "result": "identical" if cmp.returncode == 0 else ("differs" if cmp.returncode == 1 else "failed"),
                "first_difference": first.replace("first difference, ", ""),
                "windows_kept": a.get("windows", 0), "windows_never": b.get("windows", 0),
                "wall_kept": a.get("wall_seconds", 0.0), "wall_never": b.get("wall_seconds", 0.0),
                "cpu_kept": sum(a.get("program_cpu_seconds", {}).values()),
                "cpu_never": sum(b.get("program_cpu_seconds", {}).values()),
                "completed": bool(a.get("completed")) and bool(b.get("completed")),
            })
    with open(base / "forced_gc_compare.csv", "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print(f"Go's forced collection kept -> never (`--seed 1`, --elide {args.elide}), "
          f"{base / 'forced_gc_compare.csv'}:\n")
    print("| setup | cases identical | windows, median kept -> never | wall (s), median kept -> never "
          "| programs' CPU (s), total kept -> never |")
    print("|---|---:|---:|---:|---:|")
    for setup in chosen:
        rs = [r for r in rows if r["setup"] == setup]
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        same = sum(r["result"] == "identical" for r in rs)
        print(f"| {setup} | {same}/{len(rs)} | {med('windows_kept'):.0f} -> {med('windows_never'):.0f} "
              f"| {med('wall_kept'):.1f} -> {med('wall_never'):.1f} | {sum(r['cpu_kept'] for r in rs):.1f} -> "
              f"{sum(r['cpu_never'] for r in rs):.1f} |")
    for r in rows:
        if r["result"] != "identical":
            print(f"- {r['setup']} {r['case']}: {r['result']} {r['first_difference']}")


if __name__ == "__main__":
    main()
