//! What kube-apiserver fills in on built-in objects: its defaulting
//! functions (`SetDefaults_*` of `k8s.io/kubernetes/pkg/apis/*/v1`), the
//! fields its strategies reset on create, and the zero values Go writes for
//! struct fields that are not `omitempty` (a Node's `status.nodeInfo`, a
//! ReplicaSet's `status.replicas`). Clients read these: a Job's
//! `parallelism`, a container's requests copied from its limits, a pod
//! template's `restartPolicy`.
//!
//! Applied to every write of a built-in object (kube-apiserver defaults
//! whatever it decodes), before validation. Written from the upstream
//! functions' behaviour, kind by kind; kinds not listed get none.

use serde_json::{json, Map, Value};

/// Defaults an object of a built-in kind in place. `create`: a new object
/// written by an HTTP client (a strategy's `PrepareForCreate` runs: status
/// reset where the kind has a status subresource; a Job's selector).
/// A pod's defaults outside its spec, for an update that keeps the stored
/// spec (defaulted when it was written: defaulting is idempotent).
pub(crate) fn default_pod_status(obj: &mut Value) {
    // A condition's times are Go structs: `null` when unset.
    if let Some(conds) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conds {
            entry(c, "lastProbeTime", Value::Null);
            entry(c, "lastTransitionTime", Value::Null);
        }
    }
}

