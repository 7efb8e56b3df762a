#!/usr/bin/env python3
"""Batch schedulers at scale: a parallel workload of N jobs in two weighted
queues on 1,000 nodes, under Kueue (its controller manager with the
upstream kube-scheduler, `--gang kueue`) and Volcano (vc-scheduler and
vc-controller-manager, `--gang volcano`), on exact simulated time.

    python3 experiments/queue_scale.py [--sizes 1000,3000,10000] [--schedulers kueue,volcano]
                                       [--reruns 2] [--timeout 1800] [--gap 1.0]

Inputs (made once under experiments/results/queue_scale/inputs/):
platforms/1000-node.xml (16 cpu, 64Gi each) and, per N, `batkube workload
generate -n N --arrival poisson:GAP --duration uniform:300:900 --cpu
choice:4,8,16 --res choice:1:0.4,2:0.3,4:0.2,8:0.1 --seed 1`: about 0.9 of
the cluster's cpus asked for on average with GAP = 1 s. Every third job
(index mod 3 = 2) goes to tenant-b (weight 1), the others to tenant-a
(weight 2); the queues are queue_compare.py's (Volcano Queues of those
weights; Kueue ClusterQueues in one cohort with nominal quotas of 667 and
333 nodes' worth, borrowing unlimited).

Each run: wall time; simulated makespan (or, if stopped, how far it got);
windows, wake-ups and messages (summary.json); the CPU time of each
process (batkube, the scheduler, the controller; /proc/<pid>/stat sampled
every second, so a process's last second may be missed); the sha256 of
jobs.csv, and with --reruns R, whether the R runs of a case agree. A run
longer than --timeout is stopped with SIGTERM (batkube writes its outputs,
`end_reason` sigterm) and its wall time per simulated second gives the
extrapolation; a size after a stopped one is skipped.
Outputs: experiments/results/queue_scale/{queue_scale.csv,<case>/}, the
table on stdout (Markdown).
"""

import argparse
import csv
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import _common as c
import queue_compare as qc

OUT = c.RESULTS / "queue_scale"
GO = c.ROOT / "target" / "go"
CLUSTER = ("1000-node.xml", 1000, 16, 64)
TICK = os.sysconf("SC_CLK_TCK")


def workload(bk, n, gap, seed):
    path = OUT / "inputs" / f"queues_{n}_gap{gap:g}_seed{seed}.json"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.json")
    subprocess.run([bk, "workload", "generate", "-n", str(n), "--arrival", f"poisson:{gap:g}",
                    "--duration", "uniform:300:900", "--cpu", "choice:4,8,16",
                    "--res", "choice:1:0.4,2:0.3,4:0.2,8:0.1", "--seed", str(seed), "-o", str(tmp)], check=True)
    w = json.loads(tmp.read_text())
    tmp.unlink()
    for i, j in enumerate(w["jobs"]):
        j["queue"] = "tenant-b" if i % 3 == 2 else "tenant-a"
    w["description"] = (w.get("description", "") + "; queue: tenant-b for every third job (index mod 3 = 2), "
                        "tenant-a otherwise (experiments/queue_scale.py)").lstrip("; ")
    path.write_text(json.dumps(w))
    return path


def scheduler_flags(which, out):
    """(scheduler command, batkube run flags) of `which`."""
    out.mkdir(parents=True, exist_ok=True)
    if which == "kueue":
        return (f'{GO / "kube-scheduler"} --kubeconfig "$KUBECONFIG" --leader-elect=false --secure-port=0',
                ["--gang", "kueue", "--crds", str(GO / "crds" / "kueue"),
                 "--scenario", str(qc.kueue_queues(out, CLUSTER)),
                 "--controller", f'{c.ROOT / "schedulers/kueue/run.sh"} {GO / "kueue-manager"} '
                                 f'--config {c.ROOT / "schedulers/kueue/config.yaml"} --kubeconfig "$KUBECONFIG"'])
    if which == "volcano":
        return (f'{qc.VC_ENV}{GO / "vc-scheduler"} --kubeconfig "$KUBECONFIG" --scheduler-conf '
                f'{c.ROOT / "schedulers/volcano/scheduler.conf"} --leader-elect=false',
                ["--gang", "volcano", "--crds", str(GO / "crds" / "volcano"),
                 "--scenario", str(qc.volcano_queues(out)),
                 "--controller", f'{qc.VC_ENV}{GO / "vc-controller-manager"} --kubeconfig "$KUBECONFIG" --leader-elect=false'])
    sys.exit(f"queue_scale: unknown scheduler {which} (kueue, volcano)")


