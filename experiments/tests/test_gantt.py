"""experiments/gantt.py on a small made-up run: a job on several machines
is drawn on each of them, and `--by queue` colours by the workload's queues."""

import json
import subprocess
import sys

import _common as c
from conftest import EXPERIMENTS


def write_case(tmp_path):
    platform = tmp_path / "p.xml"
    hosts = "".join(f'<host id="node-{i}" speed="1Gf"><prop id="cpu" value="2"/></host>' for i in range(4))
    platform.write_text(f'<?xml version="1.0"?><platform version="4.1"><zone id="z" routing="Full">'
                        f'<host id="master" speed="1Gf"><prop id="role" value="master"/></host>{hosts}</zone></platform>')
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"nb_res": 4, "profiles": {"d": {"type": "delay", "delay": 10, "cpu": "1"}},
                                    "jobs": [{"id": "1", "subtime": 0, "res": 3, "profile": "d", "queue": "a"},
                                             {"id": "2", "subtime": 0, "res": 1, "profile": "d", "queue": "b"},
                                             {"id": "3", "subtime": 0, "res": 1, "profile": "d"}]}))
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,submission_time,starting_time,execution_time,finish_time,waiting_time,"
                    "allocated_resources\n"
                    "w0!1,0,0,10,10,0,0-2\n"
                    "w0!2,0,0,10,10,0,3\n"
                    "w0!3,0,10,10,20,10,0\n")
    return platform, workload, jobs


def test_allocations_and_queues_are_read_as_batsim_and_the_workload_write_them():
    assert c.resource_ids("0-2 5 7-8") == [0, 1, 2, 5, 7, 8]
    assert c.resource_ids("") == []
    assert c.job_key("w0!12") == "12" and c.job_key("w1!7-r2") == "7"


def test_a_parallel_job_is_on_every_machine_and_queues_colour_the_chart(tmp_path):
    platform, workload, jobs = write_case(tmp_path)
    assert c.workload_queues(workload) == {"1": "a", "2": "b"}
    out = tmp_path / "g.png"
    r = subprocess.run([sys.executable, str(EXPERIMENTS / "gantt.py"), str(jobs), "--platform", str(platform),
                        "--workload", str(workload), "-o", str(out), "--by", "queue"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
    peaks = list(c.csv.DictReader(open(out.with_name("g_peaks.csv"))))
    # Job 1 (1 cpu on each of 3 machines) then job 3 on node-0; job 2 on node-3.
    assert [float(p["peak_cpu"]) for p in peaks] == [1.0, 1.0, 1.0, 1.0]
    assert [int(p["jobs_drawn"]) for p in peaks] == [2, 1, 1, 1]
