//! FlowSchemas' and PriorityLevelConfigurations' defaults and validation,
//! as kube-apiserver 1.35 does them (`pkg/apis/flowcontrol/v1`'s
//! defaulting, `pkg/apis/flowcontrol/validation`): the defaults on every
//! write, with Go's way of writing empty fields (a required list that is
//! missing is `null`, a `false` `clusterScope` is left out, a condition's
//! unset time is `null`), and the 422s with kube-apiserver's field paths and
//! messages. A value Go would print as a struct is printed as JSON.

use super::bootstrap;
use crate::error::FieldError;
use crate::validation::{is_dns1123_label, is_dns1123_subdomain};
use serde_json::{json, Map, Value};

/// `FlowSchemaMaxMatchingPrecedence`.
const MAX_PRECEDENCE: i64 = 10000;
const MAX_QUEUES: i64 = 10_000_000;
/// Shuffle sharding's hash: 60 bits.
const MAX_HASH_BITS: f64 = 60.0;
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const NS_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

fn object<'a>(v: &'a mut Value, k: &str) -> &'a mut Map<String, Value> {
    if !v.get(k).is_some_and(Value::is_object) {
        v[k] = json!({});
    }
    v[k].as_object_mut().expect("just made an object")
}

/// `k` as Go writes a field without `omitempty` that was not sent.
fn zero(m: &mut Map<String, Value>, k: &str, z: Value) {
    m.entry(k).or_insert(z);
}

/// `k` set to `d` when missing, `null` or (`zero_too`) 0.
fn default_int(m: &mut Map<String, Value>, k: &str, d: i64, zero_too: bool) {
    let unset = match m.get(k) {
        None | Some(Value::Null) => true,
        Some(v) => zero_too && v.as_i64() == Some(0),
    };
    if unset {
        m.insert(k.into(), json!(d));
    }
}

fn each<'a>(v: &'a mut Value, k: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(k)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter(|x| x.is_object())
}

fn default_conditions(obj: &mut Value) {
    if let Some(cs) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in cs.iter_mut().filter_map(Value::as_object_mut) {
            zero(c, "lastTransitionTime", Value::Null);
        }
    }
}

/// The defaults of a FlowSchema or PriorityLevelConfiguration (every
/// write), status aside (the caller resets it on create).
pub(crate) fn default(kind: &str, obj: &mut Value) {
    let spec = object(obj, "spec");
    let mut spec = Value::Object(std::mem::take(spec));
    match kind {
        "FlowSchema" => default_schema_spec(&mut spec),
        _ => default_level_spec(&mut spec),
    }
    obj["spec"] = spec;
    default_conditions(obj);
}

fn default_schema_spec(spec: &mut Value) {
    let m = spec.as_object_mut().expect("an object");
    default_int(m, "matchingPrecedence", 1000, true);
    zero(
        object(spec, "priorityLevelConfiguration"),
        "name",
        json!(""),
    );
    if let Some(d) = spec
        .get_mut("distinguisherMethod")
        .and_then(Value::as_object_mut)
    {
        zero(d, "type", json!(""));
    }
    for rule in each(spec, "rules") {
        let r = rule.as_object_mut().expect("an object");
        zero(r, "subjects", Value::Null);
        for s in each(rule, "subjects") {
            let s = s.as_object_mut().expect("an object");
            zero(s, "kind", json!(""));
            for k in ["user", "group"] {
                if let Some(x) = s.get_mut(k).and_then(Value::as_object_mut) {
                    zero(x, "name", json!(""));
                }
            }
            if let Some(x) = s.get_mut("serviceAccount").and_then(Value::as_object_mut) {
                zero(x, "namespace", json!(""));
                zero(x, "name", json!(""));
            }
        }
        for rr in each(rule, "resourceRules") {
            let rr = rr.as_object_mut().expect("an object");
            for k in ["verbs", "apiGroups", "resources", "namespaces"] {
                zero(rr, k, Value::Null);
            }
            if rr.get("clusterScope") == Some(&json!(false)) {
                rr.remove("clusterScope");
            }
        }
        for nr in each(rule, "nonResourceRules") {
            let nr = nr.as_object_mut().expect("an object");
            for k in ["verbs", "nonResourceURLs"] {
                zero(nr, k, Value::Null);
            }
        }
    }
}

