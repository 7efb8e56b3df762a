"""Calibrates batkube's kubelet model (`batkube run --kubelet-pull/-start/-report`)
from the 2020 k3s recordings, and writes the empirical sample files it reads.

    python3 experiments/calibrate.py            # writes experiments/kubelet/{pull,start,report}.csv

Inputs: $BATKUBE_REFERENCE/results/{200_delay170,spaced_200_delay170}_{0..9}_jobs.csv
(the burst and spaced workloads replayed on k3s; Batsim's columns plus the
kubelet events `scheduled`, `pulling`, `pulled`, `created`, in seconds since
the first submission). The `*_simu_*` files (2020 simulations) are not used.

What each model latency is, measured per job (every job ran the same image
with a 170 s delay, and every job completed):

- start  (binding -> container running, every pod): `starting_time - scheduled`
  for the pods that are not the first on their node. It holds the sandbox
  creation, the image check (imagePullPolicy Always: about 0.95 s of
  `pulling -> pulled` on every pod, cached or not) and the container start.
- pull   (once per node and image): the first pod on a node takes longer
  than the later ones on the same node (a real image pull when the image was
  not cached, e.g. burst run 0, about 21 s; otherwise the first sandbox,
  about 2 s). Sample = first pod's `starting_time - scheduled` minus the
  median of the later pods' on the same node and run, floored at 0.
- report (job end -> the API shows the pod finished, node freed):
  `execution_time - 170` (the kubelet's PLEG notices the container's exit
  0-1 s after it, and the pod keeps its node until then).

The node of a job is `allocated_resources` (a recording's watch sometimes
missed the Scheduled event late in a run; those jobs have no node and no
`scheduled` and are used for `report` only).

Also printed, not written (they are not kubelet latencies): the scheduler's
reaction (`scheduled` of the next pod on a node minus `finish_time` of the
previous one; in burst it is upstream's 10 s backoff, in spaced ~0), the
replay's submission spread, and the number of nodes the recordings used.

Deterministic: the same inputs give byte-identical files.
"""

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

OUT = C.EXP / "kubelet"
DELAY = 170.0
SOURCES = {"burst": "200_delay170_{}_jobs.csv", "spaced": "spaced_200_delay170_{}_jobs.csv"}
RUNS = range(10)


