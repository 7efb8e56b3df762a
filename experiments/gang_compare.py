#!/usr/bin/env python3
"""Parallel jobs (gangs of pods) under three Kubernetes schedulers, through
`batkube run` on exact simulated time (built-in stand-in unless real Batsim
is on PATH):

  - the upstream kube-scheduler, default profile (no gangs: it binds a
    gang's pods one by one, so partly bound gangs hold nodes, and runs can
    deadlock), pods written with `--gang none`;
  - the kube-scheduler of kubernetes-sigs/scheduler-plugins with its
    Coscheduling plugin (`--gang coscheduling`, its CRDs with `--crds`);
  - batkube-scheduler (`--gang coscheduling`).

Per run: makespan, mean wait, mean bounded slowdown (tau = 10 s), utilisation,
node-seconds held by partly bound gangs, gangs started, how the run ended.
Batsim's own EASY backfilling (pybatsim) is the HPC reference when real
Batsim is installed; without it that row is left out, and the table says so.

    python3 experiments/gang_compare.py [--cases generated,nasa] [--schedulers default,coscheduling,batkube] [--reuse]
Outputs: experiments/results/gang_compare/{gang_compare.csv,gang_compare.png,<case>-<scheduler>/},
and the table on stdout (Markdown). `--reuse` keeps the runs already in
their directories (a run is long: the NASA trace is 310k pods) and runs
only the missing ones.
"""

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _common as c

OUT = c.RESULTS / "gang_compare"
GO = c.ROOT / "target" / "go"
MASTER = '--master "$(sed -n \'s/^ *server: *//p\' "$KUBECONFIG")"'
TAU = 10.0


def generated(bk):
    """200 jobs on 1, 2, 4 or 8 of 16 machines, Poisson arrivals (mean 20 s),
    durations 60 to 600 s: a queue forms, gangs compete."""
    path = OUT / "generated-parallel.json"
    if not path.exists():
        subprocess.run([bk, "workload", "generate", "-n", "200", "--arrival", "poisson:20",
                        "--duration", "uniform:60:600", "--cpu", "1",
                        "--res", "choice:1:0.4,2:0.3,4:0.2,8:0.1", "--seed", "4", "-o", str(path)],
                       check=True)
    return path, c.PLATFORMS / "16-node.xml"


def schedulers(which):
    rel = c.ROOT / "target" / "release"
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "batkube", "-p", "batkube-scheduler"],
                   cwd=c.ROOT, check=True)
    go = [p for p in ("kube-scheduler", "kube-scheduler-coscheduling")
          if (p == "kube-scheduler" and "default" in which)
          or (p == "kube-scheduler-coscheduling" and "coscheduling" in which)]
    if go:
        print(f"[setup] schedulers/build-go.sh {' '.join(go)}", file=sys.stderr)
        subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh"), *go], check=True)
    all_ = {
        "default": ("kube-scheduler (default profile)",
                    f'{GO / "kube-scheduler"} --kubeconfig "$KUBECONFIG" --secure-port=0',
                    ["--gang", "none"]),
        "coscheduling": ("kube-scheduler + Coscheduling",
                         f'{GO / "kube-scheduler-coscheduling"} --config '
                         f'{c.ROOT / "schedulers/coscheduling/config.yaml"} --secure-port=0 {MASTER}',
                         ["--gang", "coscheduling", "--crds", str(GO / "crds" / "coscheduling")]),
        "batkube": ("batkube-scheduler", str(rel / "batkube-scheduler"), ["--gang", "coscheduling"]),
    }
    return rel / "batkube", {k: all_[k] for k in which}


def ensure_pybatsim():
    """pybatsim 3.2.1 (EASY backfilling) in the plotting venv. Its pin on
    pyzmq<23 does not build on Python 3.11: the current pyzmq is taken and
    pybatsim installed without its pins (it works with it)."""
    py = c.VENV / "bin" / "python"
    if (c.VENV / "bin" / "pybatsim").exists():
        return c.VENV / "bin" / "pybatsim"
    print("[setup] pybatsim 3.2.1 into experiments/.venv (PyPI)", file=sys.stderr)
    pip = [str(py), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "pyzmq", "procset>=1,<2", "sortedcontainers>=2.3,<3", "docopt>=0.6.2,<0.7"],
                   check=True)
    subprocess.run([*pip, "--no-deps", "pybatsim==3.2.1"], check=True)
    return c.VENV / "bin" / "pybatsim"


