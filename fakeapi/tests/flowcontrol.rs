//! API priority and fairness over real HTTP (`src/flowcontrol.rs`,
//! `src/store/flowcontrol.rs`): the kinds served with their status and
//! discovery, kube-apiserver's bootstrap objects, the `Dangling` condition
//! its controller writes, and the classification every answer names in its
//! `X-Kubernetes-PF-*` headers, as the e2e suite's priority-and-fairness
//! tests read them.

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;

const FS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas";
const PL: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations";
const JSON: (&str, &str) = ("Content-Type", "application/json");

/// A header of a raw answer, by name (any case).
fn header(r: &RawResponse, name: &str) -> Option<String> {
    r.headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// The (FlowSchema, priority level) uids an answer names.
fn classified(r: &RawResponse) -> (Option<String>, Option<String>) {
    (
        header(r, "X-Kubernetes-PF-FlowSchema-UID"),
        header(r, "X-Kubernetes-PF-PriorityLevel-UID"),
    )
}

async fn get(addr: SocketAddr, path: &str) -> Value {
    let r = raw(addr, "GET", path, &[], None).await;
    assert_eq!(
        r.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

async fn uid(addr: SocketAddr, base: &str, name: &str) -> String {
    get(addr, &format!("{base}/{name}")).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn create(addr: SocketAddr, base: &str, body: Value) -> RawResponse {
    raw(
        addr,
        "POST",
        base,
        &[JSON],
        Some(body.to_string().as_bytes()),
    )
    .await
}

fn level(name: &str, shares: i64) -> Value {
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": shares,
            "limitResponse": {"type": "Reject"}}}})
}

fn schema(name: &str, precedence: i64, level: &str, user: &str) -> Value {
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {"matchingPrecedence": precedence,
            "priorityLevelConfiguration": {"name": level},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})
}

fn dangling(fs: &Value) -> Option<Value> {
    fs.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Dangling")
        .cloned()
}

/// `/apis/flowcontrol.apiserver.k8s.io/v1` lists both kinds and their
/// status, cluster-scoped with every verb; the group is in `/apis` and in
/// aggregated discovery, v1 its one version.
#[tokio::test]
async fn both_kinds_are_discovered() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let list = get(a, "/apis/flowcontrol.apiserver.k8s.io/v1").await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "flowschemas",
            "flowschemas/status",
            "prioritylevelconfigurations",
            "prioritylevelconfigurations/status"
        ]
    );
    let fs = &list["resources"][0];
    assert_eq!(fs["namespaced"], false);
    assert_eq!(fs["kind"], "FlowSchema");
    assert_eq!(fs["verbs"].as_array().unwrap().len(), 8);
    let group = get(a, "/apis/flowcontrol.apiserver.k8s.io").await;
    assert_eq!(group["preferredVersion"]["version"], "v1");
    assert_eq!(group["versions"].as_array().unwrap().len(), 1);
    let agg = raw(
        a,
        "GET",
        "/apis",
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        None,
    )
    .await
    .json();
    let g = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "flowcontrol.apiserver.k8s.io")
        .expect("flowcontrol in aggregated discovery");
    assert_eq!(g["versions"][0]["resources"][1]["scope"], "Cluster");
}

