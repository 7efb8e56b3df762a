#!/usr/bin/env python3
"""How much a scheduler's results vary: one case run over many seeds
(`batkube run --seed N`, under `--shim seccomp`), the distribution of
makespan and mean wait (mean, standard deviation, min, max) and how many
different outcomes (distinct jobs.csv: times and allocations) the runs gave.

    python3 experiments/variability.py [--scheduler upstream|batkube|'CMD'] [--cases burst,spaced,KIT]
        [--seeds 20] [--first-seed 1] [--repeat 1] [--load K] [--no-deterministic] [--out DIR]

- `--scheduler upstream` (default): the upstream kube-scheduler built by
  schedulers/build-go.sh (default profile, no leader election); `batkube`:
  batkube-scheduler (its ties broken by `--tie-break-seed`, so the seed
  decides among equal nodes); anything else is a command as `batkube run
  --scheduler` takes it.
- `--repeat R` runs each seed R times: distinct outcomes among the repeats
  of one seed are what the seed does not decide (races between the
  program's threads, decided by the OS).
- `--load K` keeps K CPU hogs busy beside the runs (the machine as a
  sweep leaves it); `0` for an idle machine.
- `--seed` makes `batkube run` deterministic (each seed names one outcome,
  the distribution is over what the seeds choose); `--no-deterministic`
  runs the program's threads as the OS schedules them, and the spread
  then includes what the seed does not decide (use `--repeat`).

Outputs: DIR/runs.csv (a row per run: case, seed, repeat, makespan,
mean wait, outcome digest, wall), DIR/variability.csv (a row per case),
the table on stdout (Markdown). DIR defaults to
experiments/results/variability/<scheduler>.
"""

import argparse
import csv
import hashlib
import json
import multiprocessing
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common as c


def hog():
    while True:
        pass


def outcome(out):
    """A digest of jobs.csv's decisions: per job its start, finish and
    allocation (the columns a scheduler decides), in job order."""
    rows = []
    with open(out / "jobs.csv", newline="") as f:
        for r in csv.DictReader(f):
            rows.append((r["job_id"], r["starting_time"], r["finish_time"],
                         r.get("allocated_resources", "")))
    rows.sort()
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:12]


def scheduler_command(which):
    if which == "upstream":
        print("[setup] schedulers/build-go.sh kube-scheduler (a no-op when up to date)", file=sys.stderr)
        subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh"), "kube-scheduler"], check=True)
        ks = c.ROOT / "target" / "go" / "kube-scheduler"
        return "upstream", f'{ks} --kubeconfig "$KUBECONFIG" --secure-port=0 --leader-elect=false'
    if which == "batkube":
        return "batkube", f"{c.scheduler()} --tie-break-seed $BATKUBE_SEED"
    return hashlib.sha256(which.encode()).hexdigest()[:8], which


def stats(xs):
    m, sd = c.mean_sd(xs)
    return m, sd, min(xs), max(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scheduler", default="upstream")
    ap.add_argument("--cases", default="burst,spaced,KIT")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--load", type=int, default=0, help="CPU hogs beside the runs")
    ap.add_argument("--deterministic", action="store_true",
                    help="the default (kept for older command lines)")
    ap.add_argument("--no-deterministic", action="store_true",
                    help="batkube run --no-deterministic: threads as the OS schedules them")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    cases = [x.strip() for x in args.cases.split(",") if x.strip()]
    for k in cases:
        if k not in c.CASES:
            ap.error(f"unknown case {k!r} (known: {', '.join(c.CASES)})")
    if args.seeds < 1 or args.repeat < 1 or args.load < 0:
        ap.error("--seeds and --repeat must be at least 1, --load at least 0")
    bk = c.batkube()
    name, cmd = scheduler_command(args.scheduler)
    out_dir = args.out or c.RESULTS / "variability" / name
    out_dir.mkdir(parents=True, exist_ok=True)

    hogs = [multiprocessing.Process(target=hog, daemon=True) for _ in range(args.load)]
    for h in hogs:
        h.start()
    rows, table = [], []
    try:
        for case in cases:
            wl, pf = c.CASES[case]
            results = []
            total = args.seeds * args.repeat
            for k, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
                for rep in range(args.repeat):
                    out = out_dir / case / f"seed-{seed}-{rep}"
                    out.mkdir(parents=True, exist_ok=True)
                    env = dict(os.environ, BATKUBE_SEED=str(seed))
                    argv = [bk, "run", "--platform", str(pf), "--workload", str(wl), "--scheduler", cmd,
                            "--standin", "--shim", "seccomp", "--seed", str(seed), "--out", str(out)]
                    if args.no_deterministic:
                        argv.append("--no-deterministic")
                    t = time.perf_counter()
                    p = subprocess.run(argv, capture_output=True, text=True, env=env)
                    wall = time.perf_counter() - t
                    if p.returncode != 0:
                        sys.exit(f"variability: {case} seed {seed} failed ({p.returncode}): "
                                 f"{shlex.join(argv)}\n{p.stderr[-2000:]}")
                    s = json.loads((out / "summary.json").read_text())
                    r = (case, seed, rep, s["makespan"], s["mean_wait"], outcome(out), round(wall, 2))
                    results.append(r)
                    rows.append(r)
                    print(f"[{case} {k * args.repeat + rep + 1}/{total}] seed {seed}: makespan "
                          f"{r[3]:.3f} s, mean wait {r[4]:.3f} s, outcome {r[5]}, {wall:.1f} s wall",
                          file=sys.stderr)
            mk = stats([r[3] for r in results])
            mw = stats([r[4] for r in results])
            distinct = len({r[5] for r in results})
            per_seed = {}
            for r in results:
                per_seed.setdefault(r[1], set()).add(r[5])
            within = max(len(v) for v in per_seed.values())
            table.append((case, len(results), distinct, within, *mk, *mw,
                          statistics.median(r[6] for r in results)))
    finally:
        for h in hogs:
            h.terminate()
    c.write_csv(out_dir / "runs.csv",
                ["case", "seed", "repeat", "makespan", "mean_wait", "outcome", "wall_s"], rows)
    header = ["case", "runs", "distinct outcomes", "most outcomes of one seed",
              "makespan mean", "makespan sd", "makespan min", "makespan max",
              "mean wait mean", "mean wait sd", "mean wait min", "mean wait max", "median wall (s)"]
    c.write_csv(out_dir / "variability.csv", header, table)
    print(f"\nscheduler: {cmd}\nseeds {args.first_seed}..{args.first_seed + args.seeds - 1}, "
          f"{args.repeat} run(s) per seed, {args.load} CPU hog(s)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for t in table:
        cells = [t[0], str(t[1]), str(t[2]), str(t[3] if args.repeat > 1 else "-")]
        cells += [f"{x:.3f}" for x in t[4:12]] + [f"{t[12]:.1f}"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
