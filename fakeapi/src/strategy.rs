//! What the real server's registry does to built-in kinds beyond the
//! metadata rules every kind shares: defaults (applied when a body is
//! decoded, and again after a mutating webhook patched it), each kind's
//! strategy on create and update (generated fields, validation), and what
//! its deletions do to dependents by default ([`gc_default`]).
//!
//! `batch/v1` Job, as kube-apiserver 1.35 does it (`SetDefaults_Job`,
//! `pkg/registry/batch/job/strategy.go`, `ValidateJob`/`ValidateJobUpdate`
//! for what controllers rely on), because kube-controller-manager's job
//! controller dereferences the defaulted fields and selects pods by the
//! generated selector:
//!
//! - defaults: `completions` and `parallelism` 1 when both are unset, else
//!   `parallelism` 1; `backoffLimit` 6 (2147483647 with
//!   `backoffLimitPerIndex`); `completionMode: NonIndexed`; `suspend: false`;
//!   `podReplacementPolicy` (`Failed` with a `podFailurePolicy`, else
//!   `TerminatingOrFailed`); `manualSelector: false`; the job's labels from
//!   its template's when it has none; the pod template's spec defaults;
//! - on create: the selector `batch.kubernetes.io/controller-uid=<uid>` and
//!   the template's labels (`batch.kubernetes.io/job-name`, `job-name`,
//!   `batch.kubernetes.io/controller-uid`, `controller-uid`), unless
//!   `manualSelector`; `status` emptied; `metadata.generation` 1;
//! - on update: `generation` bumped when the spec changes; `selector`,
//!   `completionMode`, `podFailurePolicy`, `backoffLimitPerIndex`,
//!   `managedBy`, `successPolicy` and (but for an Indexed job) `completions`
//!   immutable; the template immutable, except, while the job is suspended
//!   and has never started, its scheduling directives (node selector, node
//!   affinity, tolerations, labels, annotations, scheduling gates), which
//!   Kueue changes before it admits a job;
//! - validation: a selector matching the template's labels, a template with
//!   containers and a `restartPolicy` of `OnFailure` or `Never`,
//!   non-negative counts, `completions` for an Indexed job.

use crate::error::{ApiError, FieldError, Result};
use crate::resources::ResourceInfo;
use crate::selector::LabelSelector;
use crate::store::gc::DefaultPolicy;
use serde_json::{json, Map, Value};

/// What a deletion that names no policy does to the kind's dependents:
/// the `DefaultGarbageCollectionPolicy` of kube-apiserver's strategy, for
/// the one version fakeapi serves of each kind. v1 ReplicationControllers
/// and batch/v1 Jobs orphan, for compatibility (their other versions
/// delete); Events take no collector finalizer; every other kind, custom
/// ones included, deletes.
pub(crate) fn gc_default(group: &str, plural: &str, custom: bool) -> DefaultPolicy {
    match (group, plural) {
        _ if custom => DefaultPolicy::Delete,
        ("", "replicationcontrollers") | ("batch", "jobs") => DefaultPolicy::Orphan,
        ("", "events") | ("events.k8s.io", "events") => DefaultPolicy::Unsupported,
        _ => DefaultPolicy::Delete,
    }
}

/// Defaults of a decoded body (create or update), before admission.
pub(crate) fn defaults(info: &ResourceInfo, obj: &mut Value) {
    if (info.group, info.kind) == ("batch", "Job") {
        job_defaults(obj);
    }
}

/// The kind's strategy for a new object, after its metadata (name, uid)
/// is set: generated fields and validation.
pub(crate) fn prepare_create(info: &ResourceInfo, obj: &mut Value) -> Result<()> {
    if crate::admission::policy::is_policy_resource(info.group, info.plural) {
        return crate::admission::policy::spec::admit(info.kind, obj, None, false);
    }
    if info.group == "admissionregistration.k8s.io" {
        return crate::admission::config::admit(info.kind, obj, None);
    }
    if (info.group, info.kind) == ("batch", "Job") {
        job_defaults(obj);
        job_create(obj);
        return validate_job(obj, None);
    }
    Ok(())
}

