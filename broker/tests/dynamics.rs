//! Cluster dynamics end to end through `batkube run` with the stand-in and
//! the project's scheduler: machines made unavailable by Batsim's external
//! events (taints, evictions, KILL_JOB at the expected simulated times),
//! resubmission of evicted jobs, a scenario that drains a node and deletes
//! a pod (the timeline's rows), reruns, and bad inputs refused up front.

mod common;

use common::platform;

use std::path::{Path, PathBuf};
use std::process::Command;

/// `n` one-cpu jobs of `delay` s submitted at `subtimes`.
fn workload(dir: &Path, subtimes: &[f64], delay: f64) -> PathBuf {
    let jobs: Vec<serde_json::Value> = subtimes
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({"id": (i + 1).to_string(), "subtime": t,
                "walltime": 100000, "res": 1, "profile": "p"})
        })
        .collect();
    let w = serde_json::json!({"nb_res": 1, "jobs": jobs,
        "profiles": {"p": {"type": "delay", "delay": delay, "cpu": "1"}}});
    let path = dir.join("w.json");
    std::fs::write(&path, w.to_string()).unwrap();
    path
}

struct Run {
    ok: bool,
    stderr: String,
    out: PathBuf,
}

impl Run {
    fn read(&self, f: &str) -> String {
        std::fs::read_to_string(self.out.join(f))
            .unwrap_or_else(|e| panic!("{f}: {e}; stderr:\n{}", self.stderr))
    }
    fn summary(&self) -> serde_json::Value {
        serde_json::from_str(&self.read("summary.json")).unwrap()
    }
    /// jobs.csv rows as maps.
    fn jobs(&self) -> Vec<std::collections::HashMap<String, String>> {
        rows(&self.read("jobs.csv"))
    }
    fn timeline(&self) -> Vec<std::collections::HashMap<String, String>> {
        rows(&self.read("timeline.csv"))
    }
}