def run_easy(batsim, workload, platform, out):
    """Real Batsim with pybatsim's EASY backfilling: the HPC reference. EASY
    needs walltimes; the workload's jobs get their exact run time rounded up
    plus 1 s (perfect estimates; Batsim kills a job at its walltime).
    Returns summary-like metrics from Batsim's own _jobs.csv."""
    import math
    import socket
    out.mkdir(parents=True, exist_ok=True)
    w = json.loads(Path(workload).read_text())
    for j in w["jobs"]:
        j["walltime"] = math.ceil(float(w["profiles"][j["profile"]]["delay"])) + 1
    wl = out / "workload-with-walltimes.json"
    wl.write_text(json.dumps(w))
    with socket.socket() as s_:
        s_.bind(("127.0.0.1", 0))
        port = s_.getsockname()[1]
    endpoint = f"tcp://127.0.0.1:{port}"
    with open(out / "pybatsim.log", "w") as log:
        sched = subprocess.Popen([str(ensure_pybatsim()), "easyBackfill", "-s", endpoint, "-t", "600000"],
                                 stdout=log, stderr=subprocess.STDOUT)
    try:
        with open(out / "batsim.log", "w") as log:
            subprocess.run([batsim, "-p", str(platform), "-w", str(wl), "-e", f"{out}/", "-s", endpoint],
                           stdout=log, stderr=subprocess.STDOUT, check=True)
    finally:
        try:
            sched.wait(timeout=30)
        except subprocess.TimeoutExpired:
            sched.kill()
    nodes = sum(1 for h in c.ET.parse(platform).iter("host")
                if not any(p.get("id") == "role" and p.get("value") == "master" for p in h.iter("prop")))
    rows = list(csv.DictReader(open(out / "_jobs.csv")))
    done = [r for r in rows if r["final_state"] == "COMPLETED_SUCCESSFULLY"]
    makespan = max(float(r["finish_time"]) for r in rows)
    busy = sum(float(r["execution_time"]) * int(r["requested_number_of_resources"]) for r in done)
    return {
        "end_reason": "done", "makespan": makespan,
        "mean_wait": sum(float(r["waiting_time"]) for r in done) / max(len(done), 1),
        "utilisation": busy / (nodes * makespan) if makespan else 0.0,
        "partial_gang_node_seconds": 0.0,
        "gangs_started": sum(1 for r in done if int(r["requested_number_of_resources"]) > 1),
        "jobs_succeeded": len(done), "jobs": len(rows), "end_time": makespan,
    }, out / "_jobs.csv"


def bounded_slowdown(jobs_csv):
    vals = []
    with open(jobs_csv) as f:
        for r in csv.DictReader(f):
            if r["final_state"] != "COMPLETED_SUCCESSFULLY":
                continue
            run = float(r["execution_time"])
            wait = float(r["waiting_time"])
            vals.append(max((wait + run) / max(run, TAU), 1.0))
    return sum(vals) / len(vals) if vals else float("nan")


