"""Shared helpers for the experiments: finding binaries, running simulations,
reading Batsim jobs.csv files, the plotting venv.

Every experiment is one command (`python3 experiments/<name>.py`), writes CSV
and PNG under experiments/results/<name>/, and prints its table.
"""

import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXP = ROOT / "experiments"
RESULTS = EXP / "results"
WORKLOADS = ROOT / "workloads"
PLATFORMS = ROOT / "platforms"
REFERENCE = Path(os.environ.get("BATKUBE_REFERENCE", "/work/shared/reference/batkube"))
VENV = EXP / ".venv"
PLOT_PACKAGES = ["matplotlib>=3.7", "pandas>=2.0"]

# The inputs of the 2020 study, as this project ships them.
CASES = {
    "burst": (WORKLOADS / "200_delay170.json", PLATFORMS / "16-node.xml"),
    "spaced": (WORKLOADS / "spaced_200_delay170.json", PLATFORMS / "16-node.xml"),
    "KIT": (WORKLOADS / "KIT_10h_80.json", PLATFORMS / "1-node-6-cpu.xml"),
}


def ensure_venv():
    """Re-runs the current script inside experiments/.venv (created from PyPI
    on first use) so matplotlib and pandas are available."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    py = VENV / "bin" / "python"
    if not py.exists():
        print(f"[setup] creating {VENV} (matplotlib, pandas from PyPI)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *PLOT_PACKAGES], check=True)
    os.execv(str(py), [str(py), *sys.argv])


def _newest(paths):
    found = [p for p in paths if p.is_file() and os.access(p, os.X_OK)]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def batkube():
    """The batkube binary: $BATKUBE, else the newest build in the repo, else
    `cargo build --release -p batkube`."""
    if os.environ.get("BATKUBE"):
        return os.environ["BATKUBE"]
    dirs = [ROOT / d for d in ("target", "target-tools", "target-broker")]
    dirs += [p for p in ROOT.glob("target-*") if p.is_dir()]
    cand = [d / prof / "batkube" for d in dirs for prof in ("release", "debug")]
    best = _newest(cand)
    if best:
        return str(best)
    print("[setup] building batkube (cargo build --release -p batkube)", file=sys.stderr)
    subprocess.run(["cargo", "build", "--release", "-p", "batkube"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "release" / "batkube")


def has_run(bk):
    """Whether this batkube has the `run` subcommand (the broker)."""
    r = subprocess.run([bk, "run", "--help"], capture_output=True, text=True)
    return r.returncode == 0


def scheduler():
    """The project's scheduler binary, or None."""
    if os.environ.get("BATKUBE_SCHEDULER"):
        return os.environ["BATKUBE_SCHEDULER"]
    w = shutil.which("batkube-scheduler")
    if w:
        return w
    dirs = [p for p in ROOT.glob("target*") if p.is_dir()]
    return _newest([d / prof / "batkube-scheduler" for d in dirs for prof in ("release", "debug")])


def mode(bk):
    """'run' when `batkube run` and the scheduler exist, else 'standin'.
    BATKUBE_MODE=standin forces the stand-in."""
    if os.environ.get("BATKUBE_MODE") == "standin":
        return "standin"
    if has_run(bk) and scheduler():
        return "run"
    return "standin"


def batsim_engine():
    """Which Batsim `batkube run` drives: real Batsim when `batsim` is on
    PATH (what `batkube run` itself picks), else the built-in stand-in."""
    w = shutil.which("batsim")
    return f"real Batsim ({w})" if w else "built-in Batsim stand-in"


def engine_line(bk, m):
    """One line saying which engine produced a table."""
    if m == "run":
        return (f"engine: `batkube run` ({bk}) + batkube-scheduler ({scheduler()}) under the time shim; "
                f"Batsim side: {batsim_engine()}")
    why = "BATKUBE_MODE=standin" if os.environ.get("BATKUBE_MODE") == "standin" else \
        "`batkube run` or batkube-scheduler not found"
    return f"engine: built-in Batsim stand-in with its FCFS scheduler, NOT batkube run ({why})"


