#!/usr/bin/env python3
"""The cost of `--submit-as job` against `--submit-as pod` (issue 42: at
most 2x): the same workload through `batkube run` with batkube-scheduler,
once with the broker writing each job's pods, once with each job a batch/v1
Job whose pods kube-controller-manager's job controller makes (a
`--controller`, on the same simulated clock). Per case and style: the
median wall time of `--reps` runs, the makespan (which must not change:
the same schedule) and the ratio job/pod.

    python3 experiments/submit_as_cost.py [--cases burst,poisson] [--reps 3]
Outputs: experiments/results/submit_as_cost/{submit_as_cost.csv,<case>-<style>-<rep>/},
and the table on stdout (Markdown). Builds kube-controller-manager with
schedulers/build-go.sh when target/go has none.
"""

import argparse
import statistics
import subprocess
import sys

import _common as c

GO = c.ROOT / "target" / "go"
CASES = {
    "burst": ("16-node.xml", "200_delay170.json"),
    "poisson": ("16-node.xml", "poisson_500.json"),
}


def kcm():
    path = GO / "kube-controller-manager"
    if not path.exists():
        print("[setup] schedulers/build-go.sh kube-controller-manager", file=sys.stderr)
        subprocess.run(["bash", str(c.ROOT / "schedulers" / "build-go.sh"),
                        "kube-controller-manager"], check=True)
    return (f'{path} --kubeconfig "$KUBECONFIG" --kube-api-content-type=application/json '
            "--controllers=job-controller,garbage-collector-controller "
            "--leader-elect=false --secure-port=0")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="burst,poisson")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    bk = c.batkube()
    if not bk or not c.has_run(bk):
        sys.exit("submit_as_cost: needs `batkube run` (cargo build --release -p batkube)")
    print(c.engine_line(bk, "run"))
    job = ["--submit-as", "job", "--controller", kcm()]
    # kube-controller-manager ticks every 0.5 simulated s whatever happens:
    # `--elide controllers` passes over its timers while nothing is pending.
    styles = {"pod": [], "job": job, "job --elide controllers": job + ["--elide", "controllers"],
              "job --elide idle": job + ["--elide", "idle"]}
    results = c.RESULTS / "submit_as_cost"
    rows = []
    for case in a.cases.split(","):
        platform, workload = CASES[case]
        walls = {}
        for style, args in styles.items():
            ws, makespans = [], set()
            for rep in range(a.reps):
                out = results / f"{case}-{style.replace(' --elide ', '-elide-')}-{rep}"
                r = c.run_batkube_full(bk, c.PLATFORMS / platform, c.WORKLOADS / workload, out,
                                       args)
                if not r.ok:
                    sys.exit(f"{' '.join(map(str, r.cmd))} failed ({r.why()}):\n{r.stderr[-2000:]}")
                ws.append(r.wall)
                makespans.add(round(r.summary["makespan"], 3))
            walls[style] = statistics.median(ws)
            rows.append([case, style, len(ws), f"{walls[style]:.2f}",
                         " ".join(f"{m:.3f}" for m in sorted(makespans)),
                         f"{walls[style] / walls['pod']:.2f}"])
    header = ["case", "submit-as", "runs", "median wall s", "makespan s", "against pod"]
    c.write_csv(results / "submit_as_cost.csv", header, rows)
    c.print_table(header, rows)


if __name__ == "__main__":
    main()
