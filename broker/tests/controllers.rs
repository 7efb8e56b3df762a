//! `batkube run --controller CMD`: other control-plane programs beside the
//! scheduler, on the same simulated clock. The controller here is a
//! walltime enforcer written in Python (tests/controllers/walltime.py): it
//! wakes every PERIOD simulated seconds on its own timer and deletes the
//! pods that have run LIMIT seconds. The broker must honour its timers
//! (even with nothing pending), wait for it as for the scheduler, and end
//! the run, with every output, when it exits.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const WARM_UP: f64 = 1.0; // the default --warm-up: processes start at -1 s

fn walltime() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controllers/walltime.py");
    format!("python3 {}", script.display())
}

/// Two nodes of 2 cpus: 4 jobs at once; jobs of 100 s every 7 s.
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let mut x = String::from(
        "<?xml version='1.0'?>\n<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">\n\
         <host id=\"master\" speed=\"1Gf\"><prop id=\"role\" value=\"master\"/></host>\n\
         <link id=\"lm\" bandwidth=\"1GBps\" latency=\"50us\"/>\n",
    );
    for i in 0..2 {
        x += &format!(
            "<host id=\"node-{i}\" speed=\"1Gf\"><prop id=\"cpu\" value=\"2\"/><prop id=\"memory\" value=\"4Gi\"/></host>\n\
             <link id=\"l{i}\" bandwidth=\"1GBps\" latency=\"50us\"/>\n\
             <route src=\"master\" dst=\"node-{i}\"><link_ctn id=\"lm\"/><link_ctn id=\"l{i}\"/></route>\n"
        );
    }
    x += "</zone></platform>\n";
    let p = dir.join("p.xml");
    std::fs::write(&p, x).unwrap();
    let w = dir.join("w.json");
    let st = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args([
            "workload",
            "generate",
            "-n",
            "12",
            "--arrival",
            "interval:7",
        ])
        .args(["--duration", "100", "--cpu", "1", "--seed", "1", "-o"])
        .arg(&w)
        .status()
        .unwrap();
    assert!(st.success());
    (p, w)
}

fn run(dir: &Path, name: &str, controllers: &[String], extra: &[&str]) -> (Output, PathBuf) {
    let (p, w) = inputs(dir);
    let out = dir.join(name);
    let mut c = Command::new(env!("CARGO_BIN_EXE_batkube"));
    c.args(["run", "--standin", "--platform"])
        .arg(&p)
        .arg("--workload")
        .arg(&w)
        .arg("--scheduler")
        .arg(common::batkube_scheduler())
        .arg("--out")
        .arg(&out)
        .args(extra);
    for ctl in controllers {
        c.arg("--controller").arg(ctl);
    }
    (c.output().unwrap(), out)
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// (start, finish, final state) per job of jobs.csv.
fn jobs(out: &Path) -> Vec<(f64, f64, String)> {
    let text = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (s, f, st) = (col("starting_time"), col("finish_time"), col("final_state"));
    lines
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            (
                v[s].parse().unwrap(),
                v[f].parse().unwrap(),
                v[st].to_string(),
            )
        })
        .collect()
}

/// The instant the enforcers (limit, period) delete a pod started at
/// `start`: the first poll of each (at -WARM_UP + k * period) that finds it
/// running `limit` seconds or more; the earliest of them.
fn kill_time(start: f64, enforcers: &[(f64, f64)]) -> f64 {
    enforcers
        .iter()
        .map(|&(limit, period)| {
            let k = ((start + limit + WARM_UP) / period - 1e-9).ceil();
            -WARM_UP + k * period
        })
        .fold(f64::INFINITY, f64::min)
}

fn check_kills(out: &Path, enforcers: &[(f64, f64)]) {
    let js = jobs(out);
    assert_eq!(js.len(), 12);
    for (start, finish, state) in &js {
        assert_eq!(state, "COMPLETED_KILLED", "every job outlives the walltime");
        let want = kill_time(*start, enforcers);
        assert!(
            (finish - want).abs() < 1e-6,
            "a job started at {start} ended at {finish}, not at the enforcers' poll {want}"
        );
    }
}

#[test]
fn a_controllers_timers_run_on_simulated_time_and_are_honoured_with_nothing_pending() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = run(dir.path(), "one", &[format!("{} 30 5", walltime())], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_kills(&out, &[(30.0, 5.0)]);
    let log = std::fs::read_to_string(out.join("controller-1.log")).unwrap();
    assert_eq!(log.matches("deleted").count(), 12, "{log}");
    // Its own kubeconfig, for the same API.
    let own = std::fs::read_to_string(out.join("kubeconfig-controller-1.yaml")).unwrap();
    assert!(own.contains("controller-1"), "{own}");
    // Same inputs, same outputs.
    let (o2, again) = run(dir.path(), "again", &[format!("{} 30 5", walltime())], &[]);
    assert!(o2.status.success());
    for f in ["jobs.csv", "pods.csv", "timeline.csv"] {
        assert_eq!(
            std::fs::read_to_string(out.join(f)).unwrap(),
            std::fs::read_to_string(again.join(f)).unwrap(),
            "{f} differs between two runs"
        );
    }
}

#[test]
fn several_controllers_share_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let enforcers = [(30.0, 5.0), (20.0, 7.0)];
    let ctl: Vec<String> = enforcers
        .iter()
        .map(|(l, p)| format!("{} {l} {p}", walltime()))
        .collect();
    let (o, out) = run(dir.path(), "two", &ctl, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_kills(&out, &enforcers);
    let deleted = |n: usize| {
        std::fs::read_to_string(out.join(format!("controller-{n}.log")))
            .unwrap()
            .matches("deleted")
            .count()
    };
    // Each pod deleted once, by one of them or (at a shared instant) by both.
    assert!(deleted(1) + deleted(2) >= 12);
    assert!(deleted(2) > 0, "the 20 s enforcer acts first on most jobs");
    // Two identical ones act in the same instants on the same pods: which
    // one's DELETE comes first is the OS's choice, the outcome is not.
    let twins = vec![format!("{} 30 5", walltime()); 2];
    let (o, out) = run(dir.path(), "twins", &twins, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_kills(&out, &[(30.0, 5.0)]);
}

#[test]
fn a_controller_that_exits_ends_the_run_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = run(
        dir.path(),
        "crash",
        &[format!("{} 30 5 50", walltime())],
        &[],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let s = summary(&out);
    assert_eq!(s["end_reason"], "controller-exited", "{s}");
    assert_eq!(
        s["end_time"].as_f64().unwrap(),
        49.0,
        "it exits 50 s after its start at -1"
    );
    assert!(err.contains("controller 1 (python3"), "{err}");
    assert!(err.contains("exit status: 3"), "{err}");
    assert!(
        err.contains("exiting at"),
        "the end of its log is quoted: {err}"
    );
    for f in ["jobs.csv", "pods.csv", "nodes.csv", "timeline.csv"] {
        assert!(out.join(f).is_file(), "{f} written");
    }
    // At once: before the simulation starts.
    let (o, out) = run(dir.path(), "false", &["false".into()], &[]);
    assert!(!o.status.success());
    assert_eq!(summary(&out)["end_reason"], "controller-exited");
}

#[test]
fn a_controller_that_ignores_the_linked_shim_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (o, _) = run(
        dir.path(),
        "linked",
        &[format!("{} 30 5", walltime())],
        &["--shim", "linked"],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("controller 1 (python3") && err.contains("never read the clock"),
        "{err}"
    );
}
