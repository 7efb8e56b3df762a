#!/usr/bin/env python3
"""Experiment 1: simulated vs real (k3s) deviation table.

For burst, spaced and KIT: the real k3s recordings of 2020 (10 runs, 1 for
KIT), the 2020 Batkube simulations (20 runs each, kube-scheduler, timeout
50 ms) next to the numbers the 2020 study published, and ours
(`batkube run --sync exact` with batkube-scheduler, run --runs times to show
that it is reproducible). Prints and writes makespan, mean wait, their
deviation from k3s, per-job start-time deltas against the job's mean k3s
start, the same deltas by rank (i-th start vs the mean i-th k3s start, which
ignores the order in which simultaneous pods started), and how many runs
over-allocated a node.

    python3 experiments/deviation.py [--runs 3]
Outputs: experiments/results/deviation/{deviation.csv,start_deltas.csv,deviation.png}
The stand-in (FCFS) replaces `batkube run` only when `batkube run` or
batkube-scheduler is not available (or BATKUBE_MODE=standin); a failing
`batkube run` is reported, never replaced.
"""

import argparse
import statistics
import sys
import time

import _common as c

c.ensure_venv()
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = c.RESULTS / "deviation"
# (real k3s runs, 2020 Batkube simulations)
REFS = {
    "burst": ("200_delay170_[0-9]_jobs.csv", "200_delay170_simu_*_jobs.csv"),
    "spaced": ("spaced_200_delay170_[0-9]_jobs.csv", "spaced_200_delay170_simu_*_jobs.csv"),
    "KIT": ("KIT_0_jobs.csv", "KIT_10h_80_simu_*_jobs.csv"),
}
# The 2020 study's published table: (makespan, sd, mean wait, sd).
PUBLISHED = {
    ("burst", "k3s"): (2467.2, 28.3, 1076.7, 10.6), ("burst", "2020"): (2214.8, 0.5, 970.1, 12.6),
    ("spaced", "k3s"): (2468.3, 5.1, 146.0, 1.7), ("spaced", "2020"): (2256.9, 16.9, 48.1, 9.4),
    ("KIT", "k3s"): (32556.2, 0.0, 2884.3, 0.0), ("KIT", "2020"): (32554.7, 1.3, 2020.1, 950.0),
}


