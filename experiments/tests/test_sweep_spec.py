"""The spec format of experiments/sweep.py: naming, paths relative to the
spec, run ids, and a clear error (no traceback) for every user mistake."""

import subprocess
import sys
import textwrap

import pytest

import sweep
from conftest import EXPERIMENTS, ROOT


@pytest.fixture
def specdir(tmp_path):
    """A spec directory with stand-in binaries (never run here), a workload,
    a platform and a scheduler config."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("batkube", "batkube-scheduler"):
        p = bin_dir / name
        p.write_text("#!/bin/sh\nexit 0\n")
        p.chmod(0o755)
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "w1.json").write_text('{"nb_res": 1, "jobs": [], "profiles": {}}')
    (tmp_path / "inputs" / "w2.json").write_text('{"nb_res": 2, "jobs": [], "profiles": {}}')
    (tmp_path / "inputs" / "p.xml").write_text("<platform/>")
    (tmp_path / "inputs" / "sched.yaml").write_text("weights: {}\n")
    (tmp_path / "kubelet.csv").write_text("1.0\n")
    return tmp_path


def write(specdir, body):
    p = specdir / "spec.yaml"
    p.write_text(textwrap.dedent(body))
    return p


GOOD = """\
    batkube: bin/batkube
    path: [bin]
    repeat: 2
    grid:
      workload: [inputs/w1.json, inputs/w2.json]
      platform: [inputs/p.xml]
      scheduler:
        least: batkube-scheduler --config inputs/sched.yaml
      flags:
        exact: ""
        pulls: --kubelet-pull kubelet.csv --sync=exact
    """


def test_grid_expands_with_names_and_absolute_paths(specdir):
    runs, settings = sweep.load_spec(write(specdir, GOOD))
    assert len(runs) == 2 * 1 * 1 * 2 * 2
    assert {r.names["workload"] for r in runs} == {"w1", "w2"}  # a list: file stems
    assert {r.names["flags"] for r in runs} == {"exact", "pulls"}  # a mapping: its keys
    assert settings["batkube"] == str(specdir / "bin" / "batkube")
    r = next(r for r in runs if r.names["flags"] == "pulls")
    assert r.argv[0] == str(specdir / "bin" / "batkube")
    assert str(specdir / "inputs" / "w1.json") in r.argv or str(specdir / "inputs" / "w2.json") in r.argv
    sched = r.argv[r.argv.index("--scheduler") + 1]
    assert sched == f"{specdir}/bin/batkube-scheduler --config {specdir}/inputs/sched.yaml"
    assert r.argv[-3:] == ["--kubelet-pull", str(specdir / "kubelet.csv"), "--sync=exact"]
    # Every run has its own id; repeats differ.
    assert len({r.id for r in runs}) == len(runs)


def test_seed_axis_gives_each_run_its_seed(specdir):
    base = GOOD.replace("    repeat: 2\n", "").rstrip(" ")
    runs, _ = sweep.load_spec(write(specdir, base + "      seed: 3..5\n"))
    assert len(runs) == 2 * 2 * 3
    assert sorted({r.names["seed"] for r in runs}) == ["3", "4", "5"]
    for r in runs:
        assert r.argv[-2:] == ["--seed", r.names["seed"]]
    assert len({r.id for r in runs}) == len(runs)
    runs, _ = sweep.load_spec(write(specdir, base + "      seed: [7, 0]\n"))
    assert [r.names["seed"] for r in runs][:2] == ["7", "0"]
    # Without the axis: no --seed, the column says none, and the ids are
    # those of a sweep written before the axis existed.
    runs, _ = sweep.load_spec(write(specdir, base))
    assert {r.names["seed"] for r in runs} == {"none"}
    assert all("--seed" not in r.argv for r in runs)


@pytest.mark.parametrize("seed,message", [
    ("5..2", "grid.seed: the range '5..2' is empty"),
    ("a..b", "grid.seed: expected whole numbers or a range A..B"),
    ("[1, -1]", "each seed must be a whole number from 0 to 2^64-1, found -1"),
    ("[1, 1.5]", "found 1.5"),
    ("[2, 2]", "seed 2 is given twice"),
    ("[]", "expected a list of whole numbers"),
])
def test_bad_seed_axes(specdir, seed, message):
    with pytest.raises(sweep.SpecError) as e:
        sweep.load_spec(write(specdir, GOOD.rstrip(" ") + f"      seed: {seed}\n"))
    assert message in str(e.value)


def test_seed_in_flags_and_axis_is_refused(specdir):
    body = GOOD.replace("--sync=exact", "--sync=exact --seed 4").rstrip(" ") + "      seed: [1]\n"
    with pytest.raises(sweep.SpecError) as e:
        sweep.load_spec(write(specdir, body))
    assert "grid.flags.pulls: --seed is set by the grid's seed axis" in str(e.value)


def test_run_id_follows_input_content_not_location(specdir, tmp_path_factory):
    spec = write(specdir, GOOD)
    ids = [r.id for r in sweep.load_spec(spec)[0]]
    assert ids == [r.id for r in sweep.load_spec(spec)[0]]  # stable
    (specdir / "inputs" / "sched.yaml").write_text("weights: {MostAllocated: 5}\n")
    changed = [r.id for r in sweep.load_spec(spec)[0]]
    assert not set(ids) & set(changed)  # a config file's content is an input
    (specdir / "inputs" / "sched.yaml").write_text("weights: {}\n")
    assert [r.id for r in sweep.load_spec(spec)[0]] == ids


def test_batkube_from_path(specdir, monkeypatch):
    monkeypatch.setenv("PATH", f"{specdir / 'bin'}:/usr/bin:/bin")
    monkeypatch.delenv("BATKUBE", raising=False)
    spec = write(specdir, GOOD.replace("    batkube: bin/batkube\n", "").replace("    path: [bin]\n", ""))
    runs, settings = sweep.load_spec(spec)
    assert settings["batkube"] == str(specdir / "bin" / "batkube")
    assert runs[0].argv[runs[0].argv.index("--scheduler") + 1].startswith(str(specdir / "bin"))


@pytest.mark.parametrize("body, message", [
    ("grid:\n  workload: [inputs/w1.json]\n  platform: [inputs/p.xml]\n"
     "  scheduler: [batkube-scheduler]\n  kubelet: [a]\n",
     "unknown axis 'kubelet' in grid"),
    ("grids: {}\n", "unknown key 'grids' at the top"),
    ("grid:\n  workload: [inputs/w1.json\n  platform: x\n", "spec.yaml:5:11: not valid YAML"),
    ("- just\n- a list\n", "expected a mapping"),
    ("grid:\n  workload: [inputs/nope.json]\n  platform: [inputs/p.xml]\n"
     "  scheduler: [batkube-scheduler]\n",
     "grid.workload.nope: file 'inputs/nope.json' not found"),
    ("grid:\n  workload: [inputs/w1.json]\n  platform: [inputs/p.xml]\n",
     "grid.scheduler is missing"),
    ("grid:\n  workload: [inputs/w1.json]\n  platform: [inputs/p.xml]\n"
     "  scheduler: [no-such-scheduler-anywhere]\n",
     "program 'no-such-scheduler-anywhere' not found"),
    ("repeat: 0\ngrid:\n  workload: [inputs/w1.json]\n  platform: [inputs/p.xml]\n"
     "  scheduler: [batkube-scheduler]\n",
     "repeat: expected a whole number >= 1"),
    ("grid:\n  workload: [inputs/w1.json, other/w1.json]\n  platform: [inputs/p.xml]\n"
     "  scheduler: [batkube-scheduler]\n",
     "several values are named 'w1'"),
    ("grid:\n  workload: [inputs/w1.json]\n  platform: [inputs/p.xml]\n"
     "  scheduler: [batkube-scheduler]\n  flags: {bad: --out /tmp/x}\n",
     "grid.flags.bad: --out is set by the sweep"),
    ("grid:\n  workload: {}\n  platform: [inputs/p.xml]\n  scheduler: [batkube-scheduler]\n",
     "grid.workload is empty"),
    ("grid:\n  workload: [inputs/w1.json]\n  platform: [inputs/p.xml]\n"
     "  scheduler: [batkube-scheduler]\n  flags: {a: [1, 2]}\n",
     "grid.flags.a: the value must be a string"),
])
def test_bad_specs_say_what_is_wrong(specdir, body, message):
    spec = write(specdir, "batkube: bin/batkube\npath: [bin]\n" + body
                 if not body.startswith("- ") else body)
    with pytest.raises(sweep.SpecError) as e:
        sweep.load_spec(spec)
    assert message in str(e.value)
    # The command line: exit 2, the message, no traceback.
    p = subprocess.run([sys.executable, str(EXPERIMENTS / "sweep.py"), str(spec),
                        "--out", str(specdir / "out")], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr
    assert "Traceback" not in p.stderr


def test_missing_spec_file(tmp_path):
    p = subprocess.run([sys.executable, str(EXPERIMENTS / "sweep.py"), str(tmp_path / "nope.yaml"),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "cannot read the spec" in p.stderr and "Traceback" not in p.stderr


def test_bad_engine_flags(specdir):
    spec = write(specdir, GOOD)
    for extra, message in ((["--jobqueue-option", "queue=short"], "--jobqueue-option needs --jobqueue"),
                           (["--jobqueue", "slurm", "--jobqueue-option", "queue"], "expected KEY=VALUE"),
                           (["--dask", "tcp://127.0.0.1:1", "--workers", "2"], "--workers has no meaning")):
        p = subprocess.run([sys.executable, str(EXPERIMENTS / "sweep.py"), str(spec),
                            "--out", str(specdir / "out"), *extra],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (extra, p.stderr)
        assert message in p.stderr and "Traceback" not in p.stderr
