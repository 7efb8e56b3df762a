//! Volcano, unmodified (`schedulers/volcano/`): `vc-scheduler` and
//! `vc-controller-manager` built from the published `volcano.sh/volcano`
//! module by `schedulers/build-go.sh` (once per test process, see
//! `common/go.rs`), stamped with the module's release, with Volcano's CRDs
//! copied from the module cache.
//!
//! And under `batkube run` on simulated time, both on one clock (the
//! controller manager through `--controller`): a parallel workload in two
//! queues created by the shipped scenario (`schedulers/volcano/queues.yaml`)
//! runs to completion with `--gang volcano`, every gang started whole, the
//! jobs that name no queue in `--default-queue`'s, a queue's capability
//! never exceeded, and every PodGroup's phase written by Volcano (never by
//! the broker).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The Volcano release schedulers/volcano/go.mod requires.
fn pinned_volcano() -> String {
    let gomod = std::fs::read_to_string(root().join("schedulers/volcano/go.mod")).unwrap();
    gomod
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("require ")
                .unwrap_or(l)
                .strip_prefix("volcano.sh/volcano v")
        })
        .expect("go.mod requires volcano.sh/volcano")
        .split_whitespace()
        .next()
        .map(|v| format!("v{v}"))
        .unwrap()
}

fn yaml(path: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn volcano_builds_with_its_crds() {
    let version = pinned_volcano();
    for name in ["vc-scheduler", "vc-controller-manager"] {
        let bin = common::go::go_program(name, false);
        let v = Command::new(&bin).arg("--version").output().unwrap();
        assert!(v.status.success(), "{name}: {v:?}");
        let out = String::from_utf8_lossy(&v.stdout);
        assert!(
            out.lines()
                .any(|l| l.trim() == format!("Version: {version}")),
            "{name} --version: {out}"
        );
    }
    let crds = common::go::go_dir().join("crds/volcano");
    for (file, group, kind, scope) in [
        (
            "scheduling.volcano.sh_queues.yaml",
            "scheduling.volcano.sh",
            "Queue",
            "Cluster",
        ),
        (
            "scheduling.volcano.sh_podgroups.yaml",
            "scheduling.volcano.sh",
            "PodGroup",
            "Namespaced",
        ),
        (
            "batch.volcano.sh_jobs.yaml",
            "batch.volcano.sh",
            "Job",
            "Namespaced",
        ),
        (
            "bus.volcano.sh_commands.yaml",
            "bus.volcano.sh",
            "Command",
            "Namespaced",
        ),
        (
            "nodeinfo.volcano.sh_numatopologies.yaml",
            "nodeinfo.volcano.sh",
            "Numatopology",
            "Cluster",
        ),
        (
            "flow.volcano.sh_jobflows.yaml",
            "flow.volcano.sh",
            "JobFlow",
            "Namespaced",
        ),
        (
            "flow.volcano.sh_jobtemplates.yaml",
            "flow.volcano.sh",
            "JobTemplate",
            "Namespaced",
        ),
    ] {
        let crd = yaml(&crds.join(file));
        assert_eq!(crd["kind"], "CustomResourceDefinition", "{file}");
        assert_eq!(crd["spec"]["group"], group, "{file}");
        assert_eq!(crd["spec"]["names"]["kind"], kind, "{file}");
        assert_eq!(crd["spec"]["scope"], scope, "{file}");
    }
}

/// The command of `--scheduler` (or `--controller`) for Volcano's `bin`
/// with `args`. Its log-level socket goes in the run's directory: at its
/// default path of the machine (`/tmp/klog-socks`) tests running side by
/// side would take it from each other (see `experiments/queue_compare.py`).
fn command(bin: &Path, args: &str) -> String {
    format!(
        "DEBUG_SOCKET_DIR=\"${{KUBECONFIG%/*}}\" {} --kubeconfig \"$KUBECONFIG\" {args}",
        bin.display()
    )
}

/// The resources of the 12 jobs of [`two_queue_workload`].
const RES: [u32; 12] = [4, 6, 4, 3, 2, 5, 1, 3, 2, 4, 6, 1];

/// 12 jobs on 16 one-cpu nodes, arriving in threes every 5 s, the odd ones
/// in queue `tenant-a`, the even ones in none; a 13th names the queue
/// `tenant-c`, which does not exist.
fn two_queue_workload(dir: &Path) -> PathBuf {
    let mut jobs: Vec<serde_json::Value> = RES
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut j = serde_json::json!({"id": (i + 1).to_string(),
                "subtime": (i / 3) as f64 * 5.0, "res": r, "profile": "p"});
            if i % 2 == 1 {
                j["queue"] = "tenant-a".into();
            }
            j
        })
        .collect();
    jobs.push(
        serde_json::json!({"id": (RES.len() + 1).to_string(), "subtime": 0.0,
        "res": 2, "profile": "p", "queue": "tenant-c"}),
    );
    let w = dir.join("w.json");
    std::fs::write(
        &w,
        serde_json::json!({"nb_res": 16, "jobs": jobs,
            "profiles": {"p": {"type": "delay", "delay": 30, "cpu": "1"}}})
        .to_string(),
    )
    .unwrap();
    w
}

