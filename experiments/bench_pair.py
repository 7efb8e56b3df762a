#!/usr/bin/env python3
"""A change to the per-window path against its parent: the scale case (N
jobs of the generator's scale workload, Poisson arrivals every 0.7 s,
exponential durations of mean 600 s, cpu 1, 2 or 4, seed 7, on
platforms/1000-node.xml, batkube-scheduler, --sync exact) run with two or
more builds, interleaved (A, B, A, B, ...), each run's CPU time (user +
system of batkube and every process it started), its system time, its peak
resident memory (the largest of batkube's and the scheduler's, from the
kernel's accounting of that run alone: `wait4`), wall time, makespan and
windows, then the medians. CPU time is the steadier measure on a shared
machine; makespan and windows must be equal across builds.

    python3 experiments/bench_pair.py [--jobs 100000] [--reps 2] BUILD BUILD...
    python3 experiments/bench_pair.py --case burst-job [--reps 5] BUILD BUILD...

`--case burst-job` is the other end: few events, many timer ticks. The
burst workload (200 one-machine jobs at time 0 on 16 nodes) with each job
a batch/v1 Job and kube-controller-manager's job controller beside the
scheduler (configured as in submit_as_cost.py), whose work queues tick
every 0.5 s: about 5,700 windows, nearly all of them a controller's timer
and nothing else.

A BUILD is a directory holding `batkube` and `batkube-scheduler` (a
release build's target/release, or a copy of its two binaries).
Outputs: experiments/results/bench_pair/runs.csv, and the table on stdout.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import _common as c

OUT = c.RESULTS / "bench_pair"


def binaries(build):
    for d in (build, os.path.join(build, "target", "release")):
        bk, sch = os.path.join(d, "batkube"), os.path.join(d, "batkube-scheduler")
        if os.path.isfile(bk) and os.path.isfile(sch):
            return bk, sch
    sys.exit(f"bench_pair: no batkube and batkube-scheduler in {build} (nor in its target/release)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=["scale", "burst-job"], default="scale")
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("builds", nargs="+")
    a = ap.parse_args()
    builds = [(b, *binaries(b)) for b in a.builds]
    OUT.mkdir(parents=True, exist_ok=True)
    extra = []
    if a.case == "burst-job":
        from submit_as_cost import KCM, kcm
        workload, platform = c.WORKLOADS / "200_delay170.json", c.PLATFORMS / "16-node.xml"
        extra = ["--submit-as", "job", "--controller", kcm(KCM)]
    else:
        workload, platform = OUT / f"scale-{a.jobs}.json", c.PLATFORMS / "1000-node.xml"
    if a.case == "scale" and not workload.is_file():
        subprocess.run([builds[0][1], "workload", "generate", "-n", str(a.jobs), "--arrival", "poisson:0.7",
                        "--duration", "exp:600", "--cpu", "choice:1,2,4", "--seed", "7", "-o", str(workload)],
                       check=True)
    runs = []
    for rep in range(a.reps):
        for name, bk, sch in builds:
            out = tempfile.mkdtemp(prefix="bench_pair-")
            err = tempfile.TemporaryFile()
            t0 = time.monotonic()
            p = subprocess.Popen([bk, "run", "--platform", str(platform), "--workload", str(workload),
                                  "--scheduler", sch, "--sync", "exact", "--out", out, *extra],
                                 stdout=subprocess.DEVNULL, stderr=err)
            # This run's own accounting (it and the processes it waited for).
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.monotonic() - t0
            p.returncode = os.waitstatus_to_exitcode(status)
            cpu, sys_s, rss_mb = ru.ru_utime + ru.ru_stime, ru.ru_stime, ru.ru_maxrss / 1024
            if p.returncode != 0:
                err.seek(0)
                tail = err.read().decode(errors="replace")[-2000:]
                sys.exit(f"bench_pair: {name} failed (exit {p.returncode}), outputs in {out}:\n{tail}")
            s = json.loads(open(os.path.join(out, "summary.json")).read())
            shutil.rmtree(out, ignore_errors=True)
            runs.append([name, rep, f"{cpu:.1f}", f"{wall:.1f}", s.get("makespan"), s.get("windows"),
                         f"{os.getloadavg()[0]:.1f}", f"{sys_s:.1f}", f"{rss_mb:.0f}"])
            print(f"[{name}] run {rep}: CPU {cpu:.1f} s (system {sys_s:.1f}), wall {wall:.1f} s, "
                  f"peak RSS {rss_mb:.0f} MB, makespan {s.get('makespan')}, "
                  f"windows {s.get('windows')}, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    c.write_csv(OUT / "runs.csv", ["build", "rep", "cpu_s", "wall_s", "makespan", "windows", "load", "system_s",
                                   "peak_rss_mb"], runs)
    header = ["build", "CPU s (median)", "system s (median)", "wall s (median)", "peak RSS MB (max)", "makespan",
              "windows"]
    rows = []
    for name, _, _ in builds:
        mine = [r for r in runs if r[0] == name]
        rows.append([name, f"{statistics.median(float(r[2]) for r in mine):.1f}",
                     f"{statistics.median(float(r[7]) for r in mine):.1f}",
                     f"{statistics.median(float(r[3]) for r in mine):.1f}",
                     f"{max(float(r[8]) for r in mine):.0f}",
                     " ".join(sorted({str(r[4]) for r in mine})), " ".join(sorted({str(r[5]) for r in mine}))])
    c.print_table(header, rows)


if __name__ == "__main__":
    main()
