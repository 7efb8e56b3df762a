//! `batkube report` and `--report` end to end: the pages of real runs (a
//! burst, a run with node failures and a scenario, a run of gangs) and of a
//! sweep parse, carry a Gantt bar per pod that ran and every pod in their
//! data; bad input gives a page of what is there; and in headless
//! chromium the pages render and answer (a bar per job, a table row per
//! pod, a click shows a job's details, a sweep's dots open the runs'
//! pages), with screenshots kept under the target directory
//! (`report-screenshots/`).

mod common;
#[path = "common/webdriver.rs"]
mod webdriver;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

fn batkube() -> Command {
    Command::new(env!("CARGO_BIN_EXE_batkube"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The runs every test looks at, made once per test process under the
/// target directory (kept for a person to open after the tests).
struct Runs {
    burst: PathBuf,
    outage: PathBuf,
    gang: PathBuf,
    sweep: PathBuf,
}

fn run(out: &Path, platform: &Path, workload: &Path, extra: &[&str]) {
    let o = batkube()
        .arg("run")
        .arg("--platform")
        .arg(platform)
        .arg("--workload")
        .arg(workload)
        .arg("--scheduler")
        .arg(common::batkube_scheduler())
        .arg("--out")
        .arg(out)
        .args(["--standin", "--report"])
        .args(extra)
        .current_dir(repo())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("report {}", out.join("report.html").display())),
        "{stderr}"
    );
}

fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let dir = common::profile_dir().join("report-tests");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let r = repo();
        // Explained: its page carries the decision trail.
        let burst = dir.join("burst");
        run(
            &burst,
            &r.join("platforms/16-node.xml"),
            &r.join("workloads/200_delay170.json"),
            &["--explain"],
        );
        // The README's cluster-dynamics example: a zone out for 2000 s,
        // evictions, resubmissions, a drain and a deletion.
        let outage = dir.join("outage");
        run(
            &outage,
            &r.join("platforms/heterogeneous.xml"),
            &r.join("workloads/poisson_500.json"),
            &[
                "--events",
                "experiments/dynamics/zone-a-outage.events",
                "--resubmit-evicted",
                "--scenario",
                "experiments/dynamics/maintenance.yaml",
            ],
        );
        // Parallel jobs on 1, 2 or 4 one-cpu machines.
        let gang_w = dir.join("gang.json");
        let o = batkube()
            .args([
                "workload",
                "generate",
                "-n",
                "40",
                "--arrival",
                "poisson:20",
            ])
            .args([
                "--duration",
                "exp:200",
                "--res",
                "choice:1,2,4",
                "--seed",
                "3",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // Two tenants, job by job in turn: the page gets per-queue panels.
        let mut w: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for (k, job) in w["jobs"].as_array_mut().unwrap().iter_mut().enumerate() {
            job["queue"] = json!(if k % 2 == 0 { "tenant-a" } else { "tenant-b" });
        }
        std::fs::write(&gang_w, serde_json::to_vec(&w).unwrap()).unwrap();
        let gang = dir.join("gang");
        run(&gang, &r.join("platforms/16-node.xml"), &gang_w, &[]);
        let sweep = make_sweep(&dir.join("sweep"), &[("b1", &burst), ("g1", &gang)]);
        Runs {
            burst,
            outage,
            gang,
            sweep,
        }
    })
}

/// A sweep's directory as experiments/sweep.py leaves it (results.csv and
/// runs/<id>/), from finished runs, plus a run that failed before it had a
/// directory; the runs' pages are left for the sweep's report to write.
fn make_sweep(dir: &Path, runs: &[(&str, &Path)]) -> PathBuf {
    let mut csv = String::from(
        "id,workload,platform,scheduler,flags,repeat,status,completed,makespan,mean_wait,utilisation,jobs,host,worker,wall_s,error\n",
    );
    for (id, src) in runs {
        let dest = dir.join("runs").join(id);
        std::fs::create_dir_all(&dest).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            if e.file_name() != "report.html" {
                std::fs::copy(e.path(), dest.join(e.file_name())).unwrap();
            }
        }
        let s: Value =
            serde_json::from_str(&std::fs::read_to_string(src.join("summary.json")).unwrap())
                .unwrap();
        csv += &format!(
            "{id},{},16-node,batkube-scheduler,none,0,ok,true,{},{},{},{},h,w,1.0,\n",
            src.file_name().unwrap().to_string_lossy(),
            s["makespan"],
            s["mean_wait"],
            s["utilisation"],
            s["jobs"]
        );
    }
    csv += "lost,gang,16-node,batkube-scheduler,none,1,failed,,,,,,h,w,0,\"exit 1: the scheduler exited\nmore\"\n";
    std::fs::write(dir.join("results.csv"), csv).unwrap();
    dir.to_path_buf()
}

/// A page, parsed (the report writes HTML that is also well-formed XML).
struct Page {
    text: String,
}

