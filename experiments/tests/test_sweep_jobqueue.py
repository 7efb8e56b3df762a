"""`sweep.py --jobqueue`: the batch job that dask-jobqueue would submit, for
SLURM, OAR and PBS, checked without any batch system."""

import sys

import pytest

import sweep

OPTIONS = ["queue=short", "walltime=01:30:00", "cores=4", "memory=8GB",
           "job_extra_directives=['--exclusive']"]
# Each batch system names the account to charge its own way.
ACCOUNT = {"slurm": "account=batkube", "oar": "project=batkube", "pbs": "account=batkube"}


def test_options_are_typed_but_times_stay_text():
    opts = sweep.parse_jobqueue_options(OPTIONS)
    # YAML 1.1 would read 01:30:00 as the integer 5400 (base 60).
    assert opts["walltime"] == "01:30:00"
    assert opts["cores"] == 4
    assert opts["job_extra_directives"] == ["--exclusive"]


@pytest.mark.parametrize("kind, directives", [
    ("slurm", ["#SBATCH -J batkube-sweep", "#SBATCH -p short", "#SBATCH -A batkube",
               "#SBATCH --cpus-per-task=4", "#SBATCH -t 01:30:00", "#SBATCH --exclusive"]),
    ("oar", ["#OAR -n batkube-sweep", "#OAR -q short", "#OAR --project batkube",
             "#OAR -l /nodes=1/core=4,walltime=01:30:00", "#OAR --exclusive"]),
    ("pbs", ["#PBS -N batkube-sweep", "#PBS -q short", "#PBS -A batkube",
             "ncpus=4", "#PBS -l walltime=01:30:00", "#PBS --exclusive"]),
])
def test_job_script(kind, directives):
    opts = sweep.parse_jobqueue_options([*OPTIONS, ACCOUNT[kind]])
    with sweep.make_jobqueue_cluster(kind, opts) as cluster:
        script = cluster.job_script()
        address = cluster.scheduler_address
    for d in directives:
        assert d in script, f"{d!r} not in the {kind} job script:\n{script}"
    # The worker runs this interpreter (which has dask) against our scheduler,
    # one thread per core: that many simulations at once.
    assert f"{sys.executable} -m distributed.cli.dask_worker {address}" in script
    assert "--nthreads 4" in script
    # The scheduler listens on a port of its own choosing, never 8786.
    assert not address.endswith(":8786")


def test_unknown_option_is_a_user_error():
    with pytest.raises(sweep.SpecError, match="--jobqueue oar: .*'account'"):
        sweep.make_jobqueue_cluster("oar", {"account": "x"})
