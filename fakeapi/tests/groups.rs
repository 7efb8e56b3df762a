//! Several listeners serve one store: each is a group of connections whose
//! requests and watch events are counted apart, and whose requests the
//! request log names (what the broker tells programs apart by).

mod common;

use common::*;
use fakeapi::{GroupActivity, StoreConfig};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use parking_lot::Mutex;
use std::sync::Arc;
use tokio::time::timeout;

#[tokio::test]
async fn each_listener_counts_its_own_requests_and_watch_events() {
    let (store, mut server, first) = start(StoreConfig::default()).await;
    let (group, addr) = server
        .add_listener("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(group, 1);
    assert_eq!(server.addrs(), [server.addr(), addr]);
    let log: Arc<Mutex<Vec<(Option<u32>, String, u16)>>> = Arc::default();
    let sink = log.clone();
    server.set_request_log(move |r| {
        sink.lock().push((
            r.group,
            format!("{} {} {}", r.method, r.verb, r.resource),
            r.code,
        ))
    });
    let second = client_for(addr);
    let activity = store.activity();
    assert_eq!(activity.group_activity(1), GroupActivity::default());

    // The second group watches pods; the first creates one.
    let watching: Api<Pod> = Api::namespaced(second, "default");
    let mut events = watching
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let creating: Api<Pod> = Api::namespaced(first, "default");
    creating
        .create(&PostParams::default(), &pod("p0"))
        .await
        .unwrap();
    match timeout(PATIENCE, events.next()).await.unwrap() {
        Some(Ok(WatchEvent::Added(p))) => assert_eq!(p.metadata.name.as_deref(), Some("p0")),
        other => panic!("expected the pod's ADDED, got {other:?}"),
    }
    timeout(PATIENCE, activity.wait_idle()).await.unwrap();

    let (g0, g1) = (activity.group_activity(0), activity.group_activity(1));
    assert_eq!(g0.requests, 1, "the create: {g0:?}");
    assert_eq!(g0.events_written, 0, "{g0:?}");
    assert_eq!(g1.requests, 1, "the watch: {g1:?}");
    assert_eq!(g1.events_written, 1, "the pod's ADDED: {g1:?}");
    let log = log.lock().clone();
    assert!(
        log.contains(&(Some(0), "POST create pods".into(), 201)),
        "{log:?}"
    );
    // A watch is logged when its response starts (its headers), in group 1.
    assert!(
        log.iter()
            .any(|(g, what, _)| *g == Some(1) && what == "GET watch pods"),
        "{log:?}"
    );
}