fn rows(text: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let h = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            h.iter()
                .zip(rec.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn run(dir: &Path, name: &str, p: &Path, w: &Path, extra: &[&str]) -> Run {
    let out = dir.join(name);
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("run")
        .arg("--platform")
        .arg(p)
        .arg("--workload")
        .arg(w)
        .arg("--scheduler")
        .arg(common::batkube_scheduler())
        .arg("--out")
        .arg(&out)
        .arg("--standin")
        .arg("--strict")
        .args(extra)
        .output()
        .unwrap();
    Run {
        ok: o.status.success(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        out,
    }
}

fn f(s: &str) -> f64 {
    s.parse().unwrap()
}

/// Four nodes, four 1000 s jobs at 0 (one per node) and two more at 5
/// that wait. Machine 0 is unavailable from 10 to 300.
fn failure_inputs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let p = platform(dir, 4);
    let w = workload(dir, &[0.0, 0.0, 0.0, 0.0, 5.0, 5.0], 1000.0);
    let e = dir.join("events.txt");
    std::fs::write(
        &e,
        "{\"type\": \"machine_unavailable\", \"resources\": \"0\", \"timestamp\": 10}\n\
         {\"type\": \"machine_available\", \"resources\": \"0\", \"timestamp\": 300}\n",
    )
    .unwrap();
    (p, w, e)
}

const FAST_LIFECYCLE: &[&str] = &[
    "--node-monitor-grace-period",
    "40s",
    "--default-unreachable-toleration-seconds",
    "60",
];

#[test]
fn an_unavailable_machine_gets_no_pods_and_its_pods_are_evicted_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let (p, w, e) = failure_inputs(dir.path());
    let mut extra = vec!["--events", e.to_str().unwrap()];
    extra.extend_from_slice(FAST_LIFECYCLE);
    let a = run(dir.path(), "a", &p, &w, &extra);
    assert!(a.ok, "{}", a.stderr);
    let jobs = a.jobs();
    // The job on machine 0 is killed when its 60 s toleration of the taint
    // (added 40 s after the machine went at 10) runs out: at 110.
    let killed: Vec<_> = jobs
        .iter()
        .filter(|j| j["final_state"] == "COMPLETED_KILLED")
        .collect();
    assert_eq!(killed.len(), 1, "{jobs:?}");
    assert_eq!(killed[0]["allocated_resources"], "0");
    assert!(
        (f(&killed[0]["finish_time"]) - 110.0).abs() < 1e-6,
        "{killed:?}"
    );
    // No job starts on machine 0 while it is out, and it gets one when back.
    for j in &jobs {
        let start = f(&j["starting_time"]);
        if j["allocated_resources"] == "0" {
            assert!(
                !(10.0..300.0).contains(&start),
                "{j:?} started on machine 0 at {start}"
            );
        }
    }
    // Back at 300: a waiting pod goes there (within the scheduler's
    // backoff, 10 s at most).
    assert!(
        jobs.iter()
            .any(|j| j["allocated_resources"] == "0"
                && (300.0..310.0).contains(&f(&j["starting_time"]))),
        "nothing started on machine 0 when it came back: {jobs:?}"
    );
    let tl = a.timeline();
    let row = |source: &str, verb: &str, name: &str| {
        tl.iter()
            .find(|r| r["source"] == source && r["verb"] == verb && r["name"] == name)
            .map(|r| f(&r["time"]))
    };
    assert_eq!(row("batsim", "machine-unavailable", "node-0"), Some(10.0));
    assert_eq!(row("broker", "taint", "node-0"), Some(50.0));
    assert_eq!(row("broker", "untaint", "node-0"), Some(300.0));
    let evicted = killed[0]["job_id"].clone();
    assert_eq!(
        row("broker", "delete", &format!("w0-{evicted}")),
        Some(110.0)
    );
    assert_eq!(
        row("broker", "KILL_JOB", &format!("w0!{evicted}")),
        Some(110.0)
    );
    let s = a.summary();
    assert_eq!(s["evictions"], 1);
    assert_eq!(s["lost_work_seconds"], 110.0);
}

#[test]
fn evicted_jobs_are_resubmitted_and_all_work_gets_done() {
    let dir = tempfile::tempdir().unwrap();
    let (p, w, e) = failure_inputs(dir.path());
    let mut extra = vec!["--events", e.to_str().unwrap(), "--resubmit-evicted"];
    extra.extend_from_slice(FAST_LIFECYCLE);
    let a = run(dir.path(), "a", &p, &w, &extra);
    assert!(a.ok, "{}", a.stderr);
    let jobs = a.jobs();
    for id in 1..=6 {
        let done = jobs.iter().any(|j| {
            let jid = &j["job_id"];
            (jid == &id.to_string() || jid.starts_with(&format!("{id}-r")))
                && j["final_state"] == "COMPLETED_SUCCESSFULLY"
                && (f(&j["execution_time"]) - 1000.0).abs() < 1e-3
        });
        assert!(done, "job {id}'s work was never done: {jobs:?}");
    }
    let s = a.summary();
    assert_eq!(s["resubmissions"], 1, "{s}");
    assert_eq!(s["completed"], true);
}

#[test]
fn a_scenario_drains_a_node_and_deletes_a_pod_and_reruns_are_identical() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 4);
    let w = workload(dir.path(), &[0.0, 0.0, 0.0, 0.0, 1.0, 1.0], 100.0);
    let sc = dir.path().join("scenario.yaml");
    std::fs::write(
        &sc,
        "# maintenance of node-1\n\
         - at: 20\n  drain: node-1\n  gracePeriodSeconds: 10\n\
         - at: 40\n  delete: {kind: Pod, name: w0-3}\n  gracePeriodSeconds: 0\n\
         - at: 250\n  uncordon: node-1\n",
    )
    .unwrap();
    let a = run(
        dir.path(),
        "a",
        &p,
        &w,
        &["--scenario", sc.to_str().unwrap()],
    );
    assert!(a.ok, "{}", a.stderr);
    let pods = rows(&a.read("pods.csv"));
    let on1 = pods
        .iter()
        .find(|r| r["node"] == "node-1" && r["started"] == "0.000000")
        .unwrap_or_else(|| panic!("no pod started on node-1 at 0: {pods:?}"))["pod"]
        .clone();
    let tl = a.timeline();
    let has = |time: f64, source: &str, verb: &str, kind: &str, name: &str| {
        tl.iter().any(|r| {
            (f(&r["time"]) - time).abs() < 1e-6
                && r["source"] == source
                && r["verb"] == verb
                && r["kind"] == kind
                && r["name"] == name
        })
    };
    let show = a.read("timeline.csv");
    assert!(has(20.0, "scenario", "drain", "Node", "node-1"), "{show}");
    assert!(has(20.0, "scenario", "evict", "Pod", &on1), "{show}");
    // The grace period runs out: the kubelet kills it.
    assert!(has(30.0, "kubelet", "delete", "Pod", &on1), "{show}");
    let on1_job = on1.replacen('-', "!", 1);
    assert!(
        has(30.0, "broker", "KILL_JOB", "batsim", &on1_job),
        "{show}"
    );
    if on1 != "w0-3" {
        assert!(has(40.0, "scenario", "delete", "Pod", "w0-3"), "{show}");
        assert!(has(40.0, "broker", "KILL_JOB", "batsim", "w0!3"), "{show}");
    }
    // Cordoned from 20 to 250: nothing starts on node-1 (resource 1) then.
    for j in a.jobs() {
        let start = f(&j["starting_time"]);
        if j["allocated_resources"] == "1" {
            assert!(!(20.0..250.0).contains(&start), "{j:?}");
        }
    }
    let b = run(
        dir.path(),
        "b",
        &p,
        &w,
        &["--scenario", sc.to_str().unwrap()],
    );
    assert!(b.ok, "{}", b.stderr);
    assert_eq!(a.read("timeline.csv"), b.read("timeline.csv"));
    assert_eq!(a.read("jobs.csv"), b.read("jobs.csv"));
}

