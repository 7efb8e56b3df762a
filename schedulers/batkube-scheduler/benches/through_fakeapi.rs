//! Decisions per second through fakeapi over HTTP, on real time: the
//! scheduler's runner with its default configuration (as the binary runs
//! with no `--config`) against an in-process fakeapi, from start-up (list
//! and watch) until every pending pod has `spec.nodeName` in the store.
//!
//! ```text
//! cargo bench -p batkube-scheduler --bench through_fakeapi                 # both cases
//! cargo bench -p batkube-scheduler --bench through_fakeapi -- 1k_pods      # the quick one
//! cargo bench -p batkube-scheduler --bench through_fakeapi -- --reps 3 10k # fewer repetitions
//! ```
//!
//! Each repetition: a fresh store with the nodes and the pending pods
//! (created through the Rust API, not timed), fakeapi on 127.0.0.1:0 on a
//! 2-worker runtime (as the broker runs it), then, timed, the scheduler on
//! its own thread with a current-thread runtime and a kube client built
//! from a kubeconfig (as `batkube-scheduler` does), until the store's change
//! stream has shown a binding for every pod. Then it checks from the store
//! that every pod is bound and no node is over its allocatable cpu, memory
//! or pod count, and prints the median, min and max over the repetitions.
//! No time shim: the process never installs one and no controller exists.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use batkube_scheduler::metrics::Metrics;
use batkube_scheduler::resources::{node_allocatable, pod_requests, Resources};
use batkube_scheduler::runner::{self, Notice, RunOptions};
use batkube_scheduler::{Scheduler, SchedulerConfig, TieBreak};
use fakeapi::{Change, Store};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

/// Safety net: a repetition that sees no binding for this long is reported
/// as stalled (not a timed assertion; the figures are only printed).
const STALL: Duration = Duration::from_secs(120);

struct Case {
    name: &'static str,
    nodes: usize,
    pods: usize,
    reps: usize,
}

const CASES: &[Case] = &[
    Case {
        name: "1k_pods_100_nodes",
        nodes: 100,
        pods: 1_000,
        reps: 10,
    },
    Case {
        name: "10k_pods_1k_nodes",
        nodes: 1_000,
        pods: 10_000,
        reps: 5,
    },
];

fn node(i: usize) -> Node {
    let name = format!("node-{i:04}");
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
    .unwrap()
}

fn pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("job-{i}"), "namespace": "default"},
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
        },
        "status": {"phase": "Pending"}
    }))
    .unwrap()
}

/// A binding: an existing unbound pod becomes bound.
fn bound_pod(c: &Change) -> Option<&str> {
    if c.resource.plural != "pods" || !c.object["spec"]["nodeName"].is_string() {
        return None;
    }
    let old = c.old.as_ref()?;
    if old["spec"]["nodeName"].is_string() {
        return None;
    }
    Some(c.name.as_str())
}

#[derive(Default)]
struct NoticeTimes {
    synced: Option<Instant>,
    first_assumed: Option<Instant>,
    last_assumed: Option<Instant>,
}

struct Rep {
    /// Start to the last pod bound.
    elapsed: Duration,
    /// Start to the first pod bound (lists, watches, first decision, first POST).
    first: Duration,
    bound: usize,
    stalled: bool,
    check: Check,
}

#[derive(Default)]
struct Check {
    unbound: usize,
    over_capacity: Vec<String>,
    max_pods_on_a_node: i64,
    nodes_used: usize,
}

