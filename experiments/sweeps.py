#!/usr/bin/env python3
"""Experiment 2: the three parameter sweeps of the 2020 study (timeout,
min-delay, max timestep) with `batkube run --sync timeout`, next to
`--sync exact` and over the 2020 results.

Each timeout-mode point runs twice:
  - "shim":    the scheduler on simulated time (the time shim), the 2020
               prototype's model (its kube-scheduler ran on a patched Go
               time library);
  - "no shim": `--shim none`, the scheduler on wall-clock time, the broker
               closing each window at the first decision or after --timeout.
Other flags keep the 2020 setting (timeout 50 ms, min-delay 0, max timestep
1000 s); the max-timestep sweep turns backoff wake-ups on
(--base-timestep min(1 s, value)); a point longer than 150 s counts as failed. One run per point (the 2020 files have
1 to 15): our exact mode is deterministic, the timeout mode is not.

    python3 experiments/sweeps.py                 # burst, a few values per sweep
    python3 experiments/sweeps.py --workloads burst,spaced,KIT
Needs `batkube run` and batkube-scheduler; without them it says so, plots the
2020 curves alone and exits with status 3.
Outputs: experiments/results/sweeps/{sweeps.csv,<sweep>_<workload>.png}
"""

import argparse
import csv
import re
import statistics
import sys
import time

import _common as c

c.ensure_venv()
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = c.RESULTS / "sweeps"
FILES = {"burst": "200_delay170", "spaced": "spaced_200_delay170", "KIT": "KIT_10h_80"}
# sweep -> (2020 file prefix, 2020 column, values in ms, as the 2020 files sample them)
SWEEPS = {
    "timeout": ("timeout", "timeout", [0, 1, 2, 5, 10, 20, 50, 100]),
    "min-delay": ("min-delay", "delay", [0, 10, 20, 50]),
    "max-timestep": ("max-timestep", "max_timestep", [1000, 10000, 100000, 1000000]),
}
SHIMS = {"shim": [], "no shim": ["--shim", "none"]}


def flags(sweep, v):
    """`batkube run` flags for one point (v in ms; the 2020 setting
    elsewhere: timeout 50 ms, min-delay 0, max timestep 1000 s)."""
    f = {"--timeout": "50ms", "--min-delay": "0ms", "--max-timestep": "1000"}
    if sweep == "timeout":
        f["--timeout"] = f"{v}ms"
    elif sweep == "min-delay":
        f["--min-delay"] = f"{v}ms"
    else:
        f["--max-timestep"] = f"{v / 1000:g}"
        f["--base-timestep"] = f"{min(1.0, v / 1000):g}"
    return ["--sync", "timeout"] + [x for kv in f.items() for x in kv]


def reference(sweep, case):
    """2020 points: value -> [(makespan or None, wall s, completed)]."""
    prefix, col, _ = SWEEPS[sweep]
    p = c.REFERENCE / "results" / f"{prefix}_{FILES[case]}.csv"
    pts = {}
    if not p.exists():
        return pts
    with open(p) as f:
        for r in csv.DictReader(f):
            try:
                x = float(r[col])
                # min-delay files record whether the run completed, not its makespan.
                ms = float(r["makespan"]) if r.get("makespan") else None
                ok = r.get("exit_code", "0") == "0"
                d = float(r["duration"])
            except (KeyError, ValueError):
                continue
            pts.setdefault(x, []).append((ms, d, ok))
    return pts


