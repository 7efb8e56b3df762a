//! The configuration objects kube-apiserver 1.35's priority-and-fairness
//! bootstrap writes when it starts (`k8s.io/apiserver`'s
//! `pkg/apis/flowcontrol/bootstrap`): the mandatory ones (`exempt` and
//! `catch-all`, a FlowSchema and a PriorityLevelConfiguration each) and the
//! suggested ones (the levels `system`, `node-high`, `leader-election`,
//! `workload-high`, `workload-low`, `global-default` and the schemas that
//! send the cluster's components to them). Each is written here as the
//! stored object reads (its defaults filled in, Go's empty fields as Go
//! writes them), annotated `apf.kubernetes.io/autoupdate-spec: "true"`.

use serde_json::{json, Value};

/// The annotation that lets the bootstrap keep an object's spec current.
pub(crate) const AUTO_UPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const NODES: &str = "system:nodes";
const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const SCHEDULER: &str = "system:kube-scheduler";

fn metadata(name: &str) -> Value {
    json!({"name": name, "annotations": {AUTO_UPDATE: "true"}})
}

fn level(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": metadata(name),
        "spec": spec,
    })
}

/// A `Limited` level that queues: `queues`, `hand` cards a flow is dealt,
/// 50 requests a queue.
fn queuing(name: &str, shares: i64, lendable: i64, queues: i64, hand: i64) -> Value {
    level(
        name,
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": {"type": "Queue", "queuing": {
                "queues": queues, "handSize": hand, "queueLengthLimit": 50,
            }},
        }}),
    )
}

fn exempt_level() -> Value {
    level(
        "exempt",
        json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
    )
}

fn catch_all_level() -> Value {
    level(
        "catch-all",
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": 5,
            "lendablePercent": 0,
            "limitResponse": {"type": "Reject"},
        }}),
    )
}

fn groups(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "Group", "group": {"name": n}}))
        .collect()
}

fn users(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| json!({"kind": "User", "user": {"name": n}}))
        .collect()
}

/// Every service account of `kube-system`.
fn kube_system_accounts() -> Vec<Value> {
    vec![
        json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}}),
    ]
}

/// A resource rule; `clusterScope` is left out when false, as Go omits it.
fn resources(verbs: &[&str], groups: &[&str], resources: &[&str], cluster: bool) -> Value {
    let mut r = json!({
        "verbs": verbs, "apiGroups": groups, "resources": resources, "namespaces": ["*"],
    });
    if cluster {
        r["clusterScope"] = json!(true);
    }
    r
}

fn everything() -> Value {
    resources(&["*"], &["*"], &["*"], true)
}

fn non_resources(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn every_url() -> Value {
    non_resources(&["*"], &["*"])
}

/// A FlowSchema of one rule; `distinguisher` `None` leaves the method out.
fn schema(
    name: &str,
    level: &str,
    precedence: i64,
    distinguisher: Option<&str>,
    subjects: Vec<Value>,
    resource_rules: Vec<Value>,
    non_resource_rules: Vec<Value>,
) -> Value {
    let mut rule = json!({"subjects": subjects});
    if !resource_rules.is_empty() {
        rule["resourceRules"] = Value::Array(resource_rules);
    }
    if !non_resource_rules.is_empty() {
        rule["nonResourceRules"] = Value::Array(non_resource_rules);
    }
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [rule],
    });
    if let Some(d) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": d});
    }
    json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": metadata(name),
        "spec": spec,
    })
}

/// The mandatory FlowSchema `exempt`: `system:masters`, everything, at
/// the exempt level.
pub(crate) fn exempt_schema() -> Value {
    schema(
        "exempt",
        "exempt",
        1,
        None,
        groups(&[MASTERS]),
        vec![everything()],
        vec![every_url()],
    )
}

/// The mandatory FlowSchema `catch-all`: everyone, everything, last.
pub(crate) fn catch_all_schema() -> Value {
    schema(
        "catch-all",
        "catch-all",
        10000,
        Some("ByUser"),
        groups(&[UNAUTHENTICATED, AUTHENTICATED]),
        vec![everything()],
        vec![every_url()],
    )
}

/// The mandatory PriorityLevelConfigurations (`exempt`, `catch-all`).
pub(crate) fn mandatory_levels() -> Vec<Value> {
    vec![catch_all_level(), exempt_level()]
}

/// The mandatory FlowSchemas.
pub(crate) fn mandatory_schemas() -> Vec<Value> {
    vec![exempt_schema(), catch_all_schema()]
}

/// The suggested PriorityLevelConfigurations, in kube-apiserver's order.
pub(crate) fn suggested_levels() -> Vec<Value> {
    vec![
        queuing("system", 30, 33, 64, 6),
        queuing("node-high", 40, 25, 64, 6),
        queuing("leader-election", 10, 0, 16, 4),
        queuing("workload-high", 40, 50, 128, 6),
        queuing("workload-low", 100, 90, 128, 6),
        queuing("global-default", 20, 50, 128, 6),
    ]
}

/// The suggested FlowSchemas, in kube-apiserver's order.
pub(crate) fn suggested_schemas() -> Vec<Value> {
    let all_of = |name: &str, level: &str, precedence: i64, d: &str, subjects: Vec<Value>| {
        schema(
            name,
            level,
            precedence,
            Some(d),
            subjects,
            vec![everything()],
            vec![every_url()],
        )
    };
    let mut leader_election = users(&[CONTROLLER_MANAGER, SCHEDULER]);
    leader_election.extend(kube_system_accounts());
    vec![
        all_of("system-nodes", "system", 500, "ByUser", groups(&[NODES])),
        schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            groups(&[NODES]),
            vec![
                resources(&["*"], &[""], &["nodes", "nodes/status"], true),
                resources(&["*"], &["coordination.k8s.io"], &["leases"], false),
            ],
            vec![],
        ),
        schema(
            "probes",
            "exempt",
            2,
            None,
            groups(&[UNAUTHENTICATED, AUTHENTICATED]),
            vec![],
            vec![non_resources(&["get"], &["/healthz", "/readyz", "/livez"])],
        ),
        schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            leader_election,
            vec![resources(
                &["get", "create", "update"],
                &["coordination.k8s.io"],
                &["leases"],
                false,
            )],
            vec![],
        ),
        all_of(
            "kube-controller-manager",
            "workload-high",
            800,
            "ByNamespace",
            users(&[CONTROLLER_MANAGER]),
        ),
        all_of(
            "kube-scheduler",
            "workload-high",
            800,
            "ByNamespace",
            users(&[SCHEDULER]),
        ),
        all_of(
            "kube-system-service-accounts",
            "workload-high",
            900,
            "ByNamespace",
            kube_system_accounts(),
        ),
        all_of(
            "service-accounts",
            "workload-low",
            9000,
            "ByUser",
            groups(&[SERVICE_ACCOUNTS]),
        ),
        all_of(
            "global-default",
            "global-default",
            9900,
            "ByUser",
            groups(&[UNAUTHENTICATED, AUTHENTICATED]),
        ),
    ]
}

/// The spec a mandatory object must keep (kube-apiserver's validation
/// refuses any other): `None` for other names.
pub(crate) fn mandatory_spec(kind: &str, name: &str) -> Option<Value> {
    let objects = match kind {
        "FlowSchema" => mandatory_schemas(),
        _ => mandatory_levels(),
    };
    objects
        .into_iter()
        .find(|o| o["metadata"]["name"] == name)
        .map(|o| o["spec"].clone())
}
