//! The upstream kube-controller-manager, unmodified (built from
//! `schedulers/kube-controller-manager`, the same Kubernetes release as the
//! kube-scheduler), with its job and garbage-collector controllers against
//! the API: a batch/v1 Job gets its pods, pods that succeed complete it, a
//! pod that fails past `backoffLimit` fails it, and a foreground deletion
//! takes its pods with it.
//!
//! kube-controller-manager writes pods and jobs in protobuf by default,
//! which fakeapi reads only for a few kinds (see fakeapi/README.md): it
//! runs with `--kube-api-content-type=application/json`.

mod common;

use fakeapi::Store;
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A safety net only: every wait below is on the API's changes.
const PATIENCE: Duration = Duration::from_secs(120);

struct Kcm(Child, std::path::PathBuf);

impl Drop for Kcm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Kcm {
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.1).unwrap_or_default();
        let lines: Vec<&str> = log.lines().rev().take(40).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

/// Waits until `cond` holds on the store, checking after each change.
async fn until(
    store: &Store,
    changes: &mut tokio::sync::mpsc::UnboundedReceiver<fakeapi::Change>,
    kcm: &Kcm,
    what: &str,
    cond: impl Fn(&Store) -> bool,
) {
    let wait = async {
        while !cond(store) {
            changes.recv().await.expect("the store is alive");
        }
    };
    if tokio::time::timeout(PATIENCE, wait).await.is_err() {
        panic!(
            "{what}: not within {PATIENCE:?}\nkube-controller-manager's log:\n{}",
            kcm.log_tail()
        );
    }
}

fn job(name: &str, completions: u32, backoff: u32) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"completions": completions, "parallelism": completions, "backoffLimit": backoff,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}})
}

/// The pods a job made (by their controller reference).
fn pods_of(store: &Store, job: &Value) -> Vec<Value> {
    let uid = job["metadata"]["uid"].as_str().unwrap().to_string();
    store
        .list("pods", Some("default"), None, None)
        .unwrap()
        .into_iter()
        .filter(|p| {
            p["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|rs| {
                    rs.iter()
                        .any(|r| r["uid"] == uid && r["controller"] == true)
                })
        })
        .collect()
}

fn condition(store: &Store, name: &str, ty: &str) -> bool {
    store
        .get("jobs.batch", Some("default"), name)
        .ok()
        .and_then(|j| j["status"]["conditions"].as_array().cloned())
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == ty && c["status"] == "True"))
}

fn end_pod(store: &Store, pod: &Value, phase: &str) {
    let name = pod["metadata"]["name"].as_str().unwrap();
    let code = if phase == "Succeeded" { 0 } else { 1 };
    let status = serde_json::from_value(json!({"phase": phase,
        "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": code,
                "reason": if code == 0 { "Completed" } else { "Error" }}}}]}))
    .unwrap();
    store.update_pod_status("default", name, status).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_controller_manager_runs_jobs_and_collects_their_garbage() {
    let bin = common::go::go_program("kube-controller-manager", false);
    let store = Store::new();
    let mut changes = store.subscribe();
    let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, fakeapi::kubeconfig_yaml(server.addr())).unwrap();
    let log = dir.path().join("kcm.log");
    let child = Command::new(&bin)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "--kube-api-content-type=application/json",
            "--controllers=job-controller,garbage-collector-controller",
            "--leader-elect=false",
            "--secure-port=0",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let kcm = Kcm(child, log);

    // Two completions: two pods, owned by the job, with its labels.
    let pi = store
        .create("jobs.batch", Some("default"), job("pi", 2, 6))
        .unwrap();
    until(&store, &mut changes, &kcm, "the job's two pods", |s| {
        pods_of(s, &pi).len() == 2
    })
    .await;
    for p in pods_of(&store, &pi) {
        assert_eq!(
            p["metadata"]["labels"]["batch.kubernetes.io/job-name"],
            "pi"
        );
        assert_eq!(
            p["metadata"]["finalizers"],
            json!(["batch.kubernetes.io/job-tracking"])
        );
        end_pod(&store, &p, "Succeeded");
    }
    until(&store, &mut changes, &kcm, "the job Complete", |s| {
        condition(s, "pi", "Complete")
    })
    .await;
    let done = store.get("jobs.batch", Some("default"), "pi").unwrap();
    assert_eq!(done["status"]["succeeded"], 2, "{done}");
    until(
        &store,
        &mut changes,
        &kcm,
        "the tracking finalizers removed",
        |s| {
            pods_of(s, &pi).iter().all(|p| {
                p["metadata"]["finalizers"]
                    .as_array()
                    .is_none_or(Vec::is_empty)
            })
        },
    )
    .await;

    // A failure with no retry left fails the job.
    let once = store
        .create("jobs.batch", Some("default"), job("once", 1, 0))
        .unwrap();
    until(&store, &mut changes, &kcm, "the pod of `once`", |s| {
        pods_of(s, &once).len() == 1
    })
    .await;
    end_pod(&store, &pods_of(&store, &once)[0], "Failed");
    until(&store, &mut changes, &kcm, "the job Failed", |s| {
        condition(s, "once", "Failed")
    })
    .await;
    let failed = store.get("jobs.batch", Some("default"), "once").unwrap();
    let reason = failed["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Failed")
        .unwrap()["reason"]
        .clone();
    assert_eq!(reason, "BackoffLimitExceeded");

    // Deleting a job in the foreground takes its pods first.
    store
        .delete_with(
            "jobs.batch",
            Some("default"),
            "pi",
            &fakeapi::DeleteOptions {
                propagation: Some(fakeapi::Propagation::Foreground),
                ..Default::default()
            },
        )
        .unwrap();
    until(
        &store,
        &mut changes,
        &kcm,
        "the job and its pods gone",
        |s| s.get("jobs.batch", Some("default"), "pi").is_err() && pods_of(s, &pi).is_empty(),
    )
    .await;
    assert_eq!(pods_of(&store, &once).len(), 1, "the other job's pod stays");
    drop(kcm);
    server.shutdown().await;
}
