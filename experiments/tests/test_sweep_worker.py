"""sweep.run_one, the function a Dask worker runs, called here directly:
outputs delivered through a shared filesystem or as bytes, failures as rows
that say why."""

import json

import pytest

import sweep
from conftest import ROOT


@pytest.fixture
def task(tmp_path, binaries):
    bk, sched = binaries
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    (runs_dir / ".token").write_text("the-token")
    platform = str(ROOT / "platforms" / "16-node.xml")
    workload = tmp_path / "w.json"
    import subprocess
    subprocess.run([str(bk), "workload", "generate", "-n", "20", "-o", str(workload)], check=True)
    argv = [str(bk), "run", "--platform", platform, "--workload", str(workload),
            "--scheduler", str(sched)]
    return {"id": "0123456789ab", "argv": argv, "files": [str(bk), platform, str(workload)],
            "timeout": 120.0, "runs_dir": str(runs_dir), "token": "the-token"}


def run(task, names=None):
    r = sweep.Run(names or {"workload": "w", "platform": "p", "scheduler": "s", "flags": "f"},
                  0, task["argv"], task["files"])
    r.id = task["id"]
    row, blob = sweep.run_one(task)
    return sweep.store_result(row, blob, r, sweep.Path(task["runs_dir"])), blob


def test_shared_filesystem_outputs_land_in_place(task):
    row, blob = run(task)
    assert blob is None
    assert row["status"] == "ok" and row["jobs_succeeded"] == 20 and row["completed"] is True
    d = sweep.Path(task["runs_dir"]) / task["id"]
    for f in ("summary.json", "jobs.csv", "pods.csv", "nodes.csv", "sweep.log", "result.json"):
        assert (d / f).is_file(), f
    assert json.loads((d / "result.json").read_text())["id"] == task["id"]
    assert "summary.error" in row  # summary's `error` does not clobber the sweep's column


def test_without_shared_filesystem_outputs_come_back_as_bytes(task):
    task["token"] = "another-client"  # this worker does not see the client's DIR
    row, blob = run(task)
    assert row["status"] == "ok" and blob
    d = sweep.Path(task["runs_dir"]) / task["id"]
    for f in ("summary.json", "jobs.csv", "pods.csv", "nodes.csv", "sweep.log"):
        assert (d / f).is_file(), f


def test_a_failing_run_is_a_row_with_the_end_of_its_log(task):
    task["argv"] = [*task["argv"], "--sync", "bogus"]
    row, _ = run(task)
    assert row["status"] == "failed"
    assert row["error"].startswith("exit 2")
    assert "invalid value 'bogus'" in row["error"]


def test_a_missing_input_names_the_host(task):
    task["files"] = [*task["files"], "/nonexistent/workload.json"]
    row, _ = run(task)
    assert row["status"] == "failed"
    assert "/nonexistent/workload.json" in row["error"] and row["host"] in row["error"]


def test_a_run_past_its_timeout_fails(task):
    task["timeout"] = 0.05
    task["argv"] = [*task["argv"], "--min-delay", "1s"]
    row, _ = run(task)
    assert row["status"] == "failed" and row["error"].startswith("timed out after 0.05 s")
