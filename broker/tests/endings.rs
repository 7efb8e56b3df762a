//! Every way a `batkube run` ends: done, SIGINT, SIGTERM, the scheduler
//! killed, Batsim killed, an overcommit under --strict, the window bound
//! hit before the scheduler watched, a stalled scheduler. Each must exit
//! with its status, write jobs.csv, pods.csv, nodes.csv and summary.json
//! (with the reason and the simulated time at the end), leave no process
//! of the run behind and no file of its own outside --out (the shim's
//! clock page in /dev/shm).
//!
//! No timed assertion: the tests wait on conditions (the API reports the
//! jobs, the process exits) with generous bounds.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Generous: the machine is shared and may be loaded.
const PATIENCE: Duration = Duration::from_secs(300);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scheduler() -> PathBuf {
    common::batkube_scheduler()
}

/// A scheduler configuration with one profile.
fn config(dir: &Path, name: &str, yaml_profile: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             profiles:\n{yaml_profile}"
        ),
    )
    .unwrap();
    p
}

/// A scheduler that takes no pod of the workload (its profile serves
/// another name): with backoff wake-ups and no give-up, the run goes on
/// until something ends it.
fn idle_scheduler(dir: &Path) -> String {
    let cfg = config(dir, "other.yaml", "- schedulerName: someone-else\n");
    format!("{} --config {}", scheduler().display(), cfg.display())
}

const ENDLESS: &[&str] = &["--base-timestep", "1", "--give-up-after", "1e12"];

fn endless_standin() -> Vec<&'static str> {
    let mut v = ENDLESS.to_vec();
    v.push("--standin");
    v
}

struct Run {
    child: Child,
    out: PathBuf,
    stderr: PathBuf,
}

fn start(dir: &Path, name: &str, scheduler: &str, extra: &[&str]) -> Run {
    let out = dir.join(name);
    let stderr = dir.join(format!("{name}.stderr"));
    let child = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("run")
        .arg("--platform")
        .arg(repo().join("platforms/16-node.xml"))
        .arg("--workload")
        .arg(repo().join("workloads/200_delay170.json"))
        .arg("--scheduler")
        .arg(scheduler)
        .arg("--out")
        .arg(&out)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    Run { child, out, stderr }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The run's figures from the API's /metrics, once the API is up.
fn metrics(out: &Path) -> Option<String> {
    let kc = std::fs::read_to_string(out.join("kubeconfig.yaml")).ok()?;
    let server = kc.lines().find_map(|l| l.trim().strip_prefix("server: "))?;
    let addr = server.trim().strip_prefix("http://")?;
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Waits until the simulation is under way: the API holds every job.
fn wait_running(r: &Run) {
    wait_until("the simulation to start", || {
        metrics(&r.out).is_some_and(|m| m.lines().any(|l| l == "batkube_jobs 200"))
    });
}

/// Direct children of `pid` (every thread's).
fn children(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                v.extend(s.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
            }
        }
    }
    v
}

/// Whether our child `pid` has ended: until `finish` reaps it, an ended
/// child stays in /proc as a zombie (a run that ends before its scheduler
/// is first seen must not be waited on for the whole patience).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Live (not zombie) processes whose process group is one of `groups`.
fn live_in_groups(groups: &[u32]) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may hold spaces.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[0] != "Z" && f[0] != "X" {
            if let Ok(pgrp) = f[2].parse::<u32>() {
                if groups.contains(&pgrp) {
                    found.push(stat);
                }
            }
        }
    }
    found
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: plain system call.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "kill {pid}");
}

struct Ended {
    code: Option<i32>,
    stderr: String,
    summary: serde_json::Value,
}

