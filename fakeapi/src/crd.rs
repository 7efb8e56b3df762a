//! CustomResourceDefinitions: what the API server checks and fills in on a
//! CRD, and the definition the store serves its custom resources from.
//!
//! A CRD is an ordinary object of the built-in row
//! `customresourcedefinitions.apiextensions.k8s.io`; the store calls
//! [`admit`] before writing one (defaults, then the main validations of
//! apiextensions-apiserver, as a 422 with field paths) and, when it is
//! written, reads it with [`Definition::parse`] and adds its served
//! versions to its resource table (the naming and establishing controllers'
//! work, done at once: a CRD is `Established` as soon as it is created).
//! Conversion between versions is the `None` strategy: only `apiVersion`
//! changes. A CRD with a conversion webhook (`strategy: Webhook`) is
//! accepted (its owner, Kueue's cert controller for one, patches the
//! webhook's `caBundle`), but the webhook is not called: its objects are
//! served in their storage version only, and a request in another version
//! is refused with a message that says so.

use crate::error::{ApiError, FieldError};
use crate::schema::Schema;
use serde_json::{json, Value};
use std::sync::Arc;

/// The coscheduling plugin's `PodGroup` (`scheduling.x-k8s.io/v1alpha1`,
/// kubernetes-sigs/scheduler-plugins), written from its API documentation.
pub const COSCHEDULING_PODGROUP_CRD: &str =
    include_str!("../crds/scheduling.x-k8s.io_podgroups.yaml");

pub(crate) const GROUP: &str = "apiextensions.k8s.io";
pub(crate) const KIND: &str = "CustomResourceDefinition";

/// The scale subresource's paths (`.spec.replicas`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScaleSpec {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// An additional printer column (`kubectl get`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    pub name: String,
    pub ty: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// One version of a CRD.
#[derive(Debug, Clone)]
pub(crate) struct VersionDef {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub schema: Arc<Schema>,
    /// The version's `openAPIV3Schema` as written, which the OpenAPI
    /// documents publish (`None` without one).
    pub openapi: Option<Arc<Value>>,
    pub status: bool,
    pub scale: Option<ScaleSpec>,
    pub columns: Vec<Column>,
    /// `selectableFields` JSON paths, without the leading dot.
    pub selectable: Vec<String>,
}

/// Where errors in version `i`'s schema are reported: kube-apiserver
/// validates CRDs in their internal form, where a schema all versions
/// share is `spec.validation` (one version has it alone).
fn schema_path(versions: &[Value], i: usize) -> String {
    let first = &versions[0]["schema"];
    if versions.iter().all(|v| v["schema"] == *first) {
        "spec.validation.openAPIV3Schema".to_string()
    } else {
        format!("spec.versions[{i}].schema.openAPIV3Schema")
    }
}

/// A CRD as the store serves it.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    pub name: String,
    pub group: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub versions: Vec<VersionDef>,
    /// With `conversion.strategy: Webhook`, where the webhook is (its
    /// Service `namespace/name` or URL). The API calls no conversion
    /// webhook: a request in a version other than the storage version is
    /// refused, naming it, instead of being converted by rewriting
    /// `apiVersion` as under the `None` strategy.
    pub conversion_webhook: Option<String>,
}

