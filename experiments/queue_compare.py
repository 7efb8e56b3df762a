#!/usr/bin/env python3
"""Tenants sharing a cluster: one parallel workload split between two
queues of different weights, under batch schedulers that know queues and
one that does not, through `batkube run` on exact simulated time
(target/release's `batkube` and `batkube-scheduler`, or $BATKUBE and
$BATKUBE_SCHEDULER):

  - Volcano v1.10 (vc-scheduler with its proportion and drf plugins, and
    vc-controller-manager on the same clock; `--gang volcano`), queues
    created at time 0 by a scenario with their weights;
  - Kueue (its controller manager with the upstream kube-scheduler;
    `--gang kueue`), ClusterQueues in one cohort with nominal quotas in the
    tenants' proportions and borrowing, fair sharing on or off — when
    `schedulers/kueue/` is built by `schedulers/build-go.sh kueue-manager`;
    `kueue-jobs`: the same queues with each job a batch/v1 Job
    (`--submit-as job`) suspended by Kueue's own webhook, its pods made by
    kube-controller-manager's job controller, a preempted Job readmitted
    as a new Batsim job (`<id>-r1`);
  - YuniKorn (its scheduler, yunikorn-k8shim with yunikorn-core;
    `--gang yunikorn`: gangs as task groups, reserved by its placeholders),
    one queue per tenant under root with guaranteed resources in the
    tenants' proportions (whole nodes, as Kueue's nominal quotas) and no
    max, in a ConfigMap installed before the run — when
    `schedulers/build-go.sh yunikorn-scheduler` has built it;
  - batkube-scheduler, which ignores queues (first come, first served with
    gangs placed whole): the baseline.

Two workloads (`--workload`):

  - `generated` (the default), on platforms/16-node.xml (16 one-cpu
    machines): tenant `a` (weight 2) submits a burst of long jobs at the
    start, tenant `b` (weight 1) a steady stream; a fair share lets `b` in
    while `a`'s burst is queued.
  - `nasa`: workloads/NASA-iPSC-1993-3.1-parallel.json on
    platforms/128-node.xml (a 16-cpu pod per iPSC node), split between the
    tenants by the trace's user id (field 12 of the SWF, read from
    $BATKUBE_REFERENCE/swf/NASA-iPSC-1993-3.1-cln.swf, whose job numbers
    are the workload's ids): even user ids go to tenant-a (weight 2; 70 %
    of the trace's node-seconds), odd ones to tenant-b (weight 1; 30 %), so
    that a user's jobs stay in one queue. `--nasa-jobs K` keeps the first K
    jobs (submission order) and `--speedup F` divides submission times by
    F (the trace loads its 128 nodes to 47 %: F = 2 makes them contend).

Per tenant: jobs, mean wait, mean bounded slowdown (tau = 10 s), share of
the cluster's cpu-seconds (from summary.json's `queues`), and its allocated
cpu over time (queues.csv).

    python3 experiments/queue_compare.py [--schedulers volcano,kueue,kueue-fair,kueue-jobs,yunikorn,batkube] [--jobs N] [--reuse]
    python3 experiments/queue_compare.py --workload nasa [--nasa-jobs K] [--speedup F] [--schedulers ...]
Outputs: experiments/results/queue_compare/{queue_compare.csv,queue_compare.png,<scheduler>/}
(with `--workload nasa`: experiments/results/queue_compare/nasa-<K>-x<F>/…), and the table on stdout
(Markdown).
"""

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _common as c

OUT = c.RESULTS / "queue_compare"
GO = c.ROOT / "target" / "go"
# Volcano's programs serve their log level on a Unix socket at a fixed path of
# the machine (/tmp/klog-socks/klog-klog.sock, both programs the same name):
# each removes whatever socket is there first, so runs side by side (these
# experiments, a sweep) took it from each other, and a seeded run's outcome
# followed which one lost. The directory of the program's kubeconfig is the
# run's own (of fixed length under --deterministic).
VC_ENV = 'DEBUG_SOCKET_DIR="${KUBECONFIG%/*}" '
TENANTS = {"tenant-a": 2, "tenant-b": 1}
# The cluster of each workload: (platform, nodes, cpu and memory (Gi) per node).
CLUSTERS = {"generated": ("16-node.xml", 16, 1, 4), "nasa": ("128-node.xml", 128, 16, 64)}
NASA = c.WORKLOADS / "NASA-iPSC-1993-3.1-parallel.json"
NASA_SWF = c.REFERENCE / "swf" / "NASA-iPSC-1993-3.1-cln.swf"


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
    path.write_text(json.dumps({"nb_res": CLUSTERS["generated"][1], "jobs": jobs, "profiles": profiles}))
    return path


