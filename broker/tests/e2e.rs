//! End to end through `batkube run`: the stand-in, the broker, fakeapi and
//! the project's scheduler (under the time shim, preloaded), one test per
//! clock policy, on small workloads.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{artifact, platform, profile_dir};

fn scheduler() -> PathBuf {
    common::batkube_scheduler()
}

fn shim_lib() -> PathBuf {
    // `cargo test` refreshes the copy in deps/; `cargo build` the top one.
    let deps = profile_dir().join("deps/libtimeshim.so");
    if deps.exists() {
        return deps;
    }
    artifact("libtimeshim.so", "timeshim")
}

/// A small spaced workload: `n` one-cpu jobs of `delay` s every `gap` s.
fn workload(dir: &Path, n: usize, gap: f64, delay: f64) -> PathBuf {
    let jobs: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({"id": (i + 1).to_string(), "subtime": i as f64 * gap,
                "walltime": 10000, "res": 1, "profile": "p"})
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
    fn summary(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.out.join("summary.json"))
            .unwrap_or_else(|e| panic!("no summary.json ({e}); stderr:\n{}", self.stderr));
        serde_json::from_str(&text).unwrap()
    }
    fn jobs_csv(&self) -> String {
        std::fs::read_to_string(self.out.join("jobs.csv")).unwrap()
    }
}

fn run(
    dir: &Path,
    name: &str,
    platform: &Path,
    workload: &Path,
    scheduler: &str,
    extra: &[&str],
) -> Run {
    let out = dir.join(name);
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("run")
        .arg("--platform")
        .arg(platform)
        .arg("--workload")
        .arg(workload)
        .arg("--scheduler")
        .arg(scheduler)
        .arg("--out")
        .arg(&out)
        .arg("--standin")
        .args(extra)
        .output()
        .unwrap();
    Run {
        ok: o.status.success(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        out,
    }
}

fn preload() -> Vec<String> {
    vec![
        "--shim".into(),
        "preload".into(),
        "--shim-lib".into(),
        shim_lib().display().to_string(),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn exact_policy_completes_without_overcommit() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 4);
    let w = workload(dir.path(), 24, 1.0, 7.0);
    let sched = scheduler().display().to_string();
    let mut extra = preload();
    extra.push("--strict".into());
    let a = run(dir.path(), "a", &p, &w, &sched, &strs(&extra));
    assert!(a.ok, "{}", a.stderr);
    let s = a.summary();
    assert_eq!(s["completed"], true);
    assert_eq!(s["overcommit_count"], 0);
    assert_eq!(s["jobs_succeeded"], 24);
    for f in [
        "jobs.csv",
        "schedule.csv",
        "pods.csv",
        "nodes.csv",
        "summary.json",
        "kubeconfig.yaml",
    ] {
        assert!(a.out.join(f).is_file(), "{f} missing");
    }
}

/// Two exact runs give the same jobs.csv, and the first wave starts at 0.
#[test]
fn exact_policy_is_reproducible() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 4);
    let w = workload(dir.path(), 24, 1.0, 7.0);
    let sched = scheduler().display().to_string();
    let extra = preload();
    let a = run(dir.path(), "a", &p, &w, &sched, &strs(&extra));
    let b = run(dir.path(), "b", &p, &w, &sched, &strs(&extra));
    assert!(a.ok && b.ok, "{}\n{}", a.stderr, b.stderr);
    assert_eq!(a.jobs_csv(), b.jobs_csv(), "two exact runs differ");
    assert!(a.jobs_csv().contains(",1,COMPLETED_SUCCESSFULLY,0.000000,"));
}

#[test]
fn timeout_policy_completes() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 4);
    let w = workload(dir.path(), 8, 2.0, 3.0);
    let sched = scheduler().display().to_string();
    let r = run(
        dir.path(),
        "t",
        &p,
        &w,
        &sched,
        &[
            "--shim",
            "none",
            "--sync",
            "timeout",
            "--timeout",
            "200ms",
            "--give-up-after",
            "100000",
        ],
    );
    assert!(r.ok, "{}", r.stderr);
    let s = r.summary();
    assert_eq!(s["completed"], true);
    assert_eq!(s["overcommit_count"], 0);
    assert_eq!(s["jobs_succeeded"], 8, "{}", r.stderr);
}

