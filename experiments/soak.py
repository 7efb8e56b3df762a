#!/usr/bin/env python3
"""Soak: the same simulation N times, to find what only fails sometimes.

    python3 experiments/soak.py --runs 50 workloads/NASA-iPSC-1993-3.1.json platforms/128-node.xml

Each run is `batkube run` with the project's scheduler (or --scheduler CMD),
in its own session, killed after --stall-after seconds of wall time. A run is

- **completed**: exit 0, summary.json says completed, every job succeeded,
  and no warning in batkube's log about the quiescence accounting (pending
  watch-event counts, activity inconsistencies, a quiescence that moved);
- **stalled**: killed at --stall-after, or completed with such warnings (the
  run was slow to a crawl or lucky);
- **failed**: anything else (non-zero exit, jobs not all succeeded).

It prints a line per run (outcome, wall time, simulated makespan, jobs.csv
digest), then the counts, how many distinct jobs.csv the completed runs gave
(1 is the goal: runs are identical), and wall-time quantiles. The outputs of
each run stay in --out/run-NNN; --out/soak.csv has one row per run and
--out/soak.json the totals. Exit status: 0 when every run completed with
the same jobs.csv, 1 otherwise. With --fail-fast it stops at the first run
that is not completed or whose jobs.csv differs, and prints the end of that
run's log: what CI uses, so that a stall costs one --stall-after, not one per
run, and its output says where the run was.
"""

import argparse
import csv
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

# Log lines that mean the quiescence accounting went wrong, even if the run
# ended well.
SUSPECT = (
    "pending that no watcher holds",
    "activity accounting is inconsistent",
    "quiescence decided, yet the scheduler moved",
    "first movement after a quiescence decision",
    "moved after it was found quiescent",
)


def quantiles(values):
    """min, median, p90, max of a non-empty list."""
    v = sorted(values)
    p90 = v[min(len(v) - 1, max(0, round(0.9 * (len(v) - 1))))]
    return v[0], statistics.median(v), p90, v[-1]


def run_once(bk, args, out, scheduler):
    out.mkdir(parents=True, exist_ok=True)
    for f in ("summary.json", "jobs.csv"):
        (out / f).unlink(missing_ok=True)
    cmd = [bk, "run", "--platform", str(args.platform), "--workload", str(args.workload),
           "--scheduler", scheduler, "--out", str(out), *args.extra]
    t = time.perf_counter()
    with open(out / "batkube.log", "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=args.stall_after)
            killed = False
        except subprocess.TimeoutExpired:
            # SIGTERM first: batkube then writes its outputs, stops its
            # children and removes its clock page; SIGKILL if it hangs.
            os.killpg(p.pid, signal.SIGTERM)
            try:
                rc = p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                rc = p.wait()
            killed = True
    wall = time.perf_counter() - t
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        summary = {}
    text = (out / "batkube.log").read_text(errors="replace")
    suspect = sum(text.count(s) for s in SUSPECT)
    jobs = out / "jobs.csv"
    digest = hashlib.sha256(jobs.read_bytes()).hexdigest()[:16] if jobs.is_file() else ""
    ok = (rc == 0 and summary.get("completed")
          and summary.get("jobs_succeeded") == summary.get("jobs"))
    if killed:
        outcome, why = "stalled", f"killed after {args.stall_after:g} s"
    elif ok and suspect:
        outcome, why = "stalled", f"{suspect} quiescence warning(s) in batkube.log"
    elif ok:
        outcome, why = "completed", ""
    else:
        last = [l for l in text.strip().splitlines() if l.strip()]
        outcome, why = "failed", f"exit {rc}: {last[-1][:200] if last else '?'}"
    return {
        "outcome": outcome,
        "why": why,
        "wall_s": round(wall, 3),
        "makespan": summary.get("makespan"),
        "mean_wait": summary.get("mean_waiting_time"),
        "max_wait": summary.get("max_waiting_time"),
        "warnings": suspect,
        "jobs_csv": digest,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", type=Path)
    ap.add_argument("platform", type=Path)
    ap.add_argument("--runs", type=int, required=True, help="how many runs")
    ap.add_argument("--out", type=Path, help="output directory (default experiments/results/soak/<workload>)")
    ap.add_argument("--scheduler", help="scheduler command (default: the project's batkube-scheduler)")
    ap.add_argument("--stall-after", type=float, default=600.0,
                    help="wall seconds after which a run counts as stalled and is killed (default 600)")
    ap.add_argument("--fail-fast", action="store_true",
                    help="stop at the first run that does not complete, or whose jobs.csv differs "
                         "from the first run's, and print the end of its batkube.log")
    ap.add_argument("extra", nargs="*", help="more `batkube run` flags, after --")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    for p in (args.workload, args.platform):
        if not p.is_file():
            ap.error(f"{p}: no such file")
    bk = C.batkube()
    scheduler = args.scheduler or C.scheduler()
    if not scheduler:
        ap.error("no batkube-scheduler found (cargo build --release -p batkube-scheduler) and no --scheduler")
    out = args.out or C.RESULTS / "soak" / args.workload.stem
    out.mkdir(parents=True, exist_ok=True)
    print(f"soak: {args.runs} run(s) of {args.workload} on {args.platform}; "
          f"batkube {bk}; scheduler {scheduler}; outputs in {out}", flush=True)

    rows = []
    for i in range(1, args.runs + 1):
        r = run_once(bk, args, out / f"run-{i:03d}", scheduler)
        r["run"] = i
        rows.append(r)
        tail = f" ({r['why']})" if r["why"] else ""
        print(f"[{i}/{args.runs}] {r['outcome']:9} {r['wall_s']:8.1f} s  makespan {r['makespan']}  "
              f"jobs.csv {r['jobs_csv'] or '-'}{tail}", flush=True)
        differs = r["outcome"] == "completed" and r["jobs_csv"] != rows[0]["jobs_csv"]
        if args.fail_fast and (r["outcome"] != "completed" or differs):
            log = out / f"run-{i:03d}" / "batkube.log"
            lines = log.read_text(errors="replace").splitlines()
            print(f"--fail-fast: stopping after run {i}; the last lines of {log}:", flush=True)
            for line in lines[-40:]:
                print(f"    {line}", flush=True)
            break

    fields = ["run", "outcome", "wall_s", "makespan", "mean_wait", "max_wait", "warnings", "jobs_csv", "why"]
    with open(out / "soak.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("completed", "stalled", "failed")}
    digests = {r["jobs_csv"] for r in rows if r["outcome"] == "completed"}
    walls = [r["wall_s"] for r in rows]
    q = quantiles(walls)
    totals = {
        "runs": args.runs,
        "runs_done": len(rows),
        **counts,
        "distinct_jobs_csv": len(digests),
        "wall_s": {"min": q[0], "median": q[1], "p90": q[2], "max": q[3]},
        "workload": str(args.workload),
        "platform": str(args.platform),
        "scheduler": str(scheduler),
        "extra_flags": args.extra,
    }
    (out / "soak.json").write_text(json.dumps(totals, indent=2) + "\n")
    print(f"\n{counts['completed']} completed, {counts['stalled']} stalled, {counts['failed']} failed; "
          f"{len(digests)} distinct jobs.csv among the completed runs; "
          f"wall time min {q[0]:.1f} s, median {q[1]:.1f} s, p90 {q[2]:.1f} s, max {q[3]:.1f} s")
    good = counts["completed"] == args.runs and len(digests) == 1
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
