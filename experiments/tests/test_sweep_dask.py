"""End to end: a real Dask scheduler and two workers, each its own process
on 127.0.0.1 with ports of their own choosing; a small grid of real
`batkube run`s through `sweep.py --dask`; one worker killed while it runs a
simulation. Every run must end in results.csv, ok, with its outputs, the
killed one redone on the other worker; a second sweep recomputes nothing."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import EXPERIMENTS, ROOT

DEADLINE = 120.0  # seconds for any one wait below; the whole test takes ~15 s


def wait_for(what, cond, procs=(), deadline=DEADLINE, every=0.02):
    """Polls `cond` until it returns something truthy; fails naming `what`
    when a process in `procs` exits first or the deadline passes."""
    end = time.monotonic() + deadline
    while True:
        v = cond()
        if v:
            return v
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"waiting for {what}: {p.args[:4]} exited with {p.returncode}")
        if time.monotonic() > end:
            pytest.fail(f"waiting for {what}: not within {deadline:g} s")
        time.sleep(every)


class Processes:
    """Processes this test starts, each in its own session: all killed (their
    groups, by id) at the end, whatever happens."""

    def __init__(self, logdir):
        self.logdir, self.procs = logdir, []

    def start(self, name, argv):
        log = open(self.logdir / f"{name}.log", "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.logdir)
        log.close()
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait()


@pytest.fixture
def processes(tmp_path):
    ps = Processes(tmp_path)
    yield ps
    ps.stop_all()


def batkube_children(pid):
    """`batkube` processes whose parent is `pid`, as {child pid: run id}
    (the run id is in the name of its temporary --out directory)."""
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid != pid:
                continue
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if Path(argv[0].decode()).name == "batkube" and b"--out" in argv:
            out = argv[argv.index(b"--out") + 1].decode()
            found[int(d.name)] = Path(out).parent.name.split("-")[2]
    return found


def test_sweep_on_dask_survives_a_dead_worker_and_resumes(tmp_path, binaries, processes):
    from distributed import Client

    bk, sched = binaries
    # Inputs: a 20-job workload spaced every 30 s (about 46 windows), and
    # --min-delay so that each run lasts about a second of wall time.
    subprocess.run([str(bk), "workload", "generate", "-n", "20", "--duration", "100",
                    "--arrival", "interval:30", "-o", str(tmp_path / "spaced20.json")], check=True)
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""\
        batkube: {bk}
        path: [{sched.parent}]
        grid:
          workload: [spaced20.json]
          platform: [{ROOT / 'platforms' / '16-node.xml'}]
          scheduler:
            least: batkube-scheduler --config {EXPERIMENTS / 'configs' / 'least-allocated.yaml'}
            most: batkube-scheduler --config {EXPERIMENTS / 'configs' / 'most-allocated.yaml'}
          flags:
            d15: --min-delay 15ms
            d20: --min-delay 20ms
            d25: --min-delay 25ms
        """))

    # A scheduler and two workers, separate processes, random ports.
    sfile = tmp_path / "scheduler.json"
    dask_sched = processes.start("dask-scheduler", [
        sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
        "--port", "0", "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sfile)])
    address = wait_for("the scheduler file", lambda: sfile.exists() and sfile.stat().st_size > 0
                       and json.loads(sfile.read_text())["address"], [dask_sched])
    workers = {}
    for name in ("A", "B"):
        workers[name] = processes.start(f"worker-{name}", [
            sys.executable, "-m", "distributed.cli.dask_worker", address, "--name", name,
            "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
            "--dashboard-address", "127.0.0.1:0", "--local-directory", str(tmp_path / name)])
    with Client(address, timeout="60s") as client:
        client.wait_for_workers(2, timeout=DEADLINE)
        by_name = {w["name"]: a for a, w in client.scheduler_info()["workers"].items()}
    assert set(by_name) == {"A", "B"}

    out = tmp_path / "sweep"
    cmd = [sys.executable, str(EXPERIMENTS / "sweep.py"), str(spec), "--out", str(out),
           "--dask", address, "--progress-interval", "1"]
    sweep = processes.start("sweep", cmd)

    # Kill worker A while it runs a simulation: wait for that event.
    killed = wait_for("worker A to run a simulation", lambda: batkube_children(workers["A"].pid),
                      [sweep, workers["A"]])
    workers["A"].kill()
    workers["A"].wait()
    killed_run = next(iter(killed.values()))

    sweep.wait(timeout=DEADLINE)
    log = (tmp_path / "sweep.log").read_text()
    assert sweep.returncode == 0, log
    assert "6 runs in the grid: 0 already done" in log

    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6
    assert len({r["id"] for r in rows}) == 6
    assert {(r["scheduler"], r["flags"]) for r in rows} == {
        (s, d) for s in ("least", "most") for d in ("d15", "d20", "d25")}
    for r in rows:
        assert r["status"] == "ok", r
        assert r["workload"] == "spaced20" and r["platform"] == "16-node" and r["repeat"] == "0"
        assert r["completed"] == "True" and r["jobs_succeeded"] == "20", r
        assert float(r["makespan"]) > 0 and float(r["wall_s"]) > 0 and r["host"]
        for f in ("summary.json", "jobs.csv", "pods.csv", "nodes.csv", "sweep.log", "result.json"):
            assert (out / "runs" / r["id"] / f).is_file(), (r["id"], f)
    # The run that was under way on A was done again, on B.
    row = next(r for r in rows if r["id"] == killed_run)
    assert row["worker"] == by_name["B"], row

    # Again on the same DIR: nothing recomputed, the same results.
    before = (out / "results.csv").read_text()
    stamps = {r["id"]: (out / "runs" / r["id"] / "result.json").stat().st_mtime_ns for r in rows}
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE)
    assert again.returncode == 0, again.stderr
    assert "6 runs in the grid: 6 already done" in again.stderr and "0 to run" in again.stderr
    assert (out / "results.csv").read_text() == before
    assert stamps == {i: (out / "runs" / i / "result.json").stat().st_mtime_ns for i in stamps}
    # The killed worker's scratch directory is left behind by design (the
    # worker died); remove it.
    for d in Path("/tmp").glob(f"batkube-sweep-{killed_run}-*"):
        shutil.rmtree(d, ignore_errors=True)


def test_local_cluster_by_default(tmp_path, binaries):
    """No engine flag: sweep.py starts a local Dask cluster of its own."""
    bk, sched = binaries
    subprocess.run([str(bk), "workload", "generate", "-n", "20", "-o", str(tmp_path / "burst20.json")],
                   check=True)
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""\
        batkube: {bk}
        repeat: 2
        grid:
          workload: [burst20.json]
          platform: [{ROOT / 'platforms' / '16-node.xml'}]
          scheduler: [{sched}]
        """))
    p = subprocess.run([sys.executable, str(EXPERIMENTS / "sweep.py"), str(spec), "--out",
                        str(tmp_path / "out"), "--workers", "2"],
                       capture_output=True, text=True, timeout=DEADLINE)
    assert p.returncode == 0, p.stderr
    assert "Dask scheduler tcp://127.0.0.1:" in p.stderr and "dashboard http" in p.stderr
    assert "2/2 done" in p.stderr  # the plain progress line (stderr is not a terminal)
    with open(tmp_path / "out" / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["workload"], r["repeat"], r["status"], r["flags"]) for r in rows] == [
        ("burst20", "0", "ok", "none"), ("burst20", "1", "ok", "none")]
    assert rows[0]["makespan"] == rows[1]["makespan"]  # reproducible