/// The 2020 prototype's model: the scheduler under the shim on a realtime
/// clock, windows closed by a timeout. Its clock runs ahead of Batsim's
/// between windows; that must not stop the run.
#[test]
fn timeout_policy_under_the_shim_completes() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 4);
    let w = workload(dir.path(), 8, 2.0, 3.0);
    let sched = scheduler().display().to_string();
    let mut extra = preload();
    extra.extend(
        [
            "--sync",
            "timeout",
            "--timeout",
            "50ms",
            "--give-up-after",
            "100000",
        ]
        .map(String::from),
    );
    let r = run(dir.path(), "ts", &p, &w, &sched, &strs(&extra));
    assert!(r.ok, "{}", r.stderr);
    let s = r.summary();
    assert_eq!(s["completed"], true);
    assert_eq!(s["overcommit_count"], 0);
    assert_eq!(s["jobs_succeeded"], 8, "{}", r.stderr);
}

#[test]
fn backoff_wakeups_are_requested() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 2);
    let w = workload(dir.path(), 6, 0.0, 5.0);
    let sched = scheduler().display().to_string();
    let r = run(
        dir.path(),
        "b",
        &p,
        &w,
        &sched,
        &[
            "--shim",
            "none",
            "--sync",
            "timeout",
            "--timeout",
            "200ms",
            "--base-timestep",
            "0.5",
            "--max-timestep",
            "4",
            "--give-up-after",
            "100000",
        ],
    );
    assert!(r.ok, "{}", r.stderr);
    let s = r.summary();
    assert_eq!(s["jobs_succeeded"], 6, "{}", r.stderr);
    assert!(s["wake_ups_requested"].as_u64().unwrap() > 0);
}

#[test]
fn fast_forward_off_still_completes() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 2);
    let w = workload(dir.path(), 4, 10.0, 2.0);
    let sched = scheduler().display().to_string();
    let mut extra = preload();
    extra.extend(["--fast-forward".into(), "false".into()]);
    let r = run(dir.path(), "f", &p, &w, &sched, &strs(&extra));
    assert!(r.ok, "{}", r.stderr);
    assert_eq!(r.summary()["jobs_succeeded"], 4);
}

/// A scheduler that never binds (its only profile serves another
/// scheduler name) is detected and the run fails with a clear message.
#[test]
fn crash_detection_with_a_scheduler_that_never_binds() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 2);
    let w = workload(dir.path(), 3, 0.0, 5.0);
    let cfg = dir.path().join("other.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: someone-else\n",
    )
    .unwrap();
    let sched = format!("{} --config {}", scheduler().display(), cfg.display());
    let mut extra = preload();
    extra.extend(["--scheduler-crash-timeout".into(), "30".into()]);
    let r = run(dir.path(), "c", &p, &w, &sched, &strs(&extra));
    assert!(!r.ok, "a scheduler that never binds must fail the run");
    assert!(r.stderr.contains("crashed or stuck"), "{}", r.stderr);
    let s = r.summary();
    assert_eq!(s["completed"], false);
    assert!(s["error"].as_str().unwrap().contains("crashed or stuck"));
}

/// The project's scheduler, unmodified, under the seccomp supervisor (its
/// clock reads become system calls once the vDSO is hidden) decides exactly
/// as when it links the shim: the same jobs.csv byte for byte.
#[test]
fn seccomp_supervisor_gives_the_linked_jobs_csv() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 4);
    let w = workload(dir.path(), 24, 1.0, 7.0);
    let sched = scheduler().display().to_string();
    let linked = run(
        dir.path(),
        "linked",
        &p,
        &w,
        &sched,
        &["--shim", "linked", "--strict"],
    );
    let seccomp = run(
        dir.path(),
        "seccomp",
        &p,
        &w,
        &sched,
        &["--shim", "seccomp", "--strict"],
    );
    assert!(linked.ok, "{}", linked.stderr);
    assert!(seccomp.ok, "{}", seccomp.stderr);
    assert_eq!(seccomp.summary()["jobs_succeeded"], 24);
    assert_eq!(
        linked.jobs_csv(),
        seccomp.jobs_csv(),
        "seccomp and linked differ"
    );
}

/// `--shim auto` (the default) takes the linked shim for a binary that
/// carries it, and `--seed` is refused outside the supervisor.
#[test]
fn shim_auto_and_seed() {
    let dir = tempfile::tempdir().unwrap();
    let p = platform(dir.path(), 2);
    let w = workload(dir.path(), 4, 1.0, 3.0);
    let sched = scheduler().display().to_string();
    let a = run(dir.path(), "auto", &p, &w, &sched, &[]);
    assert!(a.ok, "{}", a.stderr);
    let log = std::fs::read_to_string(a.out.join("summary.json")).unwrap();
    assert!(
        log.contains("\"shim\""),
        "summary.json names the shim: {log}"
    );
    assert_eq!(a.summary()["shim"], "linked");
    let s = run(
        dir.path(),
        "seed",
        &p,
        &w,
        &sched,
        &["--shim", "linked", "--seed", "3"],
    );
    assert!(!s.ok);
    assert!(
        s.stderr
            .contains("--seed works under the seccomp supervisor only"),
        "{}",
        s.stderr
    );
}

