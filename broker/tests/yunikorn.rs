//! Apache YuniKorn's scheduler, unmodified (`schedulers/yunikorn/`: the
//! k8shim's `pkg/cmd/shim` with yunikorn-core, built from the published
//! modules by `schedulers/build-go.sh yunikorn-scheduler`, once per test
//! process, see `common/go.rs`), on simulated time under `batkube run`.
//!
//! Its queues come from its configuration: the ConfigMap of
//! `schedulers/yunikorn/yunikorn-configs.yaml`, installed before the run
//! with `--crds` (tenant-a guaranteed 10 cpus; tenant-b guaranteed 6, at
//! most 6). Its gangs are task groups (`--gang yunikorn`), reserved by the
//! placeholder pods YuniKorn creates itself. Checked from the outputs: every
//! job done, every gang started whole on the nodes its placeholders
//! reserved (placeholders created by the scheduler, bound, deleted, never
//! jobs of their own), tenant-b never beyond its max, no overcommit, and a
//! job naming a queue YuniKorn does not have rejected.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The yunikorn-k8shim release schedulers/yunikorn/go.mod requires.
fn pinned_release() -> String {
    let gomod = std::fs::read_to_string(root().join("schedulers/yunikorn/go.mod")).unwrap();
    gomod
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("github.com/apache/yunikorn-k8shim v")
                .map(|v| v.split_whitespace().next().unwrap().to_string())
        })
        .expect("go.mod requires github.com/apache/yunikorn-k8shim")
}

/// The build is YuniKorn's own program, stamped as its Makefile stamps it:
/// its first log line (written before it reads any configuration) names
/// the release and the core's commit.
#[test]
fn yunikorn_builds_from_its_module() {
    let bin = common::go::go_program("yunikorn-scheduler", false);
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(&bin)
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success(), "it cannot run without an API: {text}");
    let info = text
        .lines()
        .find(|l| l.contains("Build info:"))
        .unwrap_or_else(|| panic!("no build info line: {text}"));
    assert!(
        info.contains(&format!("version={} ", pinned_release())),
        "{info}"
    );
    assert!(info.contains("isPluginVersion=false"), "{info}");
    let core = info
        .split_whitespace()
        .find_map(|w| w.strip_prefix("coreSHA="))
        .unwrap();
    assert!(
        core.len() == 12 && core.chars().all(|c| c.is_ascii_hexdigit()),
        "{info}"
    );
    assert!(text.contains("no-such-kubeconfig"), "{text}");
}