def nasa_tenant(user):
    """The NASA trace's user id -> tenant: even ids to tenant-a, odd to tenant-b."""
    return "tenant-a" if user % 2 == 0 else "tenant-b"


def nasa_workload(out, k, speedup):
    """The parallel NASA iPSC workload, its first `k` jobs (all when None),
    each in its user's tenant (`nasa_tenant`), submission times divided by
    `speedup` (rounded to the microsecond)."""
    path = out / "workload.json"
    if path.exists():
        return path
    if not NASA_SWF.is_file():
        sys.exit(f"queue_compare: --workload nasa needs the trace's user ids from {NASA_SWF} "
                 "(set BATKUBE_REFERENCE to the directory holding swf/)")
    users = {}
    for line in NASA_SWF.read_text().splitlines():
        f = line.split()
        if f and not line.startswith(";"):
            users[f[0]] = int(f[11])
    w = json.loads(NASA.read_text())
    jobs = w["jobs"][:k] if k else w["jobs"]
    missing = [j["id"] for j in jobs if j["id"] not in users]
    if missing:
        sys.exit(f"queue_compare: {len(missing)} job(s) of {NASA.name} not in {NASA_SWF.name}, e.g. {missing[0]}")
    out_jobs = []
    for j in jobs:
        j = dict(j, queue=nasa_tenant(users[j["id"]]))
        if speedup != 1:
            j["subtime"] = round(j["subtime"] / speedup, 6)
        out_jobs.append(j)
    used = {j["profile"] for j in out_jobs}
    w = dict(w, jobs=out_jobs, profiles={n: p for n, p in w["profiles"].items() if n in used})
    w["description"] = (f"{NASA.name}, first {len(out_jobs)} jobs, submission times / {speedup:g}, queue by the "
                        "trace's user id: even -> tenant-a, odd -> tenant-b (experiments/queue_compare.py)")
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(w))
    return path


def volcano_queues(out):
    p = out / "volcano-queues.yaml"
    p.write_text("".join(
        f"- at: 0\n  create:\n    apiVersion: scheduling.volcano.sh/v1beta1\n    kind: Queue\n"
        f"    metadata: {{name: {t}}}\n    spec: {{weight: {w}, reclaimable: true}}\n"
        for t, w in TENANTS.items()))
    return p


def node_shares(nodes):
    """Whole nodes per tenant, in proportion to the weights (largest
    remainders), summing to `nodes`: Kueue's nominal quotas must add up to
    the cluster, since a cohort lends only unused nominal quota (quotas of
    16 * 2 // 3 and 16 // 3 cpu left one of 16 cpus to nobody)."""
    total = sum(TENANTS.values())
    exact = {t: nodes * w / total for t, w in TENANTS.items()}
    share = {t: int(v) for t, v in exact.items()}
    for t in sorted(exact, key=lambda t: (share[t] - exact[t], t))[:nodes - sum(share.values())]:
        share[t] += 1
    return share


def kueue_queues(out, cluster):
    """A ResourceFlavor, one ClusterQueue per tenant in one cohort (nominal
    quota: whole nodes in proportion to its weight, the others' unused
    quota borrowable without limit), a LocalQueue of the tenant's name in
    the jobs' namespace."""
    _, nodes, cpu, mem_gi = cluster
    docs = ["- at: 0\n  create:\n    apiVersion: kueue.x-k8s.io/v1beta2\n    kind: ResourceFlavor\n"
            "    metadata: {name: default-flavor}\n"]
    for t, n in node_shares(nodes).items():
        w = TENANTS[t]
        docs.append(
            f"- at: 0\n  create:\n    apiVersion: kueue.x-k8s.io/v1beta2\n    kind: ClusterQueue\n"
            f"    metadata: {{name: {t}}}\n    spec:\n      cohortName: tenants\n      namespaceSelector: {{}}\n"
            f"      fairSharing: {{weight: \"{w}\"}}\n"
            f"      preemption: {{reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}}\n"
            f"      resourceGroups:\n      - coveredResources: [cpu, memory]\n        flavors:\n"
            f"        - name: default-flavor\n          resources:\n"
            f"          - {{name: cpu, nominalQuota: \"{n * cpu}\"}}\n"
            f"          - {{name: memory, nominalQuota: \"{n * mem_gi}Gi\"}}\n")
        docs.append(f"- at: 0\n  create:\n    apiVersion: kueue.x-k8s.io/v1beta2\n    kind: LocalQueue\n"
                    f"    metadata: {{name: {t}, namespace: default}}\n    spec: {{clusterQueue: {t}}}\n")
    p = out / "kueue-queues.yaml"
    p.write_text("".join(docs))
    return p