fn default_level_spec(spec: &mut Value) {
    zero(spec.as_object_mut().expect("an object"), "type", json!(""));
    if let Some(l) = spec.get_mut("limited").filter(|l| l.is_object()) {
        let m = l.as_object_mut().expect("an object");
        default_int(m, "nominalConcurrencyShares", 30, false);
        default_int(m, "lendablePercent", 0, false);
        let lr = object(l, "limitResponse");
        zero(lr, "type", json!(""));
        if let Some(q) = lr.get_mut("queuing").and_then(Value::as_object_mut) {
            default_int(q, "handSize", 8, true);
            default_int(q, "queues", 64, true);
            default_int(q, "queueLengthLimit", 50, true);
        }
    }
    if let Some(e) = spec.get_mut("exempt").and_then(Value::as_object_mut) {
        default_int(e, "nominalConcurrencyShares", 0, false);
        default_int(e, "lendablePercent", 0, false);
    }
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn int(v: &Value, k: &str) -> i64 {
    v.get(k).and_then(Value::as_i64).unwrap_or(0)
}

fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Specs compared as Go's semantic equality compares them: an empty list
/// or map is a missing one.
fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !is_empty(x))
                .map(|(k, x)| (k.clone(), semantic(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.values().all(is_empty),
        _ => false,
    }
}

/// The 422 causes of a FlowSchema or PriorityLevelConfiguration (object
/// metadata aside: the caller checks it, the name as a DNS subdomain).
pub(crate) fn validate(kind: &str, obj: &Value, out: &mut Vec<FieldError>) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    match kind {
        "FlowSchema" => {
            validate_schema_spec(name, spec, out);
            if let Some(mandatory) = bootstrap::mandatory_spec(kind, name) {
                if semantic(spec) != semantic(&mandatory) {
                    out.push(FieldError::invalid(
                        "spec",
                        spec,
                        format!("spec of '{name}' must equal the fixed value"),
                    ));
                }
            }
        }
        _ => {
            if obj
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
                .is_some_and(|a| a.contains_key(PRESERVE_ZERO))
            {
                out.push(FieldError::forbidden(
                    "metadata.annotations",
                    format!("annotation '{PRESERVE_ZERO}' is forbidden"),
                ));
            }
            validate_level_spec(name, spec, out);
            if let Some(mandatory) = bootstrap::mandatory_spec(kind, name) {
                let (mut have, mut want) = (spec.clone(), mandatory);
                let detail = if name == "exempt" {
                    // The exempt level's `exempt` is the admin's to change.
                    for s in [&mut have, &mut want] {
                        if let Some(m) = s.as_object_mut() {
                            m.remove("exempt");
                        }
                    }
                    format!("spec of '{name}' except the 'spec.exempt' field must equal the fixed value")
                } else {
                    format!("spec of '{name}' must equal the fixed value")
                };
                if semantic(&have) != semantic(&want) {
                    out.push(FieldError::invalid("spec", spec, detail));
                }
            }
        }
    }
    validate_conditions(obj, out);
}

/// v1beta3's round-trip annotation, which v1 objects may not carry.
const PRESERVE_ZERO: &str = "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares";

fn validate_conditions(obj: &Value, out: &mut Vec<FieldError>) {
    let mut seen: Vec<&str> = Vec::new();
    let conditions = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for (i, c) in conditions.enumerate() {
        let ty = text(c, "type");
        let field = format!("status.conditions[{i}].type");
        if seen.contains(&ty) {
            out.push(FieldError::new(
                crate::error::FieldErrorKind::Duplicate,
                field.clone(),
                Some(crate::error::go_value(&json!(ty))),
                "",
            ));
        }
        seen.push(ty);
        if ty.is_empty() {
            out.push(FieldError::required(field, ""));
        }
    }
}

