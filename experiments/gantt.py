#!/usr/bin/env python3
"""Experiment 3: Gantt charts from a Batsim jobs.csv, one row per machine.

Pods sharing a node are stacked inside the node's row, each as tall as its
cpu share of the node, so a person sees at once whether a node is ever over
capacity: the row's dashed line is the node's capacity, and any instant where
the stack goes above it is drawn in red and counted.

    python3 experiments/gantt.py                       # demo: ours vs k3s vs Batkube 2020
    python3 experiments/gantt.py JOBS.csv --platform P --workload W [-o out.png] [--timeline T] [--by queue]
A job on several machines is drawn on each of them. `--by queue` colours jobs
by the queue they name in the workload (one colour per queue, with a legend).
With a batkube timeline.csv (given, or beside JOBS.csv), the periods when a
machine was unavailable (Batsim's external events) are hatched on its row.
Outputs: experiments/results/gantt/*.png and *_peaks.csv
"""

import argparse
import hashlib

import _common as c

c.ensure_venv()
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

OUT = c.RESULTS / "gantt"


def colour(job_id):
    h = int(hashlib.md5(str(job_id).encode()).hexdigest()[:6], 16)
    return plt.cm.tab20((h % 20) / 20)


def request(requests, job_id):
    """A job's cpu request; a resubmitted job (`<id>-r<n>`) has its original's."""
    jid = str(job_id)
    return requests.get(jid, requests.get(jid.rsplit("-r", 1)[0], 1.0))


def place(jobs_on_node):
    """Stacks intervals: each job gets the lowest offset where it does not
    overlap a running job's band. Returns [(job, offset)]."""
    placed = []
    for j in sorted(jobs_on_node, key=lambda j: (j["starting_time"], str(j["job_id"]))):
        s, f, h = j["starting_time"], j["finish_time"], j["share"]
        busy = sorted((o, o + p["share"]) for p, o in placed
                      if p["starting_time"] < f and s < p["finish_time"])
        off = 0.0
        for lo, hi in busy:
            if off + h <= lo + 1e-9:
                break
            off = max(off, hi)
        placed.append((j, off))
    return placed


def allocation_panel(ax, jobs, requests, nodes):
    """Allocated cpu over time. Up to 4 nodes: one filled curve per node
    with its capacity line; more: the fullest node's allocation as a
    fraction of its capacity, with the capacity at 1."""
    ev = {}
    for j in jobs:
        a = (j.get("allocated_resources") or "").strip()
        if not a:
            continue
        cpu = request(requests, j["job_id"])
        for part in a.split():
            lo, _, hi = part.partition("-")
            for r in range(int(lo), int(hi or lo) + 1):
                if r < len(nodes):
                    ev.setdefault(r, []).extend([(j["starting_time"], cpu), (j["finish_time"], -cpu)])
    curves = {}
    for r, e in ev.items():
        e.sort(key=lambda x: (x[0], x[1]))  # frees before starts at equal times
        t, y, cur = [0.0], [0.0], 0.0
        for when, d in e:
            cur += d
            t.append(when)
            y.append(max(cur, 0.0))
        curves[r] = (t, y)
    if len(nodes) <= 4:
        for r, (name, cap) in enumerate(nodes):
            t, y = curves.get(r, ([0.0], [0.0]))
            line = ax.step(t, y, where="post", linewidth=0.8, label=f"{name}: cpu allocated")[0]
            ax.fill_between(t, y, step="post", alpha=0.25, color=line.get_color())
            ax.axhline(cap, linestyle="--", color="black", linewidth=0.9, label=f"{name}: capacity {cap:g} cpu")
            over = [yy > cap + 1e-9 for yy in y]
            if any(over):
                ax.fill_between(t, y, cap, where=over, step="post", color="red", label="over capacity")
        ax.set_ylabel("cpu allocated")
        ax.set_ylim(0, max([cap for _, cap in nodes] + [max(y) for _, y in curves.values()]) * 1.15)
    else:
        times = sorted({tt for t, _ in curves.values() for tt in t})
        idx = {r: 0 for r in curves}
        worst = []
        for tt in times:
            m = 0.0
            for r, (t, y) in curves.items():
                while idx[r] + 1 < len(t) and t[idx[r] + 1] <= tt:
                    idx[r] += 1
                m = max(m, y[idx[r]] / nodes[r][1])
            worst.append(m)
        ax.step(times, worst, where="post", linewidth=0.9, label="fullest node: cpu allocated / capacity")
        ax.fill_between(times, worst, step="post", alpha=0.25)
        ax.axhline(1.0, linestyle="--", color="black", linewidth=0.9, label="capacity")
        over = [w > 1 + 1e-9 for w in worst]
        if any(over):
            ax.fill_between(times, worst, 1.0, where=over, step="post", color="red", label="over capacity")
        ax.set_ylabel("fullest node\n(fraction of cpu)")
        ax.set_ylim(0, max(worst + [1.0]) * 1.15)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right", ncol=3)


