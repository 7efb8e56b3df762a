#!/usr/bin/env python3
"""Run a grid of `batkube run` simulations on Dask: a local cluster (one
worker per core), an existing Dask scheduler (`--dask ADDRESS`), or workers
started as batch jobs through dask-jobqueue (`--jobqueue slurm|oar|pbs`).

    python3 experiments/sweep.py SPEC.yaml --out DIR [--workers N | --dask ADDRESS |
        --jobqueue slurm|oar|pbs [--jobqueue-option KEY=VALUE ...]]

SPEC.yaml (paths are relative to the spec file's directory):

    batkube: ../../target/release/batkube   # optional; else $BATKUBE, else PATH
    path: [../../target/release]            # optional; where scheduler programs are looked up before PATH
    timeout: 1800                           # optional; wall seconds per run, a longer run fails
    repeat: 2                               # optional; runs per combination (default 1)
    grid:
      workload: [../../workloads/200_delay170.json]
      platform: [../../platforms/16-node.xml]
      scheduler:
        least: batkube-scheduler --config ../configs/least-allocated.yaml
      flags:                                # optional
        exact: ""
        timeout50: --sync timeout --timeout 50ms
      seed: 1..20                           # optional; `--seed N` per value: a list of
                                            # whole numbers or an inclusive range A..B

Outputs: DIR/results.csv (one row per run of the grid: id, one column per
axis, repeat, status, every summary.json field, host, worker, wall_s, error),
with --report DIR/report.html (`batkube report DIR`: the axes against
makespan, mean wait and utilisation, linking each run's page, written in
runs/<id>/report.html where missing),
DIR/results.parquet when pandas and pyarrow are importable, DIR/runs/<id>/
(the run's whole --out, sweep.log, result.json). A run's id is a hash of its
inputs' content (workload, platform, binaries, every file its command names)
and its command line: run again on the same DIR, the sweep skips the runs
whose result.json says ok and does the rest.

Workers run the functions below from pickled code (they need only Python,
dask and the binaries); inputs and binaries are named by absolute paths, so
a worker needs the same filesystem view (a shared home on a cluster), never
a particular working directory.
"""

import argparse
import asyncio
import csv
import hashlib
import io
import json
import os
import shlex
import shutil
import socket
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

AXES = ("workload", "platform", "scheduler", "flags", "seed")
MAX_SEED = 2**64 - 1
TOP_KEYS = ("grid", "repeat", "batkube", "path", "timeout")
FIXED_COLUMNS = ("id", *AXES, "repeat", "status")
TAIL_COLUMNS = ("host", "worker", "wall_s", "error")
DEFAULT_TIMEOUT = 3600.0


class SpecError(Exception):
    """A mistake in the user's spec file or command line: printed, no traceback."""


# --------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------

class Run:
    """One simulation of the grid: its axis value names, repeat index, the
    argv of `batkube run` without --out, and its id."""

    def __init__(self, names, repeat, argv, files):
        self.names, self.repeat, self.argv, self.files = names, repeat, argv, files
        self.id = None

    def key_material(self, digest_of):
        return json.dumps({"argv": self.argv, "repeat": self.repeat,
                           "files": {f: digest_of(f) for f in sorted(self.files)}},
                          sort_keys=True)


def _load_yaml(path):
    import yaml
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SpecError(f"cannot read the spec {path}: {e.strerror}")
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise SpecError(f"{path}{where}: not valid YAML: {problem}")
    if not isinstance(spec, dict):
        raise SpecError(f"{path}: expected a mapping with a `grid:` key at the top, "
                        f"found {type(spec).__name__}")
    return spec


