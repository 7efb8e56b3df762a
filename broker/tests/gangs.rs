//! Parallel jobs as gangs, end to end through `batkube run` and the
//! stand-in: a job on `res` machines is `res` pods, started by one
//! EXECUTE_JOB once all are bound, ended together; a job larger than the
//! platform is refused; a run where partly bound gangs wait for each other
//! ends as a deadlock, with its outputs. And batkube-scheduler on a
//! generated parallel workload: under `--gang coscheduling` every gang
//! starts whole, none ever holds a node half bound, and two runs agree;
//! under `--gang none` a gang's pods still get distinct nodes (its
//! anti-affinity), placed one by one.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workload(dir: &Path, jobs: &[(u32, f64, u32)]) -> PathBuf {
    // (res, subtime, delay)
    let js: Vec<serde_json::Value> = jobs
        .iter()
        .enumerate()
        .map(|(i, &(res, at, delay))| {
            serde_json::json!({"id": (i + 1).to_string(), "subtime": at, "res": res,
                "profile": format!("d{delay}")})
        })
        .collect();
    let mut profiles = serde_json::Map::new();
    for &(_, _, d) in jobs {
        profiles.insert(
            format!("d{d}"),
            serde_json::json!({"type": "delay", "delay": d, "cpu": "1"}),
        );
    }
    let w = serde_json::json!({"nb_res": 4, "jobs": js, "profiles": profiles});
    let path = dir.join("w.json");
    std::fs::write(&path, w.to_string()).unwrap();
    path
}

fn run(
    dir: &Path,
    name: &str,
    nodes: usize,
    w: &Path,
    scheduler: &str,
    extra: &[&str],
) -> (Output, PathBuf) {
    let p = common::platform(dir, nodes);
    let out = dir.join(name);
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--standin", "--platform"])
        .arg(&p)
        .arg("--workload")
        .arg(w)
        .arg("--scheduler")
        .arg(scheduler)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    (o, out)
}

/// The fields of one CSV line, `"…"` quoting (with `""`) undone: reasons
/// in pods.csv hold commas.
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    out
}

fn csv(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = fields(lines.next().unwrap());
    lines
        .map(|l| header.iter().cloned().zip(fields(l)).collect())
        .collect()
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn parallel_jobs_run_as_gangs_of_pods_started_and_ended_together() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = [
        (4, 0.0, 20),
        (2, 0.0, 10),
        (1, 0.0, 30),
        (3, 5.0, 10),
        (4, 5.0, 15),
        (1, 12.0, 5),
        (2, 12.0, 25),
    ];
    let w = workload(dir.path(), &jobs);
    let sched = common::batkube_scheduler().display().to_string();
    let (o, out) = run(
        dir.path(),
        "a",
        8,
        &w,
        &sched,
        &["--gang", "none", "--strict"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&out);
    assert_eq!(s["jobs"], 7, "a gang is one job");
    assert_eq!(s["jobs_succeeded"], 7);
    assert_eq!(s["gangs_started"], 5);
    // Batsim's own record: each job on as many distinct machines as it asked.
    for row in csv(&out.join("jobs.csv")) {
        let res: usize = row["requested_number_of_resources"].parse().unwrap();
        let alloc = batsim::IntervalSet::parse(&row["allocated_resources"]).unwrap();
        assert_eq!(
            alloc.len() as usize,
            res,
            "job {}: {}",
            row["job_id"],
            row["allocated_resources"]
        );
    }
    // One pod per machine, named after the job, started and ended together.
    let pods = csv(&out.join("pods.csv"));
    assert_eq!(pods.len(), jobs.iter().map(|j| j.0 as usize).sum::<usize>());
    let mut by_job: std::collections::BTreeMap<String, Vec<_>> = Default::default();
    for p in &pods {
        by_job.entry(p["job_id"].clone()).or_default().push(p);
    }
    for (job, ps) in &by_job {
        let n = ps.len();
        let base = ps[0]["pod"].rsplit_once('-').map(|(b, _)| b).unwrap_or("");
        if n > 1 {
            for (k, p) in ps.iter().enumerate() {
                assert_eq!(p["pod"], format!("{base}-{k}"), "{job}");
                assert_eq!(p["group"], base, "{job}");
            }
            let nodes: std::collections::BTreeSet<&str> =
                ps.iter().map(|p| p["node"].as_str()).collect();
            assert_eq!(nodes.len(), n, "{job}: pods of a gang on distinct nodes");
        }
        for p in ps {
            assert_eq!(p["started"], ps[0]["started"], "{job}: started together");
            assert_eq!(p["finished"], ps[0]["finished"], "{job}: finished together");
            assert_eq!(p["outcome"], "COMPLETED_SUCCESSFULLY");
        }
    }
}

#[test]
fn a_job_larger_than_the_platform_is_rejected_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path(), &[(5, 0.0, 10), (2, 0.0, 10)]);
    let sched = common::batkube_scheduler().display().to_string();
    let (o, out) = run(dir.path(), "r", 4, &w, &sched, &["--gang", "none"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pods = csv(&out.join("pods.csv"));
    let rejected: Vec<_> = pods.iter().filter(|p| p["job_id"] == "w0!1").collect();
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0]["outcome"].contains("asks for 5 machines; the platform has 4"),
        "{}",
        rejected[0]["outcome"]
    );
    let s = summary(&out);
    assert_eq!(s["jobs_rejected"], 1);
    assert_eq!(s["jobs_succeeded"], 1);
}