/// The kind's strategy for an update of the main resource (`status` is
/// handled by the caller): generation and validation against the old object.
pub(crate) fn prepare_update(
    info: &ResourceInfo,
    obj: &mut Value,
    old: &Value,
    subresource: Option<&str>,
) -> Result<()> {
    if crate::admission::policy::is_policy_resource(info.group, info.plural) {
        let status = subresource == Some("status");
        return crate::admission::policy::spec::admit(info.kind, obj, Some(old), status);
    }
    if info.group == "admissionregistration.k8s.io" {
        return crate::admission::config::admit(info.kind, obj, Some(old));
    }
    if (info.group, info.kind) != ("batch", "Job") {
        return Ok(());
    }
    if subresource.is_none() {
        job_defaults(obj);
    }
    let bumped = crate::store::next_generation(Some(old), |o| obj.get("spec") != o.get("spec"));
    obj["metadata"]["generation"] = json!(bumped);
    if subresource.is_none() {
        validate_job(obj, Some(old))?;
    }
    Ok(())
}

/// `SetDefaults_PodSpec`'s pod-level defaults, for pod templates.
fn pod_spec_defaults(spec: &mut Map<String, Value>) {
    for (k, v) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("securityContext", json!({})),
        ("schedulerName", json!("default-scheduler")),
    ] {
        spec.entry(k).or_insert(v);
    }
}

fn job_defaults(obj: &mut Value) {
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    let template_labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    let spec = obj["spec"].as_object_mut().expect("an object");
    let unset = |spec: &Map<String, Value>, k: &str| spec.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    if unset(spec, "parallelism") {
        spec.insert("parallelism".into(), json!(1));
    }
    if unset(spec, "backoffLimit") {
        let limit = if unset(spec, "backoffLimitPerIndex") {
            6
        } else {
            i32::MAX as i64
        };
        spec.insert("backoffLimit".into(), json!(limit));
    }
    if unset(spec, "completionMode") {
        spec.insert("completionMode".into(), json!("NonIndexed"));
    }
    if unset(spec, "suspend") {
        spec.insert("suspend".into(), json!(false));
    }
    if unset(spec, "podReplacementPolicy") {
        let p = if unset(spec, "podFailurePolicy") {
            "TerminatingOrFailed"
        } else {
            "Failed"
        };
        spec.insert("podReplacementPolicy".into(), json!(p));
    }
    if unset(spec, "manualSelector") {
        spec.insert("manualSelector".into(), json!(false));
    }
    let template = spec.entry("template").or_insert_with(|| json!({}));
    if let Some(t) = template.as_object_mut() {
        let pod_spec = t.entry("spec").or_insert_with(|| json!({}));
        if let Some(ps) = pod_spec.as_object_mut() {
            pod_spec_defaults(ps);
        }
    }
    if let Some(labels) = template_labels {
        let has_own = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty());
        if !has_own {
            if !obj.get("metadata").is_some_and(Value::is_object) {
                obj["metadata"] = json!({});
            }
            obj["metadata"]["labels"] = labels;
        }
    }
}

/// `PrepareForCreate`: the generated selector and template labels, an
/// empty status, generation 1.
fn job_create(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let manual = obj
        .pointer("/spec/manualSelector")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !manual {
        let template = &mut obj["spec"]["template"];
        if !template.get("metadata").is_some_and(Value::is_object) {
            template["metadata"] = json!({});
        }
        if !template["metadata"]
            .get("labels")
            .is_some_and(Value::is_object)
        {
            template["metadata"]["labels"] = json!({});
        }
        let labels = template["metadata"]["labels"]
            .as_object_mut()
            .expect("an object");
        for k in ["job-name", "batch.kubernetes.io/job-name"] {
            labels.entry(k).or_insert_with(|| json!(name));
        }
        for k in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
            labels.entry(k).or_insert_with(|| json!(uid));
        }
        let spec = &mut obj["spec"];
        if !spec.get("selector").is_some_and(Value::is_object) {
            spec["selector"] = json!({});
        }
        if !spec["selector"]
            .get("matchLabels")
            .is_some_and(Value::is_object)
        {
            spec["selector"]["matchLabels"] = json!({});
        }
        spec["selector"]["matchLabels"]
            .as_object_mut()
            .expect("an object")
            .entry("batch.kubernetes.io/controller-uid")
            .or_insert_with(|| json!(uid));
    }
    obj["status"] = json!({});
    obj["metadata"]["generation"] = json!(1);
}

