#!/usr/bin/env python3
"""Experiment 1: simulated vs real (k3s) deviation table.

For burst, spaced and KIT: the real k3s recordings of 2020, the 2020 Batkube
simulations, and our simulation (`batkube run --sync exact` with
batkube-scheduler when available, else the built-in stand-in with FCFS,
labelled as such). Prints and writes makespan, mean wait, over-allocation
and per-job start-time deltas against k3s.

    python3 experiments/deviation.py
Outputs: experiments/results/deviation/{deviation.csv,start_deltas.csv,deviation.png}
"""

import statistics
import sys

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


def starts(jobs):
    return {str(j["job_id"]): j["starting_time"] for j in jobs if j["starting_time"] is not None}


def main():
    bk = c.batkube()
    m = c.mode(bk)
    rows, delta_rows = [], []
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for k, (case, (wl, pf)) in enumerate(c.CASES.items()):
        requests = c.workload_requests(wl)
        caps = [cpu for _, cpu in c.platform_nodes(pf)]
        real_pat, simu_pat = REFS[case]
        real = [c.read_jobs(p) for p in c.reference_runs(real_pat)]
        simu = [c.read_jobs(p) for p in c.reference_runs(simu_pat)]
        label, wall, path = c.simulate(bk, m, pf, wl, OUT / f"ours_{case}")
        ours = c.read_jobs(path)
        real_starts = [starts(r) for r in real]

        def per_job_deltas(run):
            s = starts(run)
            d = []
            for jid, t in s.items():
                ref = [rs[jid] for rs in real_starts if jid in rs]
                if ref:
                    d.append(t - statistics.fmean(ref))
            return d

        k3s_ms = c.mean_sd(c.makespan(r) for r in real)
        k3s_w = c.mean_sd(c.mean_wait(r) for r in real)
        for source, runs in (("k3s (real, 2020)", real), ("Batkube 2020 (timeout 50 ms)", simu), (label, [ours])):
            if not runs:
                rows.append([case, source, 0, "", "", "", "", "", "", "", ""])
                continue
            ms = c.mean_sd(c.makespan(r) for r in runs)
            w = c.mean_sd(c.mean_wait(r) for r in runs)
            over = sum(1 for r in runs if c.overcommit(r, requests, caps)[1] > 0)
            deltas = [d for r in runs for d in per_job_deltas(r)] if source[:3] != "k3s" else []
            absd = [abs(d) for d in deltas]
            rows.append([
                case, source, len(runs),
                f"{ms[0]:.1f}", f"{ms[1]:.1f}", f"{w[0]:.1f}", f"{w[1]:.1f}",
                f"{(ms[0] - k3s_ms[0]) / k3s_ms[0] * 100:+.1f}%" if source[:3] != "k3s" else "",
                f"{w[0] - k3s_w[0]:+.1f}" if source[:3] != "k3s" else "",
                f"{statistics.fmean(absd):.1f} / {statistics.median(absd):.1f} / {max(absd):.1f}" if absd else "",
                f"{over}/{len(runs)}",
            ])
            for d in deltas:
                delta_rows.append([case, source, f"{d:.3f}"])
            if absd:
                xs = sorted(absd)
                axes[k].plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=source)
        axes[k].set_title(f"{case}: |start - k3s mean start| per job")
        axes[k].set_xlabel("seconds")
        axes[k].set_ylabel("CDF")
        axes[k].set_xscale("symlog")
        axes[k].legend(fontsize=7)
        print(f"[{case}] ours: {label}, {wall:.2f} s wall", file=sys.stderr)
    header = ["workload", "source", "runs", "makespan", "sd", "mean_wait", "sd",
              "makespan_vs_k3s", "mean_wait_vs_k3s_s", "start_delta_mean/median/max_s",
              "runs_over_allocated"]
    c.write_csv(OUT / "deviation.csv", header, rows)
    c.write_csv(OUT / "start_deltas.csv", ["workload", "source", "start_minus_k3s_s"], delta_rows)
    fig.tight_layout()
    fig.savefig(OUT / "deviation.png", dpi=120)
    c.print_table(header, rows)
    print(f"\nwrote {OUT}/deviation.csv, start_deltas.csv, deviation.png")


if __name__ == "__main__":
    main()
