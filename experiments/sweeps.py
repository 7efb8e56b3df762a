#!/usr/bin/env python3
"""Experiment 2: the three parameter sweeps of the 2020 study (timeout,
min-delay, max timestep), run with `batkube run --sync timeout` next to
`--sync exact`, plotted over the 2020 results.

    python3 experiments/sweeps.py            # quick: burst, a few values per sweep
    python3 experiments/sweeps.py --full     # every 2020 value, all workloads
Needs `batkube run` and batkube-scheduler; without them it says so, plots the
2020 curves alone and exits with status 3.
Outputs: experiments/results/sweeps/{sweeps.csv,<sweep>_<workload>.png}
"""

import argparse
import csv
import statistics
import sys

import _common as c

c.ensure_venv()
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = c.RESULTS / "sweeps"
FILES = {"burst": "200_delay170", "spaced": "spaced_200_delay170", "KIT": "KIT_10h_80"}
# sweep -> (2020 file prefix, 2020 column, unit of the 2020 values, quick values)
SWEEPS = {
    "timeout": ("timeout", "timeout", "ms", [0, 1, 2, 5, 10, 50, 100]),
    "min-delay": ("min-delay", "delay", "ms", [0, 10, 50]),
    "max-timestep": ("max-timestep", "max_timestep", "ms", [1000, 10000, 100000, 1000000]),
}


def flags(sweep, v):
    """`batkube run` flags for one point (the 2020 setting elsewhere:
    timeout 50 ms, min-delay 0, max timestep 1000 s)."""
    base = {"timeout": "50ms", "min-delay": "0ms", "max-timestep": "1000"}
    if sweep == "timeout":
        base["timeout"] = f"{v}ms"
    elif sweep == "min-delay":
        base["min-delay"] = f"{v}ms"
    else:
        base["max-timestep"] = f"{v / 1000:g}"
    return ["--sync", "timeout", "--timeout", base["timeout"], "--min-delay", base["min-delay"],
            "--max-timestep", base["max-timestep"]]


def reference(sweep, case):
    prefix, col, _, _ = SWEEPS[sweep]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="every 2020 value, every workload")
    a = ap.parse_args()
    bk = c.batkube()
    runnable = c.mode(bk) == "run"
    if not runnable:
        print("sweeps: NOT RUN: `batkube run` with batkube-scheduler is not usable here "
              f"({bk}: no `run` subcommand, no batkube-scheduler binary, or BATKUBE_MODE=standin). "
              "Plotting the 2020 results alone.", file=sys.stderr)
    cases = list(FILES) if a.full else ["burst"]
    rows = []
    for sweep, (_, _, unit, quick) in SWEEPS.items():
        for case in cases:
            wl, pf = c.CASES[case]
            ref = reference(sweep, case)
            values = sorted(ref) if a.full else quick
            fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
            xs = sorted(ref)
            # Without makespans (min-delay), the left panel shows how many runs completed.
            by_rate = bool(xs) and all(m is None for x in xs for m, _, _ in ref[x])
            if by_rate:
                ax1.plot(xs, [statistics.fmean(1.0 if ok else 0.0 for _, _, ok in ref[x]) for x in xs],
                         "o-", ms=3, label="Batkube 2020 (timeout model)")
            else:
                ax1.plot(xs, [statistics.fmean(m for m, _, _ in ref[x] if m is not None) for x in xs],
                         "o-", ms=3, label="Batkube 2020 (timeout model)")
            ax2.plot(xs, [statistics.fmean(d for _, d, _ in ref[x]) for x in xs], "o-", ms=3, label="Batkube 2020")
            if runnable:
                wall, rc = c.run_batkube(bk, pf, wl, OUT / f"{case}_exact", ["--sync", "exact"], check=False)
                exact = c.makespan(c.read_jobs(OUT / f"{case}_exact" / "jobs.csv")) if rc == 0 else float("nan")
                rows.append([sweep, case, "exact", "", f"{exact:.3f}", f"{wall:.3f}", rc])
                ours_ms, ours_wall = [], []
                for v in values:
                    out = OUT / f"{case}_{sweep}_{v:g}"
                    w, rc = c.run_batkube(bk, pf, wl, out, flags(sweep, v), check=False)
                    ms = c.makespan(c.read_jobs(out / "jobs.csv")) if rc == 0 else float("nan")
                    ours_ms.append(ms)
                    ours_wall.append(w)
                    rows.append([sweep, case, "timeout", v, f"{ms:.3f}", f"{w:.3f}", rc])
                    print(f"[{sweep} {case}] {v} {unit}: makespan {ms:.1f} s, {w:.2f} s wall", file=sys.stderr)
                if by_rate:
                    ax1.plot(values, [0.0 if ms != ms else 1.0 for ms in ours_ms], "s-", ms=3,
                             label="batkube --sync timeout")
                    ax1.axhline(0.0 if exact != exact else 1.0, color="green", linestyle="--",
                                label="batkube --sync exact")
                else:
                    ax1.plot(values, ours_ms, "s-", ms=3, label="batkube --sync timeout")
                    ax1.axhline(exact, color="green", linestyle="--", label="batkube --sync exact")
                ax2.plot(values, ours_wall, "s-", ms=3, label="batkube --sync timeout")
                ax2.axhline(wall, color="green", linestyle="--", label="batkube --sync exact")
            left = "runs completed (fraction)" if by_rate else "makespan (s)"
            for ax, yl in ((ax1, left), (ax2, "wall time per simulation (s)")):
                ax.set_xlabel(f"{sweep} ({unit})")
                ax.set_ylabel(yl)
                ax.set_xscale("symlog")
                if not (ax is ax1 and by_rate):
                    ax.set_yscale("log")
                ax.legend(fontsize=7)
            fig.suptitle(f"{sweep} sweep, {case}")
            fig.tight_layout()
            OUT.mkdir(parents=True, exist_ok=True)
            fig.savefig(OUT / f"{sweep}_{case}.png", dpi=110)
            plt.close(fig)
    if rows:
        header = ["sweep", "workload", "sync", "value", "makespan", "wall_s", "exit_code"]
        c.write_csv(OUT / "sweeps.csv", header, rows)
        c.print_table(header, rows)
    print(f"wrote {OUT}")
    if not runnable:
        sys.exit(3)


if __name__ == "__main__":
    main()
