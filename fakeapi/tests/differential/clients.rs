//! The real clients whose normal work is recorded as cases
//! (`BATKUBE_APIDIFF=record-clients`, see `main.rs`): each gets a
//! kubeconfig for the recording proxy, with the case's namespace as its
//! own, and does what it does against a real kube-apiserver.
//!
//! - `kubectl`: `clients/kubectl.sh` (get, apply, patch, delete, wait,
//!   events), with the `kubectl` on PATH;
//! - `client-go-informer`: `clients/informer/` (a shared informer's
//!   streaming list, a reflector's list and a watch from version 1, which
//!   kube-apiserver 1.35 serves from etcd's history while etcd has not
//!   compacted it, rather than 410 Gone), built by `schedulers/build-go.sh
//!   apidiff-informer`;
//! - `kube-rs-reflector`: kube-rs's watcher and reflector, in this process
//!   (the paged list then watch, and the streaming list).

use crate::target::repo_root;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The clients of this file, then the controllers of `controllers.rs`.
pub const ALL: [&str; 6] = [
    "kubectl",
    "client-go-informer",
    "kube-rs-reflector",
    "volcano-controllers",
    "kueue-manager",
    "coscheduling",
];

/// What the recorded case says it is.
pub fn about(client: &str) -> &'static str {
    match client {
        "kubectl" => {
            "kubectl's requests (clients/kubectl.sh: get, apply client-side and server-side, patch, wait, delete, events), recorded through the proxy of record.rs"
        }
        "client-go-informer" => {
            "client-go v0.35.8 informers (clients/informer: a shared informer's streaming list, writes it sees, a reflector's list then watch from version 1, served from etcd's uncompacted history), recorded through the proxy of record.rs"
        }
        "kube-rs-reflector" => {
            "kube-rs 5 watchers and reflectors (a paged list then watch, a streaming list; writes they see), recorded through the proxy of record.rs"
        }
        other => crate::controllers::about(other)
            .unwrap_or_else(|| panic!("unknown client {client:?}: one of {ALL:?}")),
    }
}

/// Runs `client` against the kubeconfig at `kubeconfig` (the proxy), in `ns`.
pub async fn run(
    client: &str,
    kubeconfig: &Path,
    proxy: &str,
    ns: &str,
    go_dir: &Path,
    real: &crate::target::Target,
) {
    match client {
        "kubectl" => {
            let cache = tempdir("kubectl-cache");
            command(
                std::process::Command::new("bash")
                    .arg(dir().join("kubectl.sh"))
                    .env("KUBECONFIG", kubeconfig)
                    .env("NS", ns)
                    .env("KUBECTL_CACHE", &cache),
                "clients/kubectl.sh",
            )
            .await;
            let _ = std::fs::remove_dir_all(cache);
        }
        "client-go-informer" => {
            let bin = go_dir.join("apidiff-informer");
            let st = std::process::Command::new("bash")
                .arg(repo_root().join("schedulers/build-go.sh"))
                .arg(go_dir)
                .arg("apidiff-informer")
                .status()
                .expect("running schedulers/build-go.sh");
            assert!(st.success(), "building apidiff-informer failed: see above");
            command(
                std::process::Command::new(&bin)
                    .env("KUBECONFIG", kubeconfig)
                    .env("NS", ns),
                "apidiff-informer",
            )
            .await;
        }
        "kube-rs-reflector" => kube_rs(proxy, ns).await,
        other => crate::controllers::run(other, kubeconfig, proxy, ns, real).await,
    }
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/differential/clients")
}

fn tempdir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("batkube-apidiff-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn command(cmd: &mut std::process::Command, what: &str) {
    let mut cmd =
        tokio::process::Command::from(std::mem::replace(cmd, std::process::Command::new("true")));
    let st = tokio::time::timeout(Duration::from_secs(180), cmd.status())
        .await
        .unwrap_or_else(|_| panic!("{what} took more than 3 minutes"))
        .unwrap_or_else(|e| panic!("starting {what}: {e}"));
    assert!(st.success(), "{what} failed ({st}): its output is above");
}

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"v": v}
    }))
    .unwrap()
}

/// Waits until the reflector's store says `want`.
async fn seen(
    what: &str,
    store: &reflector::Store<ConfigMap>,
    want: impl Fn(&reflector::Store<ConfigMap>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !want(store) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the kube-rs reflector never saw {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn value(store: &reflector::Store<ConfigMap>, ns: &str, name: &str) -> Option<String> {
    store
        .get(&reflector::ObjectRef::new(name).within(ns))
        .map(|c| {
            c.data
                .as_ref()
                .and_then(|d| d.get("v").cloned())
                .unwrap_or_default()
        })
}

/// kube-rs's watcher and reflector, as a controller runs them: one with
/// the default paged list then watch, one with the streaming list.
async fn kube_rs(proxy: &str, ns: &str) {
    let mut cfg = kube::Config::new(proxy.parse().unwrap());
    cfg.default_namespace = ns.to_string();
    let client = kube::Client::try_from(cfg).expect("a kube-rs client");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &cm("before", "1"))
        .await
        .expect("create before");
    let mut tasks = Vec::new();
    let mut stores = Vec::new();
    for config in [
        watcher::Config::default(),
        watcher::Config::default().streaming_lists(),
    ] {
        let (reader, writer) = reflector::store();
        let stream = reflector(writer, watcher(api.clone(), config)).applied_objects();
        tasks.push(tokio::spawn(async move {
            futures_util::pin_mut!(stream);
            while let Some(r) = stream.next().await {
                r.expect("the kube-rs watcher failed");
            }
        }));
        // One at a time, so that the recording's order is the same each time.
        reader.wait_until_ready().await.expect("a ready store");
        stores.push(reader);
    }
    api.create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("create a");
    for s in &stores {
        seen("a", s, |s| value(s, ns, "a").is_some()).await;
    }
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch a");
    api.delete("before", &DeleteParams::default())
        .await
        .expect("delete before");
    for s in &stores {
        seen("a=2 and before gone", s, |s| {
            value(s, ns, "a").as_deref() == Some("2") && value(s, ns, "before").is_none()
        })
        .await;
    }
    for t in tasks {
        t.abort();
        let _ = t.await;
    }
}