pub(crate) fn default_object(group: &str, kind: &str, obj: &mut Value, create: bool) {
    match (group, kind) {
        ("", "Pod") => {
            if let Some(spec) = obj.get_mut("spec") {
                requests_from_limits(spec);
                default_pod_spec(spec);
                entry(spec, "enableServiceLinks", json!(true));
            }
            if create {
                reset_status(obj, json!({"phase": "Pending"}));
            }
            default_pod_status(obj);
        }
        ("", "PodTemplate") => default_template(obj.get_mut("template")),
        ("", "ReplicationController") => {
            default_template(obj.pointer_mut("/spec/template"));
            let labels = obj.pointer("/spec/template/metadata/labels").cloned();
            if let Some(labels) = labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
                let spec = object(obj, "spec");
                if !spec
                    .get("selector")
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty())
                {
                    spec.insert("selector".into(), labels.clone());
                }
                if !obj
                    .pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty())
                {
                    obj["metadata"]["labels"] = labels;
                }
            }
            entry(object(obj, "spec"), "replicas", json!(1));
            status_zeros(obj, create, &[("replicas", json!(0))]);
        }
        ("", "Service") => default_service(obj),
        ("", "Secret") => {
            entry(obj, "type", json!("Opaque"));
        }
        ("", "PersistentVolume") => {
            let spec = object(obj, "spec");
            entry(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            entry(spec, "volumeMode", json!("Filesystem"));
            status_zeros(obj, create, &[("phase", json!("Pending"))]);
        }
        ("", "PersistentVolumeClaim") => {
            entry(object(obj, "spec"), "volumeMode", json!("Filesystem"));
            status_zeros(obj, create, &[("phase", json!("Pending"))]);
        }
        ("", "Endpoints") => {
            for subset in array(obj, "subsets") {
                for port in array(subset, "ports") {
                    entry(port, "protocol", json!("TCP"));
                }
            }
        }
        ("", "Node") => default_node(obj),
        ("", "Namespace") => {
            if create {
                reset_status(obj, json!({}));
            }
            entry(object(obj, "status"), "phase", json!("Active"));
        }
        ("", "ResourceQuota") => {
            if create {
                reset_status(obj, json!({}));
            }
        }
        ("", "Event") => {
            for (k, v) in [
                ("eventTime", Value::Null),
                ("firstTimestamp", Value::Null),
                ("lastTimestamp", Value::Null),
                ("reportingComponent", json!("")),
                ("reportingInstance", json!("")),
                ("source", json!({})),
            ] {
                entry(obj, k, v);
            }
        }
        ("events.k8s.io", "Event") => {
            for (k, v) in [
                ("deprecatedFirstTimestamp", Value::Null),
                ("deprecatedLastTimestamp", Value::Null),
                ("deprecatedSource", json!({})),
            ] {
                entry(obj, k, v);
            }
        }
        ("apps", "Deployment") => {
            default_template(obj.pointer_mut("/spec/template"));
            let spec = object(obj, "spec");
            entry(spec, "replicas", json!(1));
            let strategy = object(spec, "strategy");
            entry(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type") == Some(&json!("RollingUpdate")) {
                let ru = object(strategy, "rollingUpdate");
                entry(ru, "maxUnavailable", json!("25%"));
                entry(ru, "maxSurge", json!("25%"));
            }
            entry(spec, "revisionHistoryLimit", json!(10));
            entry(spec, "progressDeadlineSeconds", json!(600));
            status_zeros(obj, create, &[]);
        }
        ("apps", "DaemonSet") => {
            default_template(obj.pointer_mut("/spec/template"));
            let spec = object(obj, "spec");
            let strategy = object(spec, "updateStrategy");
            entry(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type") == Some(&json!("RollingUpdate")) {
                let ru = object(strategy, "rollingUpdate");
                entry(ru, "maxUnavailable", json!(1));
                entry(ru, "maxSurge", json!(0));
            }
            entry(spec, "revisionHistoryLimit", json!(10));
            status_zeros(
                obj,
                create,
                &[
                    ("currentNumberScheduled", json!(0)),
                    ("numberMisscheduled", json!(0)),
                    ("desiredNumberScheduled", json!(0)),
                    ("numberReady", json!(0)),
                ],
            );
        }
        ("apps", "StatefulSet") => {
            default_template(obj.pointer_mut("/spec/template"));
            let spec = object(obj, "spec");
            entry(spec, "podManagementPolicy", json!("OrderedReady"));
            let strategy = object(spec, "updateStrategy");
            if !strategy.contains_key("type") {
                strategy.insert("type".into(), json!("RollingUpdate"));
                entry(strategy, "rollingUpdate", json!({}));
            }
            if strategy.get("type") == Some(&json!("RollingUpdate")) {
                if let Some(ru) = strategy
                    .get_mut("rollingUpdate")
                    .and_then(Value::as_object_mut)
                {
                    entry_map(ru, "partition", json!(0));
                }
            }
            let retention = object(spec, "persistentVolumeClaimRetentionPolicy");
            entry(retention, "whenDeleted", json!("Retain"));
            entry(retention, "whenScaled", json!("Retain"));
            entry(spec, "replicas", json!(1));
            entry(spec, "revisionHistoryLimit", json!(10));
            status_zeros(
                obj,
                create,
                &[("replicas", json!(0)), ("availableReplicas", json!(0))],
            );
        }
        ("apps", "ReplicaSet") => {
            default_template(obj.pointer_mut("/spec/template"));
            entry(object(obj, "spec"), "replicas", json!(1));
            status_zeros(obj, create, &[("replicas", json!(0))]);
        }
        ("batch", "Job") => default_job(obj, create),
        ("batch", "CronJob") => {
            let spec = object(obj, "spec");
            entry(spec, "concurrencyPolicy", json!("Allow"));
            entry(spec, "suspend", json!(false));
            entry(spec, "successfulJobsHistoryLimit", json!(3));
            entry(spec, "failedJobsHistoryLimit", json!(1));
            if let Some(jt) = obj.pointer_mut("/spec/jobTemplate/spec/template") {
                default_template(Some(jt));
            }
            status_zeros(obj, create, &[]);
        }
        ("policy", "PodDisruptionBudget") => status_zeros(
            obj,
            create,
            &[
                ("disruptionsAllowed", json!(0)),
                ("currentHealthy", json!(0)),
                ("desiredHealthy", json!(0)),
                ("expectedPods", json!(0)),
            ],
        ),
        ("scheduling.k8s.io", "PriorityClass") => {
            entry(obj, "preemptionPolicy", json!("PreemptLowerPriority"));
        }
        ("flowcontrol.apiserver.k8s.io", "FlowSchema" | "PriorityLevelConfiguration") => {
            crate::flowcontrol::spec::default(kind, obj);
            status_zeros(obj, create, &[]);
        }
        _ => {}
    }
}

