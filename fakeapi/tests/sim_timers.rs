//! Watch timers on simulated time: a watch's `timeoutSeconds` and periodic
//! bookmarks happen when the owner of the clock moves it past them, at the
//! simulated instant they are due, however little wall time passed.

mod common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use common::*;
use fakeapi::{SimTimers, StoreConfig, WatchTimers};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tokio::time::timeout;

/// 2026-01-01T00:00:00Z.
const T0_NS: i64 = 1_767_225_600_000_000_000;
const S: i64 = 1_000_000_000;

struct SimClock(Arc<AtomicI64>);

impl SimClock {
    fn at(&self, ns: i64) -> DateTime<Utc> {
        self.0.store(ns, Ordering::SeqCst);
        DateTime::from_timestamp_nanos(ns)
    }
}

fn simulated(bookmark_secs: u64) -> (StoreConfig, SimClock, SimTimers) {
    let now = Arc::new(AtomicI64::new(T0_NS));
    let n = now.clone();
    let timers = SimTimers::default();
    let config = StoreConfig {
        clock: Arc::new(move || DateTime::from_timestamp_nanos(n.load(Ordering::SeqCst))),
        watch_timers: WatchTimers::Simulated(timers.clone()),
        bookmark_interval: std::time::Duration::from_secs(bookmark_secs),
        ..Default::default()
    };
    (config, SimClock(now), timers)
}

#[tokio::test]
async fn watch_timeout_ends_at_its_simulated_deadline() {
    let (config, clock, timers) = simulated(30);
    let (store, server, client) = start(config).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = pods
        .watch(
            &WatchParams::default().timeout(290).disable_bookmarks(),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    // The deadline is 290 simulated seconds after the watch started.
    assert_eq!(
        timers.earliest_deadline(),
        Some(DateTime::from_timestamp_nanos(T0_NS + 290 * S))
    );
    // A microsecond before: nothing fires, and the watch still delivers.
    let before = clock.at(T0_NS + 290 * S - 1000);
    assert_eq!(timers.fire_until(before), 0);
    store.create_pod(pod("still-open")).unwrap();
    match timeout(PATIENCE, events.try_next()).await.unwrap().unwrap() {
        Some(WatchEvent::Added(p)) => assert_eq!(p.metadata.name.unwrap(), "still-open"),
        other => panic!("expected the pod, got {other:?}"),
    }
    // At the deadline it fires, counts as pending API activity until the
    // end reached the client, and the watch ends.
    let at = clock.at(T0_NS + 290 * S);
    assert_eq!(timers.fire_until(at), 1);
    assert_eq!(timers.earliest_deadline(), None);
    let end = timeout(PATIENCE, events.try_next()).await.unwrap().unwrap();
    assert!(end.is_none(), "the watch should have ended, got {end:?}");
    let activity = server.activity();
    let start = std::time::Instant::now();
    while !activity.snapshot().is_idle() {
        assert!(start.elapsed() < PATIENCE, "{:?}", activity.snapshot());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn bookmarks_come_on_simulated_ticks() {
    let (config, clock, timers) = simulated(60);
    let (store, _server, client) = start(config).await;
    store.create_pod(pod("a")).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    // Ticks fall on multiples of the interval of the store's clock.
    let tick = (T0_NS / (60 * S) + 1) * 60 * S;
    assert_eq!(
        timers.earliest_deadline(),
        Some(DateTime::from_timestamp_nanos(tick))
    );
    assert_eq!(timers.fire_until(clock.at(tick)), 1);
    match timeout(PATIENCE, events.try_next()).await.unwrap().unwrap() {
        Some(WatchEvent::Bookmark(b)) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected a bookmark, got {other:?}"),
    }
    // Re-armed for the next tick; gone with the watch.
    assert_eq!(
        timers.earliest_deadline(),
        Some(DateTime::from_timestamp_nanos(tick + 60 * S))
    );
    drop(events);
    let start = std::time::Instant::now();
    while timers.earliest_deadline().is_some() {
        assert!(start.elapsed() < PATIENCE, "the timer outlived its watch");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
