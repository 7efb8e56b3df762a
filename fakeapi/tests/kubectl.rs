//! kubectl against fakeapi, through a generated kubeconfig. Skipped, with a
//! notice, when kubectl is not on PATH.

mod common;

use common::*;
use fakeapi::StoreConfig;
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::time::timeout;

fn kubectl_path() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("kubectl"))
            .find(|p| p.is_file())
    })
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        c.env_remove("KUBECONFIG").kill_on_drop(true);
        c
    }

    async fn run(&self, args: &[&str]) -> String {
        let out = timeout(PATIENCE, self.cmd(args).output())
            .await
            .expect("kubectl within the safety timeout")
            .expect("kubectl runs");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{stdout}\n{stderr}"
        );
        stdout
    }
}

#[tokio::test]
async fn kubectl_works() {
    let Some(bin) = kubectl_path() else {
        eprintln!("NOTICE: kubectl not found on PATH; skipping the kubectl test");
        return;
    };
    let (store, server, _client) = start(StoreConfig::default()).await;
    let dir = std::env::temp_dir().join(format!("fakeapi-kubectl-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, fakeapi::kubeconfig_yaml(server.addr())).unwrap();
    let k = Kubectl { bin, kubeconfig };
    // kubectl keeps a discovery cache under $HOME; give it its own.
    std::env::set_var("HOME", &dir);

    store.create_node(node("n1")).unwrap();
    store.create_pod(pod("job-1")).unwrap();

    let out = k.run(&["get", "nodes"]).await;
    assert!(out.contains("n1") && out.contains("Ready"), "{out}");

    let out = k.run(&["get", "pods", "-A", "-o", "wide"]).await;
    assert!(
        out.contains("NAMESPACE") && out.contains("default") && out.contains("job-1"),
        "{out}"
    );

    let out = k.run(&["api-resources"]).await;
    for r in [
        "pods",
        "nodes",
        "leases",
        "poddisruptionbudgets",
        "csinodes",
    ] {
        assert!(out.contains(r), "{r} missing from api-resources:\n{out}");
    }

    let manifest = dir.join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: from-kubectl\n  labels: {app: demo}\nspec:\n  containers:\n  - name: main\n    image: busybox\n",
    )
    .unwrap();
    let out = k
        .run(&[
            "create",
            "--validate=false",
            "-f",
            manifest.to_str().unwrap(),
        ])
        .await;
    assert!(out.contains("pod/from-kubectl created"), "{out}");

    // `get pods -w` sees the binding.
    let mut watch = k
        .cmd(&["get", "pods", "-w", "-o", "wide"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut listed = false;
    let mut saw_binding = false;
    while !saw_binding {
        let line = timeout(PATIENCE, lines.next_line())
            .await
            .expect("kubectl get -w output within the safety timeout")
            .unwrap()
            .expect("kubectl get -w keeps running");
        if !listed && line.contains("from-kubectl") {
            listed = true;
            store.bind_pod("default", "from-kubectl", "n1").unwrap();
        } else if listed && line.contains("from-kubectl") && line.contains("n1") {
            saw_binding = true;
        }
    }
    watch.kill().await.unwrap();

    let out = k.run(&["describe", "pod", "from-kubectl"]).await;
    assert!(
        out.contains("Name:") && out.contains("from-kubectl") && out.contains("n1"),
        "{out}"
    );

    let out = k.run(&["delete", "pod", "from-kubectl"]).await;
    assert!(out.contains("deleted"), "{out}");
    assert_eq!(
        store.get_pod("default", "from-kubectl").unwrap_err().code(),
        404
    );
    let _ = std::fs::remove_dir_all(&dir);
}