/// On a platform whose master is a `<cluster>` host, each message of the
/// broker's reply takes 0.0006 s to reach Batsim's server (50 µs up, the
/// 500 µs backbone, 50 µs down). A wake-up wanted 1 µs after a binding (the
/// kubelet's start latency) must name an instant after the message that
/// asks for it arrives; it was asked for at `now + 1 µs`, and Batsim
/// aborted ("You asked to be awaken in the past!").
#[test]
fn a_wake_up_closer_than_the_reply_takes_to_reach_batsim_is_asked_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cluster.xml");
    std::fs::write(
        &p,
        r#"<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
<zone id="AS0" routing="Full">
  <cluster id="c1" prefix="a" suffix="" radical="0-3" speed="1Gf" bw="125MBps" lat="50us"
           bb_bw="2.25GBps" bb_lat="500us"><prop id="cpu" value="1"/></cluster>
  <cluster id="c2" prefix="master_host" suffix="" radical="0-0" speed="1Gf" bw="125MBps"
           lat="50us" bb_bw="2.25GBps" bb_lat="500us"><prop id="role" value="master"/></cluster>
  <link id="backbone" bandwidth="1.25GBps" latency="500us"/>
  <zoneRoute src="c1" dst="c2" gw_src="ac1_router" gw_dst="master_hostc2_router">
    <link_ctn id="backbone"/>
  </zoneRoute>
</zone>
</platform>"#,
    )
    .unwrap();
    let w = workload(dir.path(), 12, 0.5, 3.0);
    let sched = scheduler().display().to_string();
    for start in ["0.000001", "0.0004"] {
        let r = run(
            dir.path(),
            start,
            &p,
            &w,
            &sched,
            &["--kubelet-start", start],
        );
        assert!(r.ok, "--kubelet-start {start}: {}", r.stderr);
        let s = r.summary();
        assert_eq!(s["jobs_succeeded"], 12, "--kubelet-start {start}");
    }
}

/// A job whose executor ends in the step in which another message reaches
/// Batsim's server (here a submission, 1-2 ns before the job's nominal end)
/// posts its own message just after the server sent that instant's message
/// to the broker: the server takes it first, over the compute host's route
/// (0.0002 s on platforms/16-node.xml), and the broker's reply only after
/// it. A wake-up wanted sooner (the kubelet's start, 0.1 ms after the
/// binding) was asked for before the reply could arrive, and Batsim aborted
/// ("You asked to be awaken in the past!"); found on the NASA trace under
/// YuniKorn. It is now asked for after that message; runs where no
/// executor ends so are unchanged.
#[test]
fn a_wake_up_is_asked_after_a_completion_already_on_its_way_to_batsim() {
    let dir = tempfile::tempdir().unwrap();
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../platforms/16-node.xml");
    let sched = scheduler().display().to_string();
    let mut starts = Vec::new();
    for (name, offset) in [("in-flight", -1.5e-9), ("after", 0.0)] {
        let w = dir.path().join(format!("{name}.json"));
        let workload = serde_json::json!({"nb_res": 16, "jobs": [
            {"id": "A", "subtime": 0, "res": 1, "profile": "ten"},
            {"id": "B", "subtime": 10.0001 + offset, "res": 1, "profile": "one"}],
            "profiles": {"ten": {"type": "delay", "delay": 10, "cpu": 1},
                         "one": {"type": "delay", "delay": 1, "cpu": 1}}});
        std::fs::write(&w, workload.to_string()).unwrap();
        let r = run(
            dir.path(),
            name,
            &p,
            &w,
            &sched,
            &["--kubelet-start", "0.0001"],
        );
        assert!(r.ok, "{name}: {}", r.stderr);
        let jobs = std::fs::read_to_string(r.out.join("jobs.csv")).unwrap();
        let b = jobs
            .lines()
            .find(|l| l.starts_with("B,"))
            .unwrap()
            .to_string();
        starts.push(b.split(',').nth(8).unwrap().to_string());
    }
    // In flight: B's start waits for A's message (10.0001 + 0.0002), then
    // the kubelet's start is asked for at once. Otherwise A's message comes
    // with B's submission (10.0003) and B starts 0.1 ms later.
    assert_eq!(starts, ["10.000300", "10.000400"]);
}
