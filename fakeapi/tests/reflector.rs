//! kube-runtime reflectors stay consistent while 10,000 pods are created
//! (Rust API), bound (HTTP binding subresource) and completed (Rust API)
//! concurrently: per pod, resourceVersions only grow; at the end the
//! reflectors hold exactly the store's state.

mod common;

use common::*;
use fakeapi::StoreConfig;
use futures_util::{Stream, TryStreamExt};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::json;
use std::collections::HashMap;
use tokio::time::timeout;

const PODS: usize = 10_000;
const WORKERS: usize = 8;

/// Drives a reflector until it has seen `sentinel`; checks that each pod's
/// resourceVersion never goes backwards. Returns the number of events.
async fn drive(
    stream: impl Stream<Item = Result<watcher::Event<Pod>, watcher::Error>>,
    reader: reflector::Store<Pod>,
    sentinel: ObjectRef<Pod>,
) -> usize {
    let mut last_rv: HashMap<String, u64> = HashMap::new();
    let mut events = 0;
    futures_util::pin_mut!(stream);
    while let Some(ev) = stream.try_next().await.expect("watch stream error") {
        events += 1;
        if let watcher::Event::Apply(p) | watcher::Event::InitApply(p) = &ev {
            let name = p.metadata.name.clone().unwrap();
            let rv: u64 = p
                .metadata
                .resource_version
                .as_ref()
                .unwrap()
                .parse()
                .unwrap();
            let prev = last_rv.insert(name.clone(), rv).unwrap_or(0);
            assert!(
                rv >= prev,
                "{name}: resourceVersion went back from {prev} to {rv}"
            );
        }
        if reader.get(&sentinel).is_some() {
            return events;
        }
    }
    panic!("watch stream ended before the sentinel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reflectors_stay_consistent_under_10k_pods() {
    let (store, _server, client) = start(StoreConfig::default()).await;
    store.create_node(node("n1")).unwrap();
    let all: Api<Pod> = Api::all(client.clone());
    let sentinel = ObjectRef::new("zz-sentinel").within("default");

    let (reader_all, writer_all) = reflector::store::<Pod>();
    let stream_all =
        reflector::reflector(writer_all, watcher(all.clone(), watcher::Config::default()));
    let all_task = tokio::spawn(drive(stream_all, reader_all.clone(), sentinel.clone()));

    // The scheduler's informer: non-terminal pods only, via streaming lists.
    let (reader_active, writer_active) = reflector::store::<Pod>();
    let cfg = watcher::Config::default()
        .fields("status.phase!=Succeeded,status.phase!=Failed")
        .streaming_lists();
    let stream_active =
        reflector::reflector(writer_active, watcher(all.clone(), cfg)).default_backoff();
    let active_task = tokio::spawn(drive(
        stream_active,
        reader_active.clone(),
        sentinel.clone(),
    ));

    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let store = store.clone();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        workers.push(tokio::spawn(async move {
            for i in (w..PODS).step_by(WORKERS) {
                let name = format!("job-{i:05}");
                store.create_pod(pod(&name)).unwrap();
                let binding =
                    json!({"metadata": {"name": name}, "target": {"kind": "Node", "name": "n1"}});
                let _: kube::core::Status = pods
                    .create_subresource("binding", &name, &PostParams::default(), &binding)
                    .await
                    .unwrap();
                store
                    .update_pod_status(
                        "default",
                        &name,
                        PodStatus {
                            phase: Some("Succeeded".into()),
                            ..Default::default()
                        },
                    )
                    .unwrap();
            }
        }));
    }
    for w in workers {
        timeout(PATIENCE * 5, w).await.unwrap().unwrap();
    }
    store.create_pod(pod("zz-sentinel")).unwrap();
    let n_all = timeout(PATIENCE * 5, all_task).await.unwrap().unwrap();
    let n_active = timeout(PATIENCE * 5, active_task).await.unwrap().unwrap();
    assert!(n_all >= PODS && n_active >= 1);

    let state = reader_all.state();
    assert_eq!(state.len(), PODS + 1);
    for p in state
        .iter()
        .filter(|p| p.metadata.name.as_deref() != Some("zz-sentinel"))
    {
        let stored = store
            .get_pod("default", p.metadata.name.as_deref().unwrap())
            .unwrap();
        assert_eq!(
            p.metadata.resource_version,
            stored.metadata.resource_version
        );
        assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
        assert_eq!(
            p.status.as_ref().unwrap().phase.as_deref(),
            Some("Succeeded")
        );
    }
    let active: Vec<_> = reader_active
        .state()
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(active, ["zz-sentinel"]);
}