/// Whether kube-apiserver keeps `metadata.generation` for this built-in
/// kind (its strategy sets it to 1 on create and bumps it when the spec
/// changes); `Some(status_apart)` if so.
pub(crate) fn generation(group: &str, kind: &str) -> Option<bool> {
    match (group, kind) {
        ("", "Pod")
        | ("", "ReplicationController")
        | ("apps", "Deployment" | "DaemonSet" | "StatefulSet" | "ReplicaSet")
        | ("batch", "Job" | "CronJob")
        | ("policy", "PodDisruptionBudget")
        | ("flowcontrol.apiserver.k8s.io", "FlowSchema" | "PriorityLevelConfiguration") => {
            Some(true)
        }
        ("", "PodTemplate")
        | ("scheduling.k8s.io", "PriorityClass")
        | ("resource.k8s.io", "DeviceClass" | "ResourceSlice") => Some(false),
        _ => None,
    }
}

/// A pod's QoS class, as kube-apiserver computes it on create: BestEffort
/// without any request or limit, Guaranteed when every container limits
/// cpu and memory and requests what it limits, Burstable otherwise.
pub(crate) fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        let counted = |m: Option<&Map<String, Value>>| {
            m.map(|m| m.keys().filter(|k| *k == "cpu" || *k == "memory").count())
                .unwrap_or(0)
        };
        if counted(requests) > 0 || counted(limits) > 0 {
            any = true;
        }
        for r in ["cpu", "memory"] {
            let l = limits.and_then(|m| m.get(r));
            let q = requests.and_then(|m| m.get(r));
            if l.is_none() || (q.is_some() && q != l) {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed && !containers.is_empty() {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The object at `key` of `v`, made one if it is absent or not an object.
fn object<'a, T: AsMap + ?Sized>(v: &'a mut T, key: &str) -> &'a mut Map<String, Value> {
    let m = v.as_map();
    if !m.get(key).is_some_and(Value::is_object) {
        m.insert(key.into(), json!({}));
    }
    m.get_mut(key)
        .and_then(Value::as_object_mut)
        .expect("just made an object")
}

/// A JSON object, or a value made one.
trait AsMap {
    fn as_map(&mut self) -> &mut Map<String, Value>;
}

impl AsMap for Value {
    fn as_map(&mut self) -> &mut Map<String, Value> {
        if !self.is_object() {
            *self = json!({});
        }
        self.as_object_mut().expect("just made an object")
    }
}

impl AsMap for Map<String, Value> {
    fn as_map(&mut self) -> &mut Map<String, Value> {
        self
    }
}

fn array<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// A field set unless present (`null` counts as absent, as a nil pointer).
/// Nothing on a value that is not an object.
fn entry<T: AsMap + ?Sized>(v: &mut T, key: &str, default: Value) {
    entry_map(v.as_map(), key, default);
}

fn entry_map(m: &mut Map<String, Value>, key: &str, default: Value) {
    if !m.contains_key(key) || m[key].is_null() {
        m.insert(key.into(), default);
    }
}

/// A strategy's `PrepareForCreate`: the status a client sent is dropped.
fn reset_status(obj: &mut Value, to: Value) {
    obj["status"] = to;
}

/// The status fields Go always writes (`replicas: 0`), after a reset on
/// create.
fn status_zeros(obj: &mut Value, create: bool, zeros: &[(&str, Value)]) {
    if create {
        reset_status(obj, json!({}));
    }
    let status = object(obj, "status");
    for (k, v) in zeros {
        entry_map(status, k, v.clone());
    }
}

/// `SetDefaults_Pod`: a container's limits are its requests where it
/// requests nothing.
fn requests_from_limits(spec: &mut Value) {
    for key in ["containers", "initContainers"] {
        for c in array(spec, key) {
            let Some(limits) = c
                .pointer("/resources/limits")
                .and_then(Value::as_object)
                .cloned()
            else {
                continue;
            };
            let requests = object(object_value(c, "resources"), "requests");
            for (k, v) in limits {
                requests.entry(k).or_insert(v);
            }
        }
    }
}

fn object_value<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
    object(v, key);
    &mut v[key]
}

/// A pod template: its spec's defaults (not a Pod's own: no
/// `enableServiceLinks`, no requests from limits).
fn default_template(template: Option<&mut Value>) {
    if let Some(spec) = template.and_then(|t| t.get_mut("spec")) {
        default_pod_spec(spec);
    }
}