impl Definition {
    /// Reads an admitted CRD.
    pub(crate) fn parse(crd: &Value) -> Result<Definition, ApiError> {
        let spec = &crd["spec"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let strs = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let names = &spec["names"];
        let mut versions = Vec::new();
        for (i, v) in spec["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let all: Vec<Value> = spec["versions"].as_array().cloned().unwrap_or_default();
            let path = schema_path(&all, i);
            let schema = Schema::parse(&v["schema"]["openAPIV3Schema"], &path)
                .map_err(|errs| invalid_crd(crd, errs))?;
            let subs = &v["subresources"];
            let scale = subs
                .get("scale")
                .filter(|x| x.is_object())
                .map(|sc| ScaleSpec {
                    spec_replicas: s(&sc["specReplicasPath"]),
                    status_replicas: s(&sc["statusReplicasPath"]),
                    label_selector: sc["labelSelectorPath"].as_str().map(str::to_string),
                });
            let columns = v["additionalPrinterColumns"]
                .as_array()
                .map(|cols| {
                    cols.iter()
                        .map(|c| Column {
                            name: s(&c["name"]),
                            ty: s(&c["type"]),
                            format: s(&c["format"]),
                            description: s(&c["description"]),
                            priority: c["priority"].as_i64().unwrap_or(0),
                            json_path: s(&c["jsonPath"]),
                        })
                        .collect()
                })
                .unwrap_or_else(|| {
                    // A CRD without columns prints its age, as the real server's default.
                    vec![Column {
                        name: "Age".into(),
                        ty: "date".into(),
                        format: String::new(),
                        description: String::new(),
                        priority: 0,
                        json_path: ".metadata.creationTimestamp".into(),
                    }]
                });
            versions.push(VersionDef {
                name: s(&v["name"]),
                served: v["served"].as_bool().unwrap_or(false),
                storage: v["storage"].as_bool().unwrap_or(false),
                schema: Arc::new(schema),
                openapi: v["schema"]
                    .get("openAPIV3Schema")
                    .filter(|x| x.is_object())
                    .map(|x| Arc::new(x.clone())),
                status: subs.get("status").is_some_and(Value::is_object),
                scale,
                columns,
                selectable: v["selectableFields"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f["jsonPath"].as_str())
                    .map(|p| p.trim_start_matches('.').to_string())
                    .collect(),
            });
        }
        Ok(Definition {
            name: s(&crd["metadata"]["name"]),
            group: s(&spec["group"]),
            plural: s(&names["plural"]),
            singular: s(&names["singular"]),
            kind: s(&names["kind"]),
            list_kind: s(&names["listKind"]),
            short_names: strs(&names["shortNames"]),
            categories: strs(&names["categories"]),
            namespaced: spec["scope"] == "Namespaced",
            versions,
            conversion_webhook: (spec["conversion"]["strategy"] == "Webhook").then(|| {
                let cc = &spec["conversion"]["webhook"]["clientConfig"];
                match cc["url"].as_str() {
                    Some(url) => url.to_string(),
                    None => format!(
                        "service {}/{}",
                        s(&cc["service"]["namespace"]),
                        s(&cc["service"]["name"])
                    ),
                }
            }),
        })
    }
}

fn invalid_crd(crd: &Value, errs: Vec<FieldError>) -> ApiError {
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    ApiError::invalid(GROUP, KIND, name, errs)
}

/// A wrongly typed field: the real server's decoder refuses the body (400).
fn undecodable(path: &str, want: &str, got: &Value) -> ApiError {
    ApiError::BadRequest(format!(
        "CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: {path}: expected {want}, got {got}"
    ))
}

/// Checks the JSON types of the fields read below.
fn check_types(crd: &Value) -> Result<(), ApiError> {
    fn want(v: &Value, path: &str, ty: &str) -> Result<(), ApiError> {
        let ok = match ty {
            "string" => v.is_string() || v.is_null(),
            "boolean" => v.is_boolean() || v.is_null(),
            "object" => v.is_object() || v.is_null(),
            "array" => v.is_array() || v.is_null(),
            _ => true,
        };
        if ok {
            Ok(())
        } else {
            Err(undecodable(path, ty, v))
        }
    }
    want(&crd["spec"], "spec", "object")?;
    let spec = &crd["spec"];
    for f in ["group", "scope"] {
        want(&spec[f], &format!("spec.{f}"), "string")?;
    }
    want(&spec["names"], "spec.names", "object")?;
    for f in ["plural", "singular", "kind", "listKind"] {
        want(&spec["names"][f], &format!("spec.names.{f}"), "string")?;
    }
    for f in ["shortNames", "categories"] {
        want(&spec["names"][f], &format!("spec.names.{f}"), "array")?;
        for (i, x) in spec["names"][f]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            want(x, &format!("spec.names.{f}[{i}]"), "string")?;
        }
    }
    want(&spec["versions"], "spec.versions", "array")?;
    for (i, v) in spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("spec.versions[{i}]");
        want(v, &p, "object")?;
        want(&v["name"], &format!("{p}.name"), "string")?;
        want(&v["served"], &format!("{p}.served"), "boolean")?;
        want(&v["storage"], &format!("{p}.storage"), "boolean")?;
        want(&v["schema"], &format!("{p}.schema"), "object")?;
        want(&v["subresources"], &format!("{p}.subresources"), "object")?;
        want(
            &v["additionalPrinterColumns"],
            &format!("{p}.additionalPrinterColumns"),
            "array",
        )?;
    }
    want(&spec["conversion"], "spec.conversion", "object")?;
    Ok(())
}

