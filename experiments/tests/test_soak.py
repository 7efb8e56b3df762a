"""experiments/soak.py: the short soak CI runs (a few whole NASA runs, the
trace that exposed the quiescence faults), and its verdicts."""

import json
import os
import subprocess
import sys

from conftest import EXPERIMENTS, ROOT

SOAK = EXPERIMENTS / "soak.py"


def soak(binaries, tmp_path, *args):
    bk, sched = binaries
    env = dict(os.environ, BATKUBE=str(bk), BATKUBE_SCHEDULER=str(sched))
    return subprocess.run([sys.executable, str(SOAK), "--out", str(tmp_path), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True)


def test_nasa_runs_complete_identically(binaries, tmp_path):
    # A run takes about 20 s here beside a CPU hog: 300 s is a wide margin,
    # and --fail-fast makes a stall cost one of them, not three.
    r = soak(binaries, tmp_path, "--runs", "3", "--stall-after", "300", "--fail-fast",
             "workloads/NASA-iPSC-1993-3.1.json", "platforms/128-node.xml")
    assert r.returncode == 0, r.stdout + r.stderr
    totals = json.loads((tmp_path / "soak.json").read_text())
    assert totals["completed"] == 3 and totals["distinct_jobs_csv"] == 1, totals
    assert "3 completed, 0 stalled, 0 failed; 1 distinct jobs.csv" in r.stdout
    rows = (tmp_path / "soak.csv").read_text().splitlines()
    assert len(rows) == 4 and all(",0," in row for row in rows[1:]), rows  # no warnings


def test_a_run_that_cannot_finish_is_stalled_and_a_broken_one_failed(binaries, tmp_path):
    # A scheduler that never binds: the run goes on until killed.
    # With --fail-fast the second run is not started, and the first's log
    # is shown.
    r = soak(binaries, tmp_path / "stall", "--runs", "2", "--stall-after", "3", "--fail-fast",
             "--scheduler", "sleep 600",
             "workloads/200_delay170.json", "platforms/16-node.xml", "--", "--shim", "none")
    assert r.returncode == 1
    assert "0 completed, 1 stalled, 0 failed" in r.stdout, r.stdout + r.stderr
    assert "--fail-fast: stopping after run 1; the last lines of" in r.stdout, r.stdout
    assert not (tmp_path / "stall" / "run-002").exists()
    totals = json.loads((tmp_path / "stall" / "soak.json").read_text())
    assert totals["runs"] == 2 and totals["runs_done"] == 1, totals
    # A scheduler that exits at once: the run fails with batkube's reason.
    r = soak(binaries, tmp_path / "fail", "--runs", "1", "--scheduler", "true",
             "workloads/200_delay170.json", "platforms/16-node.xml", "--", "--shim", "none")
    assert r.returncode == 1
    assert "0 completed, 0 stalled, 1 failed" in r.stdout, r.stdout + r.stderr
    assert "(exit " in r.stdout


def test_bad_input_is_refused(binaries, tmp_path):
    r = soak(binaries, tmp_path, "--runs", "2", "workloads/nope.json", "platforms/16-node.xml")
    assert r.returncode == 2 and "workloads/nope.json: no such file" in r.stderr