def session_cpu(sid, cpu):
    """Updates cpu {pid: (comm, seconds of user + system time)} for the
    processes of session `sid` (threads included: /proc/<pid>/stat sums them)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        f = stat[stat.rindex(")") + 2:].split()
        if int(f[3]) != sid:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        cpu[int(d.name)] = (comm, (int(f[11]) + int(f[12])) / TICK)


def windows_breakdown(log):
    """Where the wall time went, from the broker's debug log (`window closed
    ... wall_ms=` lines, written with --windows): the windows of at least
    30 ms (the scheduler computing: Volcano's sessions, kube-scheduler's
    cycles), the shorter ones (timer wake-ups that find nothing to do, such
    as Volcano's 20 ms bind ticks), and the time between windows (the
    exchange with Batsim, the instant applied to the API and delivered)."""
    import re
    from datetime import datetime
    rows = []
    pat = re.compile(r"^(\S+?)Z? +DEBUG batkube::broker: window closed .*?wall_ms=([0-9.e+-]+)")
    for line in open(log, errors="replace"):
        m = pat.match(line)
        if m:
            rows.append((datetime.fromisoformat(m.group(1)).timestamp(), float(m.group(2)) / 1e3))
    if len(rows) < 2:
        return {}
    span = rows[-1][0] - rows[0][0]
    long_ = [w for _, w in rows if w >= 0.03]
    short = [w for _, w in rows if w < 0.03]
    inside = sum(w for _, w in rows)
    return {"windows_long": len(long_), "wall_long_s": round(sum(long_), 1),
            "windows_short": len(short), "wall_short_s": round(sum(short), 1),
            "wall_between_s": round(span - inside, 1)}


def run(bk, platform, wl, out, which, timeout, seed, gogc=None, windows=False):
    sched, flags = scheduler_flags(which, out)
    for f in ("summary.json", "jobs.csv"):
        (out / f).unlink(missing_ok=True)
    cmd = [bk, "run", "--platform", str(platform), "--workload", str(wl), "--scheduler", sched,
           "--out", str(out), "--seed", str(seed),
           # The seed for the programs' randomness only: --deterministic
           # (which runs a scheduler and a controller manager one thread at
           # a time between them) costs about 2x, this benchmark measures
           # speed, and the mode clears the environment GOGC goes through.
           "--no-deterministic", *flags]
    (out / "command").write_text(" ".join(map(str, cmd)) + "\n")
    t0 = time.monotonic()
    env = dict(os.environ)
    if gogc:
        env["GOGC"] = gogc
    if windows:
        env["BATKUBE_LOG"] = "info,batkube::broker=debug"
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(out / "stderr.log", "w"),
                         start_new_session=True, env=env)
    cpu, stopped = {}, False
    while p.poll() is None:
        if not stopped and time.monotonic() - t0 > timeout:
            os.kill(p.pid, signal.SIGTERM)
            stopped = True
        session_cpu(p.pid, cpu)
        time.sleep(1.0)
    wall = time.monotonic() - t0
    try:
        s = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        s = {}
    by_comm = {}
    for comm, sec in cpu.values():
        by_comm[comm] = by_comm.get(comm, 0.0) + sec
    jobs = out / "jobs.csv"
    digest = hashlib.sha256(jobs.read_bytes()).hexdigest()[:12] if jobs.is_file() else ""
    if windows:
        s["windows_breakdown"] = windows_breakdown(out / "stderr.log")
    return wall, p.returncode, s, by_comm, digest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,3000,10000", help="jobs per case, comma-separated")
    ap.add_argument("--schedulers", default="kueue,volcano", help="kueue, volcano (comma-separated)")
    ap.add_argument("--reruns", type=int, default=1, help="runs per case (jobs.csv compared between them)")
    ap.add_argument("--timeout", type=float, default=1800, help="wall seconds before a run is stopped")
    ap.add_argument("--gap", type=float, default=1.0, help="mean gap between arrivals (s)")
    ap.add_argument("--seed", type=int, default=1, help="the workload's seed and batkube run --seed")
    ap.add_argument("--batkube", help="this batkube binary (not built); default: target/release/batkube, built")
    ap.add_argument("--go", help="the Go programs from this directory (not built); default: target/go, built")
    ap.add_argument("--gogc", help="GOGC for the Go programs (the scheduler and controller), e.g. 400: "
                                   "less garbage collection for more memory; their decisions do not change")
    ap.add_argument("--windows", action="store_true",
                    help="log each window (the broker's debug log) and split the wall time into windows of "
                         "at least 30 ms, shorter ones, and the time between windows")
    ap.add_argument("--tag", default="", help="a suffix of each case's output directory (two builds side by side)")
    a = ap.parse_args()
    global GO
    which = a.schedulers.split(",")
    if a.batkube:
        bk = str(Path(a.batkube).resolve())
    else:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "batkube"], cwd=c.ROOT, check=True)
        bk = str(c.ROOT / "target" / "release" / "batkube")
    if a.go:
        GO = Path(a.go).resolve()
    else:
        go = []
        if "kueue" in which:
            go += ["kube-scheduler", "kueue-manager"]
        if "volcano" in which:
            go += ["vc-scheduler", "vc-controller-manager"]
        subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh"), *go], check=True)
    platform = c.PLATFORMS / CLUSTER[0]
    header = ["scheduler", "jobs", "run", "end", "jobs_done", "wall_s", "simulated_s", "windows", "wake_ups",
              "messages", "windows_per_sim_s", "wall_ms_per_window", "cpu_batkube_s", "cpu_scheduler_s",
              "cpu_controller_s", "mean_wait_s", "jobs_csv"]
    rows = []
    for w in which:
        for n in [int(float(x)) for x in a.sizes.split(",")]:
            wl = workload(bk, n, a.gap, a.seed)
            stopped = False
            for r in range(1, a.reruns + 1):
                out = OUT / f"{w}_{n}{a.tag}" / f"run{r}"
                print(f"[run] {w} {n} jobs, run {r}", file=sys.stderr)
                wall, rc, s, cpu, digest = run(bk, platform, wl, out, w, a.timeout, a.seed, a.gogc, a.windows)
                sim = s.get("end_time") or s.get("makespan") or 0.0
                win = s.get("windows", 0)
                sched = sum(v for k, v in cpu.items() if k in ("kube-scheduler", "vc-scheduler"))
                ctl = sum(v for k, v in cpu.items() if k in ("kueue-manager", "vc-controller-m"))
                rows.append([w, n, r, s.get("end_reason", f"exit {rc}"),
                             f"{s.get('jobs_succeeded', 0)}/{s.get('jobs', n)}", f"{wall:.1f}", f"{sim:.0f}", win,
                             s.get("wake_ups_requested", ""), s.get("messages_exchanged", ""),
                             f"{win / sim:.1f}" if sim else "", f"{1000 * wall / win:.2f}" if win else "",
                             f"{cpu.get('batkube', 0):.1f}", f"{sched:.1f}", f"{ctl:.1f}",
                             f"{s.get('mean_wait', float('nan')):.1f}", digest])
                print(f"  {dict(zip(header, rows[-1]))}", file=sys.stderr)
                if s.get("windows_breakdown"):
                    print(f"  windows: {s['windows_breakdown']}", file=sys.stderr)
                c.write_csv(OUT / "queue_scale.csv", header, rows)
                if not s.get("completed"):
                    stopped = True
                    break
            if stopped:
                print(f"[skip] {w}: larger sizes after a run that did not complete", file=sys.stderr)
                break
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(map(str, r)) + " |")


if __name__ == "__main__":
    main()
