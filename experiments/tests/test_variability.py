"""experiments/variability.py end to end with batkube-scheduler: a row per
run, the distribution per case, and our scheduler's promise: under one
seed, every run gives the same jobs.csv."""

import csv
import os
import subprocess
import sys

from conftest import EXPERIMENTS, ROOT


def test_variability_runs_each_seed_and_counts_outcomes(binaries, tmp_path):
    bk, sched = binaries
    env = dict(os.environ, BATKUBE=str(bk), BATKUBE_SCHEDULER=str(sched))
    out = tmp_path / "var"
    p = subprocess.run([sys.executable, str(EXPERIMENTS / "variability.py"), "--scheduler", "batkube",
                        "--cases", "burst", "--seeds", "2", "--repeat", "2", "--load", "1",
                        "--out", str(out)], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    with open(out / "runs.csv", newline="") as f:
        runs = list(csv.DictReader(f))
    assert [(r["seed"], r["repeat"]) for r in runs] == [("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")]
    for seed in ("1", "2"):
        mine = {r["outcome"] for r in runs if r["seed"] == seed}
        assert len(mine) == 1, f"seed {seed}: runs differ: {runs}"
    assert all(float(r["makespan"]) > 0 for r in runs)
    with open(out / "variability.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and rows[0]["case"] == "burst" and rows[0]["runs"] == "4"
    assert rows[0]["most outcomes of one seed"] == "1"
    assert rows[0]["distinct outcomes"] in ("1", "2")
    assert "| burst | 4 |" in p.stdout


def test_unknown_case_is_refused():
    p = subprocess.run([sys.executable, str(EXPERIMENTS / "variability.py"), "--cases", "nope"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "unknown case 'nope'" in p.stderr
