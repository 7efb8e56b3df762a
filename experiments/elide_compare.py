#!/usr/bin/env python3
"""Timer elision against the exact run: `batkube run --compare-exact` on many cases.

Each case is a generated parallel workload with two tenants' queues (as
`queue_compare.py`'s, smaller: --jobs jobs on 16 one-cpu machines, another
seed per case), or a prefix of the NASA iPSC parallel trace split between
the tenants (--nasa-jobs). Each setup runs each case twice through
`batkube run --elide RULES --compare-exact --seed 1` (the Go programs under
the seccomp supervisor, deterministic with the seed; batkube-scheduler linked): exactly, and with the
rules; the comparison names the first difference in jobs.csv, pods.csv or
any program's API requests (with simulated times).

Writes results/elide_compare/<rules>/elide_compare.csv (one row per setup and
case: identical or the first difference, windows, wall and CPU time of both
runs) and prints a table per setup.

    python3 experiments/elide_compare.py [--setups volcano,kueue,coscheduling,batkube] [--cases 20]
        [--jobs 12] [--elide idle] [--nasa-jobs 60] [--reuse]
"""

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import sys
import time

import _common as c
import gang_compare
import queue_compare

OUT = c.RESULTS / "elide_compare"


def case_workload(bk, out, i, jobs):
    """Tenant a: a third of the jobs at time 0; tenant b: Poisson arrivals;
    parallel jobs on 1, 2 or 4 machines, 30 to 240 s."""
    path = out / f"case-{i:02d}.json"
    if path.exists():
        return path
    parts = {}
    for tenant, args in (("tenant-a", ["-n", str(jobs // 3), "--arrival", "burst",
                                       "--duration", "uniform:60:240", "--seed", str(1000 + i)]),
                         ("tenant-b", ["-n", str(jobs - jobs // 3), "--arrival", "poisson:10",
                                       "--duration", "uniform:30:180", "--seed", str(2000 + i)])):
        p = out / f"{tenant}-{i}.json"
        subprocess.run([bk, "workload", "generate", *args, "--cpu", "1", "--res", "choice:1:0.5,2:0.3,4:0.2",
                        "-o", str(p)], check=True, stdout=subprocess.DEVNULL)
        parts[tenant] = json.loads(p.read_text())
        p.unlink()
    all_jobs, profiles = [], {}
    for tenant, w in parts.items():
        for j in w["jobs"]:
            name = f"{tenant}-{j['profile']}"
            profiles[name] = w["profiles"][j["profile"]]
            all_jobs.append(dict(j, id=f"{tenant}-{j['id']}", profile=name, queue=tenant))
    all_jobs.sort(key=lambda j: (j["subtime"], j["id"]))
    path.write_text(json.dumps({"nb_res": 16, "jobs": all_jobs, "profiles": profiles}))
    return path


def setups(which, out):
    """name -> (command, flags, platform) for each setup asked for."""
    q = [w for w in which if w in ("volcano", "kueue", "yunikorn", "batkube")]
    g = [w for w in which if w == "coscheduling"]
    unknown = [w for w in which if w not in ("volcano", "kueue", "yunikorn", "batkube", "coscheduling")]
    if unknown:
        sys.exit(f"elide_compare: unknown setup(s) {', '.join(unknown)} (volcano, kueue, yunikorn, "
                 "coscheduling, batkube)")
    chosen = {}
    bk = None
    if q:
        bk, s = queue_compare.schedulers(q, out, queue_compare.CLUSTERS["generated"])
        for k, (_, cmd, flags) in s.items():
            chosen[k] = (cmd, flags)
    if g:
        bk, s = gang_compare.schedulers(g)
        for k, (_, cmd, flags) in s.items():
            chosen[k] = (cmd, flags)
    return str(bk), {k: chosen[k] for k in which}


def summary(d):
    p = d / "summary.json"
    return json.loads(p.read_text()) if p.is_file() else {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setups", default="volcano,kueue,coscheduling,batkube",
                    help="volcano, kueue (with kube-scheduler), yunikorn, coscheduling (kube-scheduler + "
                         "Coscheduling), batkube (default: volcano,kueue,coscheduling,batkube)")
    ap.add_argument("--cases", type=int, default=20, help="generated cases per setup (default 20)")
    ap.add_argument("--jobs", type=int, default=12, help="jobs per generated case (default 12)")
    ap.add_argument("--nasa-jobs", type=int, default=0, metavar="K",
                    help="also the first K jobs of the NASA iPSC parallel trace, on 128 nodes (default: none)")
    ap.add_argument("--elide", default="idle", help="the --elide rules to check (default: idle)")
    ap.add_argument("--reuse", action="store_true", help="keep comparisons already made")
    ap.add_argument("--time-limit", type=float, default=1800, metavar="SECONDS",
                    help="stop one comparison after this much wall time (default 1800)")
    args = ap.parse_args()
    base = OUT / args.elide.replace(",", "+").replace(":", "-")
    base.mkdir(parents=True, exist_ok=True)
    bk, chosen = setups(args.setups.split(","), base)
    cases = [(f"case-{i:02d}", case_workload(bk, base, i, args.jobs), c.PLATFORMS / "16-node.xml",
              queue_compare.CLUSTERS["generated"]) for i in range(args.cases)]
    if args.nasa_jobs:
        nasa_dir = base / f"nasa-{args.nasa_jobs}"
        cases.append((f"nasa-{args.nasa_jobs}", queue_compare.nasa_workload(nasa_dir, args.nasa_jobs, 1.0),
                      c.PLATFORMS / "128-node.xml", queue_compare.CLUSTERS["nasa"]))
    rows = []
    for setup, (cmd, flags) in chosen.items():
        for name, w, platform, cluster in cases:
            out = base / setup / name
            if not (args.reuse and (out / "compare.txt").is_file()):
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir(parents=True)
                f = list(flags)
                if cluster is not queue_compare.CLUSTERS["generated"] and setup in ("kueue", "yunikorn"):
                    # Quotas of the NASA cluster.
                    f = queue_compare.schedulers([setup], out, cluster)[1][setup][2]
                print(f"[compare] {setup} {name}", file=sys.stderr)
                t0 = time.monotonic()
                try:
                    subprocess.run([bk, "run", "--platform", str(platform), "--workload", str(w), "--scheduler", cmd,
                                    "--out", str(out), *f, "--elide", args.elide, "--compare-exact",
                                    # batkube-scheduler is linked with the shim, and deterministic.
                                    *([] if setup == "batkube" else ["--seed", "1"])],
                                   stdout=subprocess.DEVNULL, stderr=open(out / "compare.log", "w"),
                                   timeout=args.time_limit)
                except subprocess.TimeoutExpired:
                    print(f"[compare] {setup} {name}: --time-limit reached", file=sys.stderr)
                (out / "wall_s").write_text(f"{time.monotonic() - t0:.1f}\n")
            text = (out / "compare.txt").read_text() if (out / "compare.txt").is_file() else ""
            first = next((line for line in text.splitlines() if line.startswith("first difference")), "")
            ex, el = summary(out / "exact"), summary(out / "elided")
            rows.append({
                "setup": setup, "case": name,
                "result": "identical" if text.rstrip().endswith("identical") else ("differs" if text else "failed"),
                "first_difference": first.replace("first difference, ", ""),
                "windows_exact": ex.get("windows", 0), "windows_elided": el.get("windows", 0),
                "wall_exact": ex.get("wall_seconds", 0.0), "wall_elided": el.get("wall_seconds", 0.0),
                "cpu_exact": sum(ex.get("program_cpu_seconds", {}).values()),
                "cpu_elided": sum(el.get("program_cpu_seconds", {}).values()),
                "makespan_exact": ex.get("makespan", 0.0), "makespan_elided": el.get("makespan", 0.0),
                "mean_wait_exact": ex.get("mean_wait", 0.0), "mean_wait_elided": el.get("mean_wait", 0.0),
                "wake_ups_elided": sum(el.get("wake_ups_elided", {}).values()),
            })
    with open(base / "elide_compare.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print(f"`--elide {args.elide}` against the exact run (`--seed 1`), {base / 'elide_compare.csv'}:\n")
    print("| setup | cases identical | windows, median exact -> elided | wall (s), median exact -> elided "
          "| programs' CPU (s), median | mean wait, median abs. change (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for setup in chosen:
        rs = [r for r in rows if r["setup"] == setup]
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        same = sum(r["result"] == "identical" for r in rs)
        dw = statistics.median(abs(r["mean_wait_elided"] - r["mean_wait_exact"]) for r in rs)
        print(f"| {setup} | {same}/{len(rs)} | {med('windows_exact'):.0f} -> {med('windows_elided'):.0f} "
              f"| {med('wall_exact'):.1f} -> {med('wall_elided'):.1f} | {med('cpu_exact'):.1f} -> "
              f"{med('cpu_elided'):.1f} | {dw:.2f} |")
    for r in rows:
        if r["result"] != "identical":
            print(f"- {r['setup']} {r['case']}: {r['result']} {r['first_difference']}")


if __name__ == "__main__":
    main()