/// The objects kube-apiserver writes when it starts are there, each
/// FlowSchema with `Dangling` `False` written by the config consumer
/// (its own managed-fields entry, on `status`), the producer's entry on
/// the rest.
#[tokio::test]
async fn the_bootstrap_configuration_is_there_with_its_status() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let schemas = get(a, FS).await;
    let mut names: Vec<&str> = schemas["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "catch-all",
            "exempt",
            "global-default",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-system-service-accounts",
            "probes",
            "service-accounts",
            "system-leader-election",
            "system-node-high",
            "system-nodes"
        ]
    );
    for fs in schemas["items"].as_array().unwrap() {
        let d = dangling(fs).unwrap_or_else(|| panic!("no Dangling on {fs}"));
        assert_eq!(
            (&d["status"], &d["reason"]),
            (&json!("False"), &json!("Found")),
            "{fs}"
        );
        assert_eq!(
            fs["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
            "true"
        );
        let managers: Vec<(&str, &str)> = fs["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap(),
                    e["operation"].as_str().unwrap(),
                )
            })
            .collect();
        assert!(
            managers.contains(&("api-priority-and-fairness-config-consumer-v1", "Apply"))
                && managers.contains(&("api-priority-and-fairness-config-producer-v1", "Update")),
            "{managers:?}"
        );
        assert_eq!(fs["metadata"]["generation"], 1);
    }
    let levels = get(a, PL).await;
    assert_eq!(levels["items"].as_array().unwrap().len(), 8);
    let exempt = get(a, &format!("{PL}/exempt")).await;
    assert_eq!(
        exempt["spec"],
        json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})
    );
    let global = get(a, &format!("{PL}/global-default")).await;
    assert_eq!(
        global["spec"]["limited"]["limitResponse"]["queuing"],
        json!({"queues": 128, "handSize": 6, "queueLengthLimit": 50})
    );
}

/// What the e2e suite's classification test does: a level and a schema for
/// user `noxu`; a request impersonating `noxu` names them, one
/// impersonating `foo` names `global-default`, and fakeapi's own user
/// (`system:masters`) names `exempt`. A schema of lower precedence wins; a
/// schema whose level goes is `Dangling` and matches no more.
#[tokio::test]
async fn requests_are_classified_by_the_stored_flow_schemas() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let r = create(a, PL, level("e2e-level", 1)).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let pl_uid = r.json()["metadata"]["uid"].as_str().unwrap().to_string();
    let r = create(a, FS, schema("e2e-schema", 1000, "e2e-level", "noxu")).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let created = r.json();
    assert_eq!(created["status"], json!({}), "no status on create");
    let fs_uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    // The controller's condition, right after the create.
    let fs = get(a, &format!("{FS}/e2e-schema")).await;
    let d = dangling(&fs).expect("a Dangling condition");
    assert_eq!(d["status"], "False");
    assert_eq!(
        d["message"],
        "This FlowSchema references the PriorityLevelConfiguration object named \"e2e-level\" and it exists"
    );

    let as_user = |user: &'static str| async move {
        raw(
            a,
            "GET",
            "/version",
            &[
                ("Impersonate-User", user),
                ("Impersonate-Group", "system:authenticated"),
            ],
            None,
        )
        .await
    };
    assert_eq!(
        classified(&as_user("noxu").await),
        (Some(fs_uid.clone()), Some(pl_uid.clone()))
    );
    assert_eq!(
        classified(&as_user("foo").await),
        (
            Some(uid(a, FS, "global-default").await),
            Some(uid(a, PL, "global-default").await)
        )
    );
    let exempt = (
        Some(uid(a, FS, "exempt").await),
        Some(uid(a, PL, "exempt").await),
    );
    let admin = raw(a, "GET", "/api/v1/namespaces/default/pods", &[], None).await;
    assert_eq!(classified(&admin), exempt);
    // Errors are classified too, as kube-apiserver classifies them.
    let missing = raw(a, "GET", "/api/v1/namespaces/default/pods/none", &[], None).await;
    assert_eq!(missing.status, 404);
    assert_eq!(classified(&missing), exempt);

    // Lower precedence first.
    create(a, PL, level("earlier-level", 2)).await;
    let r = create(a, FS, schema("z-earlier", 999, "earlier-level", "noxu")).await;
    let earlier_uid = r.json()["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(
        classified(&as_user("noxu").await).0,
        Some(earlier_uid.clone())
    );
    // Its level gone, it is dangling and left out.
    let r = raw(a, "DELETE", &format!("{PL}/earlier-level"), &[], None).await;
    assert_eq!(r.status, 200);
    let fs = get(a, &format!("{FS}/z-earlier")).await;
    let d = dangling(&fs).unwrap();
    assert_eq!(
        (&d["status"], &d["reason"]),
        (&json!("True"), &json!("NotFound"))
    );
    assert_eq!(classified(&as_user("noxu").await).0, Some(fs_uid.clone()));
    // Back again.
    create(a, PL, level("earlier-level", 2)).await;
    assert_eq!(
        dangling(&get(a, &format!("{FS}/z-earlier")).await).unwrap()["status"],
        "False"
    );
    assert_eq!(classified(&as_user("noxu").await).0, Some(earlier_uid));
}