/// `SetDefaults_PodSpec` and what it holds: containers, probes, ports,
/// volumes.
fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    entry(spec, "dnsPolicy", json!("ClusterFirst"));
    entry(spec, "restartPolicy", json!("Always"));
    entry(spec, "securityContext", json!({}));
    entry(spec, "terminationGracePeriodSeconds", json!(30));
    entry(spec, "schedulerName", json!("default-scheduler"));
    let host_network = spec.get("hostNetwork") == Some(&json!(true));
    for key in ["containers", "initContainers", "ephemeralContainers"] {
        for c in array(spec, key) {
            default_container(c, host_network);
        }
    }
    for v in array(spec, "volumes") {
        default_volume(v);
    }
}

fn default_container(c: &mut Value, host_network: bool) {
    if !c.is_object() {
        return;
    }
    if !c
        .get("imagePullPolicy")
        .is_some_and(|p| p.as_str().is_some_and(|s| !s.is_empty()))
    {
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let policy = if image_tag(image) == "latest" {
            "Always"
        } else {
            "IfNotPresent"
        };
        c["imagePullPolicy"] = json!(policy);
    }
    entry(c, "terminationMessagePath", json!("/dev/termination-log"));
    entry(c, "terminationMessagePolicy", json!("File"));
    entry(c, "resources", json!({}));
    for p in array(c, "ports") {
        entry(p, "protocol", json!("TCP"));
        if host_network && p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0 {
            if let Some(cp) = p.get("containerPort").cloned() {
                p["hostPort"] = cp;
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).filter(|p| p.is_object()) {
            for (k, v) in [
                ("timeoutSeconds", 1),
                ("periodSeconds", 10),
                ("successThreshold", 1),
                ("failureThreshold", 3),
            ] {
                if p.get(k).and_then(Value::as_i64).unwrap_or(0) == 0 {
                    p[k] = json!(v);
                }
            }
            if let Some(h) = p.get_mut("httpGet").filter(|h| h.is_object()) {
                entry(h, "path", json!("/"));
                entry(h, "scheme", json!("HTTP"));
            }
        }
    }
    for e in array(c, "env") {
        if let Some(f) = e.pointer_mut("/valueFrom/fieldRef") {
            entry(f, "apiVersion", json!("v1"));
        }
    }
}

/// The tag of an image reference as the kubelet's parser reads it:
/// `latest` when there is neither tag nor digest.
fn image_tag(image: &str) -> &str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag,
        None if digest => "",
        None => "latest",
    }
}

fn default_volume(v: &mut Value) {
    let Some(m) = v.as_object_mut() else {
        return;
    };
    // No source at all: an emptyDir.
    if m.keys().all(|k| k == "name") {
        m.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = m.get_mut(source).filter(|s| s.is_object()) {
            entry(s, "defaultMode", json!(420));
        }
    }
    if let Some(h) = m.get_mut("hostPath").filter(|s| s.is_object()) {
        entry(h, "type", json!(""));
    }
    if let Some(p) = m.get_mut("projected") {
        for src in array(p, "sources") {
            if let Some(t) = src.get_mut("serviceAccountToken") {
                entry(t, "expirationSeconds", json!(3600));
            }
        }
    }
}

