#!/usr/bin/env python3
"""Spreading (the upstream default profile) against bin packing
(MostAllocated, experiments/configs/most-allocated.yaml) when a zone fails.

Zone a of platforms/heterogeneous.xml (node-0, -3, -6, -9: 22 of its 48
cpus) becomes unavailable from 2000 to 4000 simulated seconds
(experiments/dynamics/zone-a-outage.events, Batsim's external events) under
workloads/poisson_500.json. The broker behaves as Kubernetes does: the
nodes turn NotReady and get the unreachable taints after the node monitor
grace period (50 s), their pods are evicted 300 s later, and with
--resubmit-evicted an evicted job starts over elsewhere (full duration).

    python3 experiments/failure_compare.py
Outputs: experiments/results/failure/{summary.csv, failure.png, gantt_*.png}
and each run's outputs under experiments/results/failure/runs/.
"""

import json
import subprocess
import time

import _common as c

c.ensure_venv()
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import gantt  # noqa: E402

OUT = c.RESULTS / "failure"
PLATFORM = c.PLATFORMS / "heterogeneous.xml"
WORKLOAD = c.WORKLOADS / "poisson_500.json"
EVENTS = c.EXP / "dynamics" / "zone-a-outage.events"
CONFIGS = {
    "spreading (default profile)": None,
    "bin packing (MostAllocated)": c.EXP / "configs" / "most-allocated.yaml",
}


def run(bk, name, config):
    out = OUT / "runs" / name
    out.mkdir(parents=True, exist_ok=True)
    sched = c.scheduler() + (f" --config {config}" if config else "")
    cmd = [bk, "run", "--platform", str(PLATFORM), "--workload", str(WORKLOAD), "--scheduler", sched,
           "--out", str(out), "--events", str(EVENTS), "--resubmit-evicted"]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return json.loads((out / "summary.json").read_text()), time.perf_counter() - t, out


def main():
    bk = c.batkube()
    rows, results = [], {}
    for label, config in CONFIGS.items():
        name = "most-allocated" if config else "default"
        s, wall, out = run(bk, name, config)
        jobs = c.read_jobs(out / "jobs.csv")
        killed = sum(1 for j in jobs if j["final_state"] == "COMPLETED_KILLED")
        results[label] = s
        rows.append([label, f"{s['makespan']:.1f}", f"{s['mean_wait']:.1f}", f"{s['max_wait']:.1f}",
                     s["evictions"], killed, f"{s['lost_work_seconds']:.1f}", s["resubmissions"],
                     f"{wall:.1f}"])
        gantt.gantt(out / "jobs.csv", PLATFORM, WORKLOAD, OUT / f"gantt_{name}.png", f"{label}, zone a out 2000-4000 s")
    header = ["profile", "makespan_s", "mean_wait_s", "max_wait_s", "evictions", "jobs_killed",
              "lost_work_s", "resubmissions", "wall_s"]
    c.print_table(header, rows)
    c.write_csv(OUT / "summary.csv", header, rows)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    labels = list(results)
    for ax, (key, title) in zip(axes, [("evictions", "pods evicted"), ("lost_work_seconds", "work lost (s)"),
                                       ("mean_wait", "mean wait (s)")]):
        ax.bar(range(len(labels)), [results[l][key] for l in labels], color=["tab:blue", "tab:orange"])
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels([l.split(" (")[0] for l in labels])
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("zone a (22 of 48 cpus) unavailable 2000-4000 s, poisson_500, evicted jobs resubmitted")
    fig.tight_layout()
    fig.savefig(OUT / "failure.png", dpi=110)
    print(f"{OUT / 'failure.png'}")


if __name__ == "__main__":
    main()
