#!/usr/bin/env python3
"""Experiment 4: how cost grows with size.

    python3 experiments/scale.py                       # 10k, 100k jobs on 1k nodes; 10k, 100k, 1M on 10k nodes
    python3 experiments/scale.py --sizes 10000,100000 --nodes 1000
    python3 experiments/scale.py --workload workloads/NASA-iPSC-1993-3.1.json --nodes 128

Generated inputs (seeded, made once under experiments/results/scale/inputs/
with `batkube workload generate` and `batkube platform gen`): jobs arrive as
a Poisson process (mean gap --gap, 0.7 s), run for an exponential time
(mean --duration, 600 s), ask for 1, 2 or 4 cpus; nodes have 16 cpus and
64Gi. Each case is one `batkube run --sync exact` with batkube-scheduler on
the built-in stand-in. Measured: wall time of the process; startup (the
process's wall time minus the broker loop's, `summary.json` wall_seconds:
loading and checking the inputs, starting the API, writing the outputs);
peak resident memory of batkube and of the scheduler, each its own (the
kernel's high-water mark, VmHWM, read every 0.5 s); windows per wall
second; overcommits; whether every job succeeded. Plots wall time and peak
memory against jobs on log-log axes with the slope of each line.
Outputs: experiments/results/scale/{scale.csv,scale.png}; a run's own
outputs in experiments/results/scale/<case>/. A run longer than --timeout
(2400 s) is killed and reported.
"""

import argparse
import math
import os
import signal
import subprocess
import sys
import time
import json
from pathlib import Path

import _common as c

OUT = c.RESULTS / "scale"
DEFAULT_GRID = [(10_000, 1000), (100_000, 1000), (10_000, 10_000), (100_000, 10_000), (1_000_000, 10_000)]


def size_label(n):
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def generated_workload(bk, jobs, gap, duration, seed):
    path = OUT / "inputs" / f"poisson{gap:g}_exp{duration:g}_cpu124_{size_label(jobs)}_seed{seed}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([bk, "workload", "generate", "-n", str(jobs), "--arrival", f"poisson:{gap:g}",
                        "--duration", f"exp:{duration:g}", "--cpu", "choice:1,2,4", "--seed", str(seed),
                        "-o", str(path)], check=True)
    return path


def platform_for(bk, nodes):
    shipped = c.PLATFORMS / f"{nodes}-node.xml"
    if shipped.exists():
        return shipped
    path = OUT / "inputs" / f"{nodes}-node.xml"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([bk, "platform", "gen", "-n", str(nodes), "--cpu", "16", "--memory", "64Gi",
                        "-o", str(path)], check=True)
    return path


def _hwm_by_role(sid, peaks):
    """Updates peaks {pid: (comm, VmHWM KiB)} for the processes of session `sid`."""
    peaks.update(c.session_status(sid, "VmHWM"))


def run_case(bk, platform, workload, out, timeout, extra):
    out.mkdir(parents=True, exist_ok=True)
    summary_path = out / "summary.json"
    if summary_path.exists():
        summary_path.unlink()
    cmd = [bk, "run", "--platform", str(platform), "--workload", str(workload),
           "--scheduler", c.scheduler(), "--out", str(out), "--sync", "exact", *extra]
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    peaks = {}
    while p.poll() is None:
        if time.perf_counter() - t > timeout:
            os.killpg(p.pid, signal.SIGKILL)
            break
        _hwm_by_role(p.pid, peaks)
        time.sleep(0.5)
    err = p.communicate()[1]
    wall = time.perf_counter() - t
    try:
        s = json.loads(summary_path.read_text())
    except (OSError, ValueError):
        s = {}
    bk_kib = max((kib for comm, kib in peaks.values() if comm.startswith("batkube") and "sched" not in comm),
                 default=0)
    sched_kib = max((kib for comm, kib in peaks.values() if "sched" in comm), default=0)
    return cmd, p.returncode, wall, s, bk_kib / 1024, sched_kib / 1024, err