fn default_service(obj: &mut Value) {
    let spec = object(obj, "spec");
    entry_map(spec, "sessionAffinity", json!("None"));
    if spec.get("sessionAffinity") == Some(&json!("None")) {
        spec.remove("sessionAffinityConfig");
    }
    if spec.get("sessionAffinity") == Some(&json!("ClientIP"))
        && spec
            .get("sessionAffinityConfig")
            .and_then(|c| c.pointer("/clientIP/timeoutSeconds"))
            .is_none()
    {
        spec.insert(
            "sessionAffinityConfig".into(),
            json!({"clientIP": {"timeoutSeconds": 10800}}),
        );
    }
    entry_map(spec, "type", json!("ClusterIP"));
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            entry(p, "protocol", json!("TCP"));
            let unset = match p.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                _ => false,
            };
            if unset {
                if let Some(port) = p.get("port").cloned() {
                    p["targetPort"] = port;
                }
            }
        }
    }
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let external = ty == "NodePort"
        || ty == "LoadBalancer"
        || spec
            .get("externalIPs")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
    if external {
        entry_map(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        entry_map(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        entry_map(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    let status = object(obj, "status");
    entry_map(status, "loadBalancer", json!({}));
}

fn default_node(obj: &mut Value) {
    let status = object(obj, "status");
    if !status.contains_key("allocatable") {
        if let Some(c) = status.get("capacity").cloned() {
            status.insert("allocatable".into(), c);
        }
    }
    let endpoints = status.entry("daemonEndpoints").or_insert_with(|| json!({}));
    if let Some(e) = endpoints.as_object_mut() {
        let kubelet = e.entry("kubeletEndpoint").or_insert_with(|| json!({}));
        entry(kubelet, "Port", json!(0));
    }
    let info = status.entry("nodeInfo").or_insert_with(|| json!({}));
    for k in [
        "machineID",
        "systemUUID",
        "bootID",
        "kernelVersion",
        "osImage",
        "containerRuntimeVersion",
        "kubeletVersion",
        "kubeProxyVersion",
        "operatingSystem",
        "architecture",
    ] {
        entry(info, k, json!(""));
    }
    if let Some(conds) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conds {
            entry(c, "lastHeartbeatTime", Value::Null);
            entry(c, "lastTransitionTime", Value::Null);
        }
    }
}

fn default_job(obj: &mut Value, create: bool) {
    default_template(obj.pointer_mut("/spec/template"));
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let manual = obj.pointer("/spec/manualSelector") == Some(&json!(true));
    if create && !manual && !uid.is_empty() {
        // The job strategy's generated selector and template labels.
        let template = object_value(object_value(obj, "spec"), "template");
        let labels = object(object_value(template, "metadata"), "labels");
        labels.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
        labels.insert("batch.kubernetes.io/job-name".into(), json!(name));
        labels.insert("controller-uid".into(), json!(uid));
        labels.insert("job-name".into(), json!(name));
        obj["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    }
    let spec = object(obj, "spec");
    if !spec.contains_key("completions") && !spec.contains_key("parallelism") {
        spec.insert("completions".into(), json!(1));
    }
    entry_map(spec, "parallelism", json!(1));
    let per_index = spec
        .get("backoffLimitPerIndex")
        .is_some_and(|v| !v.is_null());
    entry_map(
        spec,
        "backoffLimit",
        json!(if per_index { i32::MAX } else { 6 }),
    );
    entry_map(spec, "completionMode", json!("NonIndexed"));
    entry_map(spec, "suspend", json!(false));
    let failure_policy = spec.get("podFailurePolicy").is_some_and(|v| !v.is_null());
    entry_map(
        spec,
        "podReplacementPolicy",
        json!(if failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        }),
    );
    entry_map(spec, "manualSelector", json!(false));
    // A Job without labels takes its template's (defaulting again when
    // read back, after the strategy added its own).
    let labels = obj.pointer("/spec/template/metadata/labels").cloned();
    if let Some(l) = labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
        if !obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
        {
            obj["metadata"]["labels"] = l;
        }
    }
    status_zeros(obj, create, &[]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags() {
        assert_eq!(image_tag("busybox"), "latest");
        assert_eq!(image_tag("busybox:1.36"), "1.36");
        assert_eq!(image_tag("registry:5000/busybox"), "latest");
        assert_eq!(image_tag("registry:5000/busybox:latest"), "latest");
        assert_eq!(image_tag("busybox@sha256:abc"), "");
    }

    #[test]
    fn qos_classes() {
        assert_eq!(
            qos_class(&json!({"containers": [{"name": "c"}]})),
            "BestEffort"
        );
        assert_eq!(
            qos_class(&json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]})),
            "Burstable"
        );
        assert_eq!(
            qos_class(&json!({"containers": [{"resources": {
                "limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}]})),
            "Guaranteed"
        );
    }

    #[test]
    fn a_job_gets_its_selector_and_counts() {
        let mut j = json!({"metadata": {"name": "j", "uid": "u"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x:1"}], "restartPolicy": "Never"}}}});
        default_object("batch", "Job", &mut j, true);
        assert_eq!(j["spec"]["parallelism"], 1);
        assert_eq!(j["spec"]["completions"], 1);
        assert_eq!(
            j["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            "u"
        );
        assert_eq!(j["metadata"]["labels"]["job-name"], "j");
        assert_eq!(
            j["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
    }
}
