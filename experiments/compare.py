#!/usr/bin/env python3
"""Compares two Batsim jobs.csv files line by line (a simulation and a real
replay, two scheduler configurations, two clock policies).

    python3 experiments/compare.py A/jobs.csv B/jobs.csv [--platform P --workload W]
Prints makespan, mean and max wait, over-capacity nodes (with --platform and
--workload), and the per-job start-time deltas (B - A); writes
experiments/results/compare/start_deltas.csv.
"""

import argparse
import statistics

import _common as c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--platform")
    ap.add_argument("--workload")
    a = ap.parse_args()
    runs = {"A": c.read_jobs(a.a), "B": c.read_jobs(a.b)}
    rows = []
    for name, jobs in runs.items():
        over = ""
        if a.platform and a.workload:
            caps = [cpu for _, cpu in c.platform_nodes(a.platform)]
            over = c.overcommit(jobs, c.workload_requests(a.workload), caps)[1]
        waits = [j["waiting_time"] for j in jobs if j["waiting_time"] is not None]
        rows.append([name, getattr(a, name.lower()), len(jobs), f"{c.makespan(jobs):.3f}",
                     f"{statistics.fmean(waits):.3f}", f"{max(waits):.3f}", over])
    c.print_table(["run", "file", "jobs", "makespan", "mean_wait", "max_wait", "nodes_over_capacity"], rows)
    sa = {str(j["job_id"]): j["starting_time"] for j in runs["A"] if j["starting_time"] is not None}
    deltas = [(jid, j["starting_time"] - sa[jid]) for j in runs["B"]
              if (jid := str(j["job_id"])) in sa and j["starting_time"] is not None]
    if deltas:
        d = [x for _, x in deltas]
        ad = sorted(abs(x) for x in d)
        print(f"\nstart(B) - start(A) over {len(d)} jobs: mean {statistics.fmean(d):+.3f} s, "
              f"|delta| median {statistics.median(ad):.3f} s, p95 {ad[int(0.95 * (len(ad) - 1))]:.3f} s, "
              f"max {ad[-1]:.3f} s; identical starts: {sum(1 for x in ad if x < 1e-6)}")
        c.write_csv(c.RESULTS / "compare" / "start_deltas.csv", ["job_id", "start_b_minus_a"],
                    [[jid, f"{x:.6f}"] for jid, x in deltas])


if __name__ == "__main__":
    main()