#[test]
fn bad_scenarios_and_events_are_refused_before_the_simulation_with_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 2);
    let w = workload(dir.path(), &[0.0], 10.0);
    let sc = dir.path().join("bad.yaml");
    std::fs::write(&sc, "- at: 5\n  cordon: node-0\n- at: 6\n  drain: node-7\n").unwrap();
    let a = run(
        dir.path(),
        "a",
        &p,
        &w,
        &["--scenario", sc.to_str().unwrap()],
    );
    assert!(!a.ok);
    assert!(
        a.stderr.contains("bad.yaml:3: unknown node \"node-7\""),
        "{}",
        a.stderr
    );
    assert!(!a.out.join("jobs.csv").exists(), "the simulation started");
    let e = dir.path().join("bad-events.txt");
    std::fs::write(
        &e,
        "{\"type\": \"machine_unavailable\", \"resources\": \"0\", \"timestamp\": 1}\n\
         {\"type\": \"machine_unavailable\", \"resources\": \"5\", \"timestamp\": 2}\n",
    )
    .unwrap();
    let b = run(dir.path(), "b", &p, &w, &["--events", e.to_str().unwrap()]);
    assert!(!b.ok);
    assert!(b.stderr.contains("bad-events.txt:2:"), "{}", b.stderr);
}