def _named_values(axis, value, spec_path):
    """An axis' values as [(name, value)]: a list names each value by itself
    (a path by its file stem), a mapping gives the names."""
    if isinstance(value, (str, int, float)):
        value = [value]
    if isinstance(value, list):
        out = []
        for v in value:
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise SpecError(f"{spec_path}: grid.{axis}: each value must be a string, "
                                f"found {v!r}")
            v = str(v)
            out.append((Path(v).stem if axis in ("workload", "platform") else v, v))
    elif isinstance(value, dict):
        out = []
        for k, v in value.items():
            if v is None:
                v = ""
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise SpecError(f"{spec_path}: grid.{axis}.{k}: the value must be a string, "
                                f"found {v!r}")
            out.append((str(k), str(v)))
    else:
        raise SpecError(f"{spec_path}: grid.{axis}: expected a list or a mapping of names "
                        f"to values, found {type(value).__name__}")
    if not out:
        raise SpecError(f"{spec_path}: grid.{axis} is empty")
    names = [n for n, _ in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(f"{spec_path}: grid.{axis}: several values are named {dup[0]!r}; "
                        f"use a mapping to name them")
    return out


def _seed_values(value, spec_path):
    """The seed axis as [(name, value)]: whole numbers, one by one or as an
    inclusive range "A..B"; each run gets `--seed N`."""
    where = f"{spec_path}: grid.seed"
    if isinstance(value, str):
        a, dots, b = value.partition("..")
        try:
            lo, hi = int(a.strip()), int(b.strip())
        except ValueError:
            lo = hi = None
        if not dots or lo is None:
            raise SpecError(f"{where}: expected whole numbers or a range A..B, found {value!r}")
        if hi < lo:
            raise SpecError(f"{where}: the range {value!r} is empty")
        value = list(range(lo, hi + 1))
    elif isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        raise SpecError(f"{where}: expected a list of whole numbers or a range A..B, "
                        f"found {value!r}")
    out = []
    for v in value:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_SEED:
            raise SpecError(f"{where}: each seed must be a whole number from 0 to 2^64-1, "
                            f"found {v!r}")
        out.append((str(v), str(v)))
    names = [n for n, _ in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SpecError(f"{where}: seed {dup[0]} is given twice")
    return out


def _existing_file(base, text):
    """`text` as an absolute path when it names an existing file or directory
    relative to `base` (or absolutely), else None."""
    if not text or text.startswith("-") or "\n" in text:
        return None
    p = Path(text).expanduser()
    p = p if p.is_absolute() else base / p
    return p.resolve() if p.exists() else None


def _absolutize_words(base, words):
    """Every word (or `--opt=value` value) that names an existing path
    relative to the spec's directory, made absolute. Returns (words, files)."""
    out, files = [], []
    for w in words:
        opt, eq, val = w.partition("=")
        if eq and opt.startswith("-"):
            p = _existing_file(base, val)
            if p:
                w = f"{opt}={p}"
        else:
            p = _existing_file(base, w)
            if p:
                w = str(p)
        if p and p.is_file():
            files.append(str(p))
        out.append(w)
    return out, files


def _which(prog, dirs):
    for d in dirs:
        c = Path(d) / prog
        if c.is_file() and os.access(c, os.X_OK):
            return str(c.resolve())
    w = shutil.which(prog)
    return str(Path(w).resolve()) if w else None


def _resolve_program(base, prog, dirs, what):
    if "/" in prog:
        p = Path(prog).expanduser()
        p = p if p.is_absolute() else base / p
        if not p.is_file():
            raise SpecError(f"{what}: {prog} not found (looked for {p})")
        return str(p.resolve())
    found = _which(prog, dirs)
    if not found:
        where = "the spec's `path:` directories or PATH" if dirs else "PATH"
        raise SpecError(f"{what}: program {prog!r} not found on {where}; put it on PATH, "
                        f"add its directory to `path:` in the spec, or name it with a path")
    return found


def _scheduler_command(base, text, dirs, name):
    """The scheduler command with its program and every path it names made
    absolute. Leading VAR=value words (and `env`, `exec`) are kept."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise SpecError(f"grid.scheduler.{name}: cannot split {text!r} into words: {e}")
    i = 0
    while i < len(words) and (words[i] in ("env", "exec") or
                              ("=" in words[i] and not words[i].startswith(("=", "-")))):
        i += 1
    if i == len(words):
        raise SpecError(f"grid.scheduler.{name}: no program in {text!r}")
    prog = _resolve_program(base, words[i], dirs, f"grid.scheduler.{name}")
    rest, files = _absolutize_words(base, words[i + 1:])
    return shlex.join([*words[:i], prog, *rest]), [prog, *files]


def load_spec(spec_path):
    """Reads and checks a spec; returns (runs, settings). Raises SpecError
    naming the key at fault."""
    spec_path = Path(spec_path)
    spec = _load_yaml(spec_path)
    base = spec_path.resolve().parent
    unknown = [k for k in spec if k not in TOP_KEYS]
    if unknown:
        raise SpecError(f"{spec_path}: unknown key {unknown[0]!r} at the top "
                        f"(known: {', '.join(TOP_KEYS)})")
    grid = spec.get("grid")
    if not isinstance(grid, dict):
        raise SpecError(f"{spec_path}: `grid:` must be a mapping of axes "
                        f"({', '.join(AXES)}) to values")
    for k in grid:
        if k not in AXES:
            raise SpecError(f"{spec_path}: unknown axis {k!r} in grid "
                            f"(known: {', '.join(AXES)})")
    for k in ("workload", "platform", "scheduler"):
        if k not in grid:
            raise SpecError(f"{spec_path}: grid.{k} is missing")

    repeat = spec.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise SpecError(f"{spec_path}: repeat: expected a whole number >= 1, found {repeat!r}")
    timeout = spec.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise SpecError(f"{spec_path}: timeout: expected seconds > 0, found {timeout!r}")

    dirs = spec.get("path", [])
    if isinstance(dirs, str):
        dirs = [dirs]
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise SpecError(f"{spec_path}: path: expected a list of directories")
    dirs = [str((base / Path(d).expanduser()).resolve()) for d in dirs]

    if "batkube" in spec:
        if not isinstance(spec["batkube"], str):
            raise SpecError(f"{spec_path}: batkube: expected the path of the batkube binary")
        bk = _resolve_program(base, spec["batkube"], dirs, "batkube")
    elif os.environ.get("BATKUBE"):
        bk = _resolve_program(Path.cwd(), os.environ["BATKUBE"], dirs, "$BATKUBE")
    else:
        bk = _resolve_program(base, "batkube", dirs, "batkube")

    values = {a: _named_values(a, grid[a], spec_path) for a in AXES if a in grid and a != "seed"}
    if "flags" not in values:
        values["flags"] = [("none", "")]
    values["seed"] = _seed_values(grid["seed"], spec_path) if "seed" in grid else [("none", "")]

    inputs = {}
    for axis in ("workload", "platform"):
        for name, v in values[axis]:
            p = _existing_file(base, v)
            if not p or not p.is_file():
                raise SpecError(f"{spec_path}: grid.{axis}.{name}: file {v!r} not found "
                                f"(paths are relative to {base})")
            inputs[(axis, name)] = str(p)
    scheds = {}
    for name, v in values["scheduler"]:
        scheds[name] = _scheduler_command(base, v, dirs, name)
    flags = {}
    for name, v in values["flags"]:
        try:
            words = shlex.split(v)
        except ValueError as e:
            raise SpecError(f"{spec_path}: grid.flags.{name}: cannot split {v!r}: {e}")
        for w in words:
            if w in ("--out", "--platform", "-p", "--workload", "-w", "--scheduler") or \
                    w.startswith(("--out=", "--platform=", "--workload=", "--scheduler=")):
                raise SpecError(f"{spec_path}: grid.flags.{name}: {w.split('=')[0]} is set by "
                                f"the sweep; give it as its own axis")
            if "seed" in grid and (w == "--seed" or w.startswith("--seed=")):
                raise SpecError(f"{spec_path}: grid.flags.{name}: --seed is set by the "
                                f"grid's seed axis")
        flags[name] = _absolutize_words(base, words)

    runs = []
    for wn, _ in values["workload"]:
        for pn, _ in values["platform"]:
            for sn, _ in values["scheduler"]:
                for fn, _ in values["flags"]:
                    for seed, sv in values["seed"]:
                        cmd, sfiles = scheds[sn]
                        fwords, ffiles = flags[fn]
                        argv = [bk, "run", "--platform", inputs[("platform", pn)],
                                "--workload", inputs[("workload", wn)], "--scheduler", cmd,
                                *fwords, *(["--seed", sv] if sv else [])]
                        files = {bk, inputs[("platform", pn)], inputs[("workload", wn)],
                                 *sfiles, *ffiles}
                        for r in range(repeat):
                            runs.append(Run({"workload": wn, "platform": pn, "scheduler": sn,
                                             "flags": fn, "seed": seed}, r, argv, files))
    digests = {}

    def digest_of(f):
        if f not in digests:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            digests[f] = h.hexdigest()
        return digests[f]

    for r in runs:
        r.id = hashlib.sha256(r.key_material(digest_of).encode()).hexdigest()[:12]
    return runs, {"timeout": float(timeout), "batkube": bk}


# --------------------------------------------------------------------------
# On the worker (pickled by value: standard library only)
# --------------------------------------------------------------------------

def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _die_with_parent():
    """A run dies with the worker that started it (a killed worker leaves no
    simulation behind). Linux only; elsewhere a no-op."""
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def _flatten(prefix, value, out):
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list):
        out[prefix] = json.dumps(value)
    else:
        out[prefix] = value


def run_one(task):
    """Runs one simulation in a fresh temporary directory on this worker and
    returns its row; its outputs go to DIR/runs/<id>/ directly when this
    worker sees DIR (shared filesystem), else come back as a tar.gz."""
    import signal
    import subprocess
    try:
        from distributed import get_worker
        worker = get_worker().address
    except Exception:  # noqa: BLE001 (run outside a worker, e.g. in tests)
        worker = ""
    row = {"host": socket.gethostname(), "worker": worker}
    tmp = Path(tempfile.mkdtemp(prefix=f"batkube-sweep-{task['id']}-"))
    out = tmp / "out"
    try:
        missing = [f for f in task["files"] if not os.path.exists(f)]
        if missing:
            row.update(status="failed", wall_s=0.0,
                       error=f"not found on worker host {row['host']}: {', '.join(missing)} "
                             f"(workers need the same filesystem view as sweep.py)")
            return row, None
        user_socket = any(w == "--socket-endpoint" or w.startswith("--socket-endpoint=")
                          for w in task["argv"])
        preexec = _die_with_parent()
        for attempt in range(5):
            if out.exists():
                shutil.rmtree(out)
            out.mkdir()
            argv = [*task["argv"], "--out", str(out)]
            if not user_socket:
                # Real Batsim talks to the broker over TCP: a free port per run,
                # so runs sharing a host never collide.
                argv += ["--socket-endpoint", f"tcp://127.0.0.1:{_free_port()}"]
            log_path = out / "sweep.log"
            t = time.perf_counter()
            with open(log_path, "w") as log:
                log.write("$ " + shlex.join(argv) + "\n")
                log.flush()
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=preexec)
                try:
                    rc = p.wait(timeout=task["timeout"])
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                    rc = None
            wall = time.perf_counter() - t
            log_text = log_path.read_text(errors="replace")
            if rc is not None and rc != 0 and "cannot bind the Batsim socket" in log_text \
                    and not user_socket:
                continue  # another run took the port between our look and its bind
            break
        summary = {}
        try:
            summary = json.loads((out / "summary.json").read_text())
        except (OSError, ValueError):
            pass
        ok = rc == 0 and bool(summary.get("completed")) and \
            summary.get("jobs_succeeded") == summary.get("jobs")
        flat = {}
        _flatten("", summary, flat)
        for k, v in flat.items():
            row["summary." + k if k in FIXED_COLUMNS or k in TAIL_COLUMNS else k] = v
        row["status"] = "ok" if ok else "failed"
        row["wall_s"] = round(wall, 3)
        if not ok:
            why = (f"timed out after {task['timeout']:g} s" if rc is None else f"exit {rc}")
            if summary.get("error"):
                why += f": {summary['error']}"
            tail = "\n".join(log_text.strip().splitlines()[-15:])
            row["error"] = f"{why}\n{tail}"
        row["command"] = shlex.join(task["argv"])
        return row, _deliver(task, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _deliver(task, out):
    """Moves `out` to DIR/runs/<id>/ when this worker shares DIR (the token
    file proves it), atomically; else returns the outputs as tar.gz bytes."""
    runs_dir = Path(task["runs_dir"])
    try:
        shared = (runs_dir / ".token").read_text() == task["token"]
    except OSError:
        shared = False
    if shared:
        part = runs_dir / f".{task['id']}.partial-{uuid.uuid4().hex[:8]}"
        shutil.copytree(out, part)
        final = runs_dir / task["id"]
        if final.exists():
            shutil.rmtree(final)
        os.rename(part, final)
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for f in sorted(out.iterdir()):
            tar.add(f, arcname=f.name)
    return buf.getvalue()


# --------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------

class Progress:
    """done / failed / total and an ETA: a bar redrawn in place on a
    terminal, a plain line every `interval` seconds otherwise."""

    def __init__(self, total, skipped, interval, stream=sys.stderr):
        self.total, self.skipped, self.interval, self.stream = total, skipped, interval, stream
        self.done = self.failed = 0
        self.start = time.monotonic()
        self.last_line = 0.0
        self.tty = stream.isatty()

    def text(self):
        finished = self.done + self.failed
        left = self.total - self.skipped - finished
        el = time.monotonic() - self.start
        eta = "?" if finished == 0 else _hms(el / finished * left)
        return (f"{self.skipped + self.done}/{self.total} done ({self.skipped} from before), "
                f"{self.failed} failed, {left} to go, elapsed {_hms(el)}, ETA {eta}")

    def update(self, force=False):
        if self.tty:
            width = 24
            frac = (self.skipped + self.done + self.failed) / max(1, self.total)
            bar = "#" * int(frac * width) + "." * (width - int(frac * width))
            self.stream.write(f"\r[{bar}] {self.text()}\033[K")
            self.stream.flush()
        elif force or time.monotonic() - self.last_line >= self.interval:
            self.last_line = time.monotonic()
            print(f"[sweep] {self.text()}", file=self.stream, flush=True)

    def close(self):
        if self.tty:
            self.stream.write("\n")
        else:
            self.update(force=True)


def _hms(s):
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _read_result(runs_dir, run):
    try:
        row = json.loads((runs_dir / run.id / "result.json").read_text())
    except (OSError, ValueError):
        return None
    return row if isinstance(row, dict) else None


def write_results(out_dir, runs, rows):
    """results.csv (and results.parquet when pandas and pyarrow are there),
    one row per run of the grid that has a result, in grid order."""
    ordered = [rows[r.id] for r in runs if r.id in rows]
    summary_cols = []
    for row in ordered:
        for k in row:
            if k not in FIXED_COLUMNS and k not in TAIL_COLUMNS and k != "command" \
                    and k not in summary_cols:
                summary_cols.append(k)
    header = [*FIXED_COLUMNS, *summary_cols, *TAIL_COLUMNS]
    tmp = out_dir / "results.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        for row in ordered:
            w.writerow({k: row.get(k, "") for k in header})
    os.replace(tmp, out_dir / "results.csv")
    return header, ordered


def write_parquet(out_dir, header, ordered):
    try:
        import pandas as pd
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    df = pd.DataFrame([{k: row.get(k) for k in header} for row in ordered], columns=header)
    for c in df.columns:  # mixed types (a field absent from failed runs) as text
        if df[c].dtype == object and c not in FIXED_COLUMNS:
            kinds = {type(v) for v in df[c] if v is not None}
            if len(kinds) > 1:
                df[c] = df[c].map(lambda v: None if v is None else str(v))
    df.to_parquet(out_dir / "results.parquet", index=False)
    return True


def make_jobqueue_cluster(kind, options, workers_per_job_default=1):
    """A dask-jobqueue cluster (no job submitted until it is scaled).
    `options` are the cluster's keyword arguments (cores, memory, queue,
    walltime, account, job_extra_directives, ...)."""
    import dask_jobqueue
    classes = {"slurm": dask_jobqueue.SLURMCluster, "oar": dask_jobqueue.OARCluster,
               "pbs": dask_jobqueue.PBSCluster}
    kw = {"cores": 1, "memory": "2GB", "processes": workers_per_job_default,
          "job_name": "batkube-sweep", "python": sys.executable}
    if kind == "oar":
        # Without it OAR cannot be told the memory per core: say so explicitly.
        kw["memory_per_core_property_name"] = "not_applicable"
    kw.update(options)
    sched = dict(kw.pop("scheduler_options", {}) or {})
    sched.setdefault("dashboard_address", ":0")  # never a fixed port
    try:
        return classes[kind](scheduler_options=sched, **kw)
    except (TypeError, ValueError) as e:
        raise SpecError(f"--jobqueue {kind}: {str(e).splitlines()[0]} (see --jobqueue-option "
                        f"and dask-jobqueue's {classes[kind].__name__} arguments)")


def parse_jobqueue_options(items):
    import yaml
    out = {}
    for it in items or []:
        k, eq, v = it.partition("=")
        if not eq or not k:
            raise SpecError(f"--jobqueue-option {it!r}: expected KEY=VALUE "
                            f"(e.g. queue=short, cores=4, walltime=01:00:00)")
        try:
            out[k] = yaml.safe_load(v) if v else ""
        except yaml.YAMLError:
            out[k] = v
        if k in ("walltime", "memory", "queue", "account", "project") and out[k] is not None:
            out[k] = str(v)
    return out


def start_client(args):
    """The Dask client and, when we started it, the cluster."""
    from distributed import Client, LocalCluster
    if args.dask:
        try:
            return Client(args.dask, timeout="30s"), None
        except (OSError, TimeoutError) as e:
            raise SpecError(f"--dask {args.dask}: no Dask scheduler answers there ({e})")
    if args.jobqueue:
        cluster = make_jobqueue_cluster(args.jobqueue, parse_jobqueue_options(args.jobqueue_option))
        cluster.scale(jobs=args.workers or 1)
        return Client(cluster), cluster
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = args.workers or cores or 1
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                           dashboard_address=":0", host="127.0.0.1")
    return Client(cluster), cluster


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="sweep.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Paths in the spec are relative to the spec file's directory.")
    ap.add_argument("spec", help="the grid, in YAML")
    ap.add_argument("--out", required=True, help="output directory (results.csv, runs/)")
    eng = ap.add_mutually_exclusive_group()
    eng.add_argument("--dask", metavar="ADDRESS", help="an existing Dask scheduler, tcp://host:8786")
    eng.add_argument("--jobqueue", choices=("slurm", "oar", "pbs"),
                     help="start workers as batch jobs through dask-jobqueue")
    ap.add_argument("--workers", type=int, metavar="N",
                    help="local worker processes (default: one per core); with --jobqueue, batch jobs")
    ap.add_argument("--jobqueue-option", action="append", metavar="KEY=VALUE",
                    help="a dask-jobqueue cluster argument (cores=4, memory=8GB, queue=short, "
                         "walltime=02:00:00, account=..., job_extra_directives=[...]); repeatable")
    ap.add_argument("--retries", type=int, default=2,
                    help="times a run whose task raised is tried again (a run on a worker that "
                         "dies is moved to another worker in any case; default 2)")
    ap.add_argument("--progress-interval", type=float, default=30.0,
                    help="seconds between progress lines when stderr is not a terminal")
    ap.add_argument("--list", action="store_true", help="print the runs and exit")
    ap.add_argument("--report", action="store_true",
                    help="at the end, write DIR/report.html comparing the runs and each run's "
                         "page (batkube report DIR)")
    args = ap.parse_args(argv)
    if args.dask and args.workers:
        ap.error("--workers has no meaning with --dask (the scheduler has its workers)")
    if args.jobqueue_option and not args.jobqueue:
        ap.error("--jobqueue-option needs --jobqueue")
    if args.workers is not None and args.workers < 1:
        ap.error("--workers must be at least 1")

    try:
        return _sweep(args)
    except SpecError as e:
        print(f"sweep.py: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"sweep.py: error: {e}: pip install dask distributed dask-jobqueue pyyaml "
              f"(the versions CI uses are pinned in .ci/run)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n[sweep] interrupted: the runs already done are kept in {args.out}; "
              f"run the same command again to do the rest", file=sys.stderr)
        return 130


def _sweep(args):
    runs, settings = load_spec(args.spec)
    if args.list:
        for r in runs:
            print(r.id, " ".join(f"{a}={r.names[a]}" for a in AXES), f"repeat={r.repeat}",
                  shlex.join(r.argv), sep="  ")
        return 0
    if args.jobqueue:
        parse_jobqueue_options(args.jobqueue_option)  # bad options before anything starts
    out_dir = Path(args.out).resolve()
    runs_dir = out_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)

    rows = {}
    todo = []
    for r in runs:
        prev = _read_result(runs_dir, r)
        if prev and prev.get("status") == "ok":
            rows[r.id] = prev
        else:
            todo.append(r)
    print(f"[sweep] {len(runs)} runs in the grid: {len(runs) - len(todo)} already done in "
          f"{out_dir}, {len(todo)} to run", file=sys.stderr)
    if not todo:
        header, ordered = write_results(out_dir, runs, rows)
        write_parquet(out_dir, header, ordered)
        print(f"[sweep] results: {out_dir / 'results.csv'}", file=sys.stderr)
        return _report(args, settings, out_dir, 0)

    token = uuid.uuid4().hex
    (runs_dir / ".token").write_text(token)
    if __name__ != "__main__":
        # Imported (tests): workers cannot import this module, send it by value.
        import cloudpickle
        cloudpickle.register_pickle_by_value(sys.modules[__name__])

    from distributed import wait
    from distributed.client import FIRST_COMPLETED
    client, cluster = start_client(args)
    try:
        try:
            import bokeh  # noqa: F401 (the dashboard's only extra dependency)
            note = ""
        except ImportError:
            note = " (served once bokeh is installed: pip install 'bokeh>=3.1')"
        print(f"[sweep] Dask scheduler {client.scheduler.address}, dashboard "
              f"{client.dashboard_link}{note}", file=sys.stderr)
        futures = {}
        for r in todo:
            task = {"id": r.id, "argv": r.argv, "files": sorted(r.files),
                    "timeout": settings["timeout"], "runs_dir": str(runs_dir), "token": token}
            f = client.submit(run_one, task, key=f"batkube-run-{r.id}-{token[:8]}",
                              retries=args.retries, pure=False)
            futures[f] = r
        progress = Progress(len(runs), len(runs) - len(todo), args.progress_interval)
        progress.update(force=True)
        pending = set(futures)
        last_write = 0.0
        workerless_since, warned = time.monotonic(), False
        while pending:
            try:
                done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            except (TimeoutError, asyncio.TimeoutError):
                done = set()
            if not warned and not done and time.monotonic() - workerless_since > 60:
                if client.nthreads():
                    workerless_since = time.monotonic()
                else:
                    warned = True
                    if progress.tty:
                        progress.stream.write("\n")
                    print("[sweep] no Dask worker for 60 s: "
                          + ("are the batch jobs still queued (squeue, oarstat, qstat)? "
                             if args.jobqueue else "")
                          + "waiting on", file=sys.stderr)
            for f in done:
                r = futures[f]
                row = _collect(f, r, runs_dir)
                rows[r.id] = row
                if row["status"] == "ok":
                    progress.done += 1
                else:
                    progress.failed += 1
                    if progress.tty:
                        progress.stream.write("\n")
                    print(f"[sweep] run {r.id} failed ({_describe(r)}): "
                          f"{row.get('error', '').splitlines()[0] if row.get('error') else '?'}",
                          file=sys.stderr)
                f.release()
            if done and time.monotonic() - last_write > 1.0:
                write_results(out_dir, runs, rows)
                last_write = time.monotonic()
            progress.update()
        progress.close()
    finally:
        write_results(out_dir, runs, rows)  # also when interrupted
        client.close()
        if cluster is not None:
            cluster.close()
    header, ordered = write_results(out_dir, runs, rows)
    parquet = write_parquet(out_dir, header, ordered)
    failed = [r for r in runs if rows.get(r.id, {}).get("status") != "ok"]
    print(f"[sweep] results: {out_dir / 'results.csv'}"
          + (f" and {out_dir / 'results.parquet'}" if parquet else ""), file=sys.stderr)
    if failed:
        print(f"[sweep] {len(failed)} run(s) failed; their rows say why, their logs are in "
              f"runs/<id>/sweep.log; run the same command again to retry them", file=sys.stderr)
    return _report(args, settings, out_dir, 1 if failed else 0)


def _report(args, settings, out_dir, rc):
    """With --report, `batkube report DIR` (the sweep's page, and the page of
    each run that has none or an older one); a page that cannot be written
    makes the sweep fail."""
    if not args.report:
        return rc
    import subprocess
    p = subprocess.run([settings["batkube"], "report", str(out_dir)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    for line in p.stderr.strip().splitlines():
        print(f"[sweep] {line}", file=sys.stderr)
    if p.returncode != 0:
        print(f"[sweep] error: batkube report {out_dir} exited with {p.returncode}", file=sys.stderr)
        return rc or 1
    return rc


def _describe(r):
    return " ".join(f"{a}={r.names[a]}" for a in AXES) + f" repeat={r.repeat}"


def _collect(future, r, runs_dir):
    """The row of a finished future, with its outputs written under
    runs/<id>/ and result.json last (so a run counts as done only once its
    outputs are all there)."""
    try:
        row, blob = future.result()
    except Exception as e:  # noqa: BLE001 (KilledWorker, a worker-side error: a failed row)
        row, blob = {"status": "failed", "error": f"{type(e).__name__}: {e}"}, None
    return store_result(row, blob, r, runs_dir)


def store_result(row, blob, r, runs_dir):
    """Writes a run's outputs (when they came back as bytes) and then its
    result.json; returns the row with the run's id and axis values."""
    dest = runs_dir / r.id
    if blob is not None:
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 (and backports)
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)
    dest.mkdir(parents=True, exist_ok=True)
    row = {"id": r.id, **r.names, "repeat": r.repeat, **row}
    tmp = dest / "result.json.tmp"
    tmp.write_text(json.dumps(row, indent=1))
    os.replace(tmp, dest / "result.json")
    return row


if __name__ == "__main__":
    sys.exit(main())
