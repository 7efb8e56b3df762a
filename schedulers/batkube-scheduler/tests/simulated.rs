//! The binary patched with timeshim, on simulated time driven by this test
//! (the broker's exact policy in miniature: move the clock only when the
//! scheduler and the API are both quiescent, to the scheduler's earliest
//! deadline). Checks that backoff grows 1, 2, 4, 8, 10 simulated seconds.

use std::time::Duration;

use fakeapi::Store;
use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use timeshim::{Controller, Quiescence, ShimMode, SimTime};

/// Wall-clock safety net for one quiescence wait.
const BOUND: Duration = Duration::from_secs(60);

fn node(name: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
    }))
    .unwrap()
}

fn pod(name: &str, cpu: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}
    }))
    .unwrap()
}

/// Waits until the scheduler is parked, the API has nothing in flight and
/// no byte waits in a socket between them; returns the scheduler's
/// earliest deadline. Without the sockets' look the clock moved, on a
/// loaded machine, while a watch frame sat unread in the scheduler's
/// socket (measured backoffs of 9 and 79 s).
async fn settle(clock: &Controller, activity: &fakeapi::Activity, port: u16) -> Option<SimTime> {
    loop {
        activity.wait_idle().await;
        let before = activity.snapshot();
        let q = tokio::task::block_in_place(|| clock.wait_quiescent(BOUND)).unwrap();
        match q {
            Quiescence::Quiescent {
                earliest_deadline, ..
            } => {
                let after = activity.snapshot();
                if after.is_idle()
                    && after.requests_served == before.requests_served
                    && after.watch_events_written == before.watch_events_written
                    && fakeapi::tcp_queued_bytes(port) == 0
                {
                    return earliest_deadline;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            other => panic!("scheduler not quiescent: {other:?}"),
        }
    }
}

/// The scheduler's count of unschedulable attempts, from its metrics.
/// Repeated failures are no longer API writes (they fold into one Event's
/// series), so the metrics are what tells an attempt happened.
async fn unschedulable_attempts(metrics: u16) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", metrics))
        .await
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body.lines()
        .find_map(|l| {
            l.strip_prefix("scheduler_schedule_attempts_total{result=\"unschedulable\"} ")
        })
        .expect("the attempts counter")
        .trim()
        .parse()
        .unwrap()
}

/// Drives the clock deadline by deadline until the scheduler's next
/// unschedulable attempt; returns its simulated instant.
async fn next_failure(
    clock: &Controller,
    activity: &fakeapi::Activity,
    port: u16,
    metrics: u16,
    seen: &mut u64,
) -> SimTime {
    for _ in 0..1000 {
        let deadline = settle(clock, activity, port).await;
        let n = unschedulable_attempts(metrics).await;
        if n > *seen {
            *seen = n;
            return clock.now();
        }
        // Move to the scheduler's next deadline, but by at most one second,
        // as a safety net (this test does not look at the sockets' queues
        // as the broker does). Backoff expiries are whole seconds after the
        // failure, so this measures them exactly.
        let now = clock.now();
        let step = now + Duration::from_secs(1);
        let t = deadline.map_or(step, |d| d.max(now).min(step));
        clock.advance_to(t).unwrap();
    }
    panic!("no unschedulable attempt after 1000 clock moves");
}

/// A port free on loopback now, for the scheduler's metrics.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_child(
    clock: &Controller,
    addr: std::net::SocketAddr,
    tag: &str,
    metrics: Option<u16>,
) -> (std::process::Child, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("batkube-sched-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, fakeapi::kubeconfig_yaml(addr)).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_batkube-scheduler"));
    cmd.arg("--kubeconfig").arg(&kc);
    if let Some(p) = metrics {
        cmd.arg("--metrics-addr").arg(format!("127.0.0.1:{p}"));
    }
    (clock.spawn(cmd, &ShimMode::Linked).unwrap(), dir)
}