/// Watches are classified; a long-running request that is not a watch
/// (`exec`) and a request refused before authentication (an unreadable
/// `timeout`) are not.
#[tokio::test]
async fn watches_are_classified_and_what_kube_apiserver_skips_is_not() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let exempt = Some(uid(a, FS, "exempt").await);
    let s = send_raw(
        a,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
        &[],
        None,
    )
    .await;
    let w = read_raw(s).await;
    assert_eq!(w.status, 200);
    assert_eq!(classified(&w).0, exempt);
    let exec = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/pods/p/exec",
        &[],
        None,
    )
    .await;
    assert_eq!(classified(&exec), (None, None));
    let bad = raw(a, "GET", "/version?timeout=soon", &[], None).await;
    assert_eq!(bad.status, 400);
    assert_eq!(classified(&bad), (None, None));
}

/// `/metrics` gives each level's seats as kube-apiserver's controller
/// does (the suite waits for a new level's nominal seats): 600 shared by
/// the levels' shares.
#[tokio::test]
async fn metrics_give_each_levels_seats() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    create(a, PL, level("e2e-level", 1)).await;
    let r = raw(a, "GET", "/metrics", &[], None).await;
    let text = String::from_utf8(r.body).unwrap();
    for line in [
        "# TYPE apiserver_flowcontrol_nominal_limit_seats gauge",
        "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"e2e-level\"} 3",
        "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"global-default\"} 49",
        "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"exempt\"} 0",
        "apiserver_flowcontrol_lower_limit_seats{priority_level=\"workload-low\"} 24",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}