/// 12 jobs of 1 to 6 machines on the 16 one-cpu nodes of
/// platforms/16-node.xml, one every 2 s (distinct seconds: YuniKorn orders a
/// queue's applications by the second their pods were created, and breaks
/// ties at random, so two gangs of one second may each reserve part of
/// what they need): the odd ones name tenant-a, the even ones none and go
/// to `--default-queue tenant-b` (at most 6 cpus). A 13th names tenant-c,
/// which YuniKorn's configuration does not have.
#[test]
fn yunikorn_runs_gangs_in_its_queues_on_simulated_time() {
    let scheduler = common::go::go_program("yunikorn-scheduler", false);
    let dir = tempfile::tempdir().unwrap();
    let res = [4, 6, 4, 3, 2, 5, 1, 3, 2, 4, 6, 1];
    let queue_of = |i: usize| if i % 2 == 1 { "tenant-a" } else { "tenant-b" };
    let mut jobs: Vec<serde_json::Value> = res
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut j = serde_json::json!({"id": (i + 1).to_string(),
                "subtime": i as f64 * 2.0, "res": r, "profile": "p"});
            if queue_of(i) == "tenant-a" {
                j["queue"] = "tenant-a".into();
            }
            j
        })
        .collect();
    let stray = format!("w0!{}", res.len() + 1);
    jobs.push(
        serde_json::json!({"id": (res.len() + 1).to_string(), "subtime": 1.0,
        "res": 2, "profile": "p", "queue": "tenant-c"}),
    );
    let w = dir.path().join("w.json");
    std::fs::write(
        &w,
        serde_json::json!({"nb_res": 16, "jobs": jobs,
            "profiles": {"p": {"type": "delay", "delay": 30, "cpu": "1"}}})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--standin", "--strict", "--gang", "yunikorn"])
        .args(["--default-queue", "tenant-b", "--give-up-after", "60"])
        .arg("--platform")
        .arg(root().join("platforms/16-node.xml"))
        .arg("--workload")
        .arg(&w)
        .arg("--crds")
        .arg(root().join("schedulers/yunikorn/yunikorn-configs.yaml"))
        .arg("--scheduler")
        .arg(scheduler.display().to_string())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let log = std::fs::read_to_string(out.join("scheduler.log")).unwrap_or_default();
    let log_tail = || {
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    assert!(
        o.status.success(),
        "{}\nscheduler.log:\n{}",
        String::from_utf8_lossy(&o.stderr),
        log_tail()
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["jobs_succeeded"], res.len(), "{s}\n{}", log_tail());
    assert_eq!(s["jobs_rejected"], 1, "{s}");
    assert_eq!(s["overcommit_count"], 0, "{s}");
    let gangs = res.iter().filter(|&&r| r > 1).count();
    assert_eq!(s["gangs_started"], gangs, "{s}");

    // pods.csv: the jobs' pods only, every gang started and ended whole,
    // tenant-b never running more than its max (6 one-cpu pods) at once.
    let pods = std::fs::read_to_string(out.join("pods.csv")).unwrap();
    let mut times: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut node_of: BTreeMap<String, String> = BTreeMap::new();
    let mut edges: Vec<(f64, i32)> = Vec::new();
    let mut stray_seen = false;
    let mut stray_reason = false;
    let mut reader = csv::Reader::from_reader(pods.as_bytes());
    for record in reader.records() {
        let record = record.unwrap();
        let f: Vec<&str> = record.iter().collect();
        let line = f.join(",");
        assert!(f[0].starts_with("w0!"), "a row of no job: {line}");
        if f[0] == stray {
            // Rejected when YuniKorn failed its pods: the first with
            // YuniKorn's own reason, its gang mates with it.
            assert!(
                f[9].starts_with("REJECTED") && f[9].contains("failed by the scheduler"),
                "{line}"
            );
            stray_reason |= f[9].contains("ApplicationRejected: failed to place application");
            stray_seen = true;
            continue;
        }
        let i: usize = f[0].trim_start_matches("w0!").parse().unwrap();
        assert_eq!(f[13], queue_of(i - 1), "{line}");
        node_of.insert(f[1].to_string(), f[2].to_string());
        times
            .entry(f[0].to_string())
            .or_default()
            .insert(format!("{}/{}", f[5], f[6]));
        if queue_of(i - 1) == "tenant-b" {
            edges.push((f[5].parse().unwrap(), 1));
            edges.push((f[6].parse().unwrap(), -1));
        }
    }
    assert!(stray_seen, "no pods.csv row for {stray}");
    assert!(
        stray_reason,
        "no pods.csv row of {stray} with YuniKorn's reason"
    );
    assert_eq!(times.len(), res.len());
    for (job, t) in &times {
        assert_eq!(t.len(), 1, "{job}: its pods started or ended apart: {t:?}");
    }
    // Ends before starts at one instant: a node freed is taken in the same instant.
    edges.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (mut running, mut peak) = (0, 0);
    for (_, d) in edges {
        running += d;
        peak = peak.max(running);
    }
    assert!(
        peak <= 6,
        "tenant-b ran {peak} pods at once, beyond its max of 6"
    );
    // queues.csv: tenant-b's quota is its max, never exceeded.
    let queues = std::fs::read_to_string(out.join("queues.csv")).unwrap();
    let b_rows: Vec<&str> = queues
        .lines()
        .filter(|l| l.split(',').nth(1) == Some("tenant-b"))
        .collect();
    assert!(!b_rows.is_empty(), "{queues}");
    for line in b_rows {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!((f[6], f[8]), ("6000", "0"), "{line}");
    }

    // YuniKorn made each gang's placeholders (`tg-<application>-<task
    // group>-…`, one per member), bound them, deleted them, and bound the
    // real pods on the nodes they had reserved.
    let timeline = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    let rows: Vec<Vec<&str>> = timeline
        .lines()
        .skip(1)
        .map(|l| l.splitn(7, ',').collect())
        .collect();
    for (i, &r) in res.iter().enumerate() {
        let app = format!("w0-{}", i + 1);
        let prefix = format!("tg-{app}-gang-");
        let mine: Vec<&Vec<&str>> = rows
            .iter()
            .filter(|row| row[3] == "Pod" && row[5].starts_with(&prefix))
            .collect();
        if r == 1 {
            assert!(mine.is_empty(), "{app}: {mine:?}");
            continue;
        }
        let verbs = |verb: &str| -> BTreeSet<&str> {
            mine.iter()
                .filter(|row| row[2] == verb)
                .map(|row| {
                    assert_eq!(row[1], "scheduler", "{app}: {row:?}");
                    row[5]
                })
                .collect()
        };
        let created = verbs("create");
        assert_eq!(created.len(), r, "{app}: placeholders {mine:?}");
        assert_eq!(verbs("delete"), created, "{app}: {mine:?}");
        assert_eq!(verbs("bind"), created, "{app}: {mine:?}");
        let reserved: BTreeSet<&str> = mine
            .iter()
            .filter(|row| row[2] == "bind")
            .map(|row| row[6].trim_start_matches("node="))
            .collect();
        let used: BTreeSet<&str> = (0..r)
            .map(|k| node_of[&format!("{app}-{k}")].as_str())
            .collect();
        assert_eq!(
            used, reserved,
            "{app}: its pods ran where its placeholders were"
        );
    }

    // YuniKorn's reason for the stray job: its placement rules found no queue.
    assert!(
        log.lines().any(|l| l.contains("\"w0-13\"")
            && l.contains("application rejected: no placement rule matched")),
        "{}",
        log_tail()
    );
}
