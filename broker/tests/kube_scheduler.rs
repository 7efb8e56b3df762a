//! The upstream kube-scheduler, unmodified, under the seccomp supervisor:
//! built from Go modules (`schedulers/build-go.sh --check`, the machine's Go
//! and the module proxy; it also vets both Go modules and runs the example
//! plugin's Go tests; quick when up to date), then run by `batkube run
//! --shim seccomp` on the 2020 study's burst workload. Its decisions must
//! be those of a scheduler on exact simulated time: the makespan and mean
//! wait of batkube-scheduler (same profile semantics), on every run.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// target/<profile>/go/kube-scheduler, built from schedulers/kube-scheduler.
fn kube_scheduler() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let out = exe.parent().unwrap().parent().unwrap().join("go");
    let st = Command::new("bash")
        .arg(root().join("schedulers/build-go.sh"))
        .arg("--check")
        .arg(&out)
        .status()
        .expect("running schedulers/build-go.sh (needs bash and Go)");
    assert!(st.success(), "schedulers/build-go.sh failed");
    let bin = out.join("kube-scheduler");
    assert!(bin.is_file(), "{} missing after the build", bin.display());
    bin
}

fn run(out: &Path, sched: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("run")
        .arg("--platform")
        .arg(root().join("platforms/16-node.xml"))
        .arg("--workload")
        .arg(root().join("workloads/200_delay170.json"))
        .arg("--scheduler")
        .arg(format!(
            "{} --kubeconfig \"$KUBECONFIG\" --kube-api-content-type=application/json --leader-elect=false --secure-port=0",
            sched.display()
        ))
        .args(["--shim", "seccomp", "--standin", "--strict", "--out"])
        .arg(out)
        .output()
        .unwrap();
    let log = std::fs::read_to_string(out.join("scheduler.log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(20).collect();
    assert!(
        o.status.success(),
        "batkube run failed:\n{}\nscheduler log (end, reversed):\n{}",
        String::from_utf8_lossy(&o.stderr),
        tail.join("\n")
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn upstream_kube_scheduler_is_exact_under_seccomp() {
    let sched = kube_scheduler();
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2 {
        let s = run(&dir.path().join(format!("run{i}")), &sched);
        assert_eq!(s["shim"], "seccomp");
        assert_eq!(s["jobs_succeeded"], 200, "{s}");
        assert_eq!(s["overcommit_count"], 0, "{s}");
        let makespan = s["makespan"].as_f64().unwrap();
        let wait = s["mean_wait"].as_f64().unwrap();
        assert!((makespan - 2210.0026).abs() < 1e-6, "makespan {makespan}");
        assert!((wait - 979.201152).abs() < 1e-6, "mean wait {wait}");
    }
}
