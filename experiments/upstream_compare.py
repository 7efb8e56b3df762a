#!/usr/bin/env python3
"""The upstream kube-scheduler (default profile), the same with the example
plugin (NodeLabelPreference: prefer disktype=ssd), and batkube-scheduler,
side by side on burst, spaced, KIT and poisson_500, through `batkube run`
(built-in stand-in, --sync exact; the Go binaries under --shim seccomp,
ours linked):

  - makespan, mean and max wait, wall time, windows;
  - per pod, against batkube-scheduler: how many pods landed on the same
    node, how many started at the same instant, the mean |start delta|;
  - on platforms with a disktype label, the share of pods on ssd nodes
    (the plugin's effect).

The upstream binaries run with their default client settings (protobuf,
leader election on kube-system/kube-scheduler); only --secure-port=0 is
added so that a run never fails on port 10259 taken by another simulation.

    python3 experiments/upstream_compare.py [--repeat N] [--cases burst,spaced,KIT,poisson]
Outputs: experiments/results/upstream_compare/{upstream_compare.csv,pods_<case>.csv},
and the table on stdout (Markdown).
"""

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import _common as c

OUT = c.RESULTS / "upstream_compare"
CASES = dict(c.CASES)
CASES["poisson"] = (c.WORKLOADS / "poisson_500.json", c.PLATFORMS / "heterogeneous.xml")
PLUGIN_CONFIG = c.ROOT / "schedulers" / "example-plugin" / "config.yaml"
MASTER = '--master "$(sed -n \'s/^ *server: *//p\' "$KUBECONFIG")"'


def build():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "batkube", "-p", "batkube-scheduler"],
                   cwd=c.ROOT, check=True)
    print("[setup] schedulers/build-go.sh (a no-op when up to date)", file=sys.stderr)
    subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh")], check=True)
    rel, go = c.ROOT / "target" / "release", c.ROOT / "target" / "go"
    for p in (rel / "batkube", rel / "batkube-scheduler", go / "kube-scheduler", go / "kube-scheduler-with-plugin"):
        if not p.is_file():
            sys.exit(f"upstream_compare: {p} was not built")
    return rel / "batkube", {
        "kube-scheduler (default profile)":
            f'{go / "kube-scheduler"} --kubeconfig "$KUBECONFIG" --secure-port=0',
        "kube-scheduler + NodeLabelPreference":
            f"{go / 'kube-scheduler-with-plugin'} --config {PLUGIN_CONFIG} --secure-port=0 {MASTER}",
        "batkube-scheduler": str(rel / "batkube-scheduler"),
    }


def disktypes(platform):
    """node name -> disktype label (empty when none)."""
    out = {}
    for h in ET.parse(platform).getroot().iter("host"):
        props = {p.get("id"): p.get("value") for p in h.findall("prop")}
        if props.get("role") != "master":
            out[h.get("id")] = props.get("disktype", "")
    return out


def pods(out):
    """pod -> (node, started) from pods.csv."""
    with open(out / "pods.csv", newline="") as f:
        return {r["pod"]: (r["node"], float(r["started"]) if r["started"] else None)
                for r in csv.DictReader(f)}


def run(bk, case, scheduler, out):
    wl, pf = CASES[case]
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    r = subprocess.run([str(bk), "run", "--platform", str(pf), "--workload", str(wl), "--scheduler", scheduler,
                        "--standin", "--strict", "--out", str(out)], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        return {"ok": False, "error": (r.stderr.strip().splitlines() or ["?"])[-1], "wall": wall}
    s = json.loads((out / "summary.json").read_text())
    errors = sum(1 for line in (out / "scheduler.log").read_text(errors="replace").splitlines()
                 if len(line) > 5 and line[0] in "EF" and line[1:5].isdigit())
    return {"ok": True, "wall": wall, "summary": s, "pods": pods(out), "errors": errors}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1, help="runs per scheduler and case (the table shows run 1; "
                                                          "the csv every run)")
    ap.add_argument("--cases", default="burst,spaced,KIT,poisson")
    a = ap.parse_args()
    bk, schedulers = build()
    OUT.mkdir(parents=True, exist_ok=True)
    header = ["case", "scheduler", "run", "jobs ok", "makespan", "mean wait", "max wait", "wall s", "windows",
              "same node as ours", "same start as ours", "mean abs Δstart vs ours (s)", "on ssd nodes", "error lines"]
    rows = []
    for case in a.cases.split(","):
        wl, pf = CASES[case]
        disk = disktypes(pf)
        results = {}
        for name, cmd in schedulers.items():
            for i in range(a.repeat):
                print(f"[{case}] {name} run {i + 1}/{a.repeat}", file=sys.stderr)
                results[(name, i)] = run(bk, case, cmd, OUT / "runs" / f"{case}-{name.split()[0]}-{'plugin' if 'Node' in name else 'default'}-{i}")
        ours = results[("batkube-scheduler", 0)]
        per_pod = {}
        for (name, i), r in results.items():
            if not r["ok"]:
                rows.append([case, name, i + 1, f"failed: {r['error']}"] + [""] * (len(header) - 4))
                continue
            s, p = r["summary"], r["pods"]
            same_node = same_start = 0
            deltas = []
            if ours["ok"]:
                for pod, (node, start) in p.items():
                    o_node, o_start = ours["pods"].get(pod, (None, None))
                    same_node += node == o_node
                    if start is not None and o_start is not None:
                        deltas.append(abs(start - o_start))
                        same_start += abs(start - o_start) < 1e-6
            n = len(p)
            ssd = sum(1 for node, _ in p.values() if disk.get(node) == "ssd")
            rows.append([case, name, i + 1, f"{s['jobs_succeeded']}/{s['jobs']}", f"{s['makespan']:.1f}",
                         f"{s['mean_wait']:.1f}", f"{s['max_wait']:.1f}", f"{r['wall']:.1f}", s["windows"],
                         f"{same_node}/{n}", f"{same_start}/{n}",
                         f"{statistics.fmean(deltas):.1f}" if deltas else "",
                         f"{ssd}/{n}" if any(disk.values()) else "", r["errors"]])
            if i == 0:
                per_pod[name] = p
        with open(OUT / f"pods_{case}.csv", "w", newline="") as f:
            w = csv.writer(f)
            names = list(per_pod)
            w.writerow(["pod"] + [f"{n} {k}" for n in names for k in ("node", "started")])
            for pod in sorted(set().union(*[set(p) for p in per_pod.values()])):
                w.writerow([pod] + [x for n in names for x in (per_pod[n].get(pod) or ("", ""))])
    with open(OUT / "upstream_compare.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    print("| " + " | ".join(h for h in header if h != "run") + " |")
    print("|" + "---|" * (len(header) - 1))
    for r in rows:
        if r[2] == 1:
            print("| " + " | ".join(str(x) for j, x in enumerate(r) if j != 2) + " |")


if __name__ == "__main__":
    main()