/// kube-apiserver's strategy and validation: status only through
/// `/status` (and kept by it), generation bumped by the spec alone, the
/// 422s of a bad schema, and a mandatory object's spec fixed.
#[tokio::test]
async fn strategy_and_validation() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let mut body = schema("f", 1000, "global-default", "u");
    body["status"] = json!({"conditions": [{"type": "Mine", "status": "True"}]});
    let r = create(a, FS, body).await;
    assert_eq!(r.status, 201);
    let patch = |path: String, body: Value| async move {
        raw(
            a,
            "PATCH",
            &path,
            &[("Content-Type", "application/merge-patch+json")],
            Some(body.to_string().as_bytes()),
        )
        .await
    };
    let r = patch(
        format!("{FS}/f/status"),
        json!({"spec": {"matchingPrecedence": 5}, "status": {"conditions": [{"type": "PatchStatusFailed", "status": "False", "reason": "e2e"}]}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let patched = r.json();
    assert_eq!(patched["spec"]["matchingPrecedence"], 1000, "spec kept");
    assert_eq!(patched["metadata"]["generation"], 1);
    let c = &patched["status"]["conditions"][0];
    assert_eq!(c["type"], "PatchStatusFailed");
    assert!(c.get("lastTransitionTime").is_some_and(Value::is_null));
    // The merge patch dropped `Dangling`; the controller writes it back.
    let now = get(a, &format!("{FS}/f")).await;
    let types: Vec<&str> = now["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["PatchStatusFailed", "Dangling"]);
    let r = patch(
        format!("{FS}/f"),
        json!({"spec": {"matchingPrecedence": 9999}}),
    )
    .await;
    assert_eq!(r.json()["metadata"]["generation"], 2);

    let r = create(a, FS, schema("g", 1, "", "u")).await;
    assert_eq!(r.status, 422);
    let causes: Vec<String> = r.json()["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        causes,
        [
            "spec.matchingPrecedence",
            "spec.priorityLevelConfiguration.name"
        ]
    );
    let r = patch(
        format!("{FS}/catch-all"),
        json!({"spec": {"matchingPrecedence": 5000}}),
    )
    .await;
    assert_eq!(r.status, 422);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("spec of 'catch-all' must equal the fixed value"),
        "{}",
        r.json()
    );
    let r = patch(
        format!("{PL}/exempt"),
        json!({"spec": {"exempt": {"nominalConcurrencyShares": 7}}}),
    )
    .await;
    assert_eq!(r.status, 200, "the exempt level's `exempt` may change");
    let r = create(
        a,
        PL,
        json!({"metadata": {"name": "q"}, "spec": {"type": "Limited", "limited": {
            "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 5}}}}}),
    )
    .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["details"]["causes"][0]["field"],
        "spec.limited.limitResponse.queuing.handSize"
    );
    let ok = create(
        a,
        PL,
        json!({"metadata": {"name": "d"}, "spec": {"type": "Limited", "limited": {
        "limitResponse": {"type": "Queue", "queuing": {}}}}}),
    )
    .await;
    assert_eq!(
        ok.json()["spec"]["limited"],
        json!({"nominalConcurrencyShares": 30, "lendablePercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}})
    );
}

/// `kubectl get flowschemas` reads kube-apiserver's columns, the rows in
/// matching order.
#[tokio::test]
async fn tables_have_kube_apiservers_columns() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let accept = ("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io");
    let t = raw(a, "GET", FS, &[accept], None).await.json();
    let columns: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        [
            "Name",
            "PriorityLevel",
            "MatchingPrecedence",
            "DistinguisherMethod",
            "Age",
            "MissingPL"
        ]
    );
    let first = &t["rows"][0]["cells"];
    assert_eq!(
        (&first[0], &first[1], &first[2], &first[3], &first[5]),
        (
            &json!("exempt"),
            &json!("exempt"),
            &json!(1),
            &json!("<none>"),
            &json!("False")
        )
    );
    assert_eq!(t["rows"][1]["cells"][0], "probes");
    let t = raw(a, "GET", &format!("{PL}/global-default"), &[accept], None)
        .await
        .json();
    let cells = &t["rows"][0]["cells"];
    assert_eq!(
        (&cells[1], &cells[2], &cells[3], &cells[4], &cells[5]),
        (
            &json!("Limited"),
            &json!(20),
            &json!(128),
            &json!(6),
            &json!(50)
        )
    );
}

/// In a seeded store the bootstrap objects' uids are the same in every run
/// of the seed, and another seed gives others.
#[tokio::test]
async fn seeded_stores_give_the_bootstrap_objects_the_same_uids() {
    let uids = |seed: u64| {
        let store = fakeapi::Store::with_config(StoreConfig {
            id_seed: Some(seed),
            ..Default::default()
        });
        let names = |r: &str| -> Vec<String> {
            store
                .list(r, None, None, None)
                .unwrap()
                .iter()
                .map(|o| o["metadata"]["uid"].as_str().unwrap().to_string())
                .collect()
        };
        (
            names("flowschemas.flowcontrol.apiserver.k8s.io"),
            names("prioritylevelconfigurations.flowcontrol.apiserver.k8s.io"),
            store.get("namespaces", None, "default").unwrap()["metadata"]["uid"].clone(),
        )
    };
    assert_eq!(uids(7), uids(7));
    assert_ne!(uids(7).0, uids(8).0);
}

/// Both kinds answer in protobuf to a client that asks for it first
/// (client-go's default), as every built-in kind does.
#[tokio::test]
async fn both_kinds_answer_in_protobuf() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let accept = ("Accept", "application/vnd.kubernetes.protobuf, */*");
    for path in [format!("{FS}/exempt"), format!("{PL}/exempt")] {
        let r = raw(a, "GET", &path, &[accept], None).await;
        assert!(
            header(&r, "Content-Type")
                .is_some_and(|c| c.starts_with("application/vnd.kubernetes.protobuf")),
            "{}",
            r.headers
        );
        assert_eq!(r.object(), get(a, &path).await);
    }
}
