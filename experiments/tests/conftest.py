"""Shared fixtures: the binaries the sweep tests run (built when missing,
never skipped) and the sweep module itself."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"
sys.path.insert(0, str(EXPERIMENTS))


def _binary(env, name):
    if os.environ.get(env):
        return Path(os.environ[env]).resolve()
    return ROOT / "target" / "release" / name


@pytest.fixture(scope="session")
def binaries(tmp_path_factory):
    """(batkube, batkube-scheduler) from `cargo build --release`, copied to a
    private directory: a run id hashes the binaries' content, and others may
    rebuild target/ while the tests run. $BATKUBE and $BATKUBE_SCHEDULER
    (both set) name other binaries and skip the build."""
    bk, sched = _binary("BATKUBE", "batkube"), _binary("BATKUBE_SCHEDULER", "batkube-scheduler")
    if not (os.environ.get("BATKUBE") and os.environ.get("BATKUBE_SCHEDULER")):
        # Built when missing, and rebuilt when stale (a no-op when up to date).
        subprocess.run(["cargo", "build", "--release", "-p", "batkube", "-p", "batkube-scheduler"],
                       cwd=ROOT, check=True)
    assert bk.is_file() and sched.is_file(), f"{bk} or {sched} is missing after the build"
    d = tmp_path_factory.mktemp("bin")
    shutil.copy2(bk, d / "batkube")
    shutil.copy2(sched, d / "batkube-scheduler")
    return d / "batkube", d / "batkube-scheduler"
