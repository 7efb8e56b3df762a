//! Kueue's controller manager, unmodified (`schedulers/kueue/`, built from
//! its Go module by `schedulers/build-go.sh kueue-manager`, once per test
//! process, see `common/go.rs`), beside the upstream kube-scheduler, on
//! simulated time: `--gang kueue` pods (what Kueue's pod webhook would
//! write, written by the broker), Kueue's CRDs from the module cache with
//! `--crds`, and the queues of `schedulers/kueue/kueue-queues.yaml` (two
//! ClusterQueues of 8 cpu in one cohort, each borrowing up to 4, one
//! LocalQueue each) created by `--scenario` at t = 0.
//!
//! Checked from the outputs only (pods.csv, summary.json): every job ends
//! as Kueue's policy says (completes, or is preempted whole when the other
//! queue reclaims its quota); at no instant does a ClusterQueue run more
//! than its nominal quota plus its borrowing limit, nor the cohort more
//! than its two nominal quotas; a gang's pods start together (Kueue admits
//! a pod group whole); a job waiting for quota shows Kueue's reason.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use batsim::rng::SplitMix64;

/// Kueue's webhook server always listens on config.yaml's port: the runs
/// of this file take turns.
static ONE_KUEUE: Mutex<()> = Mutex::new(());

/// Per ClusterQueue (LocalQueues team-a, team-b): nominal 8 cpu, borrowing
/// limit 4 (kueue-queues.yaml).
const NOMINAL_M: i64 = 8000;
const BORROW_M: i64 = 4000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// One job of a generated workload.
struct JobSpec {
    subtime: f64,
    res: u32,
    delay: u32,
    queue: &'static str,
}

/// `n` jobs, one every 4 s, of 1 to 6 pods of 30 to 120 s, 60% in team-a
/// (seed 27).
fn generated_jobs(n: usize) -> Vec<JobSpec> {
    let mut rng = SplitMix64::new(27);
    (0..n)
        .map(|i| JobSpec {
            subtime: (i * 4) as f64,
            res: *rng.pick(&[1, 1, 2, 3, 4, 6]),
            delay: *rng.pick(&[30, 60, 90, 120]),
            queue: if rng.chance(0.6) { "team-a" } else { "team-b" },
        })
        .collect()
}

fn workload(dir: &Path, jobs: &[JobSpec]) -> PathBuf {
    let mut profiles = serde_json::Map::new();
    let list: Vec<serde_json::Value> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let p = format!("d{}", j.delay);
            profiles.insert(
                p.clone(),
                serde_json::json!({"type": "delay", "delay": j.delay, "cpu": "1", "memory": "1Gi"}),
            );
            serde_json::json!({"id": (i + 1).to_string(), "subtime": j.subtime,
                "res": j.res, "profile": p, "queue": j.queue})
        })
        .collect();
    let w = dir.join("w.json");
    std::fs::write(
        &w,
        serde_json::json!({"nb_res": 16, "jobs": list, "profiles": profiles}).to_string(),
    )
    .unwrap();
    w
}

/// A pods.csv row.
struct PodRow {
    job: String,
    started: Option<f64>,
    finished: Option<f64>,
    reason: String,
    outcome: String,
    cpu_m: i64,
}

