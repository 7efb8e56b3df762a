#!/usr/bin/env python3
"""The cost of `--submit-as job` against `--submit-as pod` (issue 42: at
most 2x): the same workload through `batkube run` with batkube-scheduler,
once with the broker writing each job's pods, once with each job a batch/v1
Job whose pods kube-controller-manager's job controller makes (a
`--controller`, on the same simulated clock). Per case and style: the
median wall time of `--reps` runs, their median CPU time (batkube and the
programs it runs: steadier than wall time on a shared machine), the windows
of the first run, the makespan and mean wait (which must not change: the
same schedule) and the ratios job/pod of both times.

Styles: `pod`; `job, kcm defaults` (upstream's client rate limit, 20
requests/s with a burst of 30, and the garbage collector beside the job
controller); `job` (kube-controller-manager as KCM below configures it:
what the README's table measures); `job` under `--elide controllers` and
`--elide idle` (opt-in model assumptions).

Cases: `burst` (200 one-machine jobs at time 0 on 16 nodes), `poisson`
(workloads/poisson_500.json), `parallel1000` (1,000 generated parallel jobs
on 1, 2 or 4 machines, Poisson arrivals every 10 s, 30 to 240 s each, seed
1; written by `batkube workload generate`).

    python3 experiments/submit_as_cost.py [--cases burst,parallel1000] [--reps 3]
        [--styles pod,job,...]
Outputs: experiments/results/submit_as_cost/{submit_as_cost.csv,<case>-<style>-<rep>/},
and the table on stdout. Builds kube-controller-manager with
schedulers/build-go.sh when target/go has none.
"""

import argparse
import resource
import statistics
import subprocess
import sys

import _common as c

GO = c.ROOT / "target" / "go"
CASES = {
    "burst": ("16-node.xml", "200_delay170.json"),
    "poisson": ("16-node.xml", "poisson_500.json"),
    "parallel1000": ("16-node.xml", None),
}

# kube-controller-manager as a cluster running only batch Jobs could run
# it (experiments/README.md, "What `--submit-as job` costs"): the job
# controller alone (the API collects garbage itself, in the same instant:
# fakeapi/src/store/gc.rs), no leader election, no HTTPS endpoint, and a
# client rate limit that a wave of pod creations, status updates and
# events does not reach (upstream's 20 requests/s would spread them over
# seconds of simulated time, one window per throttled request).
KCM = ("--controllers=job-controller --kube-api-qps=1000 --kube-api-burst=1000 "
       "--leader-elect=false --secure-port=0")
# Upstream's defaults but for what a simulation cannot do without (no
# leader election, no HTTPS endpoint, JSON bodies), with the garbage
# collector: the command `batkube run --submit-as job` suggests.
KCM_DEFAULTS = ("--controllers=job-controller,garbage-collector-controller "
                "--leader-elect=false --secure-port=0")


def kcm(flags):
    path = GO / "kube-controller-manager"
    if not path.exists():
        print("[setup] schedulers/build-go.sh kube-controller-manager", file=sys.stderr)
        subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh"),
                        "kube-controller-manager"], check=True)
    return (f'{path} --kubeconfig "$KUBECONFIG" --kube-api-content-type=application/json '
            f"{flags}")


def workload(bk, case, results):
    """The case's workload file (the generated one written once)."""
    name = CASES[case][1]
    if name:
        return c.WORKLOADS / name
    path = results / "parallel1000.json"
    if not path.exists():
        results.mkdir(parents=True, exist_ok=True)
        subprocess.run([bk, "workload", "generate", "-n", "1000", "--arrival", "poisson:10",
                        "--duration", "uniform:30:240", "--cpu", "1",
                        "--res", "choice:1:0.5,2:0.3,4:0.2", "--seed", "1", "-o", str(path)],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="burst,parallel1000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--styles", default="pod,job kcm-defaults,job,job elide-controllers,"
                    "job elide-idle", help="a subset of the default, separated by commas")
    a = ap.parse_args()
    bk = c.batkube()
    if not bk or not c.has_run(bk):
        sys.exit("submit_as_cost: needs `batkube run` (cargo build --release -p batkube)")
    print(c.engine_line(bk, "run"))
    job = ["--submit-as", "job", "--controller", kcm(KCM)]
    all_styles = {
        "pod": [],
        "job kcm-defaults": ["--submit-as", "job", "--controller", kcm(KCM_DEFAULTS)],
        "job": job,
        # kube-controller-manager's work queues tick every 0.5 simulated s
        # whatever happens; these rules pass over such ticks (model
        # assumptions, opt-in).
        "job elide-controllers": job + ["--elide", "controllers"],
        "job elide-idle": job + ["--elide", "idle"],
    }
    wanted = [s.strip() for s in a.styles.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in all_styles]
    if unknown or "pod" not in wanted:
        sys.exit(f"submit_as_cost: --styles must name pod and any of {', '.join(all_styles)} "
                 f"(unknown: {', '.join(unknown) or 'none'})")
    styles = {s: all_styles[s] for s in wanted}
    results = c.RESULTS / "submit_as_cost"
    rows = []
    for case in a.cases.split(","):
        if case not in CASES:
            sys.exit(f"submit_as_cost: unknown case {case!r} (cases: {', '.join(CASES)})")
        platform = c.PLATFORMS / CASES[case][0]
        wl = workload(bk, case, results)
        walls, cpu = {}, {}
        for style, args in styles.items():
            ws, cpus, outcomes, windows = [], [], set(), None
            for rep in range(a.reps):
                out = results / f"{case}-{style.replace(' ', '-')}-{rep}"
                before = cpu_of_children()
                r = c.run_batkube_full(bk, platform, wl, out, args, timeout=3600)
                cpus.append(cpu_of_children() - before)
                if not r.ok:
                    sys.exit(f"{' '.join(map(str, r.cmd))} failed ({r.why()}):\n{r.stderr[-2000:]}")
                ws.append(r.wall)
                outcomes.add((round(r.summary["makespan"], 3), round(r.summary["mean_wait"], 3)))
                if windows is None:
                    windows = r.summary.get("windows")
            walls[style] = statistics.median(ws)
            cpu[style] = statistics.median(cpus)
            rows.append([case, style, len(ws), f"{walls[style]:.2f}", f"{cpu[style]:.2f}", windows,
                         " ".join(f"{m:.3f}/{w:.3f}" for m, w in sorted(outcomes)),
                         f"{walls[style] / walls['pod']:.2f}", f"{cpu[style] / cpu['pod']:.2f}"])
    header = ["case", "submit-as", "runs", "median wall s", "median CPU s", "windows",
              "makespan/mean wait s", "wall against pod", "CPU against pod"]
    c.write_csv(results / "submit_as_cost.csv", header, rows)
    c.print_table(header, rows)


if __name__ == "__main__":
    main()
