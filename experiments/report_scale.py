#!/usr/bin/env python3
"""How `batkube report` scales: the page of a large run, written and opened.

    python3 experiments/report_scale.py                    # 10k and 100k jobs on 1000 nodes
    python3 experiments/report_scale.py --sizes 100000 --repeat 5

Each case is scale.py's run (the same generated inputs: Poisson arrivals,
exponential durations, 1, 2 or 4 cpus on 16-cpu nodes), reused from
experiments/results/scale/<case>/ when scale.py (or an earlier call) made
it, else run once. Measured: the wall time of `batkube report` (the best
and the mean of --repeat calls), the page's size, and, in headless chromium
(Debian's, through chromedriver), the time from navigation to the page's
script done (the `batkube-ready` performance mark: parsing, SVG, the pod
table's first page) and to the load event. The goal (issue 29): a 100,000-
job page written in under 10 s, under 25 MB, open in under 3 s.
Outputs: experiments/results/report_scale/report_scale.csv and the pages.
"""

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import _common as c
import scale

OUT = c.RESULTS / "report_scale"


class Chromium:
    """A headless chromium session over WebDriver (chromedriver's HTTP API)."""

    def __init__(self):
        drv, chromium = shutil.which("chromedriver"), shutil.which("chromium")
        if not drv or not chromium:
            sys.exit("report_scale.py needs Debian's chromium and chromium-driver "
                     "(apt-get install -y chromium chromium-driver; .ci/run installs them)")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.proc = subprocess.Popen([drv, f"--port={port}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        for line in self.proc.stdout:
            if "started successfully" in line:
                break
        else:
            sys.exit("chromedriver ended before it listened")
        self.base = f"http://127.0.0.1:{port}"
        v = self.call("POST", "/session", {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": chromium, "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                         "--disable-dev-shm-usage", "--window-size=1400,1000"]}}}})
        self.sid = v["sessionId"]

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.base + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())["value"]

    def open_ms(self, page):
        """Milliseconds from navigation to the page's script done, and to the load event."""
        self.call("POST", f"/session/{self.sid}/url", {"url": "about:blank"})
        self.call("POST", f"/session/{self.sid}/url", {"url": page.resolve().as_uri()})
        return self.call("POST", f"/session/{self.sid}/execute/sync", {"args": [], "script": """
            var ready = performance.getEntriesByName('batkube-ready')[0];
            var nav = performance.getEntriesByType('navigation')[0];
            return [ready ? ready.startTime : null, nav.loadEventEnd,
                    [...document.querySelectorAll('#gantt path.b')].reduce(function (n, p) {
                        return n + p.getAttribute('data-i').split(' ').length; },
                        document.querySelectorAll('#gantt rect.b').length),
                    document.querySelectorAll('#pods tbody tr').length];"""})

    def close(self):
        try:
            self.call("DELETE", f"/session/{self.sid}")
        finally:
            self.proc.kill()
            self.proc.wait()


def release_batkube():
    p = c.ROOT / "target" / "release" / "batkube"
    return str(p) if p.is_file() else c.batkube()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="jobs per case, comma-separated")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="`batkube report` calls per case")
    ap.add_argument("--no-browser", action="store_true", help="do not open the pages in chromium")
    a = ap.parse_args()
    bk = release_batkube()
    print(f"batkube: {bk}", file=sys.stderr)
    OUT.mkdir(parents=True, exist_ok=True)
    browser = None if a.no_browser else Chromium()
    header = ["jobs", "nodes", "pods", "report_best_s", "report_mean_s", "page_MB", "bars_drawn",
              "rows_shown", "chromium_ready_ms", "chromium_load_ms"]
    rows = []
    try:
        for jobs in (int(float(x)) for x in a.sizes.split(",")):
            workload = scale.generated_workload(bk, jobs, 0.7, 600, 1)
            platform = scale.platform_for(bk, a.nodes)
            run_dir = scale.OUT / f"{workload.stem}_{a.nodes}n"
            if not (run_dir / "summary.json").exists():
                print(f"running {jobs} jobs on {a.nodes} nodes into {run_dir}", file=sys.stderr)
                _, rc, wall, s, *_ = scale.run_case(bk, platform, workload, run_dir, 2400, [])
                if rc != 0:
                    sys.exit(f"the run failed (exit {rc}); see {run_dir}")
            page = OUT / f"report-{scale.size_label(jobs)}.html"
            times = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                subprocess.run([bk, "report", str(run_dir), "-o", str(page)], check=True,
                               stderr=subprocess.DEVNULL)
                times.append(time.perf_counter() - t)
            pods = sum(1 for _ in open(run_dir / "pods.csv")) - 1
            ready = load = bars = shown = ""
            if browser:
                ready, load, bars, shown = browser.open_ms(page)
            rows.append([jobs, a.nodes, pods, f"{min(times):.2f}", f"{statistics.mean(times):.2f}",
                         f"{page.stat().st_size / 1e6:.1f}", bars, shown,
                         f"{ready:.0f}" if ready != "" and ready is not None else "",
                         f"{load:.0f}" if load != "" else ""])
            print(f"  {dict(zip(header, rows[-1]))}", file=sys.stderr)
            c.write_csv(OUT / "report_scale.csv", header, rows)
    finally:
        if browser:
            browser.close()
    c.print_table(header, rows)


if __name__ == "__main__":
    main()
