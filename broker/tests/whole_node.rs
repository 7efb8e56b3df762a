//! A Batsim job that asks for no cpu or memory means what it means in
//! Batsim: each of its pods takes its machine whole (`--no-requests-means
//! whole-node`, the default), honoured by any scheduler through the API;
//! `--no-requests-means nothing` keeps pods that ask for nothing.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `n` jobs on 1, 2, 4 or 8 machines (seeded), one every 3 s, of 60 to
/// 140 s, in five profiles; `cpu` in the profiles when given, else none
/// (most Batsim workloads: Batsim's own, pybatsim's, batsched's).
fn workload(dir: &Path, n: usize, sizes: &[u32], cpu: Option<&str>) -> PathBuf {
    let mut x: u64 = 7;
    let jobs: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let res = sizes[(x >> 33) as usize % sizes.len()];
            serde_json::json!({"id": i.to_string(), "subtime": 3.0 * i as f64, "res": res,
                               "profile": format!("p{}", i % 5)})
        })
        .collect();
    let profiles: serde_json::Map<String, serde_json::Value> = (0..5)
        .map(|k| {
            let mut p = serde_json::json!({"type": "delay", "delay": 60 + 20 * k});
            if let Some(c) = cpu {
                p["cpu"] = c.into();
            }
            (format!("p{k}"), p)
        })
        .collect();
    let path = dir.join(format!("w-{n}-{}.json", cpu.unwrap_or("none")));
    let w = serde_json::json!({"nb_res": 16, "jobs": jobs, "profiles": profiles});
    std::fs::write(&path, w.to_string()).unwrap();
    path
}

/// `batkube run --standin --strict` (an overcommit fails it); its
/// summary.json and stderr.
fn run(
    out: &Path,
    platform: &str,
    workload: &Path,
    scheduler: &str,
    extra: &[&str],
) -> (serde_json::Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("run")
        .arg("--platform")
        .arg(root().join(platform))
        .arg("--workload")
        .arg(workload)
        .arg("--scheduler")
        .arg(scheduler)
        .args(["--standin", "--strict", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "batkube run failed:\n{stderr}");
    let summary =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    (summary, stderr)
}

/// pods.csv's rows: per node, (started, finished, job) of each pod that ran,
/// and per pod its cpu request.
fn pods(
    out: &Path,
) -> (
    BTreeMap<String, Vec<(f64, f64, String)>>,
    BTreeMap<String, i64>,
) {
    let mut r = csv::Reader::from_path(out.join("pods.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let (node, started, finished, job, pod, cpu) = (
        col("node"),
        col("started"),
        col("finished"),
        col("job_id"),
        col("pod"),
        col("cpu_request_m"),
    );
    let mut by_node: BTreeMap<String, Vec<(f64, f64, String)>> = BTreeMap::new();
    let mut requests = BTreeMap::new();
    for row in r.records() {
        let row = row.unwrap();
        requests.insert(row[pod].to_string(), row[cpu].parse().unwrap());
        if let (Ok(s), Ok(f)) = (row[started].parse::<f64>(), row[finished].parse::<f64>()) {
            by_node
                .entry(row[node].to_string())
                .or_default()
                .push((s, f, row[job].to_string()));
        }
    }
    (by_node, requests)
}

/// No node ever ran two jobs at once (a job's end and the next one's start
/// may be the same instant).
fn assert_one_job_per_node_at_a_time(out: &Path) {
    let (by_node, _) = pods(out);
    assert!(!by_node.is_empty());
    for (node, mut runs) in by_node {
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in runs.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "{node} ran {} ({}..{}) and {} ({}..{}) at once",
                w[0].2,
                w[0].0,
                w[0].1,
                w[1].2,
                w[1].0,
                w[1].1
            );
        }
    }
}