/// `batkube run` of workload `w` on platforms/16-node.xml under vc-scheduler
/// and vc-controller-manager, the queues of schedulers/volcano/queues.yaml,
/// `--default-queue tenant-b`, and `extra` flags.
fn run_two_queues(w: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let scheduler = common::go::go_program("vc-scheduler", false);
    let controller = common::go::go_program("vc-controller-manager", false);
    let conf = root().join("schedulers/volcano/scheduler.conf");
    Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--standin", "--strict", "--gang", "volcano"])
        .args(["--default-queue", "tenant-b", "--platform"])
        .arg(root().join("platforms/16-node.xml"))
        .arg("--workload")
        .arg(w)
        .arg("--crds")
        .arg(common::go::go_dir().join("crds/volcano"))
        .arg("--scenario")
        .arg(root().join("schedulers/volcano/queues.yaml"))
        .arg("--scheduler")
        .arg(command(
            &scheduler,
            &format!("--scheduler-conf {} --leader-elect=false", conf.display()),
        ))
        .arg("--controller")
        .arg(command(&controller, "--leader-elect=false"))
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// Three seeded runs at once, with CPU hogs beside them, under `--elide
/// idle`: one outcome. Runs side by side share the machine, and what a
/// program finds of it (a port, a socket at a fixed path) must not decide
/// its outcome: Volcano's log-level socket at `/tmp/klog-socks` did, in
/// about one batch of three in three (see `command`).
#[test]
fn seeded_volcano_runs_side_by_side_give_one_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let w = two_queue_workload(dir.path());
    let hogs = common::Hogs::start(2);
    let outs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("run{i}"))).collect();
    let results: Vec<std::process::Output> = std::thread::scope(|s| {
        let handles: Vec<_> = outs
            .iter()
            .map(|out| s.spawn(|| run_two_queues(&w, out, &["--seed", "1", "--elide", "idle"])))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    drop(hogs);
    for (o, out) in results.iter().zip(&outs) {
        assert!(
            o.status.success(),
            "{}: {}",
            out.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let read = |out: &Path, f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    for f in ["jobs.csv", "pods.csv"] {
        let first = read(&outs[0], f);
        assert!(first.lines().count() > RES.len(), "{f}:\n{first}");
        for out in &outs[1..] {
            assert_eq!(first, read(out, f), "{f} of {} differs", out.display());
        }
    }
}

/// A job that arrives after a quiet spell longer than `--give-up-after`
/// (every other job long done) gets the scheduler's time too: Volcano
/// binds at its next session, a second after the arrival, and the job
/// was rejected at its own arrival (the NASA trace's last job, submitted 6 s
/// after every other had ended, under the whole-trace run).
#[test]
fn a_job_arriving_after_a_quiet_spell_is_not_given_up_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.json");
    std::fs::write(
        &w,
        serde_json::json!({"nb_res": 16, "jobs": [
            {"id": "1", "subtime": 0.0, "res": 2, "profile": "p", "queue": "tenant-a"},
            {"id": "2", "subtime": 200.0, "res": 4, "profile": "p", "queue": "tenant-a"}],
            "profiles": {"p": {"type": "delay", "delay": 30, "cpu": "1"}}})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = run_two_queues(&w, &out, &["--give-up-after", "60"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["jobs_succeeded"], 2, "{s}");
    assert_eq!(s["jobs_rejected"], 0, "{s}");
}

/// 12 jobs on the 16 one-cpu nodes of platforms/16-node.xml, arriving in
/// threes every 5 s: the odd ones name the queue `tenant-a` (weight 2), the
/// even ones name none and go to `--default-queue tenant-b` (weight 1, at
/// most 6 cpus). tenant-b asks for 8 machines at time 0, when tenant-a asks
/// for 6 of the 16: its deserved share would give it 8, its capability 6
/// (the run checks it). A 13th job names a queue that does not exist: it
/// is rejected with the reason.
#[test]
fn volcano_runs_a_parallel_workload_in_two_queues_on_simulated_time() {
    let dir = tempfile::tempdir().unwrap();
    let res = RES;
    let queue_of = |i: usize| if i % 2 == 1 { "tenant-a" } else { "tenant-b" };
    let stray = format!("w0!{}", res.len() + 1);
    let w = two_queue_workload(dir.path());
    let out = dir.path().join("out");
    let o = run_two_queues(&w, &out, &[]);
    let log_tail = |name: &str| {
        let log = std::fs::read_to_string(out.join(name)).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    assert!(
        o.status.success(),
        "{}\nscheduler.log:\n{}\ncontroller-1.log:\n{}",
        String::from_utf8_lossy(&o.stderr),
        log_tail("scheduler.log"),
        log_tail("controller-1.log")
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        s["jobs_succeeded"],
        res.len(),
        "{s}\nscheduler.log:\n{}",
        log_tail("scheduler.log")
    );
    assert_eq!(s["jobs_rejected"], 1, "{s}");
    assert_eq!(s["overcommit_count"], 0);
    let gangs = res.iter().filter(|&&r| r > 1).count();
    assert_eq!(s["gangs_started"], gangs, "{s}");
    assert_eq!(s["partial_gang_node_seconds"], 0.0, "{s}");

    // Every gang started and ended whole; tenant-b never ran more than its
    // capability (6 one-cpu pods) at once.
    let pods = std::fs::read_to_string(out.join("pods.csv")).unwrap();
    let mut times: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut edges: Vec<(f64, i32)> = Vec::new();
    let mut ends: BTreeMap<String, f64> = BTreeMap::new();
    let mut stray_seen = false;
    for line in pods.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f[0] == stray {
            assert!(
                line.contains(r#"REJECTED: its queue ""tenant-c"" does not exist"#),
                "{line}"
            );
            stray_seen = true;
            continue;
        }
        ends.insert(f[0].to_string(), f[6].parse().unwrap());
        times
            .entry(f[0].to_string())
            .or_default()
            .insert(format!("{}/{}", f[5], f[6]));
        let i: usize = f[0].trim_start_matches("w0!").parse().unwrap();
        if queue_of(i - 1) == "tenant-b" {
            edges.push((f[5].parse().unwrap(), 1));
            edges.push((f[6].parse().unwrap(), -1));
        }
    }
    assert!(stray_seen, "no pods.csv row for {stray}");
    assert_eq!(times.len(), res.len());
    let last_end = ends.values().cloned().fold(0.0, f64::max);
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
        "tenant-b ran {peak} pods at once, beyond its capability of 6"
    );
    // queues.csv says the same: tenant-b's quota is its capability, never
    // borrowed beyond; and the rejected job's queue is no row of it.
    let queues = std::fs::read_to_string(out.join("queues.csv")).unwrap();
    let mut b_rows = 0;
    for line in queues.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert!(
            f[1] == "tenant-a" || f[1] == "tenant-b",
            "queue of a row: {line}"
        );
        if f[1] == "tenant-b" {
            b_rows += 1;
            assert_eq!((f[6], f[8]), ("6000", "0"), "{line}");
        }
    }
    assert!(b_rows > 0, "{queues}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for q in ["tenant-a", "tenant-b"] {
        assert!(
            summary["queues"][q]["jobs_finished"].as_u64().unwrap() > 0,
            "{q}"
        );
    }

    // The queues came from the scenario; each gang's PodGroup was written in
    // its queue (the named one or --default-queue's) and went through
    // Volcano's phases, written by an API client, never by the broker.
    let timeline = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    let rows: Vec<Vec<&str>> = timeline
        .lines()
        .skip(1)
        .map(|l| l.splitn(7, ',').collect())
        .collect();
    for q in ["tenant-a", "tenant-b"] {
        assert!(
            rows.iter()
                .any(|r| r[1] == "scenario" && r[2] == "create" && r[3] == "Queue" && r[5] == q),
            "no scenario row creating Queue {q}"
        );
    }
    for (i, &r) in res.iter().enumerate() {
        let group = format!("w0-{}", i + 1);
        let mine: Vec<&Vec<&str>> = rows
            .iter()
            .filter(|row| row[3] == "PodGroup" && row[5] == group)
            .collect();
        if r == 1 {
            // No gang: Volcano's controller makes its PodGroup (named after the pod's uid).
            assert!(mine.is_empty(), "{group}: {mine:?}");
            continue;
        }
        let created = format!("gang of {r} in queue {}", queue_of(i));
        assert!(
            mine.iter()
                .any(|row| row[1] == "broker" && row[2] == "create" && row[6] == created),
            "{group}: no broker row creating it with {created:?}: {mine:?}"
        );
        let phases: Vec<&str> = mine
            .iter()
            .filter(|row| row[2] == "status")
            .map(|row| {
                assert_eq!(row[1], "scheduler", "{group}: {row:?}");
                row[6]
            })
            .collect();
        let running = phases.iter().position(|p| *p == "phase=Running");
        let completed = phases.iter().position(|p| *p == "phase=Completed");
        assert!(running.is_some(), "{group}: phases {phases:?}");
        // Completed is written by vc-scheduler's next session (every
        // simulated second) after the pods end, so a gang that ends in the
        // run's last seconds has none: the run ends with the last job.
        if ends[&format!("w0!{}", i + 1)] <= last_end - 2.0 {
            assert!(
                matches!((running, completed), (Some(a), Some(b)) if a < b),
                "{group}: phases {phases:?}"
            );
        }
    }
    let singles = res.iter().filter(|&&r| r == 1).count();
    let made_by_volcano = rows
        .iter()
        .filter(|r| {
            r[1] == "vc-controller-manager"
                && r[2] == "create"
                && r[3] == "PodGroup"
                && r[5].starts_with("podgroup-")
        })
        .count();
    assert_eq!(
        made_by_volcano, singles,
        "PodGroups Volcano's controller made"
    );
}
