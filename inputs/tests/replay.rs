//! `batkube replay` end to end against fakeapi over real HTTP, with an
//! emulated kubelet in real time: it binds pods FCFS to nodes with free cpu,
//! writes the Scheduled/Pulling/Pulled/Created events a kubelet writes, sets
//! Running, then Succeeded after the job's delay.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use fakeapi::{Change, EventType, Origin, Store};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, Node,
    NodeStatus, PodStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

const NODES: [(&str, i64); 2] = [("node-a", 1000), ("node-b", 2000)];

fn node(name: &str, millicpu: i64) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    let cap = [
        ("cpu".to_string(), Quantity(format!("{millicpu}m"))),
        ("memory".to_string(), Quantity("4Gi".into())),
        ("pods".to_string(), Quantity("110".into())),
    ]
    .into_iter()
    .collect();
    n.status = Some(NodeStatus {
        allocatable: Some(cap),
        ..Default::default()
    });
    n
}

fn container_status(state: ContainerState) -> PodStatus {
    PodStatus {
        phase: Some(
            if state.terminated.is_some() {
                "Succeeded"
            } else {
                "Running"
            }
            .into(),
        ),
        container_statuses: Some(vec![ContainerStatus {
            name: "job".into(),
            image: "busybox".into(),
            image_id: String::new(),
            ready: state.running.is_some(),
            restart_count: 0,
            state: Some(state),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

struct Pending {
    name: String,
    millicpu: i64,
    delay: f64,
}

/// FCFS kubelet + scheduler over the store; ends when `done` jobs finished.
async fn kubelet(
    store: Store,
    mut changes: tokio::sync::mpsc::UnboundedReceiver<Change>,
    done: usize,
) {
    let mut free: HashMap<&str, i64> = NODES.iter().cloned().collect();
    let mut queue: VecDeque<Pending> = VecDeque::new();
    let (fin_tx, mut fin_rx) =
        tokio::sync::mpsc::unbounded_channel::<(String, &'static str, i64)>();
    let mut finished = 0;
    while finished < done {
        tokio::select! {
            Some(c) = changes.recv() => {
                if c.resource.plural != "pods" || c.kind != EventType::Added || c.origin != Origin::Http {
                    continue;
                }
                let spec = &c.object["spec"]["containers"][0];
                let cpu = spec["resources"]["requests"]["cpu"].as_str().unwrap_or("0");
                let millicpu = match cpu.strip_suffix('m') {
                    Some(m) => m.parse::<i64>().unwrap(),
                    None => (cpu.parse::<f64>().unwrap() * 1000.0) as i64,
                };
                let delay: f64 = spec["command"][1].as_str().unwrap().parse().unwrap();
                queue.push_back(Pending { name: c.name.clone(), millicpu, delay });
            }
            Some((name, node, millicpu)) = fin_rx.recv() => {
                let term = ContainerState {
                    terminated: Some(ContainerStateTerminated { exit_code: 0, reason: Some("Completed".into()), ..Default::default() }),
                    ..Default::default()
                };
                store.update_pod_status("default", &name, container_status(term)).unwrap();
                *free.get_mut(node).unwrap() += millicpu;
                finished += 1;
            }
        }
        // FCFS: the head waits until a node has room for it.
        while let Some(head) = queue.front() {
            let Some((&node, _)) = NODES
                .iter()
                .map(|(n, _)| (n, free[n]))
                .find(|(_, f)| *f >= head.millicpu)
            else {
                break;
            };
            let p = queue.pop_front().unwrap();
            *free.get_mut(node).unwrap() -= p.millicpu;
            store.bind_pod("default", &p.name, node).unwrap();
            for reason in ["Scheduled", "Pulling", "Pulled", "Created", "Started"] {
                store
                    .create(
                        "events",
                        Some("default"),
                        json!({
                            "metadata": {"name": format!("{}.{}", p.name, reason.to_lowercase())},
                            "involvedObject": {"kind": "Pod", "namespace": "default", "name": p.name},
                            "reason": reason, "type": "Normal", "message": reason,
                        }),
                    )
                    .unwrap();
            }
            let run = ContainerState {
                running: Some(ContainerStateRunning::default()),
                ..Default::default()
            };
            store
                .update_pod_status("default", &p.name, container_status(run))
                .unwrap();
            let tx = fin_tx.clone();
            tokio::spawn(async move {
                // The job's own duration, emulated in real time.
                tokio::time::sleep(Duration::from_secs_f64(p.delay)).await;
                let _ = tx.send((p.name, node, p.millicpu));
            });
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_a_workload_on_a_cluster_and_records_it_in_batsim_layout() {
    let store = Store::new();
    for (n, c) in NODES {
        store.create_node(node(n, c)).unwrap();
    }
    let changes = store.subscribe();
    let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fakeapi::kubeconfig_yaml(server.addr())).unwrap();
    // 7 jobs for 3 cpus: some wait; job "b!7" has an id that is not a DNS name.
    let workload = dir.path().join("w.json");
    std::fs::write(
        &workload,
        r#"{"nb_res": 1, "jobs": [
  {"id": "1", "subtime": 0, "res": 1, "profile": "one"},
  {"id": "2", "subtime": 0, "res": 1, "profile": "one"},
  {"id": "3", "subtime": 0, "res": 1, "profile": "half"},
  {"id": "4", "subtime": 0.01, "res": 1, "profile": "one"},
  {"id": "5", "subtime": 0.02, "res": 1, "profile": "half"},
  {"id": "6", "subtime": 0.03, "res": 1, "profile": "one"},
  {"id": "b!7", "subtime": 0.04, "res": 1, "profile": "one", "walltime": 10}
], "profiles": {
  "one": {"type": "delay", "delay": 0.05, "cpu": 1},
  "half": {"type": "delay", "delay": 0.05, "cpu": "500m", "memory": "1Gi"}
}}"#,
    )
    .unwrap();
    let kubelet = tokio::spawn(kubelet(store.clone(), changes, 7));
    let out = dir.path().join("out");
    let args = batkube_inputs::replay::ReplayArgs {
        kubeconfig,
        workload,
        out: out.clone(),
        namespace: "default".into(),
        image: "busybox".into(),
        scheduler_name: None,
        speedup: 1.0,
        deadline: Some(120.0),
        keep_pods: false,
    };
    let ok = batkube_inputs::replay::replay(&args).await.unwrap();
    assert_eq!(ok, 7);
    kubelet.await.unwrap();

    let text = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..17],
        "job_id,workload_name,profile,submission_time,requested_number_of_resources,requested_time,success,final_state,starting_time,execution_time,finish_time,waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata"
            .split(',')
            .collect::<Vec<_>>()
            .as_slice()
    );
    assert_eq!(&header[17..], ["scheduled", "pulling", "pulled", "created"]);
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), 7);
    let f = |r: &Vec<String>, c: &str| {
        r[col(c)]
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("no {c} in {r:?}"))
    };
    let nodes = std::fs::read_to_string(out.join("nodes.csv")).unwrap();
    assert!(
        nodes.contains("0,node-a") && nodes.contains("1,node-b"),
        "{nodes}"
    );
    let mut intervals: HashMap<String, Vec<(f64, f64, f64)>> = HashMap::new();
    for r in &rows {
        assert_eq!(r[col("final_state")], "COMPLETED_SUCCESSFULLY", "{r:?}");
        let (sub, start, fin) = (
            f(r, "submission_time"),
            f(r, "starting_time"),
            f(r, "finish_time"),
        );
        assert!(
            sub <= f(r, "scheduled") && f(r, "scheduled") <= start + 1e-6,
            "{r:?}"
        );
        assert!(fin > start, "{r:?}");
        assert!((f(r, "waiting_time") - (start - sub)).abs() < 1e-5);
        for c in ["pulling", "pulled", "created"] {
            assert!(f(r, c) >= sub, "{c}: {r:?}");
        }
        let cpu = if r[col("profile")] == "half" {
            0.5
        } else {
            1.0
        };
        intervals
            .entry(r[col("allocated_resources")].clone())
            .or_default()
            .push((start, fin, cpu));
    }
    assert_eq!(rows[6][col("job_id")], "b!7");
    assert_eq!(f(&rows[6], "requested_time"), 10.0);
    // What the emulated kubelet guaranteed is visible in the recording: no
    // node above its cpu at any start instant (node-a 1 cpu, node-b 2).
    for (res, iv) in &intervals {
        let cap = if res == "0" { 1.0 } else { 2.0 };
        for (s, _, _) in iv {
            let used: f64 = iv
                .iter()
                .filter(|(a, b, _)| a <= s && s < b)
                .map(|x| x.2)
                .sum();
            assert!(used <= cap + 1e-9, "resource {res} at {s}: {used} cpu");
        }
    }
    // Pods are cleaned up.
    assert!(store.list_pods(Some("default")).unwrap().is_empty());
    server.shutdown().await;
}