/// From the store: every pod bound, no node over allocatable.
fn check(store: &Store) -> Check {
    let nodes: Vec<Node> = store.list_typed(None).unwrap();
    let alloc: HashMap<String, Resources> = nodes
        .iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                node_allocatable(n).unwrap(),
            )
        })
        .collect();
    let mut used: HashMap<String, Resources> = HashMap::new();
    let mut out = Check::default();
    for p in store.list_pods(None).unwrap() {
        match p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            Some(n) => {
                let mut r = pod_requests(&p, false).unwrap();
                r.pods = 1;
                used.entry(n).or_default().add(&r);
            }
            None => out.unbound += 1,
        }
    }
    out.nodes_used = used.len();
    for (n, u) in &used {
        out.max_pods_on_a_node = out.max_pods_on_a_node.max(u.pods);
        let Some(a) = alloc.get(n) else {
            out.over_capacity.push(format!("{n} (no such node)"));
            continue;
        };
        if u.milli_cpu > a.milli_cpu || u.memory > a.memory || u.pods > a.pods {
            out.over_capacity.push(format!(
                "{n}: cpu {}m/{}m, memory {}/{}, pods {}/{}",
                u.milli_cpu, a.milli_cpu, u.memory, a.memory, u.pods, a.pods
            ));
        }
    }
    out.over_capacity.sort();
    out
}