def yunikorn_configs(out, cluster):
    """YuniKorn's ConfigMap (`yunikorn-configs`, read at start): one FIFO
    queue per tenant under root (FIFO: what YuniKorn's gang scheduling asks
    of a queue), guaranteed whole nodes in proportion to its weight (as
    Kueue's nominal quotas; YuniKorn orders queues by how far each is below
    its guaranteed share), no max: a tenant may use the whole cluster.
    Placement: the queue a pod names, never created."""
    _, nodes, cpu, mem_gi = cluster
    queues = "".join(
        f"          - name: {t}\n"
        f"            properties: {{application.sort.policy: fifo}}\n"
        f"            resources:\n"
        f"              guaranteed: {{vcore: \"{n * cpu}\", memory: {n * mem_gi}Gi}}\n"
        for t, n in node_shares(nodes).items())
    p = out / "yunikorn-configs.yaml"
    p.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: yunikorn-configs, namespace: default}\ndata:\n"
        "  queues.yaml: |\n    partitions:\n      - name: default\n"
        "        placementrules:\n          - {name: provided, create: false}\n"
        "        queues:\n          - name: root\n            submitacl: '*'\n            queues:\n"
        + "\n".join("    " + line if line else line for line in queues.split("\n")))
    return p


def schedulers(which, out, cluster):
    rel = c.ROOT / "target" / "release"
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "batkube", "-p", "batkube-scheduler"],
                   cwd=c.ROOT, check=True)
    go = []
    if "volcano" in which:
        go += ["vc-scheduler", "vc-controller-manager"]
    if any(w.startswith("kueue") for w in which):
        go += ["kube-scheduler", "kueue-manager"]
    if "kueue-jobs" in which:
        go += ["kube-controller-manager"]
    if "yunikorn" in which:
        go += ["yunikorn-scheduler"]
    if go:
        print(f"[setup] schedulers/build-go.sh {' '.join(go)}", file=sys.stderr)
        subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh"), *go], check=True)
    kueue_cmd = f'{GO / "kube-scheduler"} --kubeconfig "$KUBECONFIG" --leader-elect=false --secure-port=0'

    def kueue(fair):
        config = c.ROOT / "schedulers/kueue/config.yaml"
        if fair:
            # config.yaml with its fairSharing section uncommented.
            text = config.read_text()
            text = text.replace("#fairSharing:", "fairSharing:").replace("#  preemptionStrategies", "  preemptionStrategies")
            config = out / "kueue-config-fair-sharing.yaml"
            config.write_text(text)
        return (["--gang", "kueue", "--crds", str(GO / "crds" / "kueue"), "--scenario", str(kueue_queues(out, cluster)),
                 "--controller", f'{c.ROOT / "schedulers/kueue/run.sh"} {GO / "kueue-manager"} --config {config} '
                                 '--kubeconfig "$KUBECONFIG"'])

    def kueue_jobs():
        # Each job a batch/v1 Job: Kueue's own webhooks (certificates made
        # by Kueue, webhook.sh's objects, its Secret mounted), the job
        # controller making the pods.
        config = out / "kueue-config-jobs.yaml"
        config.write_text((c.ROOT / "schedulers/kueue/config.yaml").read_text()
                          .replace('  - "pod"\n', '  - "batch/job"\n'))
        hook = out / "kueue-hook"
        shutil.rmtree(hook, ignore_errors=True)
        subprocess.run(["sh", str(c.ROOT / "schedulers/kueue/webhook.sh"), str(hook), str(GO), str(config)],
                       check=True)
        return (["--gang", "kueue", "--submit-as", "job", "--warm-up", "5",
                 "--crds", str(hook / "webhook.yaml"), "--scenario", str(kueue_queues(out, cluster)),
                 "--mount-secret", f"kueue-system/kueue-webhook-server-cert={hook / 'certs'}",
                 "--controller", f'{GO / "kube-controller-manager"} --kubeconfig "$KUBECONFIG" '
                                 '--kube-api-content-type=application/json '
                                 '--controllers=job-controller,garbage-collector-controller '
                                 '--leader-elect=false --secure-port=0',
                 "--controller", f'{GO / "kueue-manager"} --kubeconfig "$KUBECONFIG" --config {hook / "config.yaml"}'])

    all_ = {
        "volcano": ("Volcano (proportion, drf)",
                    f'{VC_ENV}{GO / "vc-scheduler"} --kubeconfig "$KUBECONFIG" --scheduler-conf '
                    f'{c.ROOT / "schedulers/volcano/scheduler.conf"} --leader-elect=false',
                    ["--gang", "volcano", "--crds", str(GO / "crds" / "volcano"), "--scenario", str(volcano_queues(out)),
                     "--controller", f'{VC_ENV}{GO / "vc-controller-manager"} --kubeconfig "$KUBECONFIG" --leader-elect=false']),
        "kueue": ("Kueue (cohort, borrowing)", kueue_cmd, lambda: kueue(False)),
        "kueue-fair": ("Kueue (cohort, fair sharing)", kueue_cmd, lambda: kueue(True)),
        "kueue-jobs": ("Kueue on batch/v1 Jobs (cohort, borrowing)", kueue_cmd, kueue_jobs),
        "yunikorn": ("YuniKorn (guaranteed shares, placeholders)", str(GO / "yunikorn-scheduler"),
                     lambda: ["--gang", "yunikorn", "--crds", str(yunikorn_configs(out, cluster))]),
        "batkube": ("batkube-scheduler (no queues)", os.environ.get("BATKUBE_SCHEDULER") or str(rel / "batkube-scheduler"),
                    ["--gang", "coscheduling"]),
    }
    unknown = [w for w in which if w not in all_]
    if unknown:
        sys.exit(f"queue_compare: unknown scheduler(s) {', '.join(unknown)} ({', '.join(all_)})")
    chosen = {}
    for k in which:
        label, cmd, flags = all_[k]
        chosen[k] = (label, cmd, flags() if callable(flags) else flags)
    # $BATKUBE and $BATKUBE_SCHEDULER, as for the other experiments: to
    # compare builds.
    return Path(os.environ.get("BATKUBE") or rel / "batkube"), chosen


