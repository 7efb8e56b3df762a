#!/usr/bin/env python3
"""Tenants sharing a cluster: one parallel workload split between two
queues of different weights, under batch schedulers that know queues and
one that does not, through `batkube run` on exact simulated time:

  - Volcano v1.10 (vc-scheduler with its proportion and drf plugins, and
    vc-controller-manager on the same clock; `--gang volcano`), queues
    created at time 0 by a scenario with their weights;
  - Kueue (its controller manager with the upstream kube-scheduler;
    `--gang kueue`), ClusterQueues in one cohort with nominal quotas in the
    tenants' proportions and borrowing, fair sharing on or off — when
    `schedulers/kueue/` is built by `schedulers/build-go.sh kueue-manager`;
  - batkube-scheduler, which ignores queues (first come, first served with
    gangs placed whole): the baseline.

The workload: tenant `a` (weight 2) submits a burst of long jobs at the
start, tenant `b` (weight 1) a steady stream; a fair share lets `b` in
while `a`'s burst is queued. Per tenant: jobs, mean wait, mean bounded
slowdown (tau = 10 s), share of the cluster's cpu-seconds (from
summary.json's `queues`), and its allocated cpu over time (queues.csv).

    python3 experiments/queue_compare.py [--schedulers volcano,kueue,kueue-fair,batkube] [--jobs N] [--reuse]
Outputs: experiments/results/queue_compare/{queue_compare.csv,queue_compare.png,<scheduler>/},
and the table on stdout (Markdown).
"""

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time

import _common as c

OUT = c.RESULTS / "queue_compare"
GO = c.ROOT / "target" / "go"
MASTER = '--master "$(sed -n \'s/^ *server: *//p\' "$KUBECONFIG")"'
TENANTS = {"tenant-a": 2, "tenant-b": 1}
NODES = 16  # platforms/16-node.xml: one cpu each