/// pods.csv, read with its quoted fields (Kueue's reasons have commas).
fn pods(out: &Path) -> Vec<PodRow> {
    let text = std::fs::read_to_string(out.join("pods.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = split_csv(lines.next().unwrap());
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (job, started, finished, reason, outcome, cpu) = (
        col("job_id"),
        col("started"),
        col("finished"),
        col("last_unschedulable_reason"),
        col("outcome"),
        col("cpu_request_m"),
    );
    lines
        .map(|l| {
            let f = split_csv(l);
            PodRow {
                job: f[job].clone(),
                started: f[started].parse().ok(),
                finished: f[finished].parse().ok(),
                reason: f[reason].clone(),
                outcome: f[outcome].clone(),
                cpu_m: f[cpu].parse().unwrap(),
            }
        })
        .collect()
}

fn split_csv(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

/// Runs the workload under Kueue and kube-scheduler with `scenario`;
/// returns the output directory and summary.json.
fn run(dir: &Path, w: &Path, scenario: &Path) -> (PathBuf, serde_json::Value) {
    run_with(dir, w, scenario, "out", &[])
}

fn run_with(
    dir: &Path,
    w: &Path,
    scenario: &Path,
    name: &str,
    extra: &[&str],
) -> (PathBuf, serde_json::Value) {
    let scheduler = common::go::go_program("kube-scheduler", false);
    let kueue = common::go::go_program("kueue-manager", false);
    let _one = ONE_KUEUE.lock().unwrap_or_else(|e| e.into_inner());
    let out = dir.join(name);
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .current_dir(root())
        .args(["run", "--standin", "--strict", "--gang", "kueue"])
        .args(extra)
        .arg("--platform")
        .arg(root().join("platforms/16-node.xml"))
        .arg("--workload")
        .arg(w)
        .arg("--crds")
        .arg(common::go::go_dir().join("crds/kueue"))
        .arg("--scenario")
        .arg(scenario)
        .arg("--scheduler")
        .arg(format!(
            "{} --kubeconfig \"$KUBECONFIG\" --leader-elect=false --secure-port=0",
            scheduler.display()
        ))
        .arg("--controller")
        .arg(format!(
            "schedulers/kueue/run.sh {} --config schedulers/kueue/config.yaml",
            kueue.display()
        ))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let log = |name: &str| {
        let text = std::fs::read_to_string(out.join(name)).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    assert!(
        o.status.success(),
        "{}\nthe end of controller-1.log (Kueue):\n{}",
        String::from_utf8_lossy(&o.stderr),
        log("controller-1.log")
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    (out, s)
}

/// The quota checks, from pods.csv: at every instant, each queue's running
/// cpu is within nominal + borrowing limit and the cohort's within the two
/// nominal quotas; each gang's pods started (and ended) together. Returns
/// the largest cpu a queue ran at once, per queue.
fn check_quota_and_gangs(
    rows: &[PodRow],
    queue_of: &BTreeMap<String, &str>,
) -> BTreeMap<String, i64> {
    // (time, +/- cpu, queue): ends before starts at one instant.
    let mut steps: Vec<(f64, i64, &str)> = Vec::new();
    let mut by_job: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for r in rows {
        let (Some(s), Some(f)) = (r.started, r.finished) else {
            continue;
        };
        let q = queue_of[&r.job];
        steps.push((s, r.cpu_m, q));
        steps.push((f, -r.cpu_m, q));
        by_job
            .entry(&r.job)
            .or_default()
            .insert(format!("{s:.6}/{f:.6}"));
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut running: BTreeMap<&str, i64> = BTreeMap::new();
    let mut peak: BTreeMap<String, i64> = BTreeMap::new();
    for (t, d, q) in steps {
        let r = running.entry(q).or_default();
        *r += d;
        let now = *r;
        let p = peak.entry(q.to_string()).or_default();
        *p = (*p).max(now);
        assert!(
            now <= NOMINAL_M + BORROW_M,
            "at {t}: {q} runs {now}m cpu, over its nominal quota plus borrowing limit"
        );
        let total: i64 = running.values().sum();
        assert!(
            total <= 2 * NOMINAL_M,
            "at {t}: the cohort runs {total}m cpu"
        );
    }
    for (job, times) in by_job {
        assert_eq!(
            times.len(),
            1,
            "{job}: its pods started or ended apart: {times:?}"
        );
    }
    peak
}

fn queues_of(jobs: &[JobSpec]) -> BTreeMap<String, &'static str> {
    jobs.iter()
        .enumerate()
        .map(|(i, j)| (format!("w0!{}", i + 1), j.queue))
        .collect()
}

#[test]
fn kueue_manager_builds_with_its_crds() {
    let bin = common::go::go_program("kueue-manager", false);
    assert!(bin.is_file());
    let crds = common::go::go_dir().join("crds/kueue");
    let mut kinds = BTreeSet::new();
    for e in std::fs::read_dir(&crds).unwrap() {
        let path = e.unwrap().path();
        let crd: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            crd["kind"],
            "CustomResourceDefinition",
            "{}",
            path.display()
        );
        assert_eq!(crd["spec"]["group"], "kueue.x-k8s.io");
        // Kueue reads and writes v1beta2; batkube converts by rewriting
        // apiVersion, so no conversion webhook may be asked for.
        assert!(crd["spec"]["conversion"].is_null(), "{}", path.display());
        kinds.insert(crd["spec"]["names"]["kind"].as_str().unwrap().to_string());
    }
    for k in [
        "ClusterQueue",
        "LocalQueue",
        "ResourceFlavor",
        "Workload",
        "Cohort",
    ] {
        assert!(
            kinds.contains(k),
            "no {k} CRD in {}: {kinds:?}",
            crds.display()
        );
    }
}

/// Without preemption (the shipped queues with `reclaimWithinCohort` and
/// `withinClusterQueue` set to Never): a generated workload of 20 jobs on
/// 1 to 6 machines, 60 % for team-a, all complete; team-a borrows (runs
/// over its nominal 8 cpu) but never over 12; jobs wait for quota with
/// Kueue's reason in pods.csv. A 21st job names a LocalQueue that does
/// not exist: Kueue says so, and the broker rejects it at the end.
#[test]
fn kueue_admits_two_queues_within_their_quotas_and_borrows() {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = generated_jobs(20);
    jobs.push(JobSpec {
        subtime: 10.0,
        res: 2,
        delay: 30,
        queue: "nope",
    });
    let w = workload(dir.path(), &jobs);
    let shipped =
        std::fs::read_to_string(root().join("schedulers/kueue/kueue-queues.yaml")).unwrap();
    assert_eq!(shipped.matches("reclaimWithinCohort: Any").count(), 2);
    let scenario = dir.path().join("queues.yaml");
    std::fs::write(
        &scenario,
        shipped
            .replace("reclaimWithinCohort: Any", "reclaimWithinCohort: Never")
            .replace(
                "withinClusterQueue: LowerPriority",
                "withinClusterQueue: Never",
            ),
    )
    .unwrap();
    let (out, s) = run(dir.path(), &w, &scenario);
    assert_eq!(s["jobs_succeeded"], 20, "{s}");
    assert_eq!(s["jobs_rejected"], 1, "{s}");
    assert_eq!(s["overcommit_count"], 0);
    let rows = pods(&out);
    for r in rows.iter().filter(|r| r.job == "w0!21") {
        assert_eq!(
            r.reason,
            "Kueue Inadmissible: LocalQueue nope doesn't exist"
        );
        assert!(r.outcome.starts_with("REJECTED"), "{}", r.outcome);
    }
    let peak = check_quota_and_gangs(&rows, &queues_of(&jobs));
    assert!(
        peak["team-a"] > NOMINAL_M,
        "team-a never borrowed (peaks {peak:?}): the workload does not test borrowing"
    );
    let waited: Vec<&PodRow> = rows
        .iter()
        .filter(|r| r.reason.starts_with("Kueue Pending: "))
        .collect();
    assert!(
        !waited.is_empty(),
        "no pod shows Kueue's reason for waiting"
    );
    assert!(
        waited
            .iter()
            .any(|r| r.reason.contains("insufficient unused quota")),
        "{}",
        waited[0].reason
    );
}

/// With the shipped queues (a ClusterQueue reclaims what it lent by
/// preempting the borrower): team-a fills 12 cpu with three 4-pod jobs
/// (8 nominal + 4 borrowed), then team-b asks for its nominal 8 with two
/// 4-pod jobs while 4 cpu are free: Kueue preempts one of team-a's gangs,
/// whole (its job killed), and team-b's jobs run. Every other job
/// completes; no queue runs over its limits at any instant.
#[test]
fn kueue_reclaims_lent_quota_by_preempting_a_whole_gang() {
    let dir = tempfile::tempdir().unwrap();
    let mut jobs: Vec<JobSpec> = (0..3)
        .map(|_| JobSpec {
            subtime: 0.0,
            res: 4,
            delay: 300,
            queue: "team-a",
        })
        .collect();
    for _ in 0..2 {
        jobs.push(JobSpec {
            subtime: 20.0,
            res: 4,
            delay: 60,
            queue: "team-b",
        });
    }
    let w = workload(dir.path(), &jobs);
    let (out, s) = run(
        dir.path(),
        &w,
        &root().join("schedulers/kueue/kueue-queues.yaml"),
    );
    let rows = pods(&out);
    check_quota_and_gangs(&rows, &queues_of(&jobs));
    let outcome = |job: &str| -> BTreeSet<String> {
        rows.iter()
            .filter(|r| r.job == job)
            .map(|r| r.outcome.clone())
            .collect()
    };
    let preempted: Vec<String> = (1..=3)
        .map(|i| format!("w0!{i}"))
        .filter(|j| !outcome(j).contains("COMPLETED_SUCCESSFULLY"))
        .collect();
    assert_eq!(
        preempted.len(),
        1,
        "team-a's jobs: {:?}",
        (1..=3)
            .map(|i| outcome(&format!("w0!{i}")))
            .collect::<Vec<_>>()
    );
    let killed = outcome(&preempted[0]);
    assert!(killed.contains("PREEMPTED"), "{killed:?}");
    // Killed at the reclaim, not later: all four pods ended at 20 s.
    for r in rows.iter().filter(|r| r.job == preempted[0]) {
        assert_eq!(r.finished, Some(20.0), "{}: {}", r.job, r.outcome);
    }
    // Once the preempted group's pods are gone, the garbage collector
    // deletes their Workload (the pods own it): its deletion is requested
    // by the collector, and it leaves the API when Kueue drops its
    // finalizer; left behind, it would be queued again with no pod to run.
    let timeline = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    let workload = preempted[0].replace('!', "-");
    let rows_of: Vec<&str> = timeline
        .lines()
        .filter(|l| l.contains(&format!(",Workload,default,{workload},")))
        .collect();
    let collected = rows_of
        .iter()
        .position(|l| l.contains(",garbage-collector,"));
    assert!(
        collected.is_some() && rows_of.last().is_some_and(|l| l.contains(",delete,")),
        "the Workload {workload} of the preempted gang was not collected:\n{}",
        rows_of.join("\n")
    );
    for j in ["w0!4", "w0!5"] {
        assert_eq!(
            outcome(j),
            BTreeSet::from(["COMPLETED_SUCCESSFULLY".to_string()]),
            "{j}"
        );
    }
    assert_eq!(s["jobs_succeeded"], 4, "{s}");
    assert_eq!(s["overcommit_count"], 0);
}

/// `--seed` (hence `--deterministic`) with two programs on simulated time,
/// the upstream kube-scheduler and Kueue's controller manager (behind its
/// shell wrapper, which forks, reads pipes and waits): one thread of both
/// at a time, in the seed's order (`timeshim::Ensemble`). Two runs beside
/// CPU hogs give byte-identical jobs, pods, nodes and timeline. Before the
/// ensemble, each program was ordered on its own and they raced each
/// other: every run a different pods.csv (and the wrapper stalled the run
/// at its first `$(…)`).
#[test]
fn kueue_beside_the_kube_scheduler_with_a_seed_is_identical_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = generated_jobs(16);
    let w = workload(dir.path(), &jobs);
    let scenario = root().join("schedulers/kueue/kueue-queues.yaml");
    let flags = ["--shim", "seccomp", "--seed", "1"];
    let _hogs = common::Hogs::start(2);
    let (a, sa) = run_with(dir.path(), &w, &scenario, "a", &flags);
    let (b, _) = run_with(dir.path(), &w, &scenario, "b", &flags);
    assert_eq!(sa["overcommit_count"], 0, "{sa}");
    for f in ["jobs.csv", "pods.csv", "nodes.csv", "timeline.csv"] {
        let x = std::fs::read_to_string(a.join(f)).unwrap();
        let y = std::fs::read_to_string(b.join(f)).unwrap();
        assert!(x == y, "{f} differs between two runs with --seed 1");
    }
    check_quota_and_gangs(&pods(&a), &queues_of(&jobs));
}