/// The patched binary under a controller reads the simulated clock: its
/// decision and its `Scheduled` event happen at the simulated instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_on_simulated_time() {
    let store = Store::new();
    let mut changes = store.subscribe();
    store.create_node(node("node-0", "1")).unwrap();
    store.create_pod(pod("job-1", "1", None)).unwrap();
    let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let activity = server.activity();
    let start = 1_700_000_000.0;
    let clock = Controller::new(SimTime::from_secs_f64(start)).unwrap();
    let (mut child, dir) = start_child(&clock, server.addr(), "bind", None);
    let mut scheduled = None;
    for _ in 0..1000 {
        settle(&clock, &activity, server.addr().port()).await;
        while let Ok(c) = changes.try_recv() {
            if c.resource.plural == "events" && c.object["reason"] == "Scheduled" {
                assert_eq!(c.resource.group, "events.k8s.io");
                scheduled = Some(c.object["eventTime"].as_str().unwrap().to_string());
            }
        }
        if scheduled.is_some() {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let t: Timestamp = scheduled.expect("a Scheduled event").parse().unwrap();
    // The clock never moved: the decision took no simulated time.
    assert_eq!(t.as_second(), start as i64);
    assert_eq!(clock.now(), SimTime::from_secs_f64(start));
    assert_eq!(
        store
            .get_pod("default", "job-1")
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .as_deref(),
        Some("node-0")
    );
}

/// The upstream backoff (1, 2, 4, 8, then capped at 10 s) measured between
/// unschedulable attempts on simulated time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_grows_on_simulated_time() {
    let store = Store::new();
    let mut changes = store.subscribe();
    store.create_node(node("node-0", "1")).unwrap();
    let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let activity = server.activity();
    let clock = Controller::new(SimTime::from_secs_f64(1_700_000_000.0)).unwrap();
    let metrics = free_port();
    let (mut child, dir) = start_child(&clock, server.addr(), "backoff", Some(metrics));

    // Warm-up: a pod created after start-up reaches the scheduler through
    // its watch and is bound, so both watches are known to be running.
    let _ = settle(&clock, &activity, server.addr().port()).await;
    store.create_pod(pod("warm", "0", None)).unwrap();
    'warm: for _ in 0..1000 {
        let deadline = settle(&clock, &activity, server.addr().port()).await;
        while let Ok(c) = changes.try_recv() {
            if c.resource.plural == "pods"
                && c.name == "warm"
                && c.object["spec"]["nodeName"].is_string()
            {
                break 'warm;
            }
        }
        let now = clock.now();
        let step = now + Duration::from_secs(1);
        clock
            .advance_to(deadline.map_or(step, |d| d.max(now).min(step)))
            .unwrap();
    }
    let port = server.addr().port();
    // Read before the pod exists: its first attempt may come at once.
    let mut seen = unschedulable_attempts(metrics).await;
    store.create_pod(pod("big", "2", None)).unwrap();
    let mut last = next_failure(&clock, &activity, port, metrics, &mut seen).await;
    let first = seen;
    let mut waits = Vec::new();
    for i in 0..5 {
        // A bound pod finishes: a relevant event, the pod goes to backoff.
        let name = format!("filler-{i}");
        store.create_pod(pod(&name, "0", Some("node-0"))).unwrap();
        settle(&clock, &activity, server.addr().port()).await;
        store
            .update_pod_status(
                "default",
                &name,
                PodStatus {
                    phase: Some("Succeeded".into()),
                    ..PodStatus::default()
                },
            )
            .unwrap();
        let t = next_failure(&clock, &activity, port, metrics, &mut seen).await;
        waits.push((t - last).as_secs());
        last = t;
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(waits, vec![1, 2, 4, 8, 10]);
    // The repeats folded into a series: fewer Events made than attempts
    // (a new one each time the pod's resource version moved: its first
    // condition patch), the series' count written on the second.
    let (mut created, mut counted) = (0, 0);
    while let Ok(c) = changes.try_recv() {
        if c.resource.plural == "events" && c.object["reason"] == "FailedScheduling" {
            assert_eq!(c.object["regarding"]["name"], "big");
            match c.kind {
                fakeapi::EventType::Added => created += 1,
                _ => counted = counted.max(c.object["series"]["count"].as_u64().unwrap_or(0)),
            }
        }
    }
    assert!(
        seen - first >= 5 && created >= 1,
        "{seen} {first} {created}"
    );
    assert!(created < seen, "{created} Events for {seen} attempts");
    assert!(counted >= 2, "a series was written");
}