def quantile(xs, q):
    """Linear-interpolation quantile (numpy's default)."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def describe(xs):
    return (len(xs), quantile(xs, 0.5), statistics.fmean(xs), quantile(xs, 0.9), min(xs), max(xs))


def load_runs(ref):
    """{workload: [(run, rows)]} for the recordings."""
    out = {}
    for wl, pat in SOURCES.items():
        for i in RUNS:
            p = ref / "results" / pat.format(i)
            if not p.exists():
                sys.exit(f"missing recording {p} (set BATKUBE_REFERENCE)")
            out.setdefault(wl, []).append((i, C.read_jobs(p)))
    return out


def by_node(rows):
    nodes = {}
    for r in rows:
        a = (r.get("allocated_resources") or "").strip()
        if a and r["starting_time"] is not None:
            nodes.setdefault(a, []).append(r)
    for js in nodes.values():
        js.sort(key=lambda r: (r["starting_time"], int(r["job_id"])))
    return nodes


def calibrate(runs):
    """Samples: {component: [(seconds, workload, run, job_id)]}, and diagnostics."""
    samples = {"pull": [], "start": [], "report": []}
    diag = {"release": {}, "nodes_used": {}, "max_running": {}, "first_pull_phase": {},
            "mean_submission": {}}
    for wl, lst in runs.items():
        for run, rows in lst:
            for r in sorted(rows, key=lambda r: int(r["job_id"])):
                if r["execution_time"] is not None and r["final_state"] == "COMPLETED_SUCCESSFULLY":
                    samples["report"].append((max(0.0, r["execution_time"] - DELAY), wl, run, r["job_id"]))
            nodes = by_node(rows)
            diag["nodes_used"].setdefault(wl, []).append(len(nodes))
            ev = sorted([(r["starting_time"], 1) for r in rows] + [(r["finish_time"], -1) for r in rows])
            cur = peak = 0
            for _, d in ev:
                cur += d
                peak = max(peak, cur)
            diag["max_running"].setdefault(wl, []).append(peak)
            diag["mean_submission"].setdefault(wl, []).append(statistics.fmean(r["submission_time"] for r in rows))
            for node in sorted(nodes, key=int):
                js = [j for j in nodes[node] if j["scheduled"] is not None]
                if not js:
                    continue
                first, later = js[0], js[1:]
                lat = [j["starting_time"] - j["scheduled"] for j in later]
                for j in later:
                    samples["start"].append((j["starting_time"] - j["scheduled"], wl, run, j["job_id"]))
                if nodes[node][0] is first and lat:
                    extra = (first["starting_time"] - first["scheduled"]) - statistics.median(lat)
                    samples["pull"].append((max(0.0, extra), wl, run, first["job_id"]))
                    diag["first_pull_phase"].setdefault(wl, []).append(first["pulled"] - first["pulling"])
                # The scheduler's reaction to a freed node (consecutive pods on it).
                for a, b in zip(nodes[node], nodes[node][1:]):
                    if b["scheduled"] is not None and b["starting_time"] - a["finish_time"] < DELAY / 2:
                        diag["release"].setdefault(wl, []).append(b["scheduled"] - a["finish_time"])
    for k in samples:
        samples[k].sort(key=lambda s: (s[1], s[2], int(s[3])))
    return samples, diag


def write_samples(samples, out):
    out.mkdir(parents=True, exist_ok=True)
    for comp, xs in samples.items():
        with open(out / f"{comp}.csv", "w", newline="") as f:
            # batkube reads the first numeric field of each line; the header has none.
            f.write("seconds,workload,run,job_id\n")
            for v, wl, run, job in xs:
                f.write(f"{v:.3f},{wl},{run},{job}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help="where to write the sample files")
    args = ap.parse_args()
    runs = load_runs(C.REFERENCE)
    samples, diag = calibrate(runs)
    write_samples(samples, args.out)

    print(f"kubelet model calibrated from {C.REFERENCE}/results (burst + spaced, 10 k3s runs each)\n")
    rows = []
    for comp, flag in (("pull", "--kubelet-pull"), ("start", "--kubelet-start"), ("report", "--kubelet-report")):
        xs = [s[0] for s in samples[comp]]
        for wl in ("burst", "spaced", "all"):
            ys = xs if wl == "all" else [s[0] for s in samples[comp] if s[1] == wl]
            n, med, mean, p90, lo, hi = describe(ys)
            rows.append([comp if wl == "all" else "", flag if wl == "all" else "", wl, n,
                         f"{med:.3f}", f"{mean:.3f}", f"{p90:.3f}", f"{lo:.3f}", f"{hi:.3f}"])
    C.print_table(["latency", "flag", "from", "n", "median_s", "mean_s", "p90_s", "min_s", "max_s"], rows)
    print("\nwritten: " + ", ".join(str(args.out / f"{c}.csv") for c in samples))

    print("\nnot kubelet latencies (diagnostics):")
    for wl in ("burst", "spaced"):
        rel = diag["release"][wl]
        n, med, mean, p90, lo, hi = describe(rel)
        fp = diag["first_pull_phase"][wl]
        print(f"  {wl:6}  scheduler reaction to a freed node (next scheduled - previous finish): "
              f"median {med:.3f}, mean {mean:.3f}, p90 {p90:.3f}, max {hi:.3f} s (n={n})")
        print(f"  {wl:6}  first pod's pulling->pulled: median {quantile(fp, .5):.2f}, max {max(fp):.2f} s; "
              f"mean submission time {statistics.fmean(diag['mean_submission'][wl]):.2f} s")
        print(f"  {wl:6}  nodes that ran pods per run: {sorted(set(diag['nodes_used'][wl]))}; "
              f"most pods running at once: {sorted(set(diag['max_running'][wl]))}")
    print("\n  The k3s cluster ran the pods on 15 nodes, not 16: every run uses allocated_resources 0-14 "
          "only and never runs more than 15 pods at once.")


if __name__ == "__main__":
    main()
