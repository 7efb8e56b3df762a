#!/usr/bin/env python3
"""Experiment 4: scale run, the NASA iPSC trace (18,239 jobs) on 1,000 nodes.

    python3 experiments/scale.py [--platform platforms/1000-node.xml] [--jobs N]
Runs `batkube run --sync exact` when available, else the stand-in with FCFS
(labelled). Prints wall time, simulated makespan and throughput; plots the
running and waiting jobs over simulated time.
Outputs: experiments/results/scale/{scale.csv,scale.png}
"""

import argparse
import json
import sys

import _common as c

c.ensure_venv()
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = c.RESULTS / "scale"
NASA = c.WORKLOADS / "NASA-iPSC-1993-3.1.json"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", default=str(c.PLATFORMS / "1000-node.xml"))
    ap.add_argument("--workload", default=str(NASA))
    ap.add_argument("--jobs", type=int, help="only the first N jobs")
    a = ap.parse_args()
    bk = c.batkube()
    m = c.mode(bk)
    wl = c.Path(a.workload)
    if a.jobs:
        w = json.loads(wl.read_text())
        w["jobs"] = w["jobs"][: a.jobs]
        wl = OUT / f"first_{a.jobs}.json"
        wl.parent.mkdir(parents=True, exist_ok=True)
        wl.write_text(json.dumps(w))
    label, wall, path = c.simulate(bk, m, a.platform, wl, OUT / "run")
    jobs = c.read_jobs(path)
    ms = c.makespan(jobs)
    n_nodes = len(c.platform_nodes(a.platform))
    rows = [[c.Path(a.workload).name, len(jobs), n_nodes, label, f"{wall:.2f}", f"{ms:.0f}",
             f"{c.mean_wait(jobs):.1f}", f"{len(jobs) / wall:.0f}", f"{ms / wall:.0f}"]]
    header = ["workload", "jobs", "nodes", "simulator", "wall_s", "makespan_s", "mean_wait_s",
              "jobs_per_wall_s", "sim_s_per_wall_s"]
    c.write_csv(OUT / "scale.csv", header, rows)
    c.print_table(header, rows)
    ev = []
    for j in jobs:
        ev += [(j["submission_time"], 0, 1), (j["starting_time"], 1, -1), (j["starting_time"], 1, 1),
               (j["finish_time"], 2, -1)]
    ev.sort()
    # waiting = submitted - started; running = started - finished
    t, waiting, running, wq, rq = [], 0, 0, [], []
    for time, kind, d in ev:
        if kind == 0:
            waiting += 1
        elif kind == 1 and d < 0:
            waiting -= 1
        elif kind == 1:
            running += 1
        else:
            running -= 1
        t.append(time / 86400)
        wq.append(waiting)
        rq.append(running)
    fig, ax = plt.subplots(figsize=(12, 4))
    ax.step(t, rq, where="post", label="running jobs", linewidth=0.6)
    ax.step(t, wq, where="post", label="waiting jobs", linewidth=0.6)
    ax.set_xlabel("simulated time (days)")
    ax.set_ylabel("jobs")
    ax.set_title(f"{c.Path(a.workload).name} on {n_nodes} nodes: {label}, {wall:.1f} s wall")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "scale.png", dpi=110)
    print(f"wrote {OUT}/scale.csv, scale.png", file=sys.stderr)


if __name__ == "__main__":
    main()