def point(r):
    """(makespan or nan, fraction of jobs that succeeded) of one run."""
    s = r.summary
    frac = (s.get("jobs_succeeded", 0) / s["jobs"]) if s.get("jobs") else 0.0
    ms = s.get("makespan", float("nan")) if r.ok else float("nan")
    return ms, frac


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="burst", help="comma-separated among burst,spaced,KIT (default burst)")
    ap.add_argument("--full", action="store_true", help="same as --workloads burst,spaced,KIT")
    a = ap.parse_args()
    t0 = time.perf_counter()
    bk = c.batkube()
    runnable = c.mode(bk) == "run"
    engine = c.engine_line(bk, c.mode(bk))
    print(engine, file=sys.stderr)
    if not runnable:
        print("sweeps: NOT RUN: `batkube run` with batkube-scheduler is not usable here "
              f"({bk}: no `run` subcommand, no batkube-scheduler binary, or BATKUBE_MODE=standin). "
              "Plotting the 2020 results alone.", file=sys.stderr)
    cases = list(FILES) if a.full else a.workloads.split(",")
    rows, errors = [], {}
    header = ["sweep", "workload", "sync", "shim", "value_ms", "jobs_succeeded", "jobs_rejected", "makespan_s",
              "mean_wait_s", "overcommits", "wall_s", "exit_code", "error"]

    def record(sweep, case, sync, shim, v, r):
        s = r.summary
        rows.append([sweep, case, sync, shim, v, f"{s.get('jobs_succeeded', '')}/{s.get('jobs', '')}",
                     s.get("jobs_rejected", ""), f"{s.get('makespan', float('nan')):.3f}",
                     f"{s.get('mean_wait', float('nan')):.3f}", s.get("overcommit_count", ""),
                     f"{r.wall:.3f}", r.rc, "" if r.ok else r.why()[:160]])
        if not r.ok:
            why = re.sub(r"\d+\.\d+s", "T", r.why()[:200])
            why = re.sub(r"\d+/(\d+) jobs succeeded, \d+ rejected", r"only some of \1 jobs succeeded, the rest rejected", why)
            errors.setdefault(why, []).append(" ".join(r.cmd))

    for case in cases:
        wl, pf = c.CASES[case]
        exact = None
        if runnable:
            exact = c.run_batkube_full(bk, pf, wl, OUT / f"{case}_exact", ["--sync", "exact"])
            record("(none)", case, "exact", "shim", "", exact)
            print(f"[{case}] exact: makespan {exact.summary.get('makespan')}, {exact.wall:.2f} s wall", file=sys.stderr)
        for sweep, (_, _, values) in SWEEPS.items():
            ref = reference(sweep, case)
            fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4.4))
            xs = sorted(ref)
            if xs:
                mss = [[m for m, _, _ in ref[x] if m is not None] for x in xs]
                if any(mss):
                    ax1.plot([x for x, m in zip(xs, mss) if m], [statistics.fmean(m) for m in mss if m],
                             "o-", ms=2, color="grey", label="Batkube 2020")
                ax2.plot(xs, [statistics.fmean(1.0 if ok else 0.0 for _, _, ok in ref[x]) for x in xs],
                         "o-", ms=2, color="grey", label="Batkube 2020 (runs that completed)")
                ax3.plot(xs, [statistics.fmean(d for _, d, _ in ref[x]) for x in xs], "o-", ms=2,
                         color="grey", label="Batkube 2020")
            if runnable:
                for shim, extra in SHIMS.items():
                    pts = []
                    for v in values:
                        out = OUT / f"{case}_{sweep}_{v:g}_{shim.replace(' ', '')}"
                        r = c.run_batkube_full(bk, pf, wl, out, extra + flags(sweep, v), timeout=150)
                        record(sweep, case, "timeout", shim, v, r)
                        ms, frac = point(r)
                        pts.append((v, ms, frac, r.wall if r.ok else float("nan")))
                        print(f"[{sweep} {case} {shim}] {v} ms: {'ok' if r.ok else r.why()[:100]}, "
                              f"makespan {ms:.1f}, {r.wall:.2f} s wall", file=sys.stderr)
                    lab = f"batkube --sync timeout, {shim}"
                    ax1.plot([p[0] for p in pts], [p[1] for p in pts], "s-", ms=4, label=lab)
                    ax2.plot([p[0] for p in pts], [p[2] for p in pts], "s-", ms=4,
                             label=f"{lab} (fraction of jobs that ran)")
                    ax3.plot([p[0] for p in pts], [p[3] for p in pts], "s-", ms=4, label=lab)
                if exact is not None and exact.ok:
                    ax1.axhline(exact.summary["makespan"], color="green", linestyle="--", label="batkube --sync exact")
                    ax2.axhline(1.0, color="green", linestyle="--", label="batkube --sync exact")
                    ax3.axhline(exact.wall, color="green", linestyle="--", label="batkube --sync exact")
            for ax, yl in ((ax1, "makespan (s), complete runs only"), (ax2, "completed"),
                           (ax3, "wall time per simulation (s), complete runs")):
                ax.set_xlabel(f"{sweep} (ms)")
                ax.set_ylabel(yl)
                ax.set_xscale("symlog", linthresh=1)
                if ax is not ax2:
                    ax.set_yscale("log")
                ax.set_xlim(left=0)
                ax.grid(alpha=0.3)
                ax.legend(fontsize=6)
            ax2.set_ylim(-0.05, 1.05)
            fig.suptitle(f"{sweep} sweep, {case} ({engine})", fontsize=8)
            fig.tight_layout()
            OUT.mkdir(parents=True, exist_ok=True)
            fig.savefig(OUT / f"{sweep}_{case}.png", dpi=110)
            plt.close(fig)
    print(engine)
    if rows:
        c.write_csv(OUT / "sweeps.csv", header, rows)
        c.print_table(header[:-1], [r[:-1] for r in rows])
    if errors:
        print("\nfailures (reason: count, first command):")
        for why, cmds in errors.items():
            print(f"  {why}: {len(cmds)} run(s), e.g. {cmds[0]}")
    print(f"wrote {OUT}; total {time.perf_counter() - t0:.1f} s wall")
    if not runnable:
        sys.exit(3)


if __name__ == "__main__":
    main()
