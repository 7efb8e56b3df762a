#!/usr/bin/env python3
"""Experiment 4: scale run, the NASA iPSC trace (18,239 jobs) on 1,000 nodes.

    python3 experiments/scale.py [--platform platforms/1000-node.xml] [--jobs N]
Runs `batkube run --sync exact` with batkube-scheduler (the stand-in with
FCFS only when `batkube run` is not available, labelled). Prints wall time,
peak memory (sum of the run's processes' resident memory, sampled every
0.2 s), jobs completed, overcommits, simulated makespan and throughput;
plots the running and waiting jobs over simulated time. A run longer than
--timeout (1800 s) is killed and reported.
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
    ap.add_argument("--timeout", type=float, default=1800, help="wall-time limit of the run (s)")
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
    n_nodes = len(c.platform_nodes(a.platform))
    engine = c.engine_line(bk, m)
    print(engine, file=sys.stderr)
    header = ["workload", "jobs", "nodes", "simulator", "completed", "jobs_succeeded", "jobs_rejected",
              "overcommits", "wall_s", "peak_rss_MiB", "makespan_s", "mean_wait_s", "jobs_per_wall_s",
              "sim_s_per_wall_s"]
    if m == "run":
        label = "batkube run (exact, batkube-scheduler)"
        r = c.run_batkube_full(bk, a.platform, wl, OUT / "run", ["--sync", "exact"], timeout=a.timeout,
                               sample_memory=True)
        s = r.summary
        wall, path = r.wall, OUT / "run" / "jobs.csv"
        print(f"command: {' '.join(r.cmd)}", file=sys.stderr)
        if not r.ok:
            print(f"batkube run FAILED: {r.why()}\n{r.stderr[-1500:]}", file=sys.stderr)
        succ, rej, oc = s.get("jobs_succeeded", ""), s.get("jobs_rejected", ""), s.get("overcommit_count", "")
        done, mem = s.get("completed", False), f"{r.peak_rss_mb:.0f}"
    else:
        label = "stand-in FCFS (whole machines, no Kubernetes scheduler)"
        wall = c.run_standin(bk, a.platform, wl, OUT / "run")
        path, succ, rej, oc, done, mem = OUT / "run" / "jobs.csv", "", "", "", True, ""
    jobs = c.read_jobs(path) if path.exists() else []
    started = [j for j in jobs if j["starting_time"] is not None and j["finish_time"] is not None]
    ms = c.makespan(started) if started else float("nan")
    rows = [[c.Path(a.workload).name, len(jobs), n_nodes, label, done, succ, rej, oc, f"{wall:.2f}", mem,
             f"{ms:.0f}", f"{c.mean_wait(started):.1f}" if started else "", f"{len(jobs) / wall:.0f}",
             f"{ms / wall:.0f}"]]
    c.write_csv(OUT / "scale.csv", header, rows)
    print(engine)
    c.print_table(header, rows)
    if not started:
        sys.exit(1)
    jobs = started
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
    ax.set_title(f"{c.Path(a.workload).name} on {n_nodes} nodes: {label}, {wall:.1f} s wall, "
                 f"peak {mem or '?'} MiB")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "scale.png", dpi=110)
    print(f"wrote {OUT}/scale.csv, scale.png", file=sys.stderr)


if __name__ == "__main__":
    main()