pub(crate) fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !s.split('.').all(label) {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
    }
    errs
}

pub(crate) fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let ok = s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.ends_with('-');
    if !ok {
        errs.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}

/// What the API server does to a CRD before storing it: its defaults
/// (`singular`, `listKind`, `conversion`, `storedVersions`, `generation`)
/// and its validation (a 422 naming every bad field). `old` is the stored
/// CRD on an update.
pub(crate) fn admit(crd: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
    check_types(crd)?;
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    // Defaults (apiextensions v1 SetDefaults).
    {
        let kind = s(&crd["spec"]["names"]["kind"]);
        let names = &mut crd["spec"]["names"];
        if names.is_object() {
            if s(&names["singular"]).is_empty() {
                names["singular"] = json!(kind.to_lowercase());
            }
            if s(&names["listKind"]).is_empty() && !kind.is_empty() {
                names["listKind"] = json!(format!("{kind}List"));
            }
        }
        if crd["spec"].is_object() && !crd["spec"]["conversion"].is_object() {
            crd["spec"]["conversion"] = json!({"strategy": "None"});
        }
    }
    let mut errs: Vec<FieldError> = Vec::new();
    let spec = &crd["spec"];
    let name = s(&crd["metadata"]["name"]);
    let group = s(&spec["group"]);
    let plural = s(&spec["names"]["plural"]);
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid(
            "metadata.name",
            &json!(name),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if let e @ [_, ..] = &dns1123_subdomain(&group)[..] {
        errs.push(FieldError::invalid(
            "spec.group",
            &json!(group),
            e.join(","),
        ));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid(
            "spec.group",
            &json!(group),
            "should be a domain with at least one dot",
        ));
    }
    match s(&spec["scope"]).as_str() {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported(
            "spec.scope",
            &json!(other),
            &["Cluster".into(), "Namespaced".into()],
        )),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let mut storage = 0;
    let mut seen: Vec<String> = Vec::new();
    let mut unique = true;
    for (i, v) in versions.iter().enumerate() {
        let p = format!("spec.versions[{i}]");
        let vname = s(&v["name"]);
        if v["storage"] == true {
            storage += 1;
        }
        if seen.contains(&vname) {
            unique = false;
        }
        seen.push(vname.clone());
        if let e @ [_, ..] = &dns1035_label(&vname)[..] {
            errs.push(FieldError::invalid(
                format!("{p}.name"),
                &json!(vname),
                e.join(","),
            ));
        }
        match v["schema"].get("openAPIV3Schema").filter(|x| !x.is_null()) {
            None => errs.push(FieldError::required(
                format!("{p}.schema.openAPIV3Schema"),
                "",
            )),
            Some(schema) => {
                if let Err(e) = Schema::parse(schema, &schema_path(&versions, i)) {
                    errs.extend(e);
                }
                if v["subresources"]
                    .get("status")
                    .is_some_and(Value::is_object)
                {
                    // Status is validated on its own with properties["status"]:
                    // nothing at the root may constrain it from outside.
                    let allowed = [
                        "description",
                        "type",
                        "format",
                        "title",
                        "maximum",
                        "exclusiveMaximum",
                        "minimum",
                        "exclusiveMinimum",
                        "maxLength",
                        "minLength",
                        "pattern",
                        "maxItems",
                        "minItems",
                        "uniqueItems",
                        "multipleOf",
                        "required",
                        "items",
                        "properties",
                        "externalDocs",
                        "example",
                        "x-kubernetes-preserve-unknown-fields",
                        "x-kubernetes-validations",
                    ];
                    let root = format!("{p}.schema.openAPIV3Schema");
                    if schema["type"].as_str().is_some_and(|t| t != "object") {
                        errs.push(FieldError::invalid(
                            format!("{root}.type"),
                            &schema["type"],
                            "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                        ));
                    } else if schema.as_object().is_some_and(|m| {
                        m.iter()
                            .any(|(k, v)| !v.is_null() && !allowed.contains(&k.as_str()))
                    }) {
                        errs.push(FieldError::invalid(
                            root,
                            schema,
                            "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled",
                        ));
                    }
                }
            }
        }
        if let Some(sc) = v["subresources"].get("scale").filter(|x| x.is_object()) {
            let sp = format!("{p}.subresources.scale");
            let path = |k: &str| s(&sc[k]);
            match path("specReplicasPath") {
                x if x.is_empty() => {
                    errs.push(FieldError::required(format!("{sp}.specReplicasPath"), ""))
                }
                x if !x.starts_with(".spec.") => errs.push(FieldError::invalid(
                    format!("{sp}.specReplicasPath"),
                    &json!(x),
                    "should be a json path under .spec",
                )),
                _ => {}
            }
            match path("statusReplicasPath") {
                x if x.is_empty() => {
                    errs.push(FieldError::required(format!("{sp}.statusReplicasPath"), ""))
                }
                x if !x.starts_with(".status.") => errs.push(FieldError::invalid(
                    format!("{sp}.statusReplicasPath"),
                    &json!(x),
                    "should be a json path under .status",
                )),
                _ => {}
            }
            let sel = path("labelSelectorPath");
            if !sel.is_empty() && !sel.starts_with(".spec.") && !sel.starts_with(".status.") {
                errs.push(FieldError::invalid(
                    format!("{sp}.labelSelectorPath"),
                    &json!(sel),
                    "should be a json path under either .spec or .status",
                ));
            }
        }
        for (j, c) in v["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let cp = format!("{p}.additionalPrinterColumns[{j}]");
            if s(&c["name"]).is_empty() {
                errs.push(FieldError::required(format!("{cp}.name"), ""));
            }
            let types = "boolean,date,integer,number,string";
            match s(&c["type"]).as_str() {
                "" => errs.push(FieldError::required(
                    format!("{cp}.type"),
                    format!("must be one of {types}"),
                )),
                "boolean" | "date" | "integer" | "number" | "string" => {}
                t => errs.push(FieldError::invalid(
                    format!("{cp}.type"),
                    &json!(t),
                    format!("must be one of {types}"),
                )),
            }
            if s(&c["jsonPath"]).is_empty() {
                errs.push(FieldError::required(format!("{cp}.JSONPath"), ""));
            }
        }
    }
    if !unique {
        errs.push(FieldError::invalid(
            "spec.versions",
            &spec["versions"],
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            &spec["versions"],
            "must have exactly one version marked as storage version",
        ));
    }
    let names = &spec["names"];
    for f in ["plural", "singular", "kind", "listKind"] {
        if s(&names[f]).is_empty() {
            errs.push(FieldError::required(format!("spec.names.{f}"), ""));
        }
    }
    for f in ["plural", "singular"] {
        let n = s(&names[f]);
        if let e @ [_, ..] = &dns1035_label(&n)[..] {
            if !n.is_empty() {
                errs.push(FieldError::invalid(
                    format!("spec.names.{f}"),
                    &json!(n),
                    e.join(","),
                ));
            }
        }
    }
    for f in ["kind", "listKind"] {
        let n = s(&names[f]);
        if let e @ [_, ..] = &dns1035_label(&n.to_lowercase())[..] {
            if !n.is_empty() {
                errs.push(FieldError::invalid(
                    format!("spec.names.{f}"),
                    &json!(n),
                    format!(
                        "may have mixed case, but should otherwise match: {}",
                        e.join(",")
                    ),
                ));
            }
        }
    }
    if !s(&names["kind"]).is_empty() && s(&names["kind"]) == s(&names["listKind"]) {
        errs.push(FieldError::invalid(
            "spec.names.listKind",
            &names["listKind"],
            "kind and listKind may not be the same",
        ));
    }
    for (i, sn) in names["shortNames"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let sn = s(sn);
        if let e @ [_, ..] = &dns1035_label(&sn)[..] {
            errs.push(FieldError::invalid(
                format!("spec.names.shortNames[{i}]"),
                &json!(sn),
                e.join(","),
            ));
        }
    }
    let webhook = &spec["conversion"]["webhook"];
    match s(&spec["conversion"]["strategy"]).as_str() {
        "None" => {
            if !webhook.is_null() {
                errs.push(FieldError::forbidden(
                    "spec.conversion.webhook",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        // Accepted as the real server accepts it; objects are served in
        // their storage version only (see `Definition::conversion_webhook`).
        "Webhook" => {
            if !webhook.is_object() {
                errs.push(FieldError::required("spec.conversion.webhook", ""));
            } else {
                let cc = &webhook["clientConfig"];
                if cc["url"].is_string() == cc["service"].is_object() {
                    errs.push(FieldError::required(
                        "spec.conversion.webhook.clientConfig",
                        "exactly one of url or service is required",
                    ));
                }
                let reviews: Vec<&str> = webhook["conversionReviewVersions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if !reviews.iter().any(|v| *v == "v1" || *v == "v1beta1") {
                    errs.push(FieldError::required(
                        "spec.conversion.webhook.conversionReviewVersions",
                        "must include at least one of v1, v1beta1",
                    ));
                }
            }
        }
        "" => errs.push(FieldError::required("spec.conversion.strategy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.conversion.strategy",
            &json!(other),
            &["None".into(), "Webhook".into()],
        )),
    }
    if spec["preserveUnknownFields"] == true {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            &json!(true),
            "must be false in order to use defaults in the schema",
        ));
    }
    // Groups of the Kubernetes project need an approval annotation.
    let protected = group == "k8s.io"
        || group == "kubernetes.io"
        || group.ends_with(".k8s.io")
        || group.ends_with(".kubernetes.io");
    if protected
        && crd["metadata"]["annotations"]["api-approved.kubernetes.io"]
            .as_str()
            .is_none_or(str::is_empty)
    {
        errs.push(FieldError::required(
            "metadata.annotations[api-approved.kubernetes.io]",
            "protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111",
        ));
    }
    if let Some(old) = old {
        let immutable = |path: &str, new: &Value, old: &Value, errs: &mut Vec<FieldError>| {
            if new != old {
                errs.push(FieldError::invalid(path, new, "field is immutable"));
            }
        };
        immutable(
            "spec.group",
            &spec["group"],
            &old["spec"]["group"],
            &mut errs,
        );
        immutable(
            "spec.names.plural",
            &names["plural"],
            &old["spec"]["names"]["plural"],
            &mut errs,
        );
        if is_established(old) {
            immutable(
                "spec.scope",
                &spec["scope"],
                &old["spec"]["scope"],
                &mut errs,
            );
            immutable(
                "spec.names.kind",
                &names["kind"],
                &old["spec"]["names"]["kind"],
                &mut errs,
            );
        }
    }
    if !errs.is_empty() {
        return Err(invalid_crd(crd, errs));
    }
    // Versions ever used for storage (a new storage version is appended).
    let storage_name = versions
        .iter()
        .find(|v| v["storage"] == true)
        .map(|v| s(&v["name"]))
        .unwrap_or_default();
    let mut stored: Vec<Value> = old
        .and_then(|o| o["status"]["storedVersions"].as_array().cloned())
        .or_else(|| crd["status"]["storedVersions"].as_array().cloned())
        .unwrap_or_default();
    if !stored.iter().any(|v| v == &json!(storage_name)) {
        stored.push(json!(storage_name));
    }
    if !crd["status"].is_object() {
        crd["status"] = json!({});
    }
    crd["status"]["storedVersions"] = Value::Array(stored);
    Ok(())
}

fn is_established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

/// Sets the conditions NamesAccepted and Established of `status.conditions`
/// and `status.acceptedNames`: `conflict` is why the names were refused, if
/// they were. As kube-apiserver's naming and establishing controllers do
/// (`SetCRDCondition`): each condition is updated where it is, or added
/// after the others, its transition time kept while its status holds; the
/// other conditions, such as those a client writes through `/status`, are
/// kept as they are.
pub(crate) fn set_status(crd: &mut Value, conflict: Option<(&str, String)>, now: &str) {
    let wanted: [(&str, &str, &str, &str); 2] = match &conflict {
        None => [
            ("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            (
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ),
        ],
        Some((reason, message)) => [
            ("NamesAccepted", "False", reason, message.as_str()),
            (
                "Established",
                "False",
                "NotAccepted",
                "not all names are accepted",
            ),
        ],
    };
    if !crd["status"].is_object() {
        crd["status"] = json!({});
    }
    if !crd["status"]["conditions"].is_array() {
        crd["status"]["conditions"] = json!([]);
    }
    let conditions = crd["status"]["conditions"]
        .as_array_mut()
        .expect("just made an array");
    for (ty, status, reason, message) in wanted {
        match conditions.iter_mut().find(|c| c["type"] == ty) {
            Some(c) => {
                let since = c["lastTransitionTime"].as_str().unwrap_or("");
                if c["status"] != status || since.is_empty() {
                    c["lastTransitionTime"] = json!(now);
                }
                c["status"] = json!(status);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
            }
            None => conditions.push(json!({"type": ty, "status": status, "reason": reason,
                "message": message, "lastTransitionTime": now})),
        }
    }
    if conflict.is_none() {
        let names = crd["spec"]["names"].clone();
        let mut accepted = json!({});
        for f in [
            "plural",
            "singular",
            "shortNames",
            "kind",
            "listKind",
            "categories",
        ] {
            if !names[f].is_null() {
                accepted[f] = names[f].clone();
            }
        }
        crd["status"]["acceptedNames"] = accepted;
    } else if !crd["status"]["acceptedNames"].is_object() {
        crd["status"]["acceptedNames"] = json!({"plural": "", "kind": ""});
    }
}

/// Kubernetes' version priority: GA before beta before alpha, higher
/// numbers first, then anything else alphabetically.
pub(crate) fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parse = || -> Option<(u8, i64, i64)> {
            let rest = v.strip_prefix('v')?;
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            let major: i64 = rest[..digits].parse().ok()?;
            let tail = &rest[digits..];
            if tail.is_empty() {
                return Some((0, -major, 0));
            }
            for (prefix, rank) in [("beta", 1u8), ("alpha", 2u8)] {
                if let Some(n) = tail.strip_prefix(prefix) {
                    if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                        return Some((rank, -major, -n.parse::<i64>().ok()?));
                    }
                }
            }
            None
        };
        match parse() {
            Some((rank, major, minor)) => (rank, major, minor, String::new()),
            None => (3, 0, 0, v.to_string()),
        }
    }
    key(a).cmp(&key(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        serde_yaml::from_str(COSCHEDULING_PODGROUP_CRD).unwrap()
    }

    #[test]
    fn the_shipped_podgroup_crd_is_valid() {
        let mut c = crd();
        admit(&mut c, None).unwrap();
        let d = Definition::parse(&c).unwrap();
        assert_eq!(d.name, "podgroups.scheduling.x-k8s.io");
        assert_eq!(
            (d.kind.as_str(), d.list_kind.as_str()),
            ("PodGroup", "PodGroupList")
        );
        assert!(d.namespaced);
        let v = d.versions.iter().find(|v| v.storage).unwrap();
        assert_eq!(v.name, "v1alpha1");
        assert!(v.status && v.served);
        assert_eq!(c["status"]["storedVersions"], json!(["v1alpha1"]));
    }

    #[test]
    fn bad_crds_name_their_fields() {
        let mut c = crd();
        c["metadata"]["name"] = json!("groups.scheduling.x-k8s.io");
        c["spec"]["group"] = json!("nodot");
        c["spec"]["scope"] = json!("Galaxy");
        c["spec"]["versions"][0]["storage"] = json!(false);
        c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("type");
        let e = admit(&mut c, None).unwrap_err();
        assert_eq!(e.code(), 422);
        let fields: Vec<&str> = e.causes().iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "metadata.name",
                "spec.group",
                "spec.scope",
                // One version: its schema is the internal form's
                // spec.validation, where kube-apiserver reports it.
                "spec.validation.openAPIV3Schema.properties[spec].type",
                "spec.versions",
            ]
        );
        assert!(e.to_string().starts_with(
            "CustomResourceDefinition.apiextensions.k8s.io \"groups.scheduling.x-k8s.io\" is invalid: [metadata.name: Invalid value: \"groups.scheduling.x-k8s.io\": must be spec.names.plural+\".\"+spec.group, spec.group: Invalid value: \"nodot\": should be a domain with at least one dot, spec.scope: Unsupported value: \"Galaxy\": supported values: \"Cluster\", \"Namespaced\""
        ), "{e}");
    }

    #[test]
    fn versions_sort_as_kubernetes_sorts_them() {
        let mut v = vec![
            "v1alpha1",
            "foo",
            "v1",
            "v2beta1",
            "v1beta2",
            "v2",
            "v10alpha3",
            "bar",
        ];
        v.sort_by(|a, b| version_order(a, b));
        assert_eq!(
            v,
            vec![
                "v2",
                "v1",
                "v2beta1",
                "v1beta2",
                "v10alpha3",
                "v1alpha1",
                "bar",
                "foo"
            ]
        );
    }
}