/// Waits for the run to end; checks the outputs and that nothing of the
/// run is left (its children's process groups, its clock page).
fn finish(mut r: Run, groups: &[u32]) -> Ended {
    let pid = r.child.id();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = r.child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > PATIENCE {
            let _ = r.child.kill();
            panic!("batkube run did not end within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&r.stderr).unwrap();
    for f in ["jobs.csv", "pods.csv", "nodes.csv", "summary.json"] {
        assert!(r.out.join(f).is_file(), "{f} missing; stderr:\n{stderr}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.out.join("summary.json")).unwrap())
            .unwrap();
    assert!(summary["end_time"].is_number(), "{summary}");
    // The clock page (and anything else named after this run's pid).
    for dir in [PathBuf::from("/dev/shm"), std::env::temp_dir()] {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                assert!(
                    !name.starts_with(&format!("timeshim-{pid}-")),
                    "{} left behind",
                    e.path().display()
                );
            }
        }
    }
    let left = live_in_groups(groups);
    assert!(left.is_empty(), "processes left: {left:?}");
    if !summary["completed"].as_bool().unwrap() {
        // A run that failed still says how far it got, before the error.
        let line = stderr
            .find("batkube: simulation incomplete")
            .unwrap_or_else(|| panic!("no summary line:\n{stderr}"));
        let err = stderr.find("batkube: error:").expect("an error line");
        assert!(line < err, "{stderr}");
    }
    Ended {
        code: status.code(),
        stderr,
        summary,
    }
}

fn assert_reason(e: &Ended, reason: &str, code: i32) {
    assert_eq!(e.code, Some(code), "{}", e.stderr);
    assert_eq!(e.summary["completed"], false, "{}", e.summary);
    assert_eq!(e.summary["end_reason"], reason, "{}", e.summary);
    assert!(e.summary["error"].is_string(), "{}", e.summary);
}

#[test]
fn done() {
    let dir = tempfile::tempdir().unwrap();
    let e = run_to_end(
        dir.path(),
        "done",
        &scheduler().display().to_string(),
        &["--standin"],
    );
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    assert_eq!(e.summary["completed"], true);
    assert_eq!(e.summary["end_reason"], "done");
    // Real Batsim 4.2.1 ends this run at 2210.040003 too
    // (reference/batsim/under-broker/burst-16-node.jsonl).
    assert_eq!(e.summary["end_time"].as_f64(), Some(2210.040003));
    assert!(e.stderr.contains("simulation complete"), "{}", e.stderr);
}

fn interrupted(sig: i32, reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let r = start(
        dir.path(),
        reason,
        &idle_scheduler(dir.path()),
        &endless_standin(),
    );
    wait_running(&r);
    let groups = children(r.child.id());
    assert!(!groups.is_empty());
    signal(r.child.id(), sig);
    let e = finish(r, &groups);
    assert_reason(&e, reason, 128 + sig);
    assert!(e.summary["end_time"].as_f64().unwrap() >= 0.0);
    assert_eq!(e.summary["jobs"], 200);
}

#[test]
fn sigint() {
    interrupted(libc::SIGINT, "sigint");
}

#[test]
fn sigterm() {
    interrupted(libc::SIGTERM, "sigterm");
}

#[test]
fn scheduler_killed() {
    let dir = tempfile::tempdir().unwrap();
    let r = start(
        dir.path(),
        "s",
        &idle_scheduler(dir.path()),
        &endless_standin(),
    );
    wait_running(&r);
    let groups = children(r.child.id());
    assert_eq!(groups.len(), 1, "the scheduler only (stand-in in-process)");
    signal(groups[0], libc::SIGKILL);
    let e = finish(r, &groups);
    assert_reason(&e, "scheduler-exited", 1);
    assert!(
        e.stderr.contains("the scheduler process exited"),
        "{}",
        e.stderr
    );
}

/// Batsim as a separate process (the stand-in behind a script, as a real
/// Batsim would be started) killed mid-run: batkube notices within its
/// silence check, and writes jobs.csv itself since Batsim could not.
#[test]
fn batsim_killed() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("batsim");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} batsim \"$@\"\n",
            env!("CARGO_BIN_EXE_batkube")
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("tcp://127.0.0.1:{port}");
    let mut extra = ENDLESS.to_vec();
    extra.extend(["--batsim", script.to_str().unwrap()]);
    extra.extend(["--socket-endpoint", &endpoint]);
    let r = start(dir.path(), "b", &idle_scheduler(dir.path()), &extra);
    wait_running(&r);
    let groups = children(r.child.id());
    let batsim = *groups
        .iter()
        .find(|&&p| cmdline(p).contains(" batsim "))
        .unwrap_or_else(|| panic!("no Batsim among {groups:?}"));
    signal(batsim, libc::SIGKILL);
    let e = finish(r, &groups);
    assert_reason(&e, "batsim-failed", 1);
    assert!(e.stderr.contains("Batsim exited"), "{}", e.stderr);
}

#[test]
fn overcommit_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    // A scheduler that does not check resources.
    let cfg = config(
        dir.path(),
        "nofit.yaml",
        "- schedulerName: default-scheduler\n  plugins:\n    filter:\n      disabled: [{name: NodeResourcesFit}]\n",
    );
    let sched = format!("{} --config {}", scheduler().display(), cfg.display());
    let e = run_to_end(dir.path(), "o", &sched, &["--strict", "--standin"]);
    assert_reason(&e, "overcommit", 1);
    assert!(e.stderr.contains("(--strict)"), "{}", e.stderr);
}

/// A scheduler that never watches the API (here `sleep`) ends the run when
/// --window-bound runs out.
#[test]
fn window_bound() {
    let dir = tempfile::tempdir().unwrap();
    let e = run_to_end(
        dir.path(),
        "w",
        "sleep 100000",
        &["--window-bound", "2s", "--standin"],
    );
    assert_reason(&e, "window-bound", 1);
    assert!(e.stderr.contains("did not watch the API"), "{}", e.stderr);
}