/// The case of the issue: 150 jobs without requests on 1, 2, 4 or 8
/// machines of the 16 one-cpu nodes. Before, Kubernetes stacked up to 85
/// on the nodes and the summary said utilisation 0.000. Now each pod
/// takes its node whole: no node runs two jobs at once, utilisation
/// counts what ran, the log says so once with the number of jobs, and the
/// run is the one of the same jobs asking for a whole node's cpu.
#[test]
fn jobs_without_requests_take_their_machines_whole() {
    let dir = tempfile::tempdir().unwrap();
    let sched = common::batkube_scheduler();
    let sched = sched.to_str().unwrap();
    let none = workload(dir.path(), 150, &[1, 2, 4, 8], None);
    let out = dir.path().join("whole");
    let (s, stderr) = run(&out, "platforms/16-node.xml", &none, sched, &[]);
    assert_eq!(s["jobs_succeeded"], 150, "{s}");
    assert_eq!(s["jobs_whole_node"], 150, "{s}");
    assert_eq!(s["overcommit_count"], 0);
    assert!(s["utilisation"].as_f64().unwrap() > 0.5, "{s}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("asked for no cpu or memory"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains("150 job(s)"), "{}", said[0]);
    assert_one_job_per_node_at_a_time(&out);
    let (_, requests) = pods(&out);
    assert!(requests.values().all(|&c| c == 1000), "{requests:?}");
    // Batsim's meaning, as a Kubernetes request: the same run.
    let one_cpu = workload(dir.path(), 150, &[1, 2, 4, 8], Some("1"));
    let explicit = dir.path().join("explicit");
    let (s1, stderr1) = run(&explicit, "platforms/16-node.xml", &one_cpu, sched, &[]);
    assert_eq!(s1["jobs_whole_node"], 0);
    assert!(!stderr1.contains("asked for no cpu or memory"), "{stderr1}");
    assert_eq!(
        std::fs::read_to_string(out.join("jobs.csv")).unwrap(),
        std::fs::read_to_string(explicit.join("jobs.csv")).unwrap()
    );
    assert_eq!(s["makespan"], s1["makespan"]);
    assert_eq!(s["utilisation"], s1["utilisation"]);
}

/// Today's meaning behind the flag: pods that ask for nothing, stacked by
/// Kubernetes (what Batsim runs as sharing), utilisation 0.
#[test]
fn no_requests_means_nothing_keeps_pods_that_ask_for_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let none = workload(dir.path(), 40, &[1, 2], None);
    let out = dir.path().join("nothing");
    let sched = common::batkube_scheduler();
    let (s, stderr) = run(
        &out,
        "platforms/16-node.xml",
        &none,
        sched.to_str().unwrap(),
        &["--no-requests-means", "nothing"],
    );
    assert_eq!(s["jobs_succeeded"], 40, "{s}");
    assert_eq!(s["jobs_whole_node"], 0);
    assert_eq!(s["utilisation"], 0.0);
    assert!(!stderr.contains("asked for no cpu or memory"), "{stderr}");
    let (by_node, requests) = pods(&out);
    assert!(requests.values().all(|&c| c == 0));
    let stacked = by_node.values().any(|runs| {
        runs.iter()
            .any(|a| runs.iter().any(|b| a.2 != b.2 && b.0 < a.1 && a.0 < b.1))
    });
    assert!(stacked, "pods asking for nothing share nodes: {by_node:?}");
}

/// Nodes that differ (platforms/heterogeneous.xml: 1 to 8 cpus): no
/// request is a whole node everywhere, so the pods carry an anti-affinity
/// against every other pod, which batkube-scheduler (gangs included) and
/// the upstream kube-scheduler honour; each pod counts as using its
/// node's cpu (pods.csv, utilisation), and `--strict` would fail a run
/// where two jobs shared a node.
#[test]
fn on_nodes_that_differ_any_scheduler_gives_each_job_its_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let cpus = hosts_cpu(&root().join("platforms/heterogeneous.xml"));
    let check = |out: &Path, jobs: u64| {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(s["jobs_succeeded"], jobs, "{s}");
        assert_eq!(s["jobs_whole_node"], jobs, "{s}");
        assert!(s["utilisation"].as_f64().unwrap() > 0.0, "{s}");
        assert_one_job_per_node_at_a_time(out);
        let (by_node, requests) = pods(out);
        let mut r = csv::Reader::from_path(out.join("pods.csv")).unwrap();
        for row in r.records() {
            let row = row.unwrap();
            let node = &row[2];
            assert_eq!(requests[&row[1]], cpus[node], "{node}: {row:?}");
        }
        // Pods of different sizes: the nodes' own.
        assert!(
            by_node
                .keys()
                .map(|n| cpus[n])
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 1
        );
    };
    let gangs = workload(dir.path(), 40, &[1, 2, 4], None);
    let ours = dir.path().join("ours");
    let sched = common::batkube_scheduler();
    run(
        &ours,
        "platforms/heterogeneous.xml",
        &gangs,
        sched.to_str().unwrap(),
        &[],
    );
    check(&ours, 40);
    // The upstream kube-scheduler (InterPodAffinity), one pod per job.
    let singles = workload(dir.path(), 30, &[1], None);
    let upstream = dir.path().join("upstream");
    let ks = common::go::go_program("kube-scheduler", false);
    run(
        &upstream,
        "platforms/heterogeneous.xml",
        &singles,
        &format!(
            "{} --kubeconfig \"$KUBECONFIG\" --leader-elect=false --secure-port=0",
            ks.display()
        ),
        &["--shim", "seccomp", "--gang", "none"],
    );
    check(&upstream, 30);
}

/// Node name -> allocatable cpu in millicores, from pods.csv's view: the
/// platform's hosts with their `cpu` property, named as nodes.
fn hosts_cpu(platform: &Path) -> BTreeMap<String, i64> {
    let out = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["platform", "validate"])
        .arg(platform)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(platform).unwrap();
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(&text, opts).unwrap();
    let mut cpus = BTreeMap::new();
    for host in doc.descendants().filter(|n| n.has_tag_name("host")) {
        let cpu = host
            .children()
            .find(|p| p.has_tag_name("prop") && p.attribute("id") == Some("cpu"))
            .and_then(|p| p.attribute("value"));
        if let (Some(id), Some(cpu)) = (host.attribute("id"), cpu) {
            cpus.insert(
                id.to_string(),
                (cpu.parse::<f64>().unwrap() * 1000.0) as i64,
            );
        }
    }
    cpus
}
