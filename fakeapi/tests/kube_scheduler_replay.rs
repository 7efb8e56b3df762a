//! Replays every request the upstream kube-scheduler v1.26.7 made at
//! startup and for one binding and one failure (recorded in
//! `tests/data/kube-scheduler-v1.26.7-requests.jsonl`, see
//! /work/shared/reference/kube-scheduler/README.md), with the same methods,
//! paths, headers and bodies, against the same cluster: one node, two pods.

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

const REQUESTS: &str = include_str!("data/kube-scheduler-v1.26.7-requests.jsonl");

/// Reads a response's status line and headers only (watches stay open).
async fn read_head(mut s: tokio::net::TcpStream) -> (u16, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(PATIENCE, s.read(&mut byte))
            .await
            .expect("headers within the safety timeout")
            .unwrap();
        assert_eq!(n, 1, "connection closed before the headers");
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    (head.split(' ').nth(1).unwrap().parse().unwrap(), head)
}

#[tokio::test]
async fn kube_scheduler_v1_26_requests_are_served() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    store.create_node(node("node-0")).unwrap();
    for (name, uid) in [("job-1", "u-job-1"), ("job-2", "u-job-2")] {
        let mut p = pod(name);
        p.metadata.uid = Some(uid.into());
        store.create_pod(p).unwrap();
    }
    let mut seen = 0;
    for line in REQUESTS.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        let method = r["method"].as_str().unwrap();
        let path = r["path"].as_str().unwrap();
        let mut headers = vec![("Accept", r["accept"].as_str().unwrap_or("*/*"))];
        if let Some(ct) = r["ctype"].as_str() {
            headers.push(("Content-Type", ct));
        }
        headers.push(("User-Agent", r["ua"].as_str().unwrap_or("")));
        let body = r["body"].as_str().map(str::as_bytes);
        let conn = send_raw(server.addr(), method, path, &headers, body).await;
        seen += 1;
        if path.contains("watch=true") {
            let (status, head) = read_head(conn).await;
            assert_eq!(status, 200, "{method} {path}: {head}");
            assert!(
                head.to_ascii_lowercase()
                    .contains("content-type: application/json"),
                "{head}"
            );
            continue;
        }
        let resp = read_raw(conn).await;
        let text = String::from_utf8_lossy(&resp.body).to_string();
        let v = resp.json();
        match method {
            "GET" if path.starts_with("/apis/events.k8s.io/v1") => {
                assert_eq!(resp.status, 200, "{path}: {text}");
                assert_eq!(v["kind"], "APIResourceList");
                assert_eq!(v["resources"][0]["name"], "events");
            }
            "GET" => {
                assert_eq!(resp.status, 200, "{path}: {text}");
                assert!(
                    v["kind"].as_str().unwrap().ends_with("List"),
                    "{path}: {text}"
                );
                assert!(v["items"].is_array(), "{path}");
                assert!(v["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .is_ok());
                if path.starts_with("/api/v1/pods?") {
                    assert_eq!(v["items"].as_array().unwrap().len(), 2, "{text}");
                }
                if path.starts_with("/api/v1/nodes?") {
                    assert_eq!(v["items"][0]["metadata"]["name"], "node-0");
                }
                if path.starts_with("/api/v1/namespaces?") {
                    let names: Vec<_> = v["items"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|n| n["metadata"]["name"].clone())
                        .collect();
                    assert!(
                        names.contains(&json!("default")) && names.contains(&json!("kube-system"))
                    );
                }
            }
            "POST" if path.ends_with("/binding") => {
                assert_eq!(resp.status, 201, "{text}");
                assert_eq!(v["status"], "Success");
            }
            "POST" => {
                assert_eq!(resp.status, 201, "{path}: {text}");
                assert_eq!(v["kind"], "Event");
            }
            "PATCH" => assert_eq!(resp.status, 200, "{path}: {text}"),
            other => panic!("unexpected method {other}"),
        }
    }
    assert_eq!(seen, 33, "every recorded request replayed");
    let job1 = store.get_pod("default", "job-1").unwrap();
    assert_eq!(job1.spec.unwrap().node_name.as_deref(), Some("node-0"));
    let job2 = store.get_pod("default", "job-2").unwrap();
    let cond = &job2.status.unwrap().conditions.unwrap()[0];
    assert_eq!(
        (
            cond.type_.as_str(),
            cond.status.as_str(),
            cond.reason.as_deref()
        ),
        ("PodScheduled", "False", Some("Unschedulable"))
    );
    let events = store.list("events", Some("default"), None, None).unwrap();
    let reasons: Vec<_> = events
        .iter()
        .map(|e| e["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reasons.len(), 2);
    assert!(
        reasons.contains(&"Scheduled".to_string())
            && reasons.contains(&"FailedScheduling".to_string())
    );
}

#[tokio::test]
async fn kube_scheduler_leader_election_lease() {
    // With leader election on: GET the lease (404), POST it, then PUT renewals.
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler";
    assert_eq!(raw(a, "GET", path, &[], None).await.status, 404);
    let lease = json!({"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
        "spec": {"holderIdentity": "sched_1", "leaseDurationSeconds": 15, "acquireTime": "2024-01-01T00:00:00.000000Z", "renewTime": "2024-01-01T00:00:00.000000Z", "leaseTransitions": 0}});
    let body = serde_json::to_vec(&lease).unwrap();
    let r = raw(
        a,
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        &[("Content-Type", "application/json")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 201);
    let mut current = r.json();
    current["spec"]["renewTime"] = json!("2024-01-01T00:00:02.000000Z");
    let body = serde_json::to_vec(&current).unwrap();
    let r = raw(
        a,
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 200);
    // A second PUT with the old resourceVersion loses the race.
    let r = raw(
        a,
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 409);
    let r = raw(a, "POST", "/api/v1/namespaces/kube-system/events", &[("Content-Type", "application/json")],
        Some(br#"{"metadata":{"name":"kube-scheduler.1"},"reason":"LeaderElection","involvedObject":{"kind":"Lease","name":"kube-scheduler","namespace":"kube-system"}}"#)).await;
    assert_eq!(r.status, 201);
    // events.k8s.io/v1, which the scheduler prefers when discovery offers it.
    let r = raw(a, "POST", "/apis/events.k8s.io/v1/namespaces/default/events", &[("Content-Type", "application/json")],
        Some(br#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"job-1.2"},"eventTime":"2024-01-01T00:00:00.000000Z","reason":"Scheduled","action":"Binding","type":"Normal","reportingController":"default-scheduler","reportingInstance":"sched_1","regarding":{"kind":"Pod","namespace":"default","name":"job-1"}}"#)).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["apiVersion"], "events.k8s.io/v1");
}