def workload(bk, n):
    """Tenant a: a third of the jobs, all at time 0, long; tenant b: the rest,
    Poisson arrivals. Parallel jobs on 1, 2 or 4 machines."""
    path = OUT / f"tenants-{n}.json"
    if path.exists():
        return path
    parts = {}
    for tenant, args in (("tenant-a", ["-n", str(n // 3), "--arrival", "burst", "--duration", "uniform:300:900",
                                       "--seed", "11"]),
                         ("tenant-b", ["-n", str(n - n // 3), "--arrival", "poisson:15",
                                       "--duration", "uniform:60:300", "--seed", "12"])):
        p = OUT / f"{tenant}-{n}.json"
        subprocess.run([bk, "workload", "generate", *args, "--cpu", "1", "--res", "choice:1:0.5,2:0.3,4:0.2",
                        "-o", str(p)], check=True)
        parts[tenant] = json.loads(p.read_text())
        p.unlink()
    jobs, profiles = [], {}
    for tenant, w in parts.items():
        for j in w["jobs"]:
            prof = w["profiles"][j["profile"]]
            name = f"{tenant}-{j['profile']}"
            profiles[name] = prof
            jobs.append(dict(j, id=f"{tenant}-{j['id']}", profile=name, queue=tenant))
    jobs.sort(key=lambda j: (j["subtime"], j["id"]))
    path.write_text(json.dumps({"nb_res": NODES, "jobs": jobs, "profiles": profiles}))
    return path


def volcano_queues():
    p = OUT / "volcano-queues.yaml"
    p.write_text("".join(
        f"- at: 0\n  create:\n    apiVersion: scheduling.volcano.sh/v1beta1\n    kind: Queue\n"
        f"    metadata: {{name: {t}}}\n    spec: {{weight: {w}, reclaimable: true}}\n"
        for t, w in TENANTS.items()))
    return p


def kueue_queues():
    """A ResourceFlavor, one ClusterQueue per tenant in one cohort (nominal
    quota in proportion to its weight, the rest borrowable), a LocalQueue
    of the tenant's name in the jobs' namespace."""
    total = sum(TENANTS.values())
    docs = ["- at: 0\n  create:\n    apiVersion: kueue.x-k8s.io/v1beta2\n    kind: ResourceFlavor\n"
            "    metadata: {name: default-flavor}\n"]
    for t, w in TENANTS.items():
        quota = NODES * w // total
        docs.append(
            f"- at: 0\n  create:\n    apiVersion: kueue.x-k8s.io/v1beta2\n    kind: ClusterQueue\n"
            f"    metadata: {{name: {t}}}\n    spec:\n      cohortName: tenants\n      namespaceSelector: {{}}\n"
            f"      fairSharing: {{weight: \"{w}\"}}\n"
            f"      preemption: {{reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}}\n"
            f"      resourceGroups:\n      - coveredResources: [cpu, memory]\n        flavors:\n"
            f"        - name: default-flavor\n          resources:\n"
            f"          - {{name: cpu, nominalQuota: \"{quota}\"}}\n"
            f"          - {{name: memory, nominalQuota: \"{quota * 4}Gi\"}}\n")
        docs.append(f"- at: 0\n  create:\n    apiVersion: kueue.x-k8s.io/v1beta2\n    kind: LocalQueue\n"
                    f"    metadata: {{name: {t}, namespace: default}}\n    spec: {{clusterQueue: {t}}}\n")
    p = OUT / "kueue-queues.yaml"
    p.write_text("".join(docs))
    return p


def schedulers(which):
    rel = c.ROOT / "target" / "release"
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "batkube", "-p", "batkube-scheduler"],
                   cwd=c.ROOT, check=True)
    go = []
    if "volcano" in which:
        go += ["vc-scheduler", "vc-controller-manager"]
    if any(w.startswith("kueue") for w in which):
        go += ["kube-scheduler", "kueue-manager"]
    if go:
        print(f"[setup] schedulers/build-go.sh {' '.join(go)}", file=sys.stderr)
        subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh"), *go], check=True)
    kueue_cmd = f'{GO / "kube-scheduler"} --kubeconfig "$KUBECONFIG" --secure-port=0'

    def kueue(fair):
        config = c.ROOT / "schedulers/kueue/config.yaml"
        if fair:
            # config.yaml with its fairSharing section uncommented.
            text = config.read_text()
            text = text.replace("#fairSharing:", "fairSharing:").replace("#  preemptionStrategies", "  preemptionStrategies")
            config = OUT / "kueue-config-fair-sharing.yaml"
            config.write_text(text)
        return (["--gang", "kueue", "--crds", str(GO / "crds" / "kueue"), "--scenario", str(kueue_queues()),
                 "--controller", f'{c.ROOT / "schedulers/kueue/run.sh"} {GO / "kueue-manager"} --config {config} '
                                 '--kubeconfig "$KUBECONFIG"'])

    all_ = {
        "volcano": ("Volcano (proportion, drf)",
                    f'{GO / "vc-scheduler"} --kubeconfig "$KUBECONFIG" --scheduler-conf '
                    f'{c.ROOT / "schedulers/volcano/scheduler.conf"} --leader-elect=false',
                    ["--gang", "volcano", "--crds", str(GO / "crds" / "volcano"), "--scenario", str(volcano_queues()),
                     "--controller", f'{GO / "vc-controller-manager"} --kubeconfig "$KUBECONFIG" --leader-elect=false']),
        "kueue": ("Kueue (cohort, borrowing)", kueue_cmd, lambda: kueue(False)),
        "kueue-fair": ("Kueue (cohort, fair sharing)", kueue_cmd, lambda: kueue(True)),
        "batkube": ("batkube-scheduler (no queues)", str(rel / "batkube-scheduler"), ["--gang", "coscheduling"]),
    }
    unknown = [w for w in which if w not in all_]
    if unknown:
        sys.exit(f"queue_compare: unknown scheduler(s) {', '.join(unknown)} ({', '.join(all_)})")
    out = {}
    for k in which:
        label, cmd, flags = all_[k]
        out[k] = (label, cmd, flags() if callable(flags) else flags)
    return rel / "batkube", out