fn validate_job(obj: &Value, old: Option<&Value>) -> Result<()> {
    let mut errs = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    for f in ["parallelism", "completions", "backoffLimit"] {
        if let Some(n) = spec.get(f).and_then(Value::as_i64) {
            if n < 0 {
                errs.push(FieldError::invalid(
                    format!("spec.{f}"),
                    &json!(n),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    match spec.get("completionMode").and_then(Value::as_str) {
        Some("NonIndexed") | None => {}
        Some("Indexed") => {
            if spec.get("completions").is_none_or(Value::is_null) {
                errs.push(FieldError::required(
                    "spec.completions",
                    "when completion mode is Indexed",
                ));
            }
        }
        Some(other) => errs.push(FieldError::not_supported(
            "spec.completionMode",
            &json!(other),
            &["NonIndexed".into(), "Indexed".into()],
        )),
    }
    let template_labels = spec.pointer("/template/metadata/labels");
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => match LabelSelector::from_object(sel) {
            Err(e) => errs.push(FieldError::invalid("spec.selector", sel, e)),
            Ok(sel) => {
                if !sel.matches_labels(template_labels) {
                    errs.push(FieldError::invalid(
                        "spec.template.metadata.labels",
                        template_labels.unwrap_or(&Value::Null),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        },
    }
    if spec
        .pointer("/template/spec/containers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        errs.push(FieldError::required("spec.template.spec.containers", ""));
    }
    match spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
    {
        Some("OnFailure") | Some("Never") => {}
        None | Some("Always") | Some("") => errs.push(FieldError::required(
            "spec.template.spec.restartPolicy",
            r#"valid values: "OnFailure", "Never""#,
        )),
        Some(other) => errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            &json!(other),
            &["OnFailure".into(), "Never".into()],
        )),
    }
    if let Some(old) = old {
        let old_spec = old.get("spec").cloned().unwrap_or(Value::Null);
        let indexed = spec.get("completionMode").and_then(Value::as_str) == Some("Indexed");
        let mut immutable = vec![
            "selector",
            "completionMode",
            "podFailurePolicy",
            "backoffLimitPerIndex",
            "managedBy",
            "successPolicy",
        ];
        if !indexed {
            immutable.push("completions");
        }
        for f in immutable {
            if spec.get(f) != old_spec.get(f) {
                errs.push(FieldError::invalid(
                    format!("spec.{f}"),
                    spec.get(f).unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
        }
        if !template_update_allowed(&spec, &old_spec, old) {
            errs.push(FieldError::invalid(
                "spec.template",
                spec.get("template").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
    if errs.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(ApiError::invalid("batch", "Job", name, errs))
}

/// The template may change only while the job is suspended, and then only
/// in its scheduling directives if it has never started.
fn template_update_allowed(spec: &Value, old_spec: &Value, old: &Value) -> bool {
    let (new_t, old_t) = (spec.get("template"), old_spec.get("template"));
    if new_t == old_t {
        return true;
    }
    let suspended = old_spec.get("suspend").and_then(Value::as_bool) == Some(true);
    let never_started = old.pointer("/status/startTime").is_none_or(Value::is_null);
    if !(suspended && never_started) {
        return false;
    }
    // The old template with the new one's mutable directives: what is left
    // must not differ.
    let (Some(new_t), Some(mut merged)) = (new_t, old_t.cloned()) else {
        return false;
    };
    for meta in ["labels", "annotations"] {
        set_or_remove(
            &mut merged,
            &["metadata", meta],
            new_t.pointer(&format!("/metadata/{meta}")),
        );
    }
    for f in ["nodeSelector", "tolerations", "schedulingGates"] {
        set_or_remove(
            &mut merged,
            &["spec", f],
            new_t.pointer(&format!("/spec/{f}")),
        );
    }
    let new_affinity = new_t.pointer("/spec/affinity/nodeAffinity");
    let old_other_affinity = merged.pointer("/spec/affinity").map(|a| {
        let mut a = a.clone();
        if let Some(m) = a.as_object_mut() {
            m.remove("nodeAffinity");
        }
        a
    });
    match (new_t.pointer("/spec/affinity"), old_other_affinity) {
        // Cleared: allowed when the old one had node affinity only.
        (None, Some(rest)) if rest.as_object().is_none_or(Map::is_empty) => {
            set_or_remove(&mut merged, &["spec", "affinity"], None)
        }
        _ => set_or_remove(
            &mut merged,
            &["spec", "affinity", "nodeAffinity"],
            new_affinity,
        ),
    }
    // An affinity left empty by the swap compares as absent.
    if merged
        .pointer("/spec/affinity")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
        && new_t.pointer("/spec/affinity").is_none()
    {
        set_or_remove(&mut merged, &["spec", "affinity"], None);
    }
    merged == *new_t
}

fn set_or_remove(obj: &mut Value, path: &[&str], v: Option<&Value>) {
    let (last, parents) = path.split_last().expect("a path");
    let mut cur = obj;
    for p in parents {
        if v.is_none() && cur.get(*p).is_none() {
            return;
        }
        if !cur.get(*p).is_some_and(Value::is_object) {
            cur[*p] = json!({});
        }
        cur = &mut cur[*p];
    }
    let m = cur.as_object_mut().expect("an object");
    match v {
        Some(v) => {
            m.insert(last.to_string(), v.clone());
        }
        None => {
            m.remove(*last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;

    fn job() -> Value {
        json!({"metadata": {"name": "pi", "uid": "u-1"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}})
    }

    #[test]
    fn a_new_job_gets_defaults_and_its_selector() {
        let info = lookup("batch", "v1", "jobs").unwrap();
        let mut j = job();
        prepare_create(info, &mut j).unwrap();
        assert_eq!(j["spec"]["completions"], 1);
        assert_eq!(j["spec"]["parallelism"], 1);
        assert_eq!(j["spec"]["backoffLimit"], 6);
        assert_eq!(j["spec"]["completionMode"], "NonIndexed");
        assert_eq!(j["spec"]["suspend"], false);
        assert_eq!(j["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(
            j["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        let l = &j["spec"]["template"]["metadata"]["labels"];
        assert_eq!(l["batch.kubernetes.io/job-name"], "pi");
        assert_eq!(l["controller-uid"], "u-1");
        assert_eq!(j["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
        assert_eq!(j["metadata"]["generation"], 1);
        assert_eq!(j["status"], json!({}));
    }

    #[test]
    fn bad_jobs_are_refused_with_the_real_messages() {
        let info = lookup("batch", "v1", "jobs").unwrap();
        let mut j = job();
        j["spec"]["template"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("restartPolicy");
        let e = prepare_create(info, &mut j).unwrap_err().to_string();
        assert!(
            e.contains(r#"spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never""#),
            "{e}"
        );
        let mut j = job();
        j["spec"]["completionMode"] = json!("Indexed");
        j["spec"]["parallelism"] = json!(2);
        let e = prepare_create(info, &mut j).unwrap_err().to_string();
        assert!(
            e.contains("spec.completions: Required value: when completion mode is Indexed"),
            "{e}"
        );
        let mut j = job();
        j["spec"]["manualSelector"] = json!(true);
        j["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
        let e = prepare_create(info, &mut j).unwrap_err().to_string();
        assert!(
            e.contains("`selector` does not match template `labels`"),
            "{e}"
        );
    }

    #[test]
    fn a_suspended_job_changes_its_scheduling_directives_only() {
        let info = lookup("batch", "v1", "jobs").unwrap();
        let mut old = job();
        old["spec"]["suspend"] = json!(true);
        prepare_create(info, &mut old).unwrap();
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        new["spec"]["template"]["metadata"]["annotations"] = json!({"x": "y"});
        new["spec"]["suspend"] = json!(false);
        prepare_update(info, &mut new, &old, None).unwrap();
        assert_eq!(new["metadata"]["generation"], 2);
        let mut image = old.clone();
        image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
        let e = prepare_update(info, &mut image, &old, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("spec.template: Invalid value"), "{e}");
        // Running: nothing of the template changes.
        let mut running = old.clone();
        running["spec"]["suspend"] = json!(false);
        let mut moved = running.clone();
        moved["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        assert!(prepare_update(info, &mut moved, &running, None).is_err());
        let mut sel = old.clone();
        sel["spec"]["selector"] = json!({"matchLabels": {"controller-uid": "u-1"}});
        let e = prepare_update(info, &mut sel, &old, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("spec.selector: Invalid value"), "{e}");
    }
}