def starts(jobs):
    return {str(j["job_id"]): j["starting_time"] for j in jobs if j["starting_time"] is not None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs of ours per workload (default 3)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    bk = c.batkube()
    m = c.mode(bk)
    engine = c.engine_line(bk, m)
    print(engine, file=sys.stderr)
    rows, delta_rows, notes, failures = [], [], [], []
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for k, (case, (wl, pf)) in enumerate(c.CASES.items()):
        requests = c.workload_requests(wl)
        caps = [cpu for _, cpu in c.platform_nodes(pf)]
        real_pat, simu_pat = REFS[case]
        real = [c.read_jobs(p) for p in c.reference_runs(real_pat)]
        simu = [c.read_jobs(p) for p in c.reference_runs(simu_pat)]
        ours, walls, label = [], [], None
        for i in range(a.runs if m == "run" else 1):
            try:
                label, wall, path = c.simulate(bk, m, pf, wl, OUT / f"ours_{case}_{i}")
            except c.RunFailed as e:
                failures.append(f"{case} run {i}: {e}")
                print(f"[{case}] batkube run FAILED: {e}", file=sys.stderr)
                continue
            ours.append(c.read_jobs(path))
            walls.append(wall)
        label = label or "batkube run (exact) FAILED"
        if len(ours) > 1:
            same = all(starts(o) == starts(ours[0]) for o in ours[1:])
            notes.append(f"{case}: {len(ours)} runs of ours, per-job start times "
                         f"{'identical in every run' if same else 'DIFFER between runs'}; "
                         f"wall {', '.join(f'{w:.2f}' for w in walls)} s")
        elif ours:
            notes.append(f"{case}: 1 run of ours, wall {walls[0]:.2f} s")
        real_starts = [starts(r) for r in real]

        # k3s starts in rank order, averaged over runs: the schedule's shape
        # without the (run-to-run random) order of simultaneous pods.
        ranked = [sorted(rs.values()) for rs in real_starts]
        n_rank = min(len(r) for r in ranked)
        k3s_ranked = [statistics.fmean(r[i] for r in ranked) for i in range(n_rank)]

        def rank_deltas(run):
            s = sorted(starts(run).values())
            return [abs(a - b) for a, b in zip(s, k3s_ranked)]

        def per_job_deltas(run):
            d = []
            for jid, t in starts(run).items():
                ref = [rs[jid] for rs in real_starts if jid in rs]
                if ref:
                    d.append(t - statistics.fmean(ref))
            return d

        k3s_ms = c.mean_sd(c.makespan(r) for r in real)
        k3s_w = c.mean_sd(c.mean_wait(r) for r in real)
        for key, source, runs in (("k3s", "k3s (real cluster, 2020)", real),
                                  ("2020", "Batkube 2020 (kube-scheduler, timeout 50 ms)", simu),
                                  ("ours", label, ours)):
            pub = PUBLISHED.get((case, key))
            pub_s = f"{pub[0]:.1f} / {pub[2]:.1f}" if pub else ""
            if not runs:
                rows.append([case, source, 0] + [""] * 4 + [pub_s] + [""] * 6)
                continue
            ms = c.mean_sd(c.makespan(r) for r in runs)
            w = c.mean_sd(c.mean_wait(r) for r in runs)
            over = sum(1 for r in runs if c.overcommit(r, requests, caps)[1] > 0)
            peak = max(max(c.overcommit(r, requests, caps)[0].values(), default=0) for r in runs)
            is_ref = key == "k3s"
            deltas = [d for r in runs for d in per_job_deltas(r)] if not is_ref else []
            absd = [abs(d) for d in deltas]
            rk = [d for r in runs for d in rank_deltas(r)] if not is_ref else []
            rows.append([
                case, source, len(runs),
                f"{ms[0]:.1f}", f"{ms[1]:.1f}", f"{w[0]:.1f}", f"{w[1]:.1f}", pub_s,
                f"{(ms[0] - k3s_ms[0]) / k3s_ms[0] * 100:+.1f}%" if not is_ref else "",
                f"{w[0] - k3s_w[0]:+.1f} s ({(w[0] - k3s_w[0]) / k3s_w[0] * 100:+.1f}%)" if not is_ref else "",
                f"{statistics.fmean(absd):.1f} / {statistics.median(absd):.1f} / {max(absd):.1f}" if absd else "",
                f"{statistics.fmean(rk):.1f}" if rk else "",
                f"{over}/{len(runs)}", f"{peak:g}/{max(caps):g}",
            ])
            for d in deltas:
                delta_rows.append([case, source, f"{d:.3f}"])
            if absd:
                xs = sorted(absd)
                axes[k].plot(xs, [(i + 1) / len(xs) for i in range(len(xs))],
                             label=f"{source} (mean {statistics.fmean(absd):.0f} s)")
        axes[k].set_title(f"{case}: |start - mean k3s start| per job")
        axes[k].set_xlabel("seconds (symlog)")
        axes[k].set_ylabel("fraction of jobs (CDF)")
        axes[k].set_xscale("symlog", linthresh=1)
        axes[k].grid(alpha=0.3)
        axes[k].legend(fontsize=7, loc="upper left")
    header = ["workload", "source", "runs", "makespan_s", "sd", "mean_wait_s", "sd",
              "published_makespan/wait", "makespan_vs_k3s", "mean_wait_vs_k3s",
              "start_delta_vs_k3s_mean/median/max_s", "ranked_start_delta_mean_s", "runs_over_allocated", "peak_cpu/capacity"]
    c.write_csv(OUT / "deviation.csv", header, rows)
    c.write_csv(OUT / "start_deltas.csv", ["workload", "source", "start_minus_k3s_mean_start_s"], delta_rows)
    fig.suptitle(engine, fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "deviation.png", dpi=120)
    print(engine)
    c.print_table(header, rows)
    print()
    for n in notes:
        print(n)
    for f in failures:
        print(f"FAILED: {f}")
    print(f"\nwrote {OUT}/deviation.csv, start_deltas.csv, deviation.png; "
          f"total {time.perf_counter() - t0:.1f} s wall")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