def allocated_over_time(queues_csv):
    """tenant -> [(time, cpu allocated in cores)] from queues.csv."""
    series = {}
    if not queues_csv.is_file():
        return series
    with open(queues_csv, newline="") as f:
        for r in csv.DictReader(f):
            series.setdefault(r["queue"], []).append((float(r["time"]), int(r["cpu_allocated_m"]) / 1000))
    return series


def plot(runs, out, capacity):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 2.6 * len(runs)), sharex=True, squeeze=False)
    for ax, (label, out) in zip(axes[:, 0], runs):
        for tenant, pts in sorted(allocated_over_time(out / "queues.csv").items()):
            ax.step([t for t, _ in pts], [v for _, v in pts], where="post",
                    label=f"{tenant} (weight {TENANTS.get(tenant, '?')})")
        ax.axhline(capacity, color="black", linestyle="--", linewidth=0.8)
        ax.set_ylabel("cpu allocated")
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("simulated time (s)")
    fig.tight_layout()
    fig.savefig(out / "queue_compare.png", dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedulers", default="volcano,batkube",
                    help="volcano, kueue, kueue-fair, kueue-jobs, yunikorn, batkube (default: volcano,batkube)")
    ap.add_argument("--workload", choices=sorted(CLUSTERS), default="generated",
                    help="generated (two tenants' jobs on 16 nodes, the default) or nasa (the NASA iPSC trace "
                         "split by user id, on 128 nodes)")
    ap.add_argument("--jobs", type=int, default=120, help="jobs in the generated workload (default 120)")
    ap.add_argument("--nasa-jobs", type=int, default=None, metavar="K",
                    help="with --workload nasa: the first K jobs only (default: all 18,239)")
    ap.add_argument("--speedup", type=float, default=1.0, metavar="F",
                    help="with --workload nasa: submission times divided by F (default 1)")
    ap.add_argument("--reuse", action="store_true", help="keep runs already done instead of running them again")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--elide", default="none", metavar="RULES",
                    help="batkube run --elide RULES for the schedulers on simulated time (default none: exact; "
                         "idle passes over timers of programs whose last firing did nothing, see README)")
    ap.add_argument("--pod-gc-threshold", type=int, default=None, metavar="N",
                    help="batkube run --terminated-pod-gc-threshold N for every run (default: upstream's 12,500); "
                         "a batch scheduler's sessions go over every terminated pod still in the API (see README)")
    ap.add_argument("--seed", type=int, default=None, metavar="S",
                    help="batkube run --seed S for every run (deterministic, and slower under --shim seccomp)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                    help="stop a run after this much wall time (its outputs say how far it got)")
    args = ap.parse_args()
    if args.jobs < 3:
        ap.error("--jobs must be at least 3 (both tenants need jobs)")
    if args.speedup <= 0:
        ap.error("--speedup must be positive")
    if not args.no_plot:
        c.ensure_venv()
    cluster = CLUSTERS[args.workload]
    if args.workload == "nasa":
        base = OUT / f"nasa-{args.nasa_jobs or 'all'}-x{args.speedup:g}"
    else:
        base = OUT
    if args.elide != "none":
        base = base / f"elide-{args.elide.replace(',', '+').replace(':', '-')}"
    if args.pod_gc_threshold is not None:
        if args.pod_gc_threshold < 0:
            ap.error("--pod-gc-threshold must be 0 (keep every pod) or more")
        base = base / f"pod-gc-{args.pod_gc_threshold}"
    if args.seed is not None:
        base = base / f"seed-{args.seed}"
    base.mkdir(parents=True, exist_ok=True)
    bk, scheds = schedulers(args.schedulers.split(","), base, cluster)
    w = nasa_workload(base, args.nasa_jobs, args.speedup) if args.workload == "nasa" else workload(str(bk), args.jobs)
    platform = c.PLATFORMS / cluster[0]
    rows, runs = [], []
    for key, (label, cmd, flags) in scheds.items():
        out = base / key
        if args.reuse and (out / "wall_s").is_file() and (out / "summary.json").is_file():
            print(f"[reuse] {label}", file=sys.stderr)
        else:
            shutil.rmtree(out, ignore_errors=True)
            print(f"[run] {label}", file=sys.stderr)
            t0 = time.monotonic()
            proc = subprocess.Popen([str(bk), "run", "--platform", str(platform), "--workload", str(w),
                                     "--scheduler", cmd, "--out", str(out), *flags,
                                     *(["--elide", args.elide] if key != "batkube" else []),
                                     *(["--terminated-pod-gc-threshold", str(args.pod_gc_threshold)]
                                       if args.pod_gc_threshold is not None else []),
                                     *(["--seed", str(args.seed)] if args.seed is not None else [])],
                                    stdout=subprocess.DEVNULL)
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
        # Jobs that ended otherwise than successfully (preempted: Batsim
        # kills them, and a killed job is over), per queue.
        queue_of = {j["id"]: j.get("queue") for j in json.loads(w.read_text())["jobs"]}
        killed = {}
        if (out / "jobs.csv").is_file():
            with open(out / "jobs.csv", newline="") as f:
                for r in csv.DictReader(f):
                    if r["final_state"] != "COMPLETED_SUCCESSFULLY":
                        q = queue_of.get(r["job_id"])
                        killed[q] = killed.get(q, 0) + 1
        for tenant in TENANTS:
            q = s.get("queues", {}).get(tenant, {})
            rows.append({
                "scheduler": label, "end": s.get("end_reason", "done"), "tenant": tenant,
                "weight": TENANTS[tenant], "jobs": q.get("jobs", 0), "jobs_finished": q.get("jobs_finished", 0),
                "not_successful": killed.get(tenant, 0),
                "mean_wait": q.get("mean_wait", float("nan")),
                "bounded_slowdown": q.get("mean_bounded_slowdown", float("nan")),
                "cpu_share": q.get("cpu_share", float("nan")), "makespan": s["makespan"],
                # How far a run got (a stopped run's end_time) and its windows:
                # wall time per simulated second, to extrapolate a prefix.
                "simulated_s": s.get("end_time", s["makespan"]), "windows": s.get("windows", 0),
                "wall_s": float((out / "wall_s").read_text()),
                # Each program's CPU time (scheduler, controller-N), seconds.
                "cpu_s": " ".join(f"{k}={v:.1f}" for k, v in list(s.get("program_cpu_seconds", {}).items())
                                  + ([("batkube", s["batkube_cpu_seconds"])] if "batkube_cpu_seconds" in s else [])),
                "wake_ups_elided": sum(s.get("wake_ups_elided", {}).values()),
            })
    with open(base / "queue_compare.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print("| scheduler | end | tenant (weight) | jobs done | of which killed | mean wait (s) | bounded slowdown "
          "| cpu share | makespan (s) | windows | wall (s) | CPU (s) per program |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['scheduler']} | {r['end']} | {r['tenant']} ({r['weight']}) | {r['jobs_finished']}/{r['jobs']} "
              f"| {r['not_successful']} "
              f"| {r['mean_wait']:.1f} | {r['bounded_slowdown']:.2f} | {r['cpu_share']:.3f} "
              f"| {r['makespan']:.0f} | {r['windows']} | {r['wall_s']:.1f} | {r['cpu_s']} |")
    if not args.no_plot:
        plot(runs, base, cluster[1] * cluster[2])


if __name__ == "__main__":
    main()
