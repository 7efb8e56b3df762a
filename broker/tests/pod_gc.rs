//! The pod garbage collector (`--terminated-pod-gc-threshold`) end to end:
//! the burst workload (200 jobs on 16 nodes) keeps its exact schedule while
//! terminated pods leave the API, and the records still cover every pod.

mod common;

use std::path::Path;
use std::process::Command;

fn run(out: &Path, threshold: &str) -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--platform"])
        .arg(root.join("platforms/16-node.xml"))
        .arg("--workload")
        .arg(root.join("workloads/200_delay170.json"))
        .arg("--scheduler")
        .arg(common::batkube_scheduler())
        .arg("--out")
        .arg(out)
        .args(["--terminated-pod-gc-threshold", threshold])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn terminated_pods_beyond_the_threshold_are_collected_and_the_schedule_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let kept = run(&dir.path().join("all"), "0");
    let gc = run(&dir.path().join("gc"), "20");
    assert_eq!(kept["pods_garbage_collected"], 0);
    // Every pod terminates; all but the 20 newest are collected.
    assert_eq!(gc["pods_garbage_collected"], 180);
    for k in [
        "makespan",
        "mean_wait",
        "jobs_succeeded",
        "overcommit_count",
    ] {
        assert_eq!(gc[k], kept[k], "{k}");
    }
    assert_eq!(gc["makespan"], 2210.040003);
    let read = |d: &str, f: &str| std::fs::read_to_string(dir.path().join(d).join(f)).unwrap();
    assert_eq!(read("gc", "jobs.csv"), read("all", "jobs.csv"));
    assert_eq!(read("gc", "pods.csv").lines().count(), 201);
}