def run_standin(bk, platform, workload, out, decision_time=0.0):
    """The built-in Batsim stand-in with its FCFS scheduler. Returns wall s."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [bk, "batsim", "-p", str(platform), "-w", str(workload), "-e", f"{out}/",
           "--builtin-scheduler", "fcfs", "--builtin-decision-time", str(decision_time)]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.perf_counter() - t


RUN_TIMEOUT = float(os.environ.get("BATKUBE_RUN_TIMEOUT", "180"))


def session_status(sid, key):
    """{pid: (comm, value in KiB)} of `key` (`VmRSS`, `VmHWM`) in
    /proc/<pid>/status, for the processes of session `sid`."""
    found = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) != sid:  # session id
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            for line in (d / "status").read_text().splitlines():
                if line.startswith(key + ":"):
                    found[int(d.name)] = (comm, int(line.split()[1]))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _session_rss_kb(sid):
    """Total resident memory (KiB) of the processes of one session."""
    return sum(kb for _, kb in session_status(sid, "VmRSS").values())


class RunResult:
    """One `batkube run`: wall seconds (process, start to exit), exit code,
    summary.json (or {}), peak total RSS of the run's processes (MiB,
    sampled every 0.2 s when asked) and the command line."""

    def __init__(self, cmd, wall, rc, summary, stderr, peak_rss_mb=None):
        self.cmd, self.wall, self.rc, self.summary, self.stderr = cmd, wall, rc, summary, stderr
        self.peak_rss_mb = peak_rss_mb

    @property
    def ok(self):
        s = self.summary
        return self.rc == 0 and s.get("completed") and s.get("jobs_succeeded") == s.get("jobs")

    def why(self):
        """Short reason when not ok."""
        s = self.summary
        if self.rc == 124:
            return f"timed out after {RUN_TIMEOUT:g} s"
        if s.get("error"):
            return f"exit {self.rc}: {s['error']}"
        if s and s.get("jobs_succeeded") != s.get("jobs"):
            return (f"exit {self.rc}: {s.get('jobs_succeeded')}/{s.get('jobs')} jobs succeeded, "
                    f"{s.get('jobs_rejected')} rejected")
        return f"exit {self.rc}: {self.stderr.strip().splitlines()[-1] if self.stderr.strip() else '?'}"


def run_batkube_full(bk, platform, workload, out, args=(), timeout=None, sample_memory=False):
    """`batkube run` with the project's scheduler; returns a RunResult. A run
    longer than `timeout` (default $BATKUBE_RUN_TIMEOUT, 180 s) is killed
    and counts as failed (exit 124)."""
    timeout = timeout or RUN_TIMEOUT
    out.mkdir(parents=True, exist_ok=True)
    summary_path = out / "summary.json"
    if summary_path.exists():
        summary_path.unlink()
    cmd = [bk, "run", "--platform", str(platform), "--workload", str(workload),
           "--scheduler", scheduler(), "--out", str(out), *args]
    t = time.perf_counter()
    # Own session, so a run cut short takes its scheduler with it (and its
    # memory can be summed).
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    peak = 0
    if sample_memory:
        while p.poll() is None and time.perf_counter() - t < timeout:
            peak = max(peak, _session_rss_kb(p.pid))
            time.sleep(0.2)
    try:
        out_text, err_text = p.communicate(timeout=max(0.1, timeout - (time.perf_counter() - t)))
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out_text, err_text = p.communicate()
        rc = 124
    wall = time.perf_counter() - t
    try:
        summary = json.loads(summary_path.read_text())
    except (OSError, ValueError):
        summary = {}
    return RunResult(cmd, wall, rc, summary, err_text or "", peak / 1024 if sample_memory else None)


def run_batkube(bk, platform, workload, out, args=(), check=True):
    """`batkube run` with the project's scheduler. Returns (wall s, exit code)."""
    r = run_batkube_full(bk, platform, workload, out, args)
    if check and not r.ok:
        raise RuntimeError(f"{' '.join(r.cmd)} failed ({r.why()}):\n{r.stderr[-2000:]}")
    return r.wall, r.rc


class RunFailed(RuntimeError):
    pass


