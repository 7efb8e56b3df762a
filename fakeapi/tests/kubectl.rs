//! kubectl against fakeapi, through a generated kubeconfig: built-in kinds,
//! and a CustomResourceDefinition applied from a file with objects of its
//! kind. Skipped, with a notice, when kubectl is not on PATH.

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
    /// kubectl keeps a discovery cache under $HOME: each test its own.
    home: PathBuf,
}

impl Kubectl {
    fn new(bin: PathBuf, addr: std::net::SocketAddr, name: &str) -> Self {
        let home = std::env::temp_dir().join(format!("fakeapi-{name}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&home).unwrap();
        let kubeconfig = home.join("kubeconfig");
        std::fs::write(&kubeconfig, fakeapi::kubeconfig_yaml(addr)).unwrap();
        Kubectl {
            bin,
            kubeconfig,
            home,
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        c.env_remove("KUBECONFIG")
            .env("HOME", &self.home)
            .kill_on_drop(true);
        c
    }

    /// Runs kubectl expecting it to fail; returns its stderr.
    async fn fail(&self, args: &[&str]) -> String {
        let out = timeout(PATIENCE, self.cmd(args).output())
            .await
            .expect("kubectl within the safety timeout")
            .expect("kubectl runs");
        assert!(!out.status.success(), "kubectl {args:?} should have failed");
        String::from_utf8_lossy(&out.stderr).to_string()
    }

    fn write(&self, name: &str, text: &str) -> String {
        let p = self.home.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
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
    let k = Kubectl::new(bin, server.addr(), "kubectl");

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

    let manifest = k.write(
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: from-kubectl\n  labels: {app: demo}\nspec:\n  containers:\n  - name: main\n    image: busybox\n",
    );
    let out = k
        .run(&["create", "--validate=false", "-f", &manifest])
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
    let _ = std::fs::remove_dir_all(&k.home);
}

#[tokio::test]
async fn kubectl_applies_a_crd_and_its_objects() {
    let Some(bin) = kubectl_path() else {
        eprintln!("NOTICE: kubectl not found on PATH; skipping the kubectl test");
        return;
    };
    let (store, server, _client) = start(StoreConfig::default()).await;
    let k = Kubectl::new(bin, server.addr(), "kubectl-crd");
    const PG: &str = "podgroups.scheduling.x-k8s.io";

    let crd = k.write("crd.yaml", fakeapi::COSCHEDULING_PODGROUP_CRD);
    let out = k.run(&["apply", "-f", &crd]).await;
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/podgroups.scheduling.x-k8s.io created"
        ),
        "{out}"
    );
    let out = k.run(&["get", "crds"]).await;
    assert!(out.contains(PG), "{out}");
    let out = k
        .run(&["api-resources", "--api-group=scheduling.x-k8s.io"])
        .await;
    assert!(
        out.contains("podgroups") && out.contains("pg,pgs") && out.contains("PodGroup"),
        "{out}"
    );

    let group = |min: &str| {
        format!("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: gang-1\nspec:\n  minMember: {min}\n  minResources:\n    cpu: \"4\"\n")
    };
    let pg = k.write("pg.yaml", &group("2"));
    let out = k.run(&["apply", "-f", &pg]).await;
    assert!(
        out.contains("podgroup.scheduling.x-k8s.io/gang-1 created"),
        "{out}"
    );
    assert_eq!(
        store.get(PG, Some("default"), "gang-1").unwrap()["spec"]["minMember"],
        2
    );

    // Changed and applied again: a merge patch, as kubectl sends for custom kinds.
    k.write("pg.yaml", &group("3"));
    let out = k.run(&["apply", "-f", &pg]).await;
    assert!(
        out.contains("podgroup.scheduling.x-k8s.io/gang-1 configured"),
        "{out}"
    );
    assert_eq!(
        store.get(PG, Some("default"), "gang-1").unwrap()["spec"]["minMember"],
        3
    );

    // The status a controller writes shows in the printer columns.
    let mut g = store.get(PG, Some("default"), "gang-1").unwrap();
    g["status"] = serde_json::json!({"phase": "Running", "running": 3});
    store.update(PG, Some("default"), g).unwrap();
    let out = k.run(&["get", "podgroups"]).await;
    let header = out.lines().next().unwrap_or("");
    for col in [
        "NAME",
        "PHASE",
        "MINMEMBER",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "AGE",
    ] {
        assert!(header.contains(col), "{col} missing:\n{out}");
    }
    let row = out
        .lines()
        .find(|l| l.starts_with("gang-1"))
        .unwrap_or_else(|| panic!("{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[..4], &["gang-1", "Running", "3", "3"], "{out}");
    let out = k
        .run(&[
            "get",
            "pg",
            "gang-1",
            "-o",
            "jsonpath={.spec.minResources.cpu}",
        ])
        .await;
    assert_eq!(out, "4");

    // A bad object is refused with the server's field path.
    let bad = k.write("bad.yaml", &group("\"many\"").replace("gang-1", "gang-2"));
    let err = k.fail(&["apply", "-f", &bad]).await;
    assert!(
        err.contains("spec.minMember") && err.contains("must be of type integer"),
        "{err}"
    );

    let out = k.run(&["delete", "-f", &pg]).await;
    assert!(
        out.contains("podgroup.scheduling.x-k8s.io \"gang-1\" deleted"),
        "{out}"
    );
    assert_eq!(
        store.get(PG, Some("default"), "gang-1").unwrap_err().code(),
        404
    );
    let out = k.run(&["delete", "-f", &crd]).await;
    assert!(out.contains("deleted"), "{out}");
    // Gone from the server; this kubectl's discovery cache still knows the kind.
    let err = k.fail(&["get", "podgroups"]).await;
    assert!(
        err.contains("the server could not find the requested resource"),
        "{err}"
    );
    let fresh = k.home.join("fresh-cache");
    let fresh = fresh.to_str().unwrap();
    let err = k.fail(&["get", "podgroups", "--cache-dir", fresh]).await;
    assert!(
        err.contains("the server doesn't have a resource type \"podgroups\""),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&k.home);
}

/// `kubectl explain` of a custom resource reads its schema from the CRD's
/// OpenAPI v3 document: the descriptions of its fields, and of `metadata`
/// (ObjectMeta's, from the built-in definitions).
#[tokio::test]
async fn kubectl_explains_a_custom_resource() {
    let Some(bin) = kubectl_path() else {
        eprintln!("NOTICE: kubectl not found on PATH; skipping the kubectl test");
        return;
    };
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let k = Kubectl::new(bin, server.addr(), "kubectl-explain");
    let crd = k.write(
        "crd.yaml",
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: foos.explain.example.com
spec:
  group: explain.example.com
  scope: Namespaced
  names: {plural: foos, singular: foo, kind: Foo, listKind: FooList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        description: Foo CRD for Testing
        type: object
        properties:
          spec:
            description: Specification of Foo
            type: object
            properties:
              bars:
                description: List of Bars and their specs.
                type: array
                items:
                  type: object
                  properties:
                    name: {description: Name of Bar., type: string}
"#,
    );
    k.run(&["apply", "-f", &crd]).await;
    let out = k.run(&["explain", "foos"]).await;
    for want in [
        "Foo CRD for Testing",
        "apiVersion\t<string>",
        "APIVersion defines",
        "spec\t<Object>",
        "Specification of Foo",
    ] {
        assert!(out.contains(want), "{want:?} not in:\n{out}");
    }
    let out = k.run(&["explain", "foos.metadata"]).await;
    assert!(
        out.contains("Standard object's metadata")
            && out.contains("creationTimestamp\t<string>")
            && out.contains("CreationTimestamp is a timestamp"),
        "{out}"
    );
    let out = k.run(&["explain", "foos.spec.bars"]).await;
    assert!(
        out.contains("<[]Object>") && out.contains("Name of Bar"),
        "{out}"
    );
    let err = k.fail(&["explain", "foos.spec.bars2"]).await;
    assert!(err.contains(r#"field "bars2" does not exist"#), "{err}");
    let _ = std::fs::remove_dir_all(&k.home);
}
