"""`sweep.py --report`: after a real sweep on a local Dask cluster, the
sweep's page (`batkube report DIR`) compares the runs and links each run's
page, which exists; run again with everything done, the page is written
again without any simulation."""

import csv
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

from conftest import EXPERIMENTS, ROOT

SVG = "{http://www.w3.org/2000/svg}"


def sweep(spec, out, *extra):
    return subprocess.run([sys.executable, str(EXPERIMENTS / "sweep.py"), str(spec), "--out", str(out),
                           "--workers", "2", "--report", *extra],
                          capture_output=True, text=True, timeout=300)


def test_report_compares_the_runs_and_links_their_pages(tmp_path, binaries):
    bk, sched = binaries
    subprocess.run([str(bk), "workload", "generate", "-n", "20", "-o", str(tmp_path / "burst20.json")],
                   check=True)
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""\
        batkube: {bk}
        grid:
          workload: [burst20.json]
          platform: [{ROOT / 'platforms' / '16-node.xml'}]
          scheduler: [{sched}]
          flags:
            exact: ""
            timeout50: --sync timeout --timeout 50ms
        """))
    out = tmp_path / "out"
    p = sweep(spec, out)
    assert p.returncode == 0, p.stderr
    assert f"wrote {out / 'report.html'} (the page of a sweep" in p.stderr, p.stderr
    with open(out / "results.csv", newline="") as f:
        ids = [r["id"] for r in csv.DictReader(f)]
    assert len(ids) == 2
    # The page is HTML that is also XML: every run linked, its page there.
    page = ET.parse(out / "report.html").getroot()
    links = {a.get("href") for a in page.iter("a")} | {a.get("href") for a in page.iter(SVG + "a")}
    for i in ids:
        assert f"runs/{i}/report.html" in links
        run_page = ET.parse(out / "runs" / i / "report.html").getroot()
        bars = [r for r in run_page.iter(SVG + "rect") if "b" in (r.get("class") or "").split()
                and r.get("data-i") is not None]
        assert len(bars) == 20
    # The flags axis differs: makespan, mean wait and utilisation against it.
    strips = [s for s in page.iter(SVG + "svg") if "strip" in (s.get("class") or "")]
    assert [s.get("data-metric") for s in strips] == ["makespan", "mean_wait", "utilisation"]
    assert {s.get("data-axis") for s in strips} == {"flags"}

    # Again: nothing to run, the page is written anyway.
    (out / "report.html").unlink()
    p = sweep(spec, out)
    assert p.returncode == 0, p.stderr
    assert "0 to run" in p.stderr
    assert (out / "report.html").is_file()