def simulate(bk, m, platform, workload, out, args=("--sync", "exact")):
    """Our simulated run: `batkube run --sync exact` (mode 'run') or the
    stand-in (mode 'standin', only when `batkube run` is not available).
    Returns (label, wall seconds, jobs.csv path). A failing `batkube run`
    raises RunFailed: it is never replaced by the stand-in."""
    if m == "run":
        r = run_batkube_full(bk, platform, workload, out, args)
        if not r.ok:
            raise RunFailed(f"{' '.join(r.cmd)}: {r.why()}\n{r.stderr[-1500:]}")
        return "batkube run (exact, batkube-scheduler)", r.wall, out / "jobs.csv"
    wall = run_standin(bk, platform, workload, out)
    return "stand-in FCFS (whole machines, no Kubernetes scheduler)", wall, out / "jobs.csv"


def read_jobs(path):
    """jobs.csv rows with numeric fields as floats (None when empty)."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            for k in ("submission_time", "starting_time", "execution_time", "finish_time",
                      "waiting_time", "turnaround_time", "scheduled", "pulling", "pulled", "created"):
                v = r.get(k)
                r[k] = float(v) if v not in (None, "") else None
            rows.append(r)
    return rows


def makespan(jobs):
    return max(j["finish_time"] for j in jobs if j["finish_time"] is not None)


def mean_wait(jobs):
    return statistics.fmean(j["waiting_time"] for j in jobs if j["waiting_time"] is not None)


def workload_requests(workload):
    """job id -> cpu request in cores (1 when none)."""
    w = json.loads(Path(workload).read_text())
    out = {}
    for j in w["jobs"]:
        p = w["profiles"].get(j["profile"], {})
        v = j.get("cpu", p.get("cpu", 1))
        if isinstance(v, str):
            v = float(v[:-1]) / 1000 if v.endswith("m") else float(v)
        out[str(j["id"])] = float(v)
    return out


def workload_queues(workload):
    """job id -> its queue (the job's or its profile's `queue`), for jobs naming one."""
    w = json.loads(Path(workload).read_text())
    out = {}
    for j in w["jobs"]:
        q = j.get("queue", w["profiles"].get(j["profile"], {}).get("queue"))
        if q is not None:
            out[str(j["id"])] = str(q)
    return out


def job_key(job_id):
    """A Batsim job id ("w0!7", a resubmission "w0!7-r1") as the workload names it."""
    return str(job_id).split("!", 1)[-1].rsplit("-r", 1)[0]


def resource_ids(allocation):
    """Batsim's allocation text ("0-3 7") as resource ids."""
    ids = []
    for part in (allocation or "").split():
        lo, _, hi = part.partition("-")
        ids.extend(range(int(lo), int(hi or lo) + 1))
    return ids


def platform_nodes(platform):
    """[(name, cpu)] of compute hosts in Batsim resource-id order."""
    root = ET.parse(platform).getroot()
    nodes = []
    for h in root.iter("host"):
        props = {p.get("id"): p.get("value") for p in h.findall("prop")}
        if props.get("role") == "master" or h.get("id") == "master_host":
            continue
        c = props.get("cpu", props.get("core", h.get("core", "1")))
        c = float(c[:-1]) / 1000 if c.endswith("m") else float(c)
        nodes.append((h.get("id"), c))
    return nodes


def overcommit(jobs, requests, capacities):
    """Peak cpu per resource id and the number of resources that ever
    exceeded their capacity. capacities: list indexed by resource id."""
    events = {}
    for j in jobs:
        a = (j.get("allocated_resources") or "").strip()
        if not a or j["starting_time"] is None or j["finish_time"] is None:
            continue
        for r in resource_ids(a):
            # A resubmitted job (`<id>-r<n>`) requests what its original did.
            jid = str(j["job_id"])
            c = requests.get(jid, requests.get(jid.rsplit("-r", 1)[0], 1.0))
            events.setdefault(r, []).append((j["starting_time"], c))
            events[r].append((j["finish_time"], -c))
    peaks = {}
    for r, ev in events.items():
        ev.sort(key=lambda e: (e[0], e[1]))  # frees before starts at equal times
        cur = peak = 0.0
        for _, d in ev:
            cur += d
            peak = max(peak, cur)
        peaks[r] = peak
    over = sum(1 for r, p in peaks.items() if r < len(capacities) and p > capacities[r] + 1e-9)
    return peaks, over


def reference_runs(pattern):
    return sorted(REFERENCE.glob(f"results/{pattern}"))


def write_csv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def mean_sd(xs):
    xs = list(xs)
    if not xs:
        return (float("nan"), float("nan"))
    return (statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0)


def print_table(header, rows):
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for k, r in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