def plot(rows):
    """A row of panels per case (their scales differ by orders of magnitude),
    a panel per metric, a bar per scheduler; a run that did not complete is
    labelled with how it ended."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    metrics = [("makespan", "makespan (s)"), ("mean_wait", "mean wait (s)"),
               ("bounded_slowdown", "mean bounded slowdown"), ("utilisation", "utilisation"),
               ("partial_gang_node_s", "node·s held by partial gangs")]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    scheds = list(dict.fromkeys(r["scheduler"] for r in rows))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(len(cases), len(metrics), figsize=(4 * len(metrics), 3.2 * len(cases)),
                             squeeze=False)
    for ci, case in enumerate(cases):
        for ax, (key, title) in zip(axes[ci], metrics):
            for i, sch in enumerate(scheds):
                r = next((r for r in rows if r["case"] == case and r["scheduler"] == sch), None)
                if r is None:
                    continue
                b = ax.bar(i, r[key], color=colours[i % len(colours)], label=sch)[0]
                if r["end"] != "done":
                    ax.annotate(r["end"], (b.get_x() + b.get_width() / 2, b.get_height()),
                                ha="center", va="bottom", fontsize=7)
            ax.set_xticks([])
            ax.set_title(f"{case}: {title}", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(scheds), fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(OUT / "gang_compare.png", dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="generated,nasa")
    ap.add_argument("--schedulers", default="default,coscheduling,batkube,easy",
                    help="default, coscheduling, batkube, easy (real Batsim + pybatsim's EASY backfilling)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep runs already done (their summary.json) instead of running them again")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--batsim", default=shutil.which("batsim"),
                    help="real Batsim, for the EASY backfilling reference (default: batsim on PATH)")
    ap.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                    help="stop a run after this much wall time (SIGTERM: batkube writes its outputs, "
                         "end_reason sigterm, and the table shows how far it got)")
    args = ap.parse_args()
    if not args.no_plot:
        c.ensure_venv()
    OUT.mkdir(parents=True, exist_ok=True)
    which = args.schedulers.split(",")
    bk, scheds = schedulers([w for w in which if w != "easy"])
    if "easy" in which:
        if args.batsim:
            scheds["easy"] = ("EASY backfilling (pybatsim, real Batsim)", None, None)
        else:
            print("gang_compare: easy needs real Batsim (--batsim PATH or batsim on PATH); left out",
                  file=sys.stderr)
    cases = {}
    for case in args.cases.split(","):
        if case == "generated":
            cases[case] = generated(str(bk))
        elif case == "nasa":
            cases[case] = (c.WORKLOADS / "NASA-iPSC-1993-3.1-parallel.json", c.PLATFORMS / "128-node.xml")
        else:
            sys.exit(f"gang_compare: unknown case {case!r} (generated, nasa)")
    rows = []
    for case, (w, p) in cases.items():
        for key, (label, cmd, flags) in scheds.items():
            out = OUT / f"{case}-{key}"
            if key == "easy":
                if not (args.reuse and (out / "summary.json").is_file()):
                    print(f"[run] {case} / {label}", file=sys.stderr)
                    t0 = time.monotonic()
                    summ, _ = run_easy(args.batsim, w, p, out)
                    (out / "summary.json").write_text(json.dumps(summ))
                    (out / "wall_s").write_text(f"{time.monotonic() - t0:.1f}\n")
                s = json.loads((out / "summary.json").read_text())
                rows.append({
                    "case": case, "scheduler": label, "end": "done",
                    "makespan": s["makespan"], "mean_wait": s["mean_wait"],
                    "bounded_slowdown": bounded_slowdown(out / "_jobs.csv"),
                    "utilisation": s["utilisation"], "partial_gang_node_s": 0.0,
                    "gangs_started": s["gangs_started"], "jobs_succeeded": s["jobs_succeeded"],
                    "jobs": s["jobs"], "wall_s": float((out / "wall_s").read_text()),
                    "end_time": s["end_time"],
                })
                continue
            if args.reuse and (out / "wall_s").is_file() and (out / "summary.json").is_file():
                print(f"[reuse] {case} / {label}", file=sys.stderr)
                wall = float((out / "wall_s").read_text())
            else:
                shutil.rmtree(out, ignore_errors=True)
                print(f"[run] {case} / {label}", file=sys.stderr)
                t0 = time.monotonic()
                # batkube's own progress line goes to the terminal.
                proc = subprocess.Popen([str(bk), "run", "--platform", str(p), "--workload", str(w),
                                         "--scheduler", cmd, "--out", str(out), *flags],
                                        stdout=subprocess.DEVNULL)
                try:
                    proc.wait(timeout=args.time_limit)
                except subprocess.TimeoutExpired:
                    print(f"[run] {case} / {label}: --time-limit {args.time_limit:.0f} s reached, "
                          "stopping it (its outputs say how far it got)", file=sys.stderr)
                    proc.terminate()
                    proc.wait()
                r = proc
                wall = time.monotonic() - t0
                (out / "wall_s").write_text(f"{wall:.1f}\n")
                if r.returncode != 0:
                    print(f"[run] {case} / {label}: exit {r.returncode}", file=sys.stderr)
            s = json.loads((out / "summary.json").read_text())
            rows.append({
                "case": case, "scheduler": label, "end": s.get("end_reason", "done"),
                "makespan": s["makespan"], "mean_wait": s["mean_wait"],
                "bounded_slowdown": bounded_slowdown(out / "jobs.csv"),
                "utilisation": s["utilisation"],
                "partial_gang_node_s": s.get("partial_gang_node_seconds", 0.0),
                "gangs_started": s.get("gangs_started", 0),
                "jobs_succeeded": s["jobs_succeeded"], "jobs": s["jobs"], "wall_s": wall,
                "end_time": s.get("end_time", s["makespan"]),
            })
    with open(OUT / "gang_compare.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    print("| case | scheduler | end | makespan (s) | mean wait (s) | bounded slowdown | utilisation "
          "| partial-gang node·s | gangs started | jobs done | wall (s) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        end = r["end"] if r["end"] == "done" else f"{r['end']} at {r['end_time']:.0f} s"
        print(f"| {r['case']} | {r['scheduler']} | {end} | {r['makespan']:.1f} | {r['mean_wait']:.1f} "
              f"| {r['bounded_slowdown']:.2f} | {r['utilisation']:.3f} | {r['partial_gang_node_s']:.0f} "
              f"| {r['gangs_started']} | {r['jobs_succeeded']}/{r['jobs']} | {r['wall_s']:.1f} |")
    if not args.no_plot:
        plot(rows)
    if not args.batsim:
        print("\nBatsim's EASY backfilling (pybatsim): not run, real Batsim is not on PATH (--batsim).")


if __name__ == "__main__":
    main()