fn validate_schema_spec(name: &str, spec: &Value, out: &mut Vec<FieldError>) {
    let p = int(spec, "matchingPrecedence");
    if p <= 0 {
        out.push(FieldError::invalid(
            "spec.matchingPrecedence",
            &json!(p),
            "must be a positive value",
        ));
    }
    if p > MAX_PRECEDENCE {
        out.push(FieldError::invalid(
            "spec.matchingPrecedence",
            &json!(p),
            format!("must not be greater than {MAX_PRECEDENCE}"),
        ));
    }
    if p == 1 && name != "exempt" {
        out.push(FieldError::invalid(
            "spec.matchingPrecedence",
            &json!(p),
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(d) = spec.get("distinguisherMethod").filter(|d| !d.is_null()) {
        if !matches!(text(d, "type"), "ByNamespace" | "ByUser") {
            out.push(FieldError::not_supported(
                "spec.distinguisherMethod.type",
                d,
                &["ByNamespace".into(), "ByUser".into()],
            ));
        }
    }
    let level = spec
        .pointer("/priorityLevelConfiguration/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if level.is_empty() {
        out.push(FieldError::required(
            "spec.priorityLevelConfiguration.name",
            "must reference a priority level",
        ));
    } else {
        for m in is_dns1123_subdomain(level) {
            out.push(FieldError::invalid(
                "spec.priorityLevelConfiguration.name",
                &json!(level),
                m,
            ));
        }
    }
    let rules = spec.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        validate_rule(rule, &format!("spec.rules[{i}]"), out);
    }
}

fn validate_rule(rule: &Value, path: &str, out: &mut Vec<FieldError>) {
    let subjects = rule.get("subjects").and_then(Value::as_array);
    match subjects.filter(|s| !s.is_empty()) {
        Some(subjects) => {
            for (i, s) in subjects.iter().enumerate() {
                validate_subject(s, &format!("{path}.subjects[{i}]"), out);
            }
        }
        None => out.push(FieldError::required(
            format!("{path}.subjects"),
            "subjects must contain at least one value",
        )),
    }
    let list = |k: &str| {
        rule.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (resource_rules, non_resource_rules) = (list("resourceRules"), list("nonResourceRules"));
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        out.push(FieldError::required(
            path,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        validate_resource_rule(r, &format!("{path}.resourceRules[{i}]"), out);
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        validate_non_resource_rule(r, &format!("{path}.nonResourceRules[{i}]"), out);
    }
}

fn validate_subject(s: &Value, path: &str, out: &mut Vec<FieldError>) {
    let present = |k: &str| s.get(k).is_some_and(|x| !x.is_null());
    let forbid = |k: &str, what: &str, out: &mut Vec<FieldError>| {
        if present(k) {
            out.push(FieldError::forbidden(
                format!("{path}.{k}"),
                format!("{k} is forbidden when subject kind is not '{what}'"),
            ));
        }
    };
    let name_required = |k: &str, out: &mut Vec<FieldError>| -> Option<String> {
        let x = s.get(k).filter(|x| !x.is_null())?;
        let n = text(x, "name").to_string();
        if n.is_empty() {
            out.push(FieldError::required(format!("{path}.{k}.name"), ""));
        }
        Some(n)
    };
    match text(s, "kind") {
        "ServiceAccount" => {
            match s.get("serviceAccount").filter(|x| !x.is_null()) {
                None => out.push(FieldError::required(
                    format!("{path}.serviceAccount"),
                    "serviceAccount is required when subject kind is 'ServiceAccount'",
                )),
                Some(sa) => {
                    let name = text(sa, "name");
                    if name.is_empty() {
                        out.push(FieldError::required(
                            format!("{path}.serviceAccount.name"),
                            "",
                        ));
                    } else if name != "*" {
                        for m in is_dns1123_subdomain(name) {
                            out.push(FieldError::invalid(
                                format!("{path}.serviceAccount.name"),
                                &json!(name),
                                m,
                            ));
                        }
                    }
                    let ns = text(sa, "namespace");
                    if ns.is_empty() {
                        out.push(FieldError::required(
                            format!("{path}.serviceAccount.namespace"),
                            "must specify namespace for service account",
                        ));
                    } else {
                        for m in is_dns1123_label(ns) {
                            out.push(FieldError::invalid(
                                format!("{path}.serviceAccount.namespace"),
                                &json!(ns),
                                m,
                            ));
                        }
                    }
                }
            }
            forbid("user", "User", out);
            forbid("group", "Group", out);
        }
        "User" => {
            if name_required("user", out).is_none() {
                out.push(FieldError::required(
                    format!("{path}.user"),
                    "user is required when subject kind is 'User'",
                ));
            }
            forbid("serviceAccount", "ServiceAccount", out);
            forbid("group", "Group", out);
        }
        "Group" => {
            if name_required("group", out).is_none() {
                out.push(FieldError::required(
                    format!("{path}.group"),
                    "group is required when subject kind is 'Group'",
                ));
            }
            forbid("serviceAccount", "ServiceAccount", out);
            forbid("user", "User", out);
        }
        other => out.push(FieldError::not_supported(
            format!("{path}.kind"),
            &json!(other),
            &["Group".into(), "ServiceAccount".into(), "User".into()],
        )),
    }
}

fn validate_verbs(rule: &Value, path: &str, out: &mut Vec<FieldError>) {
    let verbs = strs(rule.get("verbs"));
    if verbs.is_empty() {
        out.push(FieldError::required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    } else if verbs.contains(&"*") {
        if verbs.len() > 1 {
            out.push(FieldError::invalid(
                format!("{path}.verbs"),
                &json!(verbs),
                "if '*' is present, must not specify other verbs",
            ));
        }
    } else if !verbs.iter().all(|v| VERBS.contains(v)) {
        out.push(FieldError::not_supported(
            format!("{path}.verbs"),
            &json!(verbs),
            &VERBS.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
        ));
    }
}

fn validate_resource_rule(rule: &Value, path: &str, out: &mut Vec<FieldError>) {
    validate_verbs(rule, path, out);
    for (k, what) in [("apiGroups", "api group"), ("resources", "resource")] {
        let xs = strs(rule.get(k));
        if xs.is_empty() {
            out.push(FieldError::required(
                format!("{path}.{k}"),
                format!("resource rules must supply at least one {what}"),
            ));
        } else if xs.len() > 1 && xs.contains(&"*") {
            out.push(FieldError::invalid(
                format!("{path}.{k}"),
                &json!(xs),
                format!("if '*' is present, must not specify other {what}s"),
            ));
        }
    }
    let namespaces = strs(rule.get("namespaces"));
    let cluster = rule.get("clusterScope") == Some(&json!(true));
    if namespaces.is_empty() && !cluster {
        out.push(FieldError::required(
            format!("{path}.namespaces"),
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if namespaces.contains(&"*") {
        if namespaces.len() > 1 {
            out.push(FieldError::invalid(
                format!("{path}.namespaces"),
                &json!(namespaces),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, ns) in namespaces.iter().enumerate() {
            for m in is_dns1123_label(ns) {
                out.push(FieldError::invalid(
                    format!("{path}.namespaces[{i}]"),
                    &json!(ns),
                    format!("{NS_INTRO}{m}"),
                ));
            }
        }
    }
}

fn validate_non_resource_rule(rule: &Value, path: &str, out: &mut Vec<FieldError>) {
    validate_verbs(rule, path, out);
    let urls = strs(rule.get("nonResourceURLs"));
    if urls.is_empty() {
        out.push(FieldError::required(
            format!("{path}.nonResourceURLs"),
            "nonResourceURLs must contain at least one value",
        ));
    } else if urls.contains(&"*") {
        if urls.len() > 1 {
            out.push(FieldError::invalid(
                format!("{path}.nonResourceURLs"),
                &json!(urls),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, u) in urls.iter().enumerate() {
            if let Some(m) = non_resource_url_problem(u) {
                out.push(FieldError::invalid(
                    format!("{path}.nonResourceURLs[{i}]"),
                    &json!(u),
                    m,
                ));
            }
        }
    }
}

/// `ValidateNonResourceURLPath`: a path from the root, without spaces or
/// `//`, its one `*` only as a last segment.
fn non_resource_url_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("must not be empty");
    }
    if path == "/" {
        return None;
    }
    if !path.starts_with('/') {
        return Some("must start with slash");
    }
    if path.contains(' ') {
        return Some("must not contain white-space");
    }
    if path.contains("//") {
        return Some("must not contain double slash");
    }
    let stars = path.matches('*').count();
    if stars > 1 || (stars == 1 && !path.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

fn validate_level_spec(name: &str, spec: &Value, out: &mut Vec<FieldError>) {
    let ty = text(spec, "type");
    if (name == "exempt") != (ty == "Exempt") {
        out.push(FieldError::invalid(
            "spec.type",
            &json!(ty),
            "must be 'Exempt' if and only if `name` is 'exempt'",
        ));
    }
    let present = |k: &str| spec.get(k).filter(|x| !x.is_null());
    match ty {
        "Exempt" => {
            if present("limited").is_some() {
                out.push(FieldError::forbidden(
                    "spec.limited",
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(e) = present("exempt") {
                let shares = e.get("nominalConcurrencyShares").and_then(Value::as_i64);
                if let Some(n) = shares.filter(|n| *n < 0) {
                    out.push(FieldError::invalid(
                        "spec.exempt.nominalConcurrencyShares",
                        &json!(n),
                        "must be a non-negative integer",
                    ));
                }
                lendable(e, "spec.exempt", out);
            }
        }
        "Limited" => {
            if present("exempt").is_some() {
                out.push(FieldError::forbidden(
                    "spec.exempt",
                    "must be nil if the type is Limited",
                ));
            }
            match present("limited") {
                None => out.push(FieldError::required(
                    "spec.limited",
                    "must not be empty when type is Limited",
                )),
                Some(l) => validate_limited(l, out),
            }
        }
        other => out.push(FieldError::not_supported(
            "spec.type",
            &json!(other),
            &["Exempt".into(), "Limited".into()],
        )),
    }
}

fn lendable(v: &Value, path: &str, out: &mut Vec<FieldError>) {
    if let Some(p) = v
        .get("lendablePercent")
        .and_then(Value::as_i64)
        .filter(|p| !(0..=100).contains(p))
    {
        out.push(FieldError::invalid(
            format!("{path}.lendablePercent"),
            &json!(p),
            "must be between 0 and 100, inclusive",
        ));
    }
}

fn validate_limited(l: &Value, out: &mut Vec<FieldError>) {
    let shares = int(l, "nominalConcurrencyShares");
    if shares < 0 {
        out.push(FieldError::invalid(
            "spec.limited.nominalConcurrencyShares",
            &json!(shares),
            "must be a non-negative integer",
        ));
    }
    let null = Value::Null;
    let lr = l.get("limitResponse").unwrap_or(&null);
    let queuing = lr.get("queuing").filter(|q| !q.is_null());
    match text(lr, "type") {
        "Reject" => {
            if queuing.is_some() {
                out.push(FieldError::forbidden(
                    "spec.limited.limitResponse.queuing",
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        "Queue" => match queuing {
            None => out.push(FieldError::required(
                "spec.limited.limitResponse.queuing",
                "must not be empty if limited.limitResponse.type is Limited",
            )),
            Some(q) => validate_queuing(q, out),
        },
        other => out.push(FieldError::not_supported(
            "spec.limited.limitResponse.type",
            &json!(other),
            &["Queue".into(), "Reject".into()],
        )),
    }
    lendable(l, "spec.limited", out);
    if let Some(b) = l
        .get("borrowingLimitPercent")
        .and_then(Value::as_i64)
        .filter(|b| *b < 0)
    {
        out.push(FieldError::invalid(
            "spec.limited.borrowingLimitPercent",
            &json!(b),
            "if specified, must be a non-negative integer",
        ));
    }
}

fn validate_queuing(q: &Value, out: &mut Vec<FieldError>) {
    let path = "spec.limited.limitResponse.queuing";
    let (limit, queues, hand) = (
        int(q, "queueLengthLimit"),
        int(q, "queues"),
        int(q, "handSize"),
    );
    if limit <= 0 {
        out.push(FieldError::invalid(
            format!("{path}.queueLengthLimit"),
            &json!(limit),
            "must be positive",
        ));
    }
    if queues <= 0 {
        out.push(FieldError::invalid(
            format!("{path}.queues"),
            &json!(queues),
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        out.push(FieldError::invalid(
            format!("{path}.queues"),
            &json!(queues),
            format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    if hand <= 0 {
        out.push(FieldError::invalid(
            format!("{path}.handSize"),
            &json!(hand),
            "must be positive",
        ));
    } else if hand > queues {
        out.push(FieldError::invalid(
            format!("{path}.handSize"),
            &json!(hand),
            format!("should not be greater than queues ({queues})"),
        ));
    } else if entropy_bits(queues, hand) > MAX_HASH_BITS {
        out.push(FieldError::invalid(
            format!("{path}.handSize"),
            &json!(hand),
            format!("required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"),
        ));
    }
}

/// The bits of hash a hand of `hand` cards from a deck of `deck` takes
/// (shuffle sharding's `RequiredEntropyBits`: log2 of the deck per card,
/// rounded up).
fn entropy_bits(deck: i64, hand: i64) -> f64 {
    ((deck as f64).log2() * hand as f64).ceil()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_objects_are_defaulted_and_valid() {
        for o in bootstrap::suggested_levels()
            .into_iter()
            .chain(bootstrap::mandatory_levels())
            .chain(bootstrap::suggested_schemas())
            .chain(bootstrap::mandatory_schemas())
        {
            let kind = o["kind"].as_str().unwrap().to_string();
            let mut d = o.clone();
            default(&kind, &mut d);
            assert_eq!(
                d, o,
                "{kind} {} is written with its defaults",
                o["metadata"]["name"]
            );
            let mut errs = Vec::new();
            validate(&kind, &o, &mut errs);
            assert!(errs.is_empty(), "{}: {errs:?}", o["metadata"]["name"]);
        }
    }

    #[test]
    fn defaults_and_go_empty_fields() {
        let mut fs = json!({"spec": {"priorityLevelConfiguration": {"name": "x"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "u"}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": false}]}]},
            "status": {"conditions": [{"type": "T"}]}});
        default("FlowSchema", &mut fs);
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        let rr = &fs["spec"]["rules"][0]["resourceRules"][0];
        assert_eq!(rr["namespaces"], Value::Null);
        assert!(rr.get("namespaces").is_some() && rr.get("clusterScope").is_none());
        assert!(fs["status"]["conditions"][0]
            .get("lastTransitionTime")
            .is_some_and(Value::is_null));
        let mut pl = json!({"spec": {"type": "Limited", "limited": {
            "limitResponse": {"type": "Queue", "queuing": {"queues": 0}}}}});
        default("PriorityLevelConfiguration", &mut pl);
        assert_eq!(
            pl["spec"]["limited"],
            json!({"nominalConcurrencyShares": 30, "lendablePercent": 0,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}})
        );
    }

    #[test]
    fn refusals_name_kube_apiservers_fields() {
        let fields = |kind: &str, o: Value| {
            let mut o = o;
            default(kind, &mut o);
            let mut errs = Vec::new();
            validate(kind, &o, &mut errs);
            errs.into_iter().map(|e| e.to_string()).collect::<Vec<_>>()
        };
        let errs = fields(
            "FlowSchema",
            json!({"metadata": {"name": "f"}, "spec": {"matchingPrecedence": 1,
                "rules": [{"subjects": [{"kind": "User"}], "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/a/*/b"]}]}]}}),
        );
        assert_eq!(
            errs,
            [
                "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1",
                "spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
                "spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"/a/*/b\": wildcard can only do suffix matching",
            ]
        );
        let errs = fields(
            "PriorityLevelConfiguration",
            json!({"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {
                "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 5}}}}}),
        );
        assert_eq!(
            errs,
            ["spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)"]
        );
        let mut catch_all = bootstrap::catch_all_schema();
        catch_all["spec"]["matchingPrecedence"] = json!(9999);
        let errs = fields("FlowSchema", catch_all);
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].ends_with("spec of 'catch-all' must equal the fixed value"),
            "{errs:?}"
        );
        // The exempt level's `exempt` may change, nothing else of it.
        let mut exempt = bootstrap::mandatory_levels().remove(1);
        exempt["spec"]["exempt"]["nominalConcurrencyShares"] = json!(10);
        assert!(fields("PriorityLevelConfiguration", exempt).is_empty());
        assert_eq!(entropy_bits(128, 6), 42.0);
        assert_eq!(entropy_bits(100, 9), 60.0);
    }
}
