#!/usr/bin/env python3
"""Box plots of a sweep's results (experiments/sweep.py): for each metric,
one panel per axis of the grid, one box per value of that axis over every
run that has it (status ok only).

    python3 experiments/sweep_plot.py DIR [--metric makespan --metric mean_wait] [--axis scheduler]

Writes DIR/plots/<metric>.png and prints their paths. Needs matplotlib: when
this Python lacks it, the script re-runs itself in experiments/.venv (created
from PyPI on first use, as the other experiments do).
"""

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

AXES = ("workload", "platform", "scheduler", "flags", "seed")
DEFAULT_METRICS = ("makespan", "mean_wait")


def load(results):
    try:
        with open(results, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"sweep_plot.py: error: cannot read {results}: {e.strerror} "
                 f"(is it a directory written by experiments/sweep.py?)")


def as_float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the sweep's --out directory (with results.csv)")
    ap.add_argument("--metric", action="append",
                    help="a numeric column of results.csv; repeatable (default: makespan, mean_wait)")
    ap.add_argument("--axis", action="append", choices=AXES,
                    help="axes to draw (default: every axis with more than one value)")
    ap.add_argument("-o", "--out", help="output directory (default DIR/plots)")
    args = ap.parse_args(argv)

    d = Path(args.dir)
    rows = load(d / "results.csv")
    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok:
        sys.exit(f"sweep_plot.py: error: no run with status ok in {d / 'results.csv'} "
                 f"({len(rows)} rows)")
    metrics = args.metric or list(DEFAULT_METRICS)
    numeric = [c for c in ok[0] if c not in ("id", *AXES, "repeat", "status")
               and all(as_float(r.get(c)) is not None for r in ok)]
    for m in metrics:
        if m not in numeric:
            sys.exit(f"sweep_plot.py: error: no numeric column {m!r} in results.csv; "
                     f"numeric columns: {', '.join(numeric)}")
    axes = args.axis or [a for a in AXES if len({r.get(a, "") for r in ok}) > 1] or ["scheduler"]

    try:
        import matplotlib
    except ImportError:
        from _common import ensure_venv
        ensure_venv()
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out) if args.out else d / "plots"
    out.mkdir(parents=True, exist_ok=True)
    for m in metrics:
        fig, panels = plt.subplots(1, len(axes), figsize=(4.5 * len(axes), 4), squeeze=False)
        for ax, axis in zip(panels[0], axes):
            values = list(dict.fromkeys(r.get(axis, "") for r in ok))  # in grid order
            data = [[float(r[m]) for r in ok if r.get(axis, "") == v] for v in values]
            ax.boxplot(data)
            ax.set_xticks(range(1, len(values) + 1), values, rotation=20, ha="right")
            ax.set_xlabel(axis)
            ax.set_ylabel(m)
            ax.set_title(f"{m} by {axis} ({sum(map(len, data))} runs)", fontsize=10)
        fig.tight_layout()
        path = out / f"{m}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(path)
    failed = len(rows) - len(ok)
    if failed:
        print(f"({failed} failed run(s) left out)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