def allocated_over_time(queues_csv):
    """tenant -> [(time, cpu allocated in cores)] from queues.csv."""
    series = {}
    if not queues_csv.is_file():
        return series
    with open(queues_csv, newline="") as f:
        for r in csv.DictReader(f):
            series.setdefault(r["queue"], []).append((float(r["time"]), int(r["cpu_allocated_m"]) / 1000))
    return series


def plot(runs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 2.6 * len(runs)), sharex=True, squeeze=False)
    for ax, (label, out) in zip(axes[:, 0], runs):
        for tenant, pts in sorted(allocated_over_time(out / "queues.csv").items()):
            ax.step([t for t, _ in pts], [v for _, v in pts], where="post",
                    label=f"{tenant} (weight {TENANTS.get(tenant, '?')})")
        ax.axhline(NODES, color="black", linestyle="--", linewidth=0.8)
        ax.set_ylabel("cpu allocated")
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("simulated time (s)")
    fig.tight_layout()
    fig.savefig(OUT / "queue_compare.png", dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedulers", default="volcano,batkube",
                    help="volcano, kueue, kueue-fair, batkube (default: volcano,batkube)")
    ap.add_argument("--jobs", type=int, default=120, help="jobs in the generated workload (default 120)")
    ap.add_argument("--reuse", action="store_true", help="keep runs already done instead of running them again")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                    help="stop a run after this much wall time (its outputs say how far it got)")
    args = ap.parse_args()
    if args.jobs < 3:
        ap.error("--jobs must be at least 3 (both tenants need jobs)")
    if not args.no_plot:
        c.ensure_venv()
    OUT.mkdir(parents=True, exist_ok=True)
    bk, scheds = schedulers(args.schedulers.split(","))
    w = workload(str(bk), args.jobs)
    platform = c.PLATFORMS / "16-node.xml"
    rows, runs = [], []
    for key, (label, cmd, flags) in scheds.items():
        out = OUT / key
        if args.reuse and (out / "wall_s").is_file() and (out / "summary.json").is_file():
            print(f"[reuse] {label}", file=sys.stderr)
        else:
            shutil.rmtree(out, ignore_errors=True)
            print(f"[run] {label}", file=sys.stderr)
            t0 = time.monotonic()
            proc = subprocess.Popen([str(bk), "run", "--platform", str(platform), "--workload", str(w),
                                     "--scheduler", cmd, "--out", str(out), *flags], stdout=subprocess.DEVNULL)
            try:
                proc.wait(timeout=args.time_limit)
            except subprocess.TimeoutExpired:
                print(f"[run] {label}: --time-limit reached, stopping it", file=sys.stderr)
                proc.terminate()
                proc.wait()
            (out / "wall_s").write_text(f"{time.monotonic() - t0:.1f}\n")
            if proc.returncode != 0:
                print(f"[run] {label}: exit {proc.returncode}", file=sys.stderr)
        s = json.loads((out / "summary.json").read_text())
        runs.append((label, out))
        for tenant in TENANTS:
            q = s.get("queues", {}).get(tenant, {})
            rows.append({
                "scheduler": label, "end": s.get("end_reason", "done"), "tenant": tenant,
                "weight": TENANTS[tenant], "jobs": q.get("jobs", 0), "jobs_finished": q.get("jobs_finished", 0),
                "mean_wait": q.get("mean_wait", float("nan")),
                "bounded_slowdown": q.get("mean_bounded_slowdown", float("nan")),
                "cpu_share": q.get("cpu_share", float("nan")), "makespan": s["makespan"],
                "wall_s": float((out / "wall_s").read_text()),
            })
    with open(OUT / "queue_compare.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print("| scheduler | end | tenant (weight) | jobs done | mean wait (s) | bounded slowdown | cpu share "
          "| makespan (s) | wall (s) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['scheduler']} | {r['end']} | {r['tenant']} ({r['weight']}) | {r['jobs_finished']}/{r['jobs']} "
              f"| {r['mean_wait']:.1f} | {r['bounded_slowdown']:.2f} | {r['cpu_share']:.3f} "
              f"| {r['makespan']:.0f} | {r['wall_s']:.1f} |")
    if not args.no_plot:
        plot(runs)


if __name__ == "__main__":
    main()