def slope(xs, ys):
    pts = [(math.log10(x), math.log10(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return float("nan")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else float("nan")


def main():
    # Into the plotting venv first: it re-executes the script, which must
    # not run the (long) cases twice.
    c.ensure_venv()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", help="jobs per case, comma-separated (with --nodes: every size on every node count)")
    ap.add_argument("--nodes", help="node counts, comma-separated")
    ap.add_argument("--workload", help="one given workload instead of generated ones (with --nodes)")
    ap.add_argument("--gap", type=float, default=0.7, help="mean gap between arrivals (s)")
    ap.add_argument("--duration", type=float, default=600, help="mean job duration (s)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=2400, help="wall-time limit of a run (s)")
    ap.add_argument("--flag", action="append", default=[], help="extra `batkube run` argument (repeatable)")
    a = ap.parse_args()
    bk = c.batkube()
    if c.mode(bk) != "run":
        sys.exit("scale.py needs `batkube run` and batkube-scheduler (build them: cargo build --release "
                 "-p batkube -p batkube-scheduler)")
    nodes = [int(n) for n in a.nodes.split(",")] if a.nodes else None
    if a.workload:
        cases = [(Path(a.workload), n) for n in (nodes or [1000])]
    elif a.sizes:
        sizes = [int(float(x)) for x in a.sizes.split(",")]
        cases = [(n, k) for k in (nodes or [1000]) for n in sizes]
    else:
        cases = [(n, k) for n, k in DEFAULT_GRID if not nodes or k in nodes]
    engine = c.engine_line(bk, "run")
    print(engine, file=sys.stderr)
    header = ["workload", "jobs", "nodes", "completed", "jobs_succeeded", "overcommits", "wall_s", "startup_s",
              "batkube_peak_rss_MiB", "scheduler_peak_rss_MiB", "windows", "windows_per_s",
              "pods_garbage_collected", "makespan_s", "mean_wait_s"]
    rows = []
    for wl, n_nodes in cases:
        workload = wl if isinstance(wl, Path) else generated_workload(bk, wl, a.gap, a.duration, a.seed)
        platform = platform_for(bk, n_nodes)
        name = f"{workload.stem}_{n_nodes}n"
        cmd, rc, wall, s, bk_mib, sched_mib, err = run_case(bk, platform, workload, OUT / name, a.timeout, a.flag)
        print(f"command: {' '.join(map(str, cmd))}", file=sys.stderr)
        if rc != 0 or not s.get("completed"):
            print(f"  FAILED (exit {rc}): {s.get('error') or err.strip()[-800:]}", file=sys.stderr)
        loop = s.get("wall_seconds", 0.0)
        rows.append([workload.name, s.get("jobs", ""), n_nodes, s.get("completed", False),
                     s.get("jobs_succeeded", ""), s.get("overcommit_count", ""), f"{wall:.1f}",
                     f"{wall - loop:.1f}" if loop else "", f"{bk_mib:.0f}", f"{sched_mib:.0f}",
                     s.get("windows", ""), f"{s.get('windows', 0) / loop:.0f}" if loop else "",
                     s.get("pods_garbage_collected", ""), f"{s.get('makespan', 0):.0f}",
                     f"{s.get('mean_wait', 0):.1f}"])
        print(f"  {rows[-1]}", file=sys.stderr)
        c.write_csv(OUT / "scale.csv", header, rows)
    print(engine)
    c.print_table(header, rows)
    plot(rows)


def plot(rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    by_nodes = {}
    for r in rows:
        if r[1] and r[3]:
            by_nodes.setdefault(r[2], []).append((int(r[1]), float(r[6]), float(r[8]), float(r[9])))
    for k, pts in sorted(by_nodes.items()):
        pts.sort()
        xs = [p[0] for p in pts]
        for ax, col, what in ((axes[0], 1, "wall"), (axes[1], 2, "batkube RSS"), (axes[1], 3, "scheduler RSS")):
            ys = [p[col] for p in pts]
            ax.plot(xs, ys, marker="o", label=f"{k} nodes, {what} (slope {slope(xs, ys):.2f})")
    xs = sorted({int(r[1]) for r in rows if r[1]})
    if xs:
        ref = [x / xs[0] for x in xs]
        axes[0].plot(xs, [min(float(r[6]) for r in rows if r[1]) * v for v in ref], "k:", label="slope 1")
    axes[0].set_ylabel("wall time (s)")
    axes[1].set_ylabel("peak resident memory (MiB)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("jobs")
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("batkube run --sync exact, batkube-scheduler, built-in stand-in")
    fig.tight_layout()
    fig.savefig(OUT / "scale.png", dpi=110)
    print(f"wrote {OUT}/scale.csv, scale.png", file=sys.stderr)


if __name__ == "__main__":
    main()
