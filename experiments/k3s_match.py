#!/usr/bin/env python3
"""Does `batkube run` with the calibrated kubelet model match the k3s recordings?

For burst and spaced (200 jobs of 170 s): the mean makespan and mean wait of
the 10 k3s recordings of 2020 against `batkube run --sync exact` with
batkube-scheduler and the kubelet model calibrated by calibrate.py
(experiments/kubelet/{pull,start,report}.csv), over several kubelet seeds,
with the 2020 prototype's error (its *_simu_* files) for reference.

The recordings ran their pods on 15 nodes, not 16 (allocated_resources 0-14
only, never more than 15 pods at once, in all 20 runs; see calibrate.py), so
the criterion rows use a 15-node platform generated as platforms/16-node.xml
was (`batkube platform gen -n 15`). The 16-node rows show the rest.

Criteria (exit status 1 when not met): on the 15-node platform with the
kubelet model, the mean makespan within 2% of k3s's and the mean wait within
10%, for burst and for spaced.

    python3 experiments/k3s_match.py [--seeds 5] [--no-plot]
Outputs: experiments/results/k3s_match/{k3s_match.csv,runs.csv,k3s_match.png}
Makespan and mean wait of our runs come from summary.json: the pods' finish
includes the kubelet's report latency, as k3s's finish_time does, and the
wait runs from the pod's creation to its container's start.
Needs `batkube run` and batkube-scheduler (BATKUBE, BATKUBE_SCHEDULER);
exits 3 without them.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as c  # noqa: E402

OUT = c.RESULTS / "k3s_match"
KUBELET = c.EXP / "kubelet"
MAKESPAN_TOL = 0.02
WAIT_TOL = 0.10
# (k3s recordings, 2020 simulations, shipped workload)
CASES = {
    "burst": ("200_delay170_[0-9]_jobs.csv", "200_delay170_simu_*_jobs.csv", c.WORKLOADS / "200_delay170.json"),
    "spaced": ("spaced_200_delay170_[0-9]_jobs.csv", "spaced_200_delay170_simu_*_jobs.csv",
               c.WORKLOADS / "spaced_200_delay170.json"),
}


def pct(x, ref):
    return (x - ref) / ref


def fmt_pct(x):
    return f"{100 * x:+.2f}%"


def kubelet_args(seed):
    return ["--kubelet-pull", str(KUBELET / "pull.csv"), "--kubelet-start", str(KUBELET / "start.csv"),
            "--kubelet-report", str(KUBELET / "report.csv"), "--kubelet-seed", str(seed)]


def platform_15(bk):
    """15 one-cpu nodes, generated like platforms/16-node.xml."""
    p = OUT / "15-node.xml"
    subprocess.run([bk, "platform", "gen", "-n", "15", "-o", str(p)], check=True, capture_output=True)
    return p


def k3s_submission_workload(workload, recordings, out):
    """The workload with each job's submission at its mean over the k3s
    runs (the replay created the burst pods over ~38 s, not at once)."""
    subs = {}
    for p in recordings:
        for j in c.read_jobs(p):
            subs.setdefault(str(j["job_id"]), []).append(j["submission_time"])
    w = json.loads(Path(workload).read_text())
    for j in w["jobs"]:
        j["subtime"] = round(statistics.fmean(subs[str(j["id"])]), 3)
    w["jobs"].sort(key=lambda j: (j["subtime"], int(j["id"])))
    out.write_text(json.dumps(w, indent=1))
    return out


def run_one(bk, platform, workload, out, args):
    """One `batkube run --sync exact`; returns summary.json or raises."""
    s_path = out / "summary.json"
    if s_path.exists():
        s_path.unlink()
    _, rc = c.run_batkube(bk, platform, workload, out, ["--sync", "exact", *args], check=False)
    try:
        s = json.loads(s_path.read_text())
    except (OSError, ValueError):
        s = {}
    if rc != 0 or not s.get("completed") or s.get("jobs_succeeded") != s.get("jobs"):
        raise RuntimeError(f"batkube run failed (exit {rc}) on {workload} {platform} {args}: "
                           f"{s.get('error') or s.get('jobs_succeeded')}; see {out}")
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5, help="kubelet seeds per case (default 5: 1..5)")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib venv)")
    a = ap.parse_args()
    if not a.no_plot:
        try:
            c.ensure_venv()  # re-executes this script in experiments/.venv
        except Exception as e:  # no venv, no network: the table is the result
            print(f"[warning] no plotting venv ({e}); CSV only", file=sys.stderr)
            a.no_plot = True

    t0 = time.perf_counter()
    bk = c.batkube()
    if c.mode(bk) != "run":
        print(f"k3s_match needs `batkube run` and batkube-scheduler (found batkube={bk}, "
              f"scheduler={c.scheduler()}); set BATKUBE and BATKUBE_SCHEDULER", file=sys.stderr)
        sys.exit(3)
    print(f"engine: {bk} run --sync exact, scheduler {c.scheduler()}", file=sys.stderr)
    if not all((KUBELET / f"{k}.csv").exists() for k in ("pull", "start", "report")):
        subprocess.run([sys.executable, str(c.EXP / "calibrate.py")], check=True, stdout=subprocess.DEVNULL)
    OUT.mkdir(parents=True, exist_ok=True)
    plat = {"16": c.PLATFORMS / "16-node.xml", "15": platform_15(bk)}
    seeds = list(range(1, a.seeds + 1))

    table, run_rows, checks, plot = [], [], [], []
    for wl, (k3s_pat, simu_pat, workload) in CASES.items():
        k3s = [c.read_jobs(p) for p in c.reference_runs(k3s_pat)]
        simu = [c.read_jobs(p) for p in c.reference_runs(simu_pat)]
        if not k3s:
            sys.exit(f"no k3s recordings {k3s_pat} under {c.REFERENCE}/results (set BATKUBE_REFERENCE)")
        k_ms, k_ms_sd = c.mean_sd(c.makespan(j) for j in k3s)
        k_w, k_w_sd = c.mean_sd(c.mean_wait(j) for j in k3s)

        def row(source, nodes, model, n, ms, ms_sd, w, w_sd):
            em, ew = pct(ms, k_ms), pct(w, k_w)
            table.append([wl, source, nodes, model, n, f"{ms:.1f}", f"{ms_sd:.1f}", f"{w:.1f}", f"{w_sd:.1f}",
                          fmt_pct(em), fmt_pct(ew)])
            plot.append((wl, f"{source}, {nodes} nodes" + (f", {model}" if model != "-" else ""), em, ew))
            return em, ew

        table.append([wl, "k3s (real, 2020)", 15, "real kubelet", len(k3s), f"{k_ms:.1f}", f"{k_ms_sd:.1f}",
                      f"{k_w:.1f}", f"{k_w_sd:.1f}", "", ""])
        if simu:
            s_ms, s_ms_sd = c.mean_sd(c.makespan(j) for j in simu)
            s_w, s_w_sd = c.mean_sd(c.mean_wait(j) for j in simu)
            row("Batkube 2020 prototype", 16, "none", len(simu), s_ms, s_ms_sd, s_w, s_w_sd)

        variants = [("16", "none", [None]), ("16", "calibrated", seeds), ("15", "none", [None]),
                    ("15", "calibrated", seeds)]
        if wl == "burst":
            variants.append(("15", "calibrated, k3s submission times", seeds))
        for nodes, model, sds in variants:
            wfile = workload
            if "submission" in model:
                wfile = k3s_submission_workload(workload, c.reference_runs(k3s_pat),
                                                OUT / "200_delay170_k3s_submissions.json")
            ms, ws = [], []
            for seed in sds:
                tag = f"{wl}_{nodes}n_{'model' if seed else 'none'}{'_k3ssub' if 'submission' in model else ''}"
                out = OUT / "runs" / (f"{tag}_seed{seed}" if seed else tag)
                s = run_one(bk, plat[nodes], wfile, out, kubelet_args(seed) if seed else [])
                ms.append(s["makespan"])
                ws.append(s["mean_wait"])
                run_rows.append([wl, nodes, model, seed or "", f"{s['makespan']:.4f}", f"{s['mean_wait']:.4f}",
                                 s["overcommit_count"], f"{s['wall_seconds']:.2f}"])
                print(f"  {wl} {nodes} nodes, kubelet model {model}, seed {seed or '-'}: makespan "
                      f"{s['makespan']:.1f} s, mean wait {s['mean_wait']:.1f} s", file=sys.stderr)
            m_ms, m_ms_sd = c.mean_sd(ms)
            m_w, m_w_sd = c.mean_sd(ws)
            em, ew = row("batkube run (exact)", nodes, model, len(sds), m_ms, m_ms_sd, m_w, m_w_sd)
            if nodes == "15" and model == "calibrated":
                checks.append((wl, em, ew))

    header = ["workload", "source", "nodes", "kubelet_model", "runs", "makespan_s", "sd", "mean_wait_s", "sd",
              "makespan_vs_k3s", "mean_wait_vs_k3s"]
    print()
    c.print_table(header, table)
    c.write_csv(OUT / "k3s_match.csv", header, table)
    c.write_csv(OUT / "runs.csv", ["workload", "nodes", "kubelet_model", "seed", "makespan_s", "mean_wait_s",
                                   "overcommit_count", "wall_s"], run_rows)

    print(f"\ncriteria (15 nodes, calibrated kubelet model, mean of {len(seeds)} seeds): "
          f"makespan within {100 * MAKESPAN_TOL:g}%, mean wait within {100 * WAIT_TOL:g}% of k3s")
    ok = True
    for wl, em, ew in checks:
        good = abs(em) <= MAKESPAN_TOL and abs(ew) <= WAIT_TOL
        ok &= good
        print(f"  {wl:6}  makespan {fmt_pct(em)}  mean wait {fmt_pct(ew)}  {'PASS' if good else 'FAIL'}")

    if not a.no_plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
        for ax, metric, k, tol in ((axes[0], "makespan", 2, MAKESPAN_TOL), (axes[1], "mean wait", 3, WAIT_TOL)):
            labels = [f"{p[0]}: {p[1]}" for p in plot]
            vals = [100 * p[k] for p in plot]
            colors = ["tab:green" if abs(v) <= 100 * tol else "tab:red" for v in vals]
            ax.barh(range(len(vals)), vals, color=colors)
            ax.axvspan(-100 * tol, 100 * tol, color="0.9", zorder=0)
            ax.axvline(0, color="k", lw=0.8)
            ax.set_yticks(range(len(vals)))
            ax.set_yticklabels(labels, fontsize=8)
            ax.set_xlabel(f"{metric} vs k3s (%), band = ±{100 * tol:g}%")
        axes[0].invert_yaxis()  # shared y axis: once
        fig.suptitle("batkube run with the calibrated kubelet model vs the k3s recordings (2020)")
        fig.tight_layout()
        fig.savefig(OUT / "k3s_match.png", dpi=120)
    print(f"\nwritten: {OUT}/k3s_match.csv, runs.csv{'' if a.no_plot else ', k3s_match.png'} "
          f"({time.perf_counter() - t0:.0f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