/// A "scheduler" that binds the first pod of each of two gangs of two on a
/// two-node platform and nothing else: each gang holds a node the other
/// needs. The run ends as a deadlock, with every output, and says so.
#[test]
fn partly_bound_gangs_waiting_for_each_other_end_the_run_as_a_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path(), &[(2, 0.0, 10), (2, 0.0, 10)]);
    let script = dir.path().join("binder.sh");
    std::fs::write(
        &script,
        r#"#!/bin/sh
server=$(sed -n 's/^ *server: *//p' "$KUBECONFIG")
# Watch pods, as a scheduler does (batkube waits for a watch to start).
curl -sN -o /dev/null "$server/api/v1/pods?watch=true" &
bind() {
  until curl -sf -o /dev/null "$server/api/v1/namespaces/default/pods/$1"; do :; done
  curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' \
    -d "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"$1\"},\"target\":{\"kind\":\"Node\",\"name\":\"$2\"}}" \
    "$server/api/v1/namespaces/default/pods/$1/binding"
}
bind w0-1-0 node-0
bind w0-2-0 node-1
exec tail -f /dev/null
"#,
    )
    .unwrap();
    let sched = format!("sh {}", script.display());
    let (o, out) = run(
        dir.path(),
        "d",
        2,
        &w,
        &sched,
        &[
            "--gang",
            "none",
            "--shim",
            "none",
            "--sync",
            "timeout",
            "--timeout",
            "200ms",
            "--give-up-after",
            "30",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a deadlock is not a completed run: {stderr}"
    );
    assert!(stderr.contains("deadlock"), "{stderr}");
    let s = summary(&out);
    assert_eq!(s["completed"], false);
    assert_eq!(s["end_reason"], "deadlock");
    assert!(
        s["partial_gang_node_seconds"].as_f64().unwrap() >= 2.0 * 30.0,
        "{s}"
    );
    for f in ["jobs.csv", "pods.csv", "nodes.csv", "timeline.csv"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
}

/// Deleting one pod of a running gang kills the job (one KILL_JOB), and
/// its other pods fail with it, their nodes freed; under the default
/// `--gang coscheduling` each gang's PodGroup is created before its pods.
#[test]
fn deleting_a_pod_of_a_running_gang_kills_the_whole_job() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path(), &[(3, 0.0, 100), (1, 0.0, 100)]);
    let scenario = dir.path().join("s.yaml");
    std::fs::write(
        &scenario,
        "- at: 10\n  delete: {kind: Pod, name: w0-1-1, namespace: default}\n  gracePeriodSeconds: 0\n",
    )
    .unwrap();
    let sched = common::batkube_scheduler().display().to_string();
    let (o, out) = run(
        dir.path(),
        "k",
        4,
        &w,
        &sched,
        &["--scenario", scenario.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let jobs = csv(&out.join("jobs.csv"));
    let killed = jobs.iter().find(|r| r["job_id"] == "1").unwrap();
    assert_eq!(killed["final_state"], "COMPLETED_KILLED", "{killed:?}");
    assert_eq!(killed["finish_time"], "10.000000");
    let pods = csv(&out.join("pods.csv"));
    for p in pods.iter().filter(|p| p["job_id"] == "w0!1") {
        assert_eq!(p["finished"], "10.000000", "{p:?}");
        if p["pod"] == "w0-1-1" {
            assert!(p["outcome"].starts_with("EVICTED"), "{p:?}");
        } else {
            assert!(p["outcome"].starts_with("KILLED: pod w0-1-1"), "{p:?}");
        }
    }
    let timeline = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    let group = timeline
        .find("create,PodGroup,default,w0-1,gang of 3")
        .expect("the PodGroup");
    let first_pod = timeline.find("create,Pod,default,w0-1-0").unwrap();
    assert!(group < first_pod, "the group object comes before its pods");
    assert_eq!(timeline.matches("KILL_JOB").count(), 1, "{timeline}");
}

/// 60 jobs on 1, 2, 4 or 8 machines (weights 0.4, 0.3, 0.2, 0.1), half a
/// cpu per pod, arriving every 2 s on average, on the 16 one-cpu nodes of
/// platforms/16-node.xml: two pods fit a node, so only anti-affinity keeps
/// a gang's pods apart, and gangs of 8 have to wait for room. Returns the
/// workload and its number of gangs.
fn parallel_workload(dir: &Path) -> (PathBuf, usize) {
    let w = dir.join("parallel.json");
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args([
            "workload",
            "generate",
            "-n",
            "60",
            "--res",
            "choice:1:0.4,2:0.3,4:0.2,8:0.1",
        ])
        .args([
            "--cpu",
            "500m",
            "--duration",
            "choice:20,40,60",
            "--arrival",
            "poisson:2",
        ])
        .args(["--seed", "25", "-o"])
        .arg(&w)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&w).unwrap()).unwrap();
    let gangs = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["res"].as_u64().unwrap() > 1)
        .count();
    (w, gangs)
}