impl Page {
    fn read(path: &Path) -> Page {
        Page {
            text: std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        }
    }

    fn doc(&self) -> roxmltree::Document<'_> {
        roxmltree::Document::parse_with_options(
            &self.text,
            roxmltree::ParsingOptions {
                allow_dtd: true,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("the page does not parse: {e}"))
    }

    fn data(&self) -> Value {
        let doc = self.doc();
        let script = doc
            .descendants()
            .find(|n| n.attribute("id") == Some("data"))
            .expect("a data script");
        serde_json::from_str(script.text().unwrap_or("")).expect("the data is JSON")
    }
}

fn has_class(n: &roxmltree::Node, c: &str) -> bool {
    n.attribute("class")
        .is_some_and(|v| v.split_whitespace().any(|x| x == c))
}

fn by_id<'a, 'i>(doc: &'a roxmltree::Document<'i>, id: &str) -> Option<roxmltree::Node<'a, 'i>> {
    doc.descendants().find(|n| n.attribute("id") == Some(id))
}

/// pods.csv's rows as maps.
fn pods_csv(dir: &Path) -> Vec<HashMap<String, String>> {
    let mut r = csv::Reader::from_path(dir.join("pods.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            h.iter()
                .zip(rec.unwrap().iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The pod indices of the Gantt's bars.
fn bar_pods(doc: &roxmltree::Document) -> Vec<usize> {
    let gantt = by_id(doc, "gantt").expect("a Gantt chart");
    gantt
        .descendants()
        .filter(|n| n.tag_name().name() == "rect" && has_class(n, "b"))
        .map(|n| n.attribute("data-i").unwrap().parse().unwrap())
        .collect()
}

#[test]
fn a_runs_page_has_a_bar_per_pod_that_ran_and_every_pod_in_its_table() {
    let r = runs();
    for dir in [&r.burst, &r.outage, &r.gang] {
        let page = Page::read(&dir.join("report.html"));
        let doc = page.doc();
        let data = page.data();
        let pods = pods_csv(dir);
        let rows = data["pods"].as_array().unwrap();
        assert_eq!(rows.len(), pods.len(), "{}", dir.display());
        // Every pod that got a node is drawn, on its node, once.
        let bars = bar_pods(&doc);
        let with_node: Vec<usize> = (0..pods.len())
            .filter(|&i| !pods[i]["node"].is_empty())
            .collect();
        let mut sorted = bars.clone();
        sorted.sort();
        assert_eq!(sorted, with_node, "{}", dir.display());
        let machines = data["machines"].as_array().unwrap();
        for &i in &bars {
            assert_eq!(rows[i][1], pods[i]["pod"]);
            assert_eq!(
                machines[rows[i][2].as_u64().unwrap() as usize],
                pods[i]["node"]
            );
        }
        // Every job that started has a bar.
        let started: HashSet<&str> = pods
            .iter()
            .filter(|p| !p["started"].is_empty())
            .map(|p| p["job_id"].as_str())
            .collect();
        let drawn: HashSet<&str> = bars.iter().map(|&i| pods[i]["job_id"].as_str()).collect();
        assert!(started.is_subset(&drawn));
        let s: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        let ending = by_id(&doc, "ending").unwrap();
        assert!(has_class(&ending, "ok"));
        let ending_text: String = ending.descendants().filter_map(|n| n.text()).collect();
        assert!(ending_text.contains("end_reason: done"), "{ending_text}");
        let words: String = by_id(&doc, "summary")
            .unwrap()
            .descendants()
            .filter_map(|n| n.text())
            .collect();
        assert!(words.contains(&format!("{} jobs", s["jobs"])), "{words}");
        // The pod table's header has the decision trail column.
        let ths: Vec<String> = by_id(&doc, "pods")
            .unwrap()
            .descendants()
            .filter(|n| n.tag_name().name() == "th")
            .map(|n| n.text().unwrap_or("").to_string())
            .collect();
        assert_eq!(ths.last().unwrap(), "decision trail");
        // No resource from elsewhere.
        assert!(!page.text.contains("http://") || !page.text.contains("src=\"http"));
        assert!(!doc.descendants().any(|n| n.attribute("src").is_some()));
    }
}

/// `--explain`: decisions.jsonl has every attempt of every pod, the last
/// on the node pods.csv gives, and the page carries them as the trail.
#[test]
fn an_explained_runs_decisions_are_recorded_and_in_its_page() {
    let r = runs();
    let pods = pods_csv(&r.burst);
    let text = std::fs::read_to_string(r.burst.join("decisions.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut last: HashMap<&str, &Value> = HashMap::new();
    let mut count: HashMap<&str, u64> = HashMap::new();
    for l in &lines {
        let pod = l["pod"].as_str().unwrap();
        *count.entry(pod).or_default() += 1;
        // The scheduler numbers a pod's attempts 1, 2, ... and writes those
        // that differ from the last written; the broker sees each.
        let n = l["attempt"].as_u64().unwrap();
        match last.get(pod) {
            None => assert_eq!(n, 1, "{l}"),
            Some(before) => assert!(n > before["attempt"].as_u64().unwrap(), "{l}"),
        }
        assert!(
            l["filter"].as_object().is_some_and(|f| !f.is_empty()),
            "{l}"
        );
        last.insert(pod, l);
    }
    for p in &pods {
        let l = last[p["pod"].as_str()];
        assert_eq!(l["node"], json!(p["node"]), "{l}");
        assert_eq!(l["reason"], Value::Null);
        // pods.csv counts the attempts whose PodScheduled condition changed
        // (the scheduler skips an unchanged one), the trail every attempt.
        assert!(
            count[p["pod"].as_str()] >= p["attempts"].parse::<u64>().unwrap(),
            "{}",
            p["pod"]
        );
        // The node chosen passed every filter and had the best total.
        let fin = l["finalscore"].as_object().unwrap();
        if !fin.is_empty() {
            let total = |n: &Value| {
                n.as_object()
                    .unwrap()
                    .values()
                    .map(|v| v.as_str().unwrap().parse::<i64>().unwrap())
                    .sum::<i64>()
            };
            let best = fin.values().map(total).max().unwrap();
            assert_eq!(total(&fin[p["node"].as_str()]), best, "{l}");
        }
    }
    // The burst fills the 16 nodes: most pods waited with a reason first.
    let failed = lines.iter().filter(|l| l["node"].is_null()).count();
    assert!(failed > 100, "{failed} failed attempts");
    let some_failure = lines.iter().find(|l| l["node"].is_null()).unwrap();
    assert!(
        some_failure["reason"]
            .as_str()
            .unwrap()
            .contains("Insufficient cpu"),
        "{some_failure}"
    );
    let page = Page::read(&r.burst.join("report.html"));
    let data = page.data();
    assert_eq!(data["explained"], true);
    assert_eq!(data["trail"].as_array().unwrap().len(), lines.len());
    // A run without --explain says so.
    let plain = Page::read(&r.outage.join("report.html")).data();
    assert_eq!(plain["explained"], false);
    assert!(!r.outage.join("decisions.jsonl").exists());
}

#[test]
fn unavailable_machines_are_hatched_and_gangs_joined() {
    let r = runs();
    let page = Page::read(&r.outage.join("report.html"));
    let doc = page.doc();
    let data = page.data();
    let machines = data["machines"].as_array().unwrap();
    let mut down: Vec<String> = doc
        .descendants()
        .filter(|n| has_class(n, "down") && n.attribute("data-m").is_some())
        .map(|n| {
            let m: usize = n.attribute("data-m").unwrap().parse().unwrap();
            format!(
                "{} {}-{}",
                machines[m].as_str().unwrap(),
                n.attribute("data-from").unwrap(),
                n.attribute("data-to").unwrap()
            )
        })
        .collect();
    down.sort();
    // experiments/dynamics/zone-a-outage.events: resources 0 3 6 9 from 2000 to 4000.
    assert_eq!(
        down,
        [
            "node-0 2000-4000",
            "node-11 2000-4000",
            "node-4 2000-4000",
            "node-7 2000-4000"
        ]
    );
    let evicted = by_id(&doc, "gantt")
        .unwrap()
        .descendants()
        .filter(|n| has_class(n, "b") && has_class(n, "o3"))
        .count();
    assert_eq!(evicted, 4);

    let page = Page::read(&r.gang.join("report.html"));
    let doc = page.doc();
    let pods = pods_csv(&r.gang);
    let mut machines_of: HashMap<&str, HashSet<&str>> = HashMap::new();
    for p in &pods {
        if !p["group"].is_empty() {
            machines_of
                .entry(&p["group"])
                .or_default()
                .insert(&p["node"]);
        }
    }
    let lines: HashSet<&str> = doc
        .descendants()
        .filter(|n| has_class(n, "gang"))
        .map(|n| n.attribute("data-g").unwrap())
        .collect();
    let expected: HashSet<&str> = machines_of
        .iter()
        .filter(|(_, m)| m.len() > 1)
        .map(|(g, _)| *g)
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(lines, expected);
    let in_gang_bars = bar_pods(&doc)
        .into_iter()
        .filter(|&i| !pods[i]["group"].is_empty())
        .count();
    let gang_class = by_id(&doc, "gantt")
        .unwrap()
        .descendants()
        .filter(|n| has_class(n, "b") && has_class(n, "g"))
        .count();
    assert_eq!(gang_class, in_gang_bars);
}

#[test]
fn a_run_with_queues_has_a_panel_per_queue_and_bars_by_queue() {
    let r = runs();
    let pods = pods_csv(&r.gang);
    let queues: HashSet<&str> = pods.iter().map(|p| p["queue"].as_str()).collect();
    assert_eq!(queues, HashSet::from(["tenant-a", "tenant-b"]));
    assert!(r.gang.join("queues.csv").is_file());
    let page = Page::read(&r.gang.join("report.html"));
    let doc = page.doc();
    let data = page.data();
    let texts = data["texts"].as_array().unwrap();
    // Every pod carries its queue, and its bar the queue's colour class.
    for (i, p) in data["pods"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            texts[p[14].as_u64().unwrap() as usize],
            pods[i]["queue"].as_str()
        );
        let q = if pods[i]["queue"] == "tenant-a" { 1 } else { 2 };
        assert_eq!(p[15], q, "{p}");
    }
    for n in by_id(&doc, "gantt")
        .unwrap()
        .descendants()
        .filter(|n| has_class(n, "b"))
    {
        let i: usize = n.attribute("data-i").unwrap().parse().unwrap();
        let q = if pods[i]["queue"] == "tenant-a" {
            "q1"
        } else {
            "q2"
        };
        assert!(
            has_class(&n, q),
            "{:?} of {:?}",
            n.attribute("class"),
            pods[i]
        );
    }
    // The table: a row per queue with its jobs; lanes of cpu and of jobs.
    let section = by_id(&doc, "queues").expect("a queues section");
    let rows: Vec<Vec<String>> = section
        .descendants()
        .filter(|n| n.has_tag_name("tr") && n.parent().is_some_and(|p| p.has_tag_name("tbody")))
        .map(|tr| {
            tr.children()
                .filter(|c| c.has_tag_name("td"))
                .map(|td| {
                    td.descendants()
                        .filter(|t| t.is_text())
                        .filter_map(|t| t.text())
                        .collect::<String>()
                        .trim()
                        .to_string()
                })
                .collect()
        })
        .collect();
    let jobs = |q: &str| {
        pods.iter()
            .filter(|p| p["queue"] == q)
            .map(|p| p["job_id"].as_str())
            .collect::<HashSet<_>>()
            .len()
    };
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0][0], "tenant-a");
    assert_eq!(rows[1][0], "tenant-b");
    assert_eq!(rows[0][1], jobs("tenant-a").to_string());
    assert_eq!(rows[1][1], jobs("tenant-b").to_string());
    for id in [
        "series-queue-cpu-0",
        "series-queue-cpu-1",
        "series-queue-jobs-0",
        "series-queue-jobs-1",
    ] {
        let lane = by_id(&doc, id).unwrap_or_else(|| panic!("no {id}"));
        assert!(
            has_class(&lane, "timeview"),
            "{id} does not zoom with the chart"
        );
    }
    // A run without queues has no such section.
    let page = Page::read(&r.burst.join("report.html"));
    assert!(by_id(&page.doc(), "queues").is_none());
}

/// Each drawn pod's bar (x, y, w, h) as the page's rects or paths give it.
fn geometry(doc: &roxmltree::Document) -> HashMap<usize, [String; 4]> {
    let gantt = by_id(doc, "gantt").unwrap();
    let mut out = HashMap::new();
    for n in gantt.descendants().filter(|n| has_class(n, "b")) {
        match n.tag_name().name() {
            "rect" => {
                let a = |k| n.attribute(k).unwrap().to_string();
                out.insert(
                    n.attribute("data-i").unwrap().parse().unwrap(),
                    [a("x"), a("y"), a("width"), a("height")],
                );
            }
            "path" => {
                let ids: Vec<usize> = n
                    .attribute("data-i")
                    .unwrap()
                    .split(' ')
                    .map(|x| x.parse().unwrap())
                    .collect();
                let bars: Vec<&str> = n.attribute("d").unwrap().split(' ').collect();
                assert_eq!(ids.len(), bars.len());
                for (i, bar) in ids.into_iter().zip(bars) {
                    // M{x},{y}h{w}v{h}h-{w}z
                    let f: Vec<&str> = bar
                        .trim_start_matches('M')
                        .trim_end_matches('z')
                        .split([',', 'h', 'v'])
                        .collect();
                    assert_eq!(f.len(), 5, "{bar}");
                    assert_eq!(f[4], format!("-{}", f[2]), "{bar}");
                    out.insert(i, [f[0], f[1], f[2], f[3]].map(str::to_string));
                }
            }
            other => panic!("a bar drawn as {other}"),
        }
    }
    out
}

#[test]
fn a_large_runs_bars_are_paths_with_the_same_places() {
    let r = runs();
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("paths.html");
    let o = batkube()
        .arg("report")
        .arg(&r.gang)
        .arg("-o")
        .arg(&page)
        .args(["--max-bar-elements", "10"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let paths = Page::read(&page);
    let rects = Page::read(&r.gang.join("report.html"));
    let (pd, rd) = (paths.doc(), rects.doc());
    assert!(bar_pods(&pd).is_empty(), "no bar is a rect");
    let (pg, rg) = (geometry(&pd), geometry(&rd));
    assert_eq!(pg.len(), pods_csv(&r.gang).len());
    assert_eq!(pg, rg);
}

fn report(dir: &Path) -> (bool, String) {
    let o = batkube().arg("report").arg(dir).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn missing_lines(doc: &roxmltree::Document) -> Vec<String> {
    by_id(doc, "missing")
        .map(|ul| {
            ul.children()
                .filter(|n| n.tag_name().name() == "li")
                .map(|n| n.descendants().filter_map(|t| t.text()).collect())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn bad_input_gives_a_page_of_what_is_there() {
    let tmp = tempfile::tempdir().unwrap();
    // Not a run's directory at all.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (ok, stderr) = report(&empty);
    assert!(ok, "{stderr}");
    let page = Page::read(&empty.join("report.html"));
    let doc = page.doc();
    let top: String = by_id(&doc, "ending")
        .unwrap()
        .descendants()
        .filter_map(|n| n.text())
        .collect();
    assert!(
        top.contains("not the output directory of a batkube run"),
        "{top}"
    );
    let lines = missing_lines(&doc);
    for f in [
        "summary.json",
        "pods.csv",
        "jobs.csv",
        "nodes.csv",
        "timeline.csv",
    ] {
        assert_eq!(
            lines.iter().filter(|l| l.starts_with(f)).count(),
            1,
            "{f}: {lines:?}"
        );
        assert!(
            stderr.contains(&format!("batkube report: {f}: not found")),
            "{stderr}"
        );
    }

    // A run killed half-way: its summary says so, pods.csv ends mid-row,
    // nodes.csv and jobs.csv were never written.
    let r = runs();
    let cut = tmp.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    let pods = std::fs::read_to_string(r.burst.join("pods.csv")).unwrap();
    let half = &pods[..pods.len() / 2];
    std::fs::write(cut.join("pods.csv"), half).unwrap();
    std::fs::copy(r.burst.join("timeline.csv"), cut.join("timeline.csv")).unwrap();
    std::fs::write(
        cut.join("summary.json"),
        r#"{"completed": false, "end_reason": "sigint", "end_time": 900.5,
            "error": "SIGINT at simulated time 900.500000", "jobs": 80}"#,
    )
    .unwrap();
    let (ok, stderr) = report(&cut);
    assert!(ok, "{stderr}");
    let page = Page::read(&cut.join("report.html"));
    let doc = page.doc();
    let ending = by_id(&doc, "ending").unwrap();
    assert!(has_class(&ending, "bad"));
    let top: String = ending.descendants().filter_map(|n| n.text()).collect();
    assert!(top.contains("end_reason: sigint"), "{top}");
    let lines = missing_lines(&doc);
    assert!(
        lines.iter().any(|l| l.starts_with("nodes.csv: not found")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("jobs.csv: not found")),
        "{lines:?}"
    );
    // The last row, cut in the middle, is the only one left out, by its line.
    let complete_rows = half.lines().count() - 1 - usize::from(!half.ends_with('\n'));
    let data = page.data();
    let kept = data["pods"].as_array().unwrap().len();
    assert!(
        kept == complete_rows || kept == complete_rows + 1,
        "{kept} of {complete_rows}"
    );
    assert_eq!(bar_pods(&doc).len(), kept);

    // Batsim's own outputs only: bars from jobs.csv, machines by resource id.
    let batsim = tmp.path().join("batsim");
    std::fs::create_dir(&batsim).unwrap();
    std::fs::copy(r.gang.join("jobs.csv"), batsim.join("jobs.csv")).unwrap();
    let (ok, stderr) = report(&batsim);
    assert!(ok, "{stderr}");
    let page = Page::read(&batsim.join("report.html"));
    let doc = page.doc();
    assert_eq!(bar_pods(&doc).len(), pods_csv(&r.gang).len());
    assert!(missing_lines(&doc)
        .iter()
        .any(|l| l.starts_with("pods.csv: not found; bars drawn from jobs.csv")));

    // Nothing to write into: an error naming the path.
    let (ok, stderr) = report(&tmp.path().join("nowhere"));
    assert!(!ok);
    assert!(stderr.contains("nowhere: not a directory"), "{stderr}");
}

#[test]
fn a_sweeps_page_compares_the_runs_and_links_each_runs_page() {
    let r = runs();
    let (ok, stderr) = report(&r.sweep);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("the page of a sweep"), "{stderr}");
    let page = Page::read(&r.sweep.join("report.html"));
    let doc = page.doc();
    // Each run's page was written, and is linked from the table.
    for id in ["b1", "g1"] {
        assert!(r.sweep.join("runs").join(id).join("report.html").is_file());
        let href = format!("runs/{id}/report.html");
        assert!(doc
            .descendants()
            .any(|n| n.tag_name().name() == "a" && n.attribute("href") == Some(&href)));
    }
    let rows = by_id(&doc, "runs-table")
        .unwrap()
        .descendants()
        .filter(|n| n.tag_name().name() == "tr")
        .count();
    assert_eq!(rows, 1 + 3);
    // The workload axis differs: one chart per metric, a dot per run with a value.
    let strips: Vec<_> = doc
        .descendants()
        .filter(|n| has_class(n, "strip"))
        .collect();
    assert_eq!(strips.len(), 3);
    for s in &strips {
        assert_eq!(s.attribute("data-axis"), Some("workload"));
        assert_eq!(s.descendants().filter(|n| has_class(n, "run")).count(), 2);
    }
    let lines = missing_lines(&doc);
    assert!(lines.iter().any(|l| l.contains("\"lost\"")), "{lines:?}");
}

/// The pages in a real browser: rendered, clicked, photographed.
#[test]
fn the_pages_render_and_answer_in_chromium() {
    let r = runs();
    let (ok, stderr) = report(&r.sweep);
    assert!(ok, "{stderr}");
    let shots = common::profile_dir().join("report-screenshots");
    let browser = webdriver::Browser::start();
    for (name, dir) in [
        ("burst", &r.burst),
        ("outage", &r.outage),
        ("gang", &r.gang),
    ] {
        browser.open(&dir.join("report.html"));
        let pods = pods_csv(dir);
        let seen = browser.run(
            "var d = JSON.parse(document.getElementById('data').textContent);
             var bars = document.querySelectorAll('#gantt rect.b');
             var jobs = new Set(), started = new Set();
             bars.forEach(function (b) { jobs.add(d.pods[+b.getAttribute('data-i')][0]); });
             d.pods.forEach(function (p) { if (p[5] !== null) started.add(p[0]); });
             var missing = [...started].filter(function (j) { return !jobs.has(j); });
             var box = document.getElementById('gantt').getBoundingClientRect();
             return {bars: bars.length, jobs_started: started.size, jobs_drawn: jobs.size,
                     missing: missing, rows: document.querySelectorAll('#pods tbody tr').length,
                     gantt_width: box.width, gantt_height: box.height,
                     ticks: document.querySelectorAll('#axis-top text').length};",
            json!([]),
        );
        let with_node = pods.iter().filter(|p| !p["node"].is_empty()).count();
        assert_eq!(seen["bars"], with_node, "{name}: {seen}");
        assert_eq!(
            seen["missing"],
            json!([]),
            "{name}: a job that ran has no bar: {seen}"
        );
        assert_eq!(seen["rows"], pods.len(), "{name}: a row per pod: {seen}");
        assert!(
            seen["gantt_width"].as_f64().unwrap() > 800.0,
            "{name}: {seen}"
        );
        assert!(seen["ticks"].as_u64().unwrap() >= 3, "{name}: {seen}");

        // A click on the widest bar shows its pod's details.
        let target = browser.run(
            "var best = null, w = -1;
             document.querySelectorAll('#gantt rect.b').forEach(function (b) {
               var r = b.getBoundingClientRect();
               if (r.width * r.height > w) { w = r.width * r.height; best = b; } });
             best.id = 'test-target';
             var d = JSON.parse(document.getElementById('data').textContent);
             var p = d.pods[+best.getAttribute('data-i')];
             return {i: best.getAttribute('data-i'), pod: p[1], job: p[0], node: d.machines[p[2]]};",
            json!([]),
        );
        let bar = browser.element("#test-target");
        browser.click(&bar);
        let details = browser.run(
            "var el = document.getElementById('details');
             return {hidden: el.hidden, text: el.textContent,
                     selected: !!document.querySelector('#overlay rect.sel[data-i=\"' + arguments[0] + '\"]'),
                     row: (document.querySelector('#pods tbody tr.sel') || {}).textContent || ''};",
            json!([target["i"]]),
        );
        assert_eq!(details["hidden"], false, "{name}: {details}");
        let text = details["text"].as_str().unwrap();
        for k in ["pod", "job", "node"] {
            let v = target[k].as_str().unwrap();
            assert!(text.contains(v), "{name}: details lack {k} {v}: {text}");
        }
        assert_eq!(details["selected"], true);
        assert!(
            details["row"]
                .as_str()
                .unwrap()
                .contains(target["pod"].as_str().unwrap()),
            "{name}: the table row is not marked: {details}"
        );
        if name == "burst" {
            // A pod that waited, then was bound: a click on its row shows
            // its decision trail, an attempt per block, the chosen node
            // marked and the refusals named.
            let pick = browser.run(
                "var d = JSON.parse(document.getElementById('data').textContent), n = {};
                 d.trail.forEach(function (a) { n[a[0]] = (n[a[0]] || 0) + 1; });
                 var i = d.pods.findIndex(function (p, k) { return n[k] >= 2 && p[2] >= 0; });
                 var numbers = d.trail.filter(function (a) { return a[0] === i; }).map(function (a) { return a[2]; });
                 var f = document.getElementById('pod-filter');
                 f.value = d.pods[i][1]; f.dispatchEvent(new Event('input'));
                 // The details panel of the last click must not cover the row.
                 document.getElementById('details').hidden = true;
                 document.querySelector('#pods tbody tr').scrollIntoView({block: 'center'});
                 return {i: i, attempts: n[i], last: numbers[numbers.length - 1], pod: d.pods[i][1], node: d.machines[d.pods[i][2]]};",
                json!([]),
            );
            let i = pick["i"].as_u64().unwrap();
            browser.click(&browser.element(&format!("#pods tbody tr[data-i=\"{i}\"]")));
            let trail = browser.run(
                "var t = document.getElementById('trail');
                 if (!t) return null;
                 var blocks = t.querySelectorAll('div.attempt');
                 var last = blocks[blocks.length - 1];
                 return {blocks: blocks.length,
                         heads: [...t.querySelectorAll('h4')].map(function (h) { return h.textContent; }),
                         chosen: (last.querySelector('tr.chosen') || {}).textContent || '',
                         refused: [...t.querySelectorAll('tr.refused')].map(function (r) { return r.textContent; }),
                         cell: document.querySelector('#pods tbody tr.sel').lastChild.textContent};",
                json!([]),
            );
            assert!(trail.is_object(), "no trail shown for {pick}");
            assert_eq!(trail["blocks"], pick["attempts"], "{trail}");
            let heads = trail["heads"].as_array().unwrap();
            let node = pick["node"].as_str().unwrap();
            assert!(
                heads
                    .last()
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("bound to {node}")),
                "{trail}"
            );
            assert!(
                heads[0]
                    .as_str()
                    .unwrap()
                    .contains("not scheduled: 0/16 nodes are available"),
                "{trail}"
            );
            assert!(
                trail["chosen"].as_str().unwrap().starts_with(node),
                "{trail}"
            );
            assert!(
                trail["refused"].as_array().unwrap().iter().any(|r| r
                    .as_str()
                    .unwrap()
                    .contains("NodeResourcesFit: Insufficient cpu")),
                "{trail}"
            );
            assert_eq!(
                trail["cell"],
                json!(format!("{} attempts", pick["last"])),
                "{trail}"
            );
            browser.screenshot(&shots.join("burst-trail.png"));
            browser.run(
                "var f = document.getElementById('pod-filter');
                 f.value = ''; f.dispatchEvent(new Event('input')); return null;",
                json!([]),
            );
        }
        if name == "gang" {
            // Colour by queue: the bars take their queue's colour, the
            // queue legend shows; the queue panels are drawn.
            let colours = browser.run(
                "var before = getComputedStyle(document.querySelector('#gantt rect.b.q1')).fill;
                 var r = document.querySelector('input[name=\"colour-by\"][value=\"queue\"]');
                 r.click();
                 var fill = function (q) { return getComputedStyle(document.querySelector('#gantt rect.b.' + q)).fill; };
                 var out = {by_queue: document.getElementById('gantt').classList.contains('by-queue'),
                            legend: !document.getElementById('legend-queue').hidden,
                            outcome_legend: !document.getElementById('legend-outcome').hidden,
                            q1: fill('q1'), q2: fill('q2'), before: before,
                            lanes: document.querySelectorAll('#queues svg.qlane').length,
                            rows: document.querySelectorAll('#queues table tbody tr').length};
                 document.getElementById('queues').scrollIntoView();
                 return out;",
                json!([]),
            );
            assert_eq!(colours["by_queue"], true, "{colours}");
            assert_eq!(colours["legend"], true, "{colours}");
            assert_eq!(colours["outcome_legend"], false, "{colours}");
            assert_ne!(colours["q1"], colours["q2"], "{colours}");
            assert_ne!(colours["q1"], colours["before"], "{colours}");
            assert_eq!(colours["lanes"], 4, "{colours}");
            assert_eq!(colours["rows"], 2, "{colours}");
            browser.screenshot(&shots.join("gang-queues.png"));
            browser.run(
                "var r = document.querySelector('input[name=\"colour-by\"][value=\"outcome\"]');
                 r.click(); window.scrollTo(0, 0); return null;",
                json!([]),
            );
        }
        browser.screenshot(&shots.join(format!("{name}.png")));
        let section = browser.element("#machines");
        browser.element_screenshot(&section, &shots.join(format!("{name}-machines.png")));

        // Zoom: the Gantt and the charts under it show half the run.
        browser.click(&browser.element("#zoom-in"));
        let views = browser.run(
            "return [...document.querySelectorAll('svg.timeview')].map(function (v) {
               return v.viewBox.baseVal.width; });",
            json!([]),
        );
        let widths = views.as_array().unwrap();
        assert!(widths.len() >= 2, "{name}: {views}");
        for w in widths {
            assert_eq!(w.as_f64().unwrap(), 5000.0, "{name}: {views}");
        }

        // A click on a table row selects that pod's bar; the filter keeps
        // the rows that match.
        browser.click(&browser.element("#zoom-reset"));
        let last = pods.len() - 1;
        let row = browser.element(&format!("#pods tbody tr[data-i=\"{last}\"] td"));
        browser.click(&row);
        let sel = browser.run(
            "var s = document.querySelector('#gantt rect.sel');
             return s ? s.getAttribute('data-i') : null;",
            json!([]),
        );
        if !pods[last]["node"].is_empty() {
            assert_eq!(sel, json!(last.to_string()), "{name}");
        }
        let filtered = browser.run(
            "var f = document.getElementById('pod-filter');
             f.value = arguments[0]; f.dispatchEvent(new Event('input'));
             return document.querySelectorAll('#pods tbody tr').length;",
            json!([pods[0]["pod"]]),
        );
        let q = pods[0]["pod"].to_lowercase();
        let expect = pods
            .iter()
            .filter(|p| {
                [
                    "job_id",
                    "pod",
                    "node",
                    "last_unschedulable_reason",
                    "outcome",
                    "group",
                    "queue",
                ]
                .iter()
                .any(|k| p[*k].to_lowercase().contains(&q))
            })
            .count();
        assert_eq!(filtered, json!(expect), "{name}: filtering on {q}");
    }

    // A large run's bars are paths: every pod still drawn, and a click at a
    // bar's place shows its pod.
    let paths_page = r.outage.join("report-paths.html");
    let o = batkube()
        .arg("report")
        .arg(&r.outage)
        .arg("-o")
        .arg(&paths_page)
        .args(["--max-bar-elements", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    browser.open(&paths_page);
    let pods = pods_csv(&r.outage);
    let target = browser.run(
        "var d = JSON.parse(document.getElementById('data').textContent);
         var n = 0, best = null, bw = -1, gantt = document.getElementById('gantt');
         document.getElementById('gantt-scroll').scrollIntoView();
         document.querySelectorAll('#gantt path.b').forEach(function (p) {
           var ids = p.getAttribute('data-i').split(' '), v = p.getAttribute('d').match(/-?\\d+(?:\\.\\d+)?/g);
           n += ids.length;
           for (var k = 0; k < ids.length; k++) {
             if (+v[5 * k + 1] < 60 && +v[5 * k + 2] > bw) { bw = +v[5 * k + 2]; best = [+ids[k], +v[5*k], +v[5*k+1], +v[5*k+2], +v[5*k+3]]; }
           }
         });
         var pt = gantt.createSVGPoint();
         pt.x = best[1] + best[3] / 2; pt.y = best[2] + best[4] / 2;
         var c = pt.matrixTransform(gantt.getScreenCTM());
         return {bars: n, rects: document.querySelectorAll('#gantt rect.b').length, i: best[0],
                 pod: d.pods[best[0]][1], x: c.x, y: c.y};",
        json!([]),
    );
    let with_node = pods.iter().filter(|p| !p["node"].is_empty()).count();
    assert_eq!(target["bars"], with_node, "{target}");
    assert_eq!(target["rects"], 0, "{target}");
    browser.click_at(target["x"].as_f64().unwrap(), target["y"].as_f64().unwrap());
    let details = browser.run(
        "return {text: document.getElementById('details').textContent,
                 sel: (document.querySelector('#overlay rect.sel') || {getAttribute: function () { return null; }}).getAttribute('data-i')};",
        json!([]),
    );
    assert!(
        details["text"]
            .as_str()
            .unwrap()
            .contains(target["pod"].as_str().unwrap()),
        "{target} {details}"
    );
    assert_eq!(details["sel"], json!(target["i"].to_string()));
    browser.screenshot(&shots.join("outage-paths.png"));

    // The sweep: a dot per run and metric, a click on one opens its run's page.
    browser.open(&r.sweep.join("report.html"));
    let seen = browser.run(
        "return {dots: document.querySelectorAll('circle.run').length,
                 rows: document.querySelectorAll('#runs-table tbody tr').length};",
        json!([]),
    );
    assert_eq!(seen, json!({"dots": 6, "rows": 3}));
    browser.screenshot(&shots.join("sweep.png"));
    let dot = browser.element("circle.run[data-id=\"g1\"]");
    browser.click(&dot);
    let now = browser.run(
        "return {url: location.href, title: document.title,
                 bars: document.querySelectorAll('#gantt rect.b').length};",
        json!([]),
    );
    assert!(
        now["url"]
            .as_str()
            .unwrap()
            .ends_with("runs/g1/report.html"),
        "{now}"
    );
    assert!(
        now["title"].as_str().unwrap().starts_with("batkube report"),
        "{now}"
    );
    assert_eq!(now["bars"], pods_csv(&r.gang).len(), "{now}");
    eprintln!("screenshots in {}", shots.display());
}
