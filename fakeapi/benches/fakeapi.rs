//! Throughput of the paths that matter for large simulations:
//! - listing 100k pods over HTTP,
//! - fanning 100k watch events out to 10 HTTP watchers,
//! - one binding round trip over HTTP with a kube-rs client (and the same
//!   with a ValidatingAdmissionPolicy bound to another resource).
//!
//! `CARGO_TARGET_DIR=... cargo bench -p fakeapi --bench fakeapi`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fakeapi::{serve, Store, StoreConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "batch"}},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    }))
    .unwrap()
}

async fn get(addr: SocketAddr, path: &str) -> usize {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    buf.len()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn list_100k(c: &mut Criterion) {
    let rt = rt();
    let store = Store::new();
    for i in 0..100_000 {
        store.create_pod(pod(&format!("job-{i:06}"))).unwrap();
    }
    let server = rt
        .block_on(serve(store, "127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let addr = server.addr();
    let mut g = c.benchmark_group("list");
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("list_100k_pods_http", |b| {
        b.to_async(&rt)
            .iter(|| async { assert!(get(addr, "/api/v1/pods").await > 10_000_000) })
    });
    g.finish();
    rt.block_on(server.shutdown());
}

fn watch_fanout(c: &mut Criterion) {
    const EVENTS: usize = 100_000;
    const WATCHERS: usize = 10;
    let rt = rt();
    let mut g = c.benchmark_group("watch");
    g.throughput(Throughput::Elements((EVENTS * WATCHERS) as u64));
    g.bench_function("fanout_100k_events_to_10_watchers", |b| {
        b.to_async(&rt).iter_custom(|iters| async move {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let store = Store::with_config(StoreConfig {
                    watch_history: 1000,
                    watch_buffer: EVENTS + 10,
                    ..Default::default()
                });
                let server = serve(store.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
                let addr = server.addr();
                let mut readers = Vec::new();
                for _ in 0..WATCHERS {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    let req = format!("GET /api/v1/pods?watch=true&resourceVersion={} HTTP/1.1\r\nHost: {addr}\r\n\r\n", store.resource_version());
                    s.write_all(req.as_bytes()).await.unwrap();
                    readers.push(s);
                }
                while store.watcher_count() < WATCHERS {
                    tokio::task::yield_now().await;
                }
                let start = Instant::now();
                let tasks: Vec<_> = readers
                    .into_iter()
                    .map(|mut s| {
                        tokio::spawn(async move {
                            let mut buf = vec![0u8; 1 << 16];
                            let mut lines = 0;
                            while lines < EVENTS {
                                let n = s.read(&mut buf).await.unwrap();
                                assert!(n > 0);
                                lines += buf[..n].iter().filter(|b| **b == b'\n').count();
                            }
                        })
                    })
                    .collect();
                let st = store.clone();
                tokio::task::spawn_blocking(move || {
                    for i in 0..EVENTS {
                        st.create_pod(pod(&format!("job-{i:06}"))).unwrap();
                    }
                })
                .await
                .unwrap();
                for t in tasks {
                    t.await.unwrap();
                }
                total += start.elapsed();
                server.shutdown().await;
            }
            total
        })
    });
    g.finish();
}

fn binding_round_trip(c: &mut Criterion) {
    binding_round_trip_in(c, "binding_round_trip_http", Store::new());
}

/// The same with a ValidatingAdmissionPolicy bound to Deployments: a write
/// no policy names must cost what it costs without any.
fn binding_round_trip_unrelated_policy(c: &mut Criterion) {
    let store = Store::new();
    store
        .create(
            "validatingadmissionpolicies.admissionregistration.k8s.io",
            None,
            json!({"metadata": {"name": "replicas"}, "spec": {
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]},
                "validations": [{"expression": "object.spec.replicas > 1"}]}}),
        )
        .unwrap();
    store
        .create(
            "validatingadmissionpolicybindings.admissionregistration.k8s.io",
            None,
            json!({"metadata": {"name": "replicas"},
                   "spec": {"policyName": "replicas", "validationActions": ["Deny"]}}),
        )
        .unwrap();
    binding_round_trip_in(c, "binding_round_trip_http_unrelated_policy", store);
}

fn binding_round_trip_in(c: &mut Criterion, name: &str, store: Store) {
    let rt = rt();
    let server = rt
        .block_on(serve(store.clone(), "127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let cfg = kube::Config::new(format!("http://{}", server.addr()).parse().unwrap());
    let client = rt.block_on(async { kube::Client::try_from(cfg).unwrap() });
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut next = 0usize;
    c.bench_function(name, |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let names: Vec<String> = (0..iters)
                .map(|_| {
                    next += 1;
                    let name = format!("bind-{next:08}");
                    store.create_pod(pod(&name)).unwrap();
                    name
                })
                .collect();
            let pods = pods.clone();
            async move {
                let start = Instant::now();
                for name in names {
                    let binding = json!({"metadata": {"name": name}, "target": {"kind": "Node", "name": "n1"}});
                    let _: kube::core::Status = pods
                        .create_subresource("binding", &name, &PostParams::default(), &binding)
                        .await
                        .unwrap();
                }
                start.elapsed()
            }
        })
    });
    rt.block_on(server.shutdown());
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = list_100k, watch_fanout, binding_round_trip, binding_round_trip_unrelated_policy
}
criterion_main!(benches);