fn sixteen_nodes() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../platforms/16-node.xml")
}

fn run_on(dir: &Path, name: &str, platform: &Path, w: &Path, gang: &str) -> PathBuf {
    let out = dir.join(name);
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--standin", "--strict", "--platform"])
        .arg(platform)
        .arg("--workload")
        .arg(w)
        .arg("--scheduler")
        .arg(common::batkube_scheduler())
        .args(["--gang", gang, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Pods by job, and a check that every gang's pods ran on distinct nodes,
/// started together, in Batsim's record as in batkube's.
fn gangs_on_distinct_nodes(
    out: &Path,
) -> std::collections::BTreeMap<String, Vec<std::collections::HashMap<String, String>>> {
    let mut by_job: std::collections::BTreeMap<String, Vec<_>> = Default::default();
    for p in csv(&out.join("pods.csv")) {
        by_job.entry(p["job_id"].clone()).or_default().push(p);
    }
    for (job, ps) in &by_job {
        let nodes: std::collections::BTreeSet<&str> =
            ps.iter().map(|p| p["node"].as_str()).collect();
        assert_eq!(
            nodes.len(),
            ps.len(),
            "{job}: pods of a gang share a node: {nodes:?}"
        );
        for p in ps {
            assert_eq!(p["started"], ps[0]["started"], "{job}: started apart");
            assert_eq!(p["outcome"], "COMPLETED_SUCCESSFULLY", "{job}");
        }
    }
    for row in csv(&out.join("jobs.csv")) {
        let res: usize = row["requested_number_of_resources"].parse().unwrap();
        let alloc = batsim::IntervalSet::parse(&row["allocated_resources"]).unwrap();
        assert_eq!(
            alloc.len() as usize,
            res,
            "job {}: {}",
            row["job_id"],
            row["allocated_resources"]
        );
    }
    by_job
}

/// batkube-scheduler with `--gang coscheduling`: it watches the PodGroups
/// and places each gang whole or not at all, so every job completes,
/// every gang starts, no node is ever held by a half-bound gang (while
/// gangs did have to wait: some were refused with their group's reason),
/// the run is not a deadlock, and a second run gives the same jobs.csv.
#[test]
fn batkube_scheduler_starts_every_gang_whole_under_coscheduling() {
    let dir = tempfile::tempdir().unwrap();
    let (w, gangs) = parallel_workload(dir.path());
    assert!(gangs >= 20, "the workload has {gangs} gangs");
    let platform = sixteen_nodes();
    let out = run_on(dir.path(), "cos-1", &platform, &w, "coscheduling");
    let s = summary(&out);
    assert_eq!(s["completed"], true, "{s}");
    assert_eq!(s["end_reason"], "done", "{s}");
    assert_eq!(s["jobs_succeeded"], 60, "{s}");
    assert_eq!(s["gangs_started"], gangs, "{s}");
    assert_eq!(s["partial_gang_node_seconds"], 0.0, "{s}");
    assert_eq!(s["overcommit_count"], 0, "{s}");
    let by_job = gangs_on_distinct_nodes(&out);
    let refused: Vec<&String> = by_job
        .values()
        .flatten()
        .map(|p| &p["last_unschedulable_reason"])
        .filter(|r| r.starts_with("pod group default/"))
        .collect();
    assert!(
        !refused.is_empty(),
        "no gang had to wait: the workload does not test waiting"
    );
    for r in &refused {
        assert!(r.contains(" pods fit (minMember "), "{r}");
    }

    let again = run_on(dir.path(), "cos-2", &platform, &w, "coscheduling");
    assert_eq!(
        std::fs::read_to_string(out.join("jobs.csv")).unwrap(),
        std::fs::read_to_string(again.join("jobs.csv")).unwrap(),
        "two runs of the same inputs differ"
    );
}

/// The same workload with `--gang none`: no PodGroups, plain pods with
/// their anti-affinity. InterPodAffinity still puts each gang's pods on
/// distinct nodes (two would fit a node by cpu), and every job completes;
/// but pods are placed one by one, as the default kube-scheduler does, so
/// partly bound gangs hold nodes while they wait.
#[test]
fn batkube_scheduler_spreads_a_gang_over_distinct_nodes_without_pod_groups() {
    let dir = tempfile::tempdir().unwrap();
    let (w, gangs) = parallel_workload(dir.path());
    let out = run_on(dir.path(), "none", &sixteen_nodes(), &w, "none");
    let s = summary(&out);
    assert_eq!(s["completed"], true, "{s}");
    assert_eq!(s["jobs_succeeded"], 60, "{s}");
    assert_eq!(s["gangs_started"], gangs, "{s}");
    gangs_on_distinct_nodes(&out);
    assert!(
        s["partial_gang_node_seconds"].as_f64().unwrap() > 0.0,
        "pods placed one by one leave gangs partly bound for a while: {s}"
    );
    let timeline = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    assert!(
        !timeline.contains(",PodGroup,"),
        "--gang none writes no PodGroup"
    );
}

/// Jobs naming queues: `queues.csv` has each queue's state at every
/// instant it changed, which agrees with pods.csv (the cpu a queue holds
/// at a row's time is its pods' requests bound then and not finished),
/// the quota comes from the queue object a scenario created (a Volcano
/// Queue's capability) and what is held beyond it is `borrowed`; and
/// summary.json has per-queue waits and shares. No queue, no file.
#[test]
fn queues_csv_follows_each_queue_and_agrees_with_pods_csv() {
    let dir = tempfile::tempdir().unwrap();
    // (res, subtime, delay, queue)
    let jobs = [
        (2, 0.0, 20, "a"),
        (1, 0.0, 10, "b"),
        (4, 0.0, 15, "a"),
        (1, 5.0, 30, "b"),
        (2, 5.0, 10, "b"),
        (3, 12.0, 5, "a"),
        (1, 12.0, 25, "a"),
    ];
    let js: Vec<serde_json::Value> = jobs
        .iter()
        .enumerate()
        .map(|(i, &(res, at, delay, q))| {
            serde_json::json!({"id": (i + 1).to_string(), "subtime": at, "res": res,
                "profile": format!("d{delay}"), "queue": q})
        })
        .collect();
    let mut profiles = serde_json::Map::new();
    for &(_, _, d, _) in &jobs {
        profiles.insert(
            format!("d{d}"),
            serde_json::json!({"type": "delay", "delay": d, "cpu": "1"}),
        );
    }
    let w = dir.path().join("q.json");
    std::fs::write(
        &w,
        serde_json::json!({"nb_res": 4, "jobs": js, "profiles": profiles}).to_string(),
    )
    .unwrap();
    let crd = dir.path().join("queues.yaml");
    std::fs::write(
        &crd,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
         metadata: {name: queues.scheduling.volcano.sh}\nspec:\n  group: scheduling.volcano.sh\n  scope: Cluster\n\
         \x20 names: {plural: queues, singular: queue, kind: Queue, listKind: QueueList}\n\
         \x20 versions:\n  - name: v1beta1\n    served: true\n    storage: true\n    schema:\n\
         \x20     openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n",
    )
    .unwrap();
    let scenario = dir.path().join("s.yaml");
    std::fs::write(
        &scenario,
        "- at: 0\n  create: {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: a}, spec: {weight: 1, capability: {cpu: \"2\", memory: 8Gi}}}\n",
    )
    .unwrap();
    let sched = common::batkube_scheduler().display().to_string();
    let (o, out) = run(
        dir.path(),
        "q",
        6,
        &w,
        &sched,
        &[
            "--gang",
            "none",
            "--strict",
            "--crds",
            crd.to_str().unwrap(),
            "--scenario",
            scenario.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = csv(&out.join("queues.csv"));
    assert!(!rows.is_empty());
    let index = |job: &str| job.rsplit('!').next().unwrap().parse::<usize>().unwrap() - 1;
    let queue_of = |job: &str| jobs[index(job)].3;
    let pods = csv(&out.join("pods.csv"));
    let t = |s: &str| s.parse::<f64>().unwrap();
    let mut last: std::collections::BTreeMap<String, f64> = Default::default();
    for r in &rows {
        let (time, q) = (t(&r["time"]), r["queue"].as_str());
        assert!(
            last.insert(q.to_string(), time)
                .is_none_or(|prev| prev < time),
            "one row per queue per instant, in time order"
        );
        let held: i64 = pods
            .iter()
            .filter(|p| queue_of(&p["job_id"]) == q)
            .filter(|p| !p["bound"].is_empty() && t(&p["bound"]) <= time)
            .filter(|p| p["finished"].is_empty() || t(&p["finished"]) > time)
            .map(|p| p["cpu_request_m"].parse::<i64>().unwrap())
            .sum();
        assert_eq!(r["cpu_allocated_m"].parse::<i64>().unwrap(), held, "{r:?}");
        let running = jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| j.3 == q)
            .filter(|(i, _)| {
                let p = pods.iter().find(|p| index(&p["job_id"]) == *i).unwrap();
                t(&p["started"]) <= time && t(&p["finished"]) > time
            })
            .count();
        assert_eq!(r["running"], running.to_string(), "{r:?}");
        let alloc: i64 = r["cpu_allocated_m"].parse().unwrap();
        if q == "a" {
            assert_eq!(r["cpu_quota_m"], "2000");
            assert_eq!(r["memory_quota"], (8i64 << 30).to_string());
            assert_eq!(r["cpu_borrowed_m"], (alloc - 2000).max(0).to_string());
        } else {
            assert_eq!(
                (r["cpu_quota_m"].as_str(), r["cpu_borrowed_m"].as_str()),
                ("", "")
            );
        }
    }
    for q in ["a", "b"] {
        let end = rows.iter().rev().find(|r| r["queue"] == q).unwrap();
        assert_eq!(
            (
                end["pending"].as_str(),
                end["running"].as_str(),
                end["cpu_allocated_m"].as_str()
            ),
            ("0", "0", "0")
        );
    }
    let s = summary(&out);
    let qa = &s["queues"]["a"];
    assert_eq!(qa["jobs"], 4);
    assert_eq!(qa["jobs_finished"], 4);
    assert!(qa["mean_bounded_slowdown"].as_f64().unwrap() >= 1.0);
    let shares: f64 = ["a", "b"]
        .iter()
        .map(|q| s["queues"][q]["cpu_share"].as_f64().unwrap())
        .sum();
    let util = s["utilisation"].as_f64().unwrap();
    assert!(
        shares >= util - 1e-9 && shares <= 1.0,
        "the queues hold at least what runs (pods bound before their gang starts hold too): {shares} vs {util}"
    );
    // Without queues, no queues.csv and no per-queue summary.
    let plain = workload(dir.path(), &[(1, 0.0, 5)]);
    let (o, out) = run(dir.path(), "plain", 2, &plain, &sched, &["--strict"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.join("queues.csv").exists());
    assert!(summary(&out).get("queues").is_none());
}

/// The PodGroups the broker writes leave the API with their pods: once the
/// pod GC (`--terminated-pod-gc-threshold`) has deleted every pod of a
/// gang, its group object is deleted too, as the garbage collector deletes
/// an object whose owners are all gone. Without it, every group of a long
/// trace stayed in the API (and in a gang scheduler's cache) to the end.
/// (The deletions are events a gang scheduler sees, and may retry its
/// waiting gangs on: the schedule need not be the one of a run that
/// collects nothing.)
#[test]
fn a_gangs_pod_group_leaves_the_api_with_its_last_pod() {
    let dir = tempfile::tempdir().unwrap();
    let (w, gangs) = parallel_workload(dir.path());
    let platform = sixteen_nodes();
    let kept = run_on(dir.path(), "kept", &platform, &w, "coscheduling");
    let out = dir.path().join("gc");
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--standin", "--strict", "--platform"])
        .arg(&platform)
        .arg("--workload")
        .arg(&w)
        .arg("--scheduler")
        .arg(common::batkube_scheduler())
        .args([
            "--gang",
            "coscheduling",
            "--terminated-pod-gc-threshold",
            "8",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |d: &Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    let s = summary(&out);
    assert_eq!(s["jobs_succeeded"], 60, "{s}");
    assert_eq!(s["gangs_started"], gangs, "{s}");
    assert_eq!(s["overcommit_count"], 0, "{s}");
    let timeline = read(&out, "timeline.csv");
    let deleted: Vec<&str> = timeline
        .lines()
        .filter(|l| l.contains(",broker,delete,PodGroup,default,"))
        .collect();
    // The 8 newest pods stay: at most 8 gangs keep their group.
    assert!(
        deleted.len() + 8 >= gangs && deleted.len() < gangs,
        "{} of {gangs} groups deleted",
        deleted.len()
    );
    for row in &deleted {
        let group = row.split(',').nth(5).unwrap();
        // Every pod of the group was collected before it.
        let at = timeline.find(row).unwrap();
        let pods = timeline[..at]
            .lines()
            .filter(|l| l.contains(&format!(",create,Pod,default,{group}-")))
            .count();
        assert!(pods > 1, "{row}: a group of {pods} pod(s)");
        assert!(
            !timeline[at..].contains(&format!(",Pod,default,{group}-")),
            "{row}: a pod of the group is still written to after its group left"
        );
    }
    assert!(
        read(&kept, "timeline.csv")
            .find(",delete,PodGroup,")
            .is_none(),
        "nothing is collected at the default threshold"
    );
}