fn run_once(case: &Case) -> Rep {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = Store::new();
    for i in 0..case.nodes {
        store.create_node(node(i)).unwrap();
    }
    for i in 0..case.pods {
        store.create_pod(pod(i)).unwrap();
    }
    let server = rt
        .block_on(fakeapi::serve(
            store.clone(),
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap();
    let kubeconfig = fakeapi::kubeconfig_yaml(server.addr());
    let mut changes: mpsc::UnboundedReceiver<Change> = store.subscribe();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();

    // BATKUBE_BENCH_NOTICES=1: also time the runner's notices (synced,
    // first and last decision), read on a thread of their own so that the
    // times are those of sending. Off by default (one message per decision).
    let (notices, notice_times) = if std::env::var_os("BATKUBE_BENCH_NOTICES").is_some() {
        let (tx, mut rx) = mpsc::unbounded_channel::<Notice>();
        let h = std::thread::spawn(move || {
            let mut t = NoticeTimes::default();
            while let Some(n) = rx.blocking_recv() {
                let now = Instant::now();
                match n {
                    Notice::Synced => t.synced = Some(now),
                    Notice::Assumed { .. } => {
                        t.first_assumed.get_or_insert(now);
                        t.last_assumed = Some(now);
                    }
                    _ => {}
                }
            }
            t
        });
        (Some(tx), Some(h))
    } else {
        (None, None)
    };

    let start = Instant::now();
    let scheduler = std::thread::Builder::new()
        .name("scheduler".into())
        .spawn(move || {
            // As `batkube-scheduler`'s main: a current-thread runtime, a
            // client from a kubeconfig, the default configuration.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let kc = Kubeconfig::from_yaml(&kubeconfig).unwrap();
                let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .unwrap();
                let client = kube::Client::try_from(cfg).unwrap();
                let sched = Scheduler::new(SchedulerConfig::default(), TieBreak::NodeName);
                runner::run(
                    client,
                    sched,
                    RunOptions {
                        metrics: Some(Metrics::new()),
                        notices,
                    },
                    async move {
                        let _ = stop_rx.await;
                    },
                )
                .await;
            });
        })
        .unwrap();

    let (first, elapsed, bound, stalled) = rt.block_on(async {
        let mut bound: HashSet<String> = HashSet::with_capacity(case.pods);
        let mut first = None;
        let mut last = Duration::ZERO;
        let mut stalled = false;
        while bound.len() < case.pods {
            match tokio::time::timeout(STALL, changes.recv()).await {
                Ok(Some(c)) => {
                    if let Some(name) = bound_pod(&c) {
                        if bound.insert(name.to_string()) {
                            last = start.elapsed();
                            first.get_or_insert(last);
                        }
                    }
                }
                Ok(None) | Err(_) => {
                    stalled = true;
                    break;
                }
            }
        }
        (first.unwrap_or_default(), last, bound.len(), stalled)
    });

    let _ = stop_tx.send(());
    scheduler.join().expect("scheduler thread panicked");
    rt.block_on(server.shutdown());
    if let Some(h) = notice_times {
        let t = h.join().unwrap();
        let at = |i: Option<Instant>| i.map_or(f64::NAN, |i| (i - start).as_secs_f64());
        println!(
            "           notices: synced {:.3} s, first decision {:.3} s, last decision {:.3} s",
            at(t.synced),
            at(t.first_assumed),
            at(t.last_assumed)
        );
    }
    let check = check(&store);
    drop(rt);
    Rep {
        elapsed,
        first,
        bound,
        stalled,
        check,
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("batkube_scheduler=warn,kube=warn,fakeapi=warn")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();

    // `cargo bench` passes `--bench`; other flags are ignored, plain words
    // select cases by substring.
    let mut reps_override: Option<usize> = std::env::var("BATKUBE_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut filters = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--reps" {
            reps_override = args.next().and_then(|s| s.parse().ok());
        } else if !a.starts_with('-') {
            filters.push(a);
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "through_fakeapi: {} cpus, load {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut failed = false;
    for case in CASES {
        if !filters.is_empty() && !filters.iter().any(|f| case.name.contains(f.as_str())) {
            continue;
        }
        let reps = reps_override.unwrap_or(case.reps).max(1);
        println!(
            "\n{}: {} pending pods (1 cpu, 1Gi) on {} nodes (32 cpu, 128Gi, 110 pods), {} repetitions",
            case.name, case.pods, case.nodes, reps
        );
        let mut rates = Vec::new();
        let mut times = Vec::new();
        let mut firsts = Vec::new();
        let mut afters = Vec::new();
        for r in 0..reps {
            let rep = run_once(case);
            let secs = rep.elapsed.as_secs_f64();
            let rate = rep.bound as f64 / secs;
            // After the first binding: the decision + binding rate once the
            // lists are in (the start-up cost is listing every pod and node).
            let after_first = (rep.bound.saturating_sub(1)) as f64
                / (rep.elapsed - rep.first).as_secs_f64().max(1e-9);
            let ok = !rep.stalled
                && rep.bound == case.pods
                && rep.check.unbound == 0
                && rep.check.over_capacity.is_empty();
            println!(
                "  rep {:>2}: {:>8.3} s  {:>8.0} decisions/s  first binding {:>6.3} s  \
                 then {:>6.0}/s  bound {}/{}  nodes used {}  max pods/node {}  over capacity {}{}",
                r + 1,
                secs,
                rate,
                rep.first.as_secs_f64(),
                after_first,
                rep.bound,
                case.pods,
                rep.check.nodes_used,
                rep.check.max_pods_on_a_node,
                rep.check.over_capacity.len(),
                if rep.stalled { "  STALLED" } else { "" }
            );
            for o in rep.check.over_capacity.iter().take(5) {
                println!("           over capacity: {o}");
            }
            if !ok {
                failed = true;
                continue;
            }
            rates.push(rate);
            times.push(secs);
            firsts.push(rep.first.as_secs_f64());
            afters.push(after_first);
        }
        if rates.is_empty() {
            println!("  no complete repetition");
            continue;
        }
        let (rmin, rmax) = (
            rates.iter().cloned().fold(f64::INFINITY, f64::min),
            rates.iter().cloned().fold(0.0, f64::max),
        );
        let (tmin, tmax) = (
            times.iter().cloned().fold(f64::INFINITY, f64::min),
            times.iter().cloned().fold(0.0, f64::max),
        );
        println!(
            "  {}: decisions/s median {:.0} (min {:.0}, max {:.0}); time median {:.3} s \
             (min {:.3}, max {:.3}); first binding median {:.3} s, then median {:.0}/s; \
             every pod bound and no node over capacity in {} of {} repetitions",
            case.name,
            median(&mut rates),
            rmin,
            rmax,
            median(&mut times),
            tmin,
            tmax,
            median(&mut firsts),
            median(&mut afters),
            times.len(),
            reps
        );
    }
    if failed {
        eprintln!("through_fakeapi: some repetitions did not bind every pod within capacity");
        std::process::exit(1);
    }
}