/// The stand-in plays an events file as Batsim 4.2.1 does: NOTIFY per
/// event, the events of one instant in one message (available before
/// unavailable), `no_more_external_event_to_occur` after the last batch,
/// and the end only after it.
#[test]
fn the_standin_sends_external_events_as_batsim_does() {
    use batkube::batsim::platform::Platform;
    use batkube::batsim::protocol::{build, EventData, Message};
    use batkube::batsim::standin::{Options, StandIn};
    use batkube::batsim::workload::Workload;
    use batkube::batsim::IntervalSet;

    let dir = tempfile::tempdir().unwrap();
    let p = Platform::from_file(&platform(dir.path(), 4)).unwrap();
    let w = Workload::from_file(&workload(dir.path(), &[0.0], 50.0), "w0").unwrap();
    let e = dir.path().join("events.txt");
    std::fs::write(
        &e,
        "{\"type\": \"machine_available\", \"resources\": \"2-3\", \"timestamp\": 30}\n\
         {\"type\": \"machine_unavailable\", \"resources\": \"0 2\", \"timestamp\": 10}\n\
         {\"type\": \"machine_unavailable\", \"resources\": \"3\", \"timestamp\": 20}\n\
         {\"type\": \"machine_available\", \"resources\": \"0\", \"timestamp\": 20}\n",
    )
    .unwrap();
    let opts = Options {
        compute_sharing: true,
        events: vec![e],
        ..Options::default()
    };
    let sim = StandIn::new(p, vec![w], opts).unwrap();
    let mut seen: Vec<(f64, Vec<String>)> = Vec::new();
    let mut dp = |m: &Message| -> anyhow::Result<Message> {
        let mut reply = Message::new(m.now);
        let mut kinds = Vec::new();
        for ev in &m.events {
            kinds.push(match &ev.data {
                EventData::Notify(n) => match n.extra.get("resources") {
                    Some(r) => format!("{} {}", n.kind, r.as_str().unwrap()),
                    None => n.kind.clone(),
                },
                other => other.kind().to_string(),
            });
            if let EventData::JobSubmitted(s) = &ev.data {
                reply.push_now(build::execute_job(&s.job_id, IntervalSet::single(1)));
            }
        }
        seen.push((m.now, kinds));
        Ok(reply)
    };
    sim.run(&mut dp).unwrap();
    let notifies: Vec<(f64, Vec<String>)> = seen
        .iter()
        .map(|(t, k)| {
            (
                *t,
                k.iter()
                    .filter(|k| k.starts_with("event_") || k.starts_with("no_more_external"))
                    .cloned()
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, k)| !k.is_empty())
        .collect();
    let flat: Vec<(f64, String)> = notifies
        .iter()
        .flat_map(|(t, k)| k.iter().map(move |k| (*t, k.clone())))
        .collect();
    assert_eq!(
        flat,
        vec![
            (10.0, "event_machine_unavailable 0 2".to_string()),
            (20.0, "event_machine_available 0".to_string()),
            (20.0, "event_machine_unavailable 3".to_string()),
            (30.0, "event_machine_available 2-3".to_string()),
            (30.0, "no_more_external_event_to_occur".to_string()),
        ],
        "{seen:?}"
    );
    // The two events of 20 travel together.
    assert!(
        notifies.iter().any(|(t, k)| *t == 20.0 && k.len() == 2),
        "{seen:?}"
    );
    let last = seen.last().unwrap();
    assert_eq!(last.1, vec!["SIMULATION_ENDS".to_string()]);
    assert!(last.0 > 50.0);
}

/// A scenario creates objects of a kind `--crds` defines; its operations
/// of an instant come before the jobs of that instant (a queue exists when
/// the first jobs arrive), and an object its schema refuses stops the run
/// before it starts, with the scenario's line and the field.
#[test]
fn a_scenario_creates_custom_objects_before_the_jobs_of_the_same_instant() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 2);
    let w = workload(dir.path(), &[0.0, 0.0, 30.0], 10.0);
    let crd = dir.path().join("tenants.yaml");
    std::fs::write(
        &crd,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
         metadata: {name: tenants.example.org}\nspec:\n  group: example.org\n  scope: Cluster\n\
         \x20 names: {plural: tenants, singular: tenant, kind: Tenant, listKind: TenantList}\n\
         \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n\
         \x20     openAPIV3Schema:\n        type: object\n        properties:\n\
         \x20         spec:\n            type: object\n            properties:\n\
         \x20             weight: {type: integer, minimum: 1}\n",
    )
    .unwrap();
    let s = dir.path().join("s.yaml");
    std::fs::write(
        &s,
        "- at: 30\n  create: {apiVersion: example.org/v1, kind: Tenant, metadata: {name: late}, spec: {weight: 1}}\n\
         - at: 0\n  create: {apiVersion: example.org/v1, kind: Tenant, metadata: {name: a}, spec: {weight: 2}}\n",
    )
    .unwrap();
    let crd_s = crd.to_str().unwrap();
    let r = run(
        dir.path(),
        "ok",
        &p,
        &w,
        &["--crds", crd_s, "--scenario", s.to_str().unwrap()],
    );
    assert!(r.ok, "{}", r.stderr);
    let tl = r.timeline();
    let pos = |pred: &dyn Fn(&std::collections::HashMap<String, String>) -> bool| {
        tl.iter().position(|row| pred(row)).unwrap()
    };
    for (tenant, at) in [("a", "0.000000"), ("late", "30.000000")] {
        let created = pos(&|row| row["kind"] == "Tenant" && row["name"] == tenant);
        assert_eq!(tl[created]["time"], at);
        assert_eq!(tl[created]["source"], "scenario");
        let first_pod =
            pos(&|row| row["kind"] == "Pod" && row["verb"] == "create" && row["time"] == at);
        assert!(
            created < first_pod,
            "the scenario's {tenant} comes before the jobs of {at}"
        );
    }
    // Refused up front: the line and the field.
    std::fs::write(
        &s,
        "- at: 0\n  create: {apiVersion: example.org/v1, kind: Tenant, metadata: {name: a}, spec: {weight: 0}}\n",
    )
    .unwrap();
    let r = run(
        dir.path(),
        "bad",
        &p,
        &w,
        &["--crds", crd_s, "--scenario", s.to_str().unwrap()],
    );
    assert!(!r.ok);
    assert!(
        r.stderr.contains("s.yaml:1:") && r.stderr.contains("spec.weight"),
        "{}",
        r.stderr
    );
}