def unavailable_periods(timeline_csv, t_end):
    """{resource id: [(start, end)]} from a batkube timeline.csv's
    machine-unavailable / machine-available rows (detail `resource=N`)."""
    import csv
    periods, since = {}, {}
    with open(timeline_csv, newline="") as f:
        for r in csv.DictReader(f):
            if r["source"] != "batsim" or r["kind"] != "Node" or not r["detail"].startswith("resource="):
                continue
            rid, t = int(r["detail"].split("=", 1)[1]), float(r["time"])
            if r["verb"] == "machine-unavailable":
                since[rid] = t
            elif r["verb"] == "machine-available" and rid in since:
                periods.setdefault(rid, []).append((since.pop(rid), t))
    for rid, t in since.items():
        periods.setdefault(rid, []).append((t, t_end))
    return periods


def gantt(jobs_csv, platform, workload, out_png, title=None, timeline=None, by="job"):
    jobs = [j for j in c.read_jobs(jobs_csv) if j["starting_time"] is not None and j["finish_time"] is not None]
    nodes = c.platform_nodes(platform)
    requests = c.workload_requests(workload)
    queue_of = c.workload_queues(workload) if by == "queue" else {}
    queues = sorted(set(queue_of.values()))
    queue_colour = {q: plt.cm.tab10(i % 10) for i, q in enumerate(queues)}

    def face(job_id):
        if by != "queue":
            return colour(job_id)
        return queue_colour.get(queue_of.get(c.job_key(job_id)), "lightgrey")

    caps = [cpu for _, cpu in nodes]
    per_node = {i: [] for i in range(len(nodes))}
    unplaced = 0
    for j in jobs:
        a = (j.get("allocated_resources") or "").strip()
        if not a:
            unplaced += 1
            continue
        for r in c.resource_ids(a):
            if r < len(nodes):
                per_node[r].append(dict(j, share=request(requests, j["job_id"]) / caps[r]))
    peaks, over = c.overcommit(jobs, requests, caps)
    n = len(nodes)
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(14, max(3, 0.45 * n + 1.5) + 2.6), sharex=True,
                                  gridspec_kw={"height_ratios": [max(3, 0.45 * n + 1.5), 2.2]})
    t_end = max((j["finish_time"] for j in jobs), default=1.0)
    row_h = 0.8
    for r in range(n):
        y0 = n - 1 - r
        stack = place(per_node[r])
        top = max((o + j["share"] for j, o in stack), default=1.0)
        scale = row_h / max(1.0, top)  # a row never draws outside its band
        for j, o in stack:
            bad = o + j["share"] > 1.0 + 1e-9
            ax.add_patch(Rectangle((j["starting_time"], y0 + o * scale), j["finish_time"] - j["starting_time"],
                                   j["share"] * scale, facecolor="red" if bad else face(j["job_id"]),
                                   edgecolor="black", linewidth=0.3))
            width = j["finish_time"] - j["starting_time"]
            if width > t_end / 40 and j["share"] * scale > 0.12:
                ax.text(j["starting_time"] + width / 2, y0 + (o + j["share"] / 2) * scale, str(j["job_id"]),
                        ha="center", va="center", fontsize=6)
        ax.plot([0, t_end], [y0 + scale, y0 + scale], linestyle="--", color="grey", linewidth=0.6)
    if timeline is None and (c.Path(jobs_csv).parent / "timeline.csv").exists():
        timeline = c.Path(jobs_csv).parent / "timeline.csv"
    if timeline:
        periods = unavailable_periods(timeline, t_end)
        first = True
        for r, (name, _) in enumerate(nodes):
            for s0, s1 in periods.get(r, []):
                ax.add_patch(Rectangle((s0, n - 1 - r - 0.05), s1 - s0, row_h + 0.1, facecolor="grey", alpha=0.25,
                                       hatch="///", edgecolor="black", linewidth=0.5,
                                       label="machine unavailable" if first else None))
                first = False
        if not first:
            ax.legend(fontsize=7, loc="upper right")
    if queues:
        handles = [Rectangle((0, 0), 1, 1, facecolor=queue_colour[q], edgecolor="black", linewidth=0.3)
                   for q in queues]
        ax.legend(handles, [f"queue {q}" for q in queues], fontsize=7, loc="lower right")
    ax.set_yticks([n - 1 - r + row_h / 2 for r in range(n)])
    ax.set_yticklabels([f"{name} ({cap:g} cpu, peak {peaks.get(r, 0):.2f})" for r, (name, cap) in enumerate(nodes)],
                       fontsize=7)
    ax.set_xlim(0, t_end * 1.01)
    ax.set_ylim(-0.2, n)
    allocation_panel(ax2, jobs, requests, nodes)
    ax2.set_xlabel("simulated time (s)")
    verdict = f"{over} node(s) over capacity (red)" if over else "no node over capacity"
    missing = f", {unplaced} without a recorded node (not drawn)" if unplaced else ""
    ax.set_title(f"{title or jobs_csv}: {len(jobs)} jobs{missing}, {verdict}; dashed line = node capacity")
    fig.tight_layout()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    c.write_csv(out_png.with_name(out_png.stem + "_peaks.csv"), ["resource_id", "node", "cpu", "peak_cpu", "jobs_drawn"],
                [[r, nodes[r][0], nodes[r][1], f"{peaks.get(r, 0):.3f}", len(per_node[r])] for r in range(n)])
    return over, unplaced


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jobs", nargs="?")
    ap.add_argument("--platform")
    ap.add_argument("--workload")
    ap.add_argument("-o", "--output")
    ap.add_argument("--timeline", help="batkube timeline.csv (default: the one beside JOBS.csv)")
    ap.add_argument("--by", choices=["job", "queue"], default="job",
                    help="colour per job (default) or per queue the workload's jobs name")
    a = ap.parse_args()
    if a.jobs:
        if not (a.platform and a.workload):
            ap.error("give --platform and --workload with a jobs.csv")
        out = c.Path(a.output) if a.output else OUT / (c.Path(a.jobs).stem + ".png")
        over, unplaced = gantt(c.Path(a.jobs), a.platform, a.workload, out, timeline=a.timeline, by=a.by)
        print(f"{out}: {over} node(s) over capacity, {unplaced} jobs without a node")
        return
    bk = c.batkube()
    m = c.mode(bk)
    rows = []
    for case in ("burst", "KIT"):
        wl, pf = c.CASES[case]
        label, _, path = c.simulate(bk, m, pf, wl, OUT / f"ours_{case}")
        demos = [(f"ours_{case}", path, label)]
        ref_real = {"burst": "200_delay170_0_jobs.csv", "KIT": "KIT_0_jobs.csv"}[case]
        ref_simu = {"burst": "200_delay170_simu_0_jobs.csv", "KIT": "KIT_10h_80_simu_0_jobs.csv"}[case]
        for name, title in ((ref_real, "k3s 2020"), (ref_simu, "Batkube 2020")):
            p = c.REFERENCE / "results" / name
            if p.exists():
                demos.append((c.Path(name).stem, p, title))
        for stem, p, title in demos:
            out = OUT / f"{case}_{stem}.png"
            over, unplaced = gantt(p, pf, wl, out, f"{case} / {title}")
            rows.append([case, title, over, unplaced, out.relative_to(c.ROOT)])
    c.print_table(["workload", "run", "nodes_over_capacity", "jobs_without_node", "figure"], rows)


if __name__ == "__main__":
    main()