/// An invariant of the run: pending pods, nothing running, no decision for
/// --scheduler-crash-timeout simulated seconds.
#[test]
fn stalled() {
    let dir = tempfile::tempdir().unwrap();
    let mut extra = ENDLESS.to_vec();
    extra.extend(["--scheduler-crash-timeout", "30", "--standin"]);
    let e = run_to_end(dir.path(), "st", &idle_scheduler(dir.path()), &extra);
    assert_reason(&e, "stalled", 1);
    assert!(e.stderr.contains("crashed or stuck"), "{}", e.stderr);
}

/// Waits for a run that ends by itself, checking its outputs and leftovers.
fn run_to_end(dir: &Path, name: &str, scheduler: &str, extra: &[&str]) -> Ended {
    let r = start(dir, name, scheduler, extra);
    let pid = r.child.id();
    let mut groups = Vec::new();
    wait_until("the scheduler to start", || {
        groups = children(pid);
        !groups.is_empty() || ended(pid)
    });
    finish(r, &groups)
}

/// A scheduler that watches the API without the shim it was said to link
/// is caught within the check's 2 s (without it, the run crawled on
/// wall-clock timeouts for minutes), with what to do.
#[test]
fn unattached_shim_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let sched = format!("env -u TIMESHIM_PAGE {}", scheduler().display());
    let e = run_to_end(dir.path(), "u", &sched, &["--shim", "linked", "--standin"]);
    assert_eq!(e.code, Some(1), "{}", e.stderr);
    assert!(
        e.stderr
            .contains("never read the clock through the time shim")
            && e.stderr.contains("--shim seccomp"),
        "{}",
        e.stderr
    );
    // Generous (the check waits 2 s): not a benchmark, a bound on "minutes".
    assert!(
        e.summary["wall_seconds"].as_f64().unwrap() < 60.0,
        "{}",
        e.summary
    );
}

/// Pods given a schedulerName the scheduler does not serve: a warning with
/// the name and what to do, while the run still goes (after 60 simulated
/// seconds, here long before the pods are given up at 600); with a profile
/// for that name, the same run completes.
#[test]
fn unserved_scheduler_name_warns() {
    let dir = tempfile::tempdir().unwrap();
    let sched = scheduler().display().to_string();
    let e = run_to_end(
        dir.path(),
        "n",
        &sched,
        &["--scheduler-name", "my-scheduler", "--standin"],
    );
    assert_eq!(e.code, Some(0), "{}", e.stderr);
    let warning = e
        .stderr
        .find("schedulerName \"my-scheduler\" have been pending")
        .unwrap_or_else(|| panic!("no warning:\n{}", e.stderr));
    assert!(e.stderr[warning..].contains("--scheduler-name NAME"));
    let given_up = e.stderr.find("rejected: still pending").expect("given up");
    assert!(
        warning < given_up,
        "the warning came after the pods were given up"
    );
    let w = e.summary["warnings"][0].as_str().unwrap();
    assert!(w.contains("60.0 simulated s"), "{w}");
    assert_eq!(e.summary["jobs_rejected"], 200);

    let cfg = config(dir.path(), "mine.yaml", "- schedulerName: my-scheduler\n");
    let sched = format!("{} --config {}", scheduler().display(), cfg.display());
    let ok = run_to_end(
        dir.path(),
        "m",
        &sched,
        &["--scheduler-name", "my-scheduler", "--standin"],
    );
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    assert_eq!(ok.summary["jobs_succeeded"], 200);
    assert_eq!(ok.summary["warnings"].as_array().unwrap().len(), 0);
}

/// `batkube serve` (Batsim and the scheduler are the user's) interrupted
/// while it waits for Batsim: its outputs are written all the same, and
/// with `--report` its page, saying how the run ended.
#[test]
fn serve_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("serve");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let stderr = dir.path().join("serve.stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["serve", "--api", "127.0.0.1:0", "--out"])
        .arg(&out)
        .args(["--socket-endpoint", &format!("tcp://127.0.0.1:{port}")])
        .arg("--report")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    wait_until("the API to be up", || metrics(&out).is_some());
    signal(child.id(), libc::SIGINT);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < PATIENCE, "serve did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&stderr).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    for f in ["pods.csv", "nodes.csv", "summary.json"] {
        assert!(out.join(f).is_file(), "{f} missing; stderr:\n{err}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["end_reason"], "sigint", "{summary}");
    assert_eq!(summary["completed"], false);
    let page = std::fs::read_to_string(out.join("report.html"))
        .unwrap_or_else(|e| panic!("no report.html ({e}); stderr:\n{err}"));
    assert!(
        page.contains("sigint"),
        "the page does not say how the run ended"
    );
    assert!(
        err.contains(&format!("report {}", out.join("report.html").display())),
        "{err}"
    );
}
