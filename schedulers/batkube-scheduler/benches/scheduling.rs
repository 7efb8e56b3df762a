//! Decisions per second: 10k pending pods on 1,000 nodes, in memory (the
//! scheduling cycle alone: queue, filters, scores, assume).
//!
//! `cargo bench -p batkube-scheduler --bench scheduling`

use std::time::{Duration, Instant};

use batkube_scheduler::model::PodInfo;
use batkube_scheduler::{Scheduler, SchedulerConfig, TieBreak};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

const NODES: usize = 1_000;
const PODS: usize = 10_000;

fn setup() -> Scheduler {
    let mut s = Scheduler::new(SchedulerConfig::default(), TieBreak::NodeName);
    for i in 0..NODES {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": format!("node-{i:04}")},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}
        }))
        .unwrap();
        s.cache.upsert_node(node).unwrap();
    }
    let t0 = Instant::now();
    for i in 0..PODS {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("job-{i}"), "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {
                "cpu": format!("{}m", 500 + (i % 4) * 250), "memory": "1Gi"}}}]}
        }))
        .unwrap();
        s.queue.add_or_update(PodInfo::new(pod).unwrap(), t0);
    }
    s
}

fn in_memory(c: &mut Criterion) {
    let mut g = c.benchmark_group("in_memory");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .warm_up_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(PODS as u64));
    g.bench_function("10k_pods_1k_nodes", |b| {
        b.iter_batched(
            setup,
            |mut s| {
                let now = Instant::now();
                let mut n = 0;
                while let Some(out) = s.cycle(now) {
                    std::hint::black_box(&out);
                    n += 1;
                }
                assert_eq!(n, PODS);
                s
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, in_memory);
criterion_main!(benches);
