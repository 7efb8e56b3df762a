//! API priority and fairness (`flowcontrol.apiserver.k8s.io/v1`), as far
//! as a server without load has it: every request is classified as
//! kube-apiserver 1.35's filter classifies it, and its answer names the
//! FlowSchema and the PriorityLevelConfiguration it matched
//! (`X-Kubernetes-PF-FlowSchema-UID`, `X-Kubernetes-PF-PriorityLevel-UID`);
//! nothing is queued nor rejected (fakeapi serves every request as it
//! comes: there are no seats to share).
//!
//! - Who asks: fakeapi authenticates nobody, so a request is
//!   [`crate::reviews::USER`] (in `system:masters`) unless it impersonates
//!   (`Impersonate-User`, `Impersonate-Group`), which is allowed to all, as
//!   to `system:masters` ([`Requester`]).
//! - What it asks: kube-apiserver's request info (resource or not, verb,
//!   group, resource, subresource, namespace, path: [`RequestInfo`]).
//! - The configuration ([`Config`]): the stored FlowSchemas whose priority
//!   level exists and is well formed, in matching order (`matchingPrecedence`
//!   ascending, then name), the mandatory `exempt` first and `catch-all`
//!   last supplied when not stored (without a uid, as kube-apiserver
//!   imagines them); the first whose rules match a request is its.
//! - What kube-apiserver's config controller writes back: each FlowSchema's
//!   `Dangling` condition (`store/flowcontrol.rs`), and the concurrency each
//!   level would get, in `/metrics` (`apiserver_flowcontrol_nominal_limit_seats`
//!   and its lower and upper bounds, from a server limit of 600 seats:
//!   `--max-requests-inflight` 400 plus `--max-mutating-requests-inflight` 200).
//! - `bootstrap.rs` the objects kube-apiserver writes at start, `spec.rs`
//!   their kinds' defaults and validation.
//!
//! Long-running requests other than watches (`proxy`, and the `attach`,
//! `exec`, `log`, `portforward` and `proxy` subresources) are not
//! classified and carry no headers, as in kube-apiserver.

pub(crate) mod bootstrap;
pub(crate) mod spec;

use serde_json::Value;

use crate::admission::config::strings;

pub(crate) const GROUP: &str = "flowcontrol.apiserver.k8s.io";
pub(crate) const FLOW_SCHEMAS: &str = "flowschemas";
pub(crate) const PRIORITY_LEVELS: &str = "prioritylevelconfigurations";
/// The answer's header naming the FlowSchema matched, by uid.
pub const FLOW_SCHEMA_UID_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// The answer's header naming the priority level matched, by uid.
pub const PRIORITY_LEVEL_UID_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";
/// The field manager of the objects kube-apiserver writes at start.
pub(crate) const PRODUCER: &str = "api-priority-and-fairness-config-producer-v1";
/// The field manager of the `Dangling` conditions.
pub(crate) const CONSUMER: &str = "api-priority-and-fairness-config-consumer-v1";
/// kube-apiserver's default `--max-requests-inflight` plus
/// `--max-mutating-requests-inflight`.
const SERVER_CONCURRENCY_LIMIT: f64 = 600.0;

/// The user a request is served as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Requester {
    pub name: String,
    pub groups: Vec<String>,
}

impl Requester {
    /// fakeapi's one user, as every request without impersonation is.
    pub(crate) fn own() -> Requester {
        Requester {
            name: crate::reviews::USER.into(),
            groups: crate::reviews::GROUPS
                .iter()
                .map(|g| g.to_string())
                .collect(),
        }
    }

    /// Whether the request impersonates a user (else it is [`Requester::own`]).
    pub(crate) fn impersonates(headers: &axum::http::HeaderMap) -> bool {
        headers
            .get("impersonate-user")
            .is_some_and(|u| !u.as_bytes().is_empty())
    }

    /// From a request's headers: the user it impersonates, else fakeapi's
    /// one user. As kube-apiserver's impersonation filter: a service
    /// account's name gets its groups when none is asked for, and every
    /// user but `system:anonymous` is in `system:authenticated` unless
    /// `system:authenticated` or `system:unauthenticated` is asked for
    /// (`system:anonymous` is in `system:unauthenticated`).
    pub(crate) fn from_headers(headers: &axum::http::HeaderMap) -> Requester {
        let value = |v: &axum::http::HeaderValue| v.to_str().ok().map(str::to_string);
        let Some(name) = headers
            .get("impersonate-user")
            .and_then(value)
            .filter(|u| !u.is_empty())
        else {
            return Requester::own();
        };
        let asked: Vec<String> = headers
            .get_all("impersonate-group")
            .iter()
            .filter_map(value)
            .collect();
        let mut groups = asked.clone();
        if asked.is_empty() {
            if let Some(ns) = service_account_namespace(&name) {
                groups = vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
        }
        let has = |g: &str| groups.iter().any(|x| x == g);
        if name == "system:anonymous" {
            if !has("system:unauthenticated") {
                groups.push("system:unauthenticated".into());
            }
        } else if !has("system:authenticated") && !has("system:unauthenticated") {
            groups.push("system:authenticated".into());
        }
        Requester { name, groups }
    }
}

/// `system:serviceaccount:NS:NAME`'s namespace.
fn service_account_namespace(user: &str) -> Option<&str> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some(ns)
}

/// What a request asks, as kube-apiserver's `RequestInfoFactory` reads it
/// from its method, path and query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestInfo<'a> {
    pub resource_request: bool,
    pub path: &'a str,
    pub verb: String,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
}

impl<'a> RequestInfo<'a> {
    /// `watch`: the query's `watch` parameter, if any.
    pub(crate) fn new(method: &str, path: &'a str, watch: Option<&str>) -> RequestInfo<'a> {
        let mut info = RequestInfo {
            resource_request: false,
            path,
            verb: method.to_ascii_lowercase(),
            group: "",
            resource: "",
            subresource: "",
            namespace: "",
        };
        let trimmed = path.trim_matches('/');
        let parts: Vec<&'a str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed.split('/').collect()
        };
        if parts.len() < 3 {
            return info;
        }
        let mut rest: &[&'a str] = match parts[0] {
            "api" => &parts[1..],
            "apis" if parts.len() >= 4 => {
                info.group = parts[1];
                &parts[2..]
            }
            _ => return info,
        };
        info.resource_request = true;
        rest = &rest[1..];
        if matches!(rest.first(), Some(&"watch") | Some(&"proxy")) {
            if rest.len() < 2 {
                return info;
            }
            info.verb = rest[0].to_string();
            rest = &rest[1..];
        } else {
            info.verb = match method {
                "POST" => "create",
                "GET" | "HEAD" => "get",
                "PUT" => "update",
                "PATCH" => "patch",
                "DELETE" => "delete",
                _ => "",
            }
            .to_string();
        }
        if rest.first() == Some(&"namespaces") {
            if let Some(ns) = rest.get(1) {
                info.namespace = ns;
                if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                    rest = &rest[2..];
                }
            }
        }
        let name = rest.get(1).copied().unwrap_or("");
        if rest.len() >= 3 && info.verb != "proxy" {
            info.subresource = rest[2];
        }
        info.resource = rest.first().copied().unwrap_or("");
        if name.is_empty() && info.verb == "get" {
            info.verb = if watch.is_some_and(watches) {
                "watch"
            } else {
                "list"
            }
            .into();
        }
        if name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".into();
        }
        info
    }

    /// Whether kube-apiserver's filter lets it through unclassified (a
    /// long-running request that is not a watch).
    pub(crate) fn unclassified(&self) -> bool {
        self.verb == "proxy"
            || (self.resource_request
                && matches!(
                    self.subresource,
                    "attach" | "exec" | "proxy" | "log" | "portforward"
                ))
            || (!self.resource_request && self.path.starts_with("/debug/pprof/"))
    }
}

/// Whether a `watch` parameter asks for a watch: anything but Go's false
/// (a value that is no boolean at all counts, as kube-apiserver's fallback
/// reading counts it).
fn watches(v: &str) -> bool {
    !matches!(v, "0" | "f" | "F" | "false" | "FALSE" | "False") && !v.eq_ignore_ascii_case("false")
}

/// A subject of a rule.
#[derive(Debug, Clone)]
enum Subject {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
    Unknown,
}

#[derive(Debug, Clone)]
struct ResourceRule {
    verbs: Vec<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    namespaces: Vec<String>,
    cluster: bool,
}

#[derive(Debug, Clone)]
struct NonResourceRule {
    verbs: Vec<String>,
    urls: Vec<String>,
}

#[derive(Debug, Clone)]
struct Rule {
    subjects: Vec<Subject>,
    resources: Vec<ResourceRule>,
    non_resources: Vec<NonResourceRule>,
}

/// A FlowSchema as the classifier uses it.
#[derive(Debug, Clone)]
struct Schema {
    name: String,
    uid: String,
    precedence: i64,
    /// Index in [`Config::levels`].
    level: usize,
    rules: Vec<Rule>,
}

/// A priority level and the seats it would get.
#[derive(Debug, Clone)]
pub(crate) struct Level {
    pub name: String,
    uid: String,
    shares: i64,
    lendable: i64,
    borrowing: Option<i64>,
}

/// The limits of a priority level, as kube-apiserver's metrics give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seats {
    pub nominal: i64,
    pub lower: i64,
    pub upper: i64,
}

/// The configuration requests are classified by.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    schemas: Vec<Schema>,
    levels: Vec<Level>,
    /// What every request of fakeapi's own user (no impersonation) is
    /// classified as, when that does not depend on the request (the
    /// bootstrap's `exempt` takes all of `system:masters`): the answer's
    /// two header values, ready; `None` when it depends on the request.
    fixed: Option<(HeaderValue, HeaderValue)>,
}

use axum::http::HeaderValue;

/// What a request was classified as: the uids of its FlowSchema and
/// priority level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Classification<'a> {
    pub flow_schema: &'a str,
    pub priority_level: &'a str,
}

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// Whether kube-apiserver's controller can use a level (its
/// `queueSetCompleterForPL`): its type and union agree, and only `exempt`
/// is exempt.
pub(crate) fn level_usable(pl: &Value) -> bool {
    let ty = text(pl, "/spec/type");
    let has = |p: &str| pl.pointer(p).is_some_and(|x| !x.is_null());
    if (ty == "Limited") != has("/spec/limited") || (ty == "Exempt") != has("/spec/exempt") {
        return false;
    }
    if (ty == "Exempt") != (text(pl, "/metadata/name") == "exempt") {
        return false;
    }
    if ty == "Limited" {
        let reject = text(pl, "/spec/limited/limitResponse/type") == "Reject";
        if reject == has("/spec/limited/limitResponse/queuing") {
            return false;
        }
    }
    ty == "Limited" || ty == "Exempt"
}

impl Level {
    fn parse(pl: &Value) -> Level {
        let int = |p: &str| pl.pointer(p).and_then(Value::as_i64);
        let limited = pl.pointer("/spec/limited").is_some_and(|l| !l.is_null());
        let (shares, lendable, borrowing) = if limited {
            (
                int("/spec/limited/nominalConcurrencyShares").unwrap_or(30),
                int("/spec/limited/lendablePercent").unwrap_or(0),
                int("/spec/limited/borrowingLimitPercent"),
            )
        } else {
            (
                int("/spec/exempt/nominalConcurrencyShares").unwrap_or(0),
                int("/spec/exempt/lendablePercent").unwrap_or(0),
                None,
            )
        };
        Level {
            name: text(pl, "/metadata/name").to_string(),
            uid: text(pl, "/metadata/uid").to_string(),
            shares,
            lendable,
            borrowing,
        }
    }
}

impl Rule {
    /// Whether it matches every request of a subject it names.
    fn universal(&self) -> bool {
        let wild = |l: &[String]| l.len() == 1 && l[0] == "*";
        self.resources.iter().any(|r| {
            wild(&r.verbs)
                && wild(&r.groups)
                && wild(&r.resources)
                && r.cluster
                && wild(&r.namespaces)
        }) && self
            .non_resources
            .iter()
            .any(|r| wild(&r.verbs) && r.urls.iter().any(|u| u == "*"))
    }

    fn parse(r: &Value) -> Rule {
        let items = |k: &str| {
            r.get(k)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        Rule {
            subjects: items("subjects")
                .iter()
                .map(|s| match text(s, "/kind") {
                    "User" if s.get("user").is_some_and(|u| !u.is_null()) => {
                        Subject::User(text(s, "/user/name").into())
                    }
                    "Group" if s.get("group").is_some_and(|g| !g.is_null()) => {
                        Subject::Group(text(s, "/group/name").into())
                    }
                    "ServiceAccount" if s.get("serviceAccount").is_some_and(|a| !a.is_null()) => {
                        Subject::ServiceAccount {
                            namespace: text(s, "/serviceAccount/namespace").into(),
                            name: text(s, "/serviceAccount/name").into(),
                        }
                    }
                    _ => Subject::Unknown,
                })
                .collect(),
            resources: items("resourceRules")
                .iter()
                .map(|rr| ResourceRule {
                    verbs: strings(rr.get("verbs")),
                    groups: strings(rr.get("apiGroups")),
                    resources: strings(rr.get("resources")),
                    namespaces: strings(rr.get("namespaces")),
                    cluster: rr.get("clusterScope") == Some(&Value::Bool(true)),
                })
                .collect(),
            non_resources: items("nonResourceRules")
                .iter()
                .map(|nr| NonResourceRule {
                    verbs: strings(nr.get("verbs")),
                    urls: strings(nr.get("nonResourceURLs")),
                })
                .collect(),
        }
    }

    fn matches(&self, who: &Requester, what: &RequestInfo<'_>) -> bool {
        if !self.subjects.iter().any(|s| s.matches(who)) {
            return false;
        }
        if what.resource_request {
            self.resources.iter().any(|r| r.matches(what))
        } else {
            self.non_resources.iter().any(|r| r.matches(what))
        }
    }
}

impl Subject {
    fn matches(&self, who: &Requester) -> bool {
        match self {
            Subject::User(n) => n == "*" || *n == who.name,
            Subject::Group(g) => g == "*" || who.groups.iter().any(|x| x == g),
            Subject::ServiceAccount { namespace, name } => {
                let Some(rest) = who.name.strip_prefix("system:serviceaccount:") else {
                    return false;
                };
                let Some(rest) = rest
                    .strip_prefix(namespace.as_str())
                    .and_then(|r| r.strip_prefix(':'))
                else {
                    return false;
                };
                name == "*" || rest == name
            }
            Subject::Unknown => false,
        }
    }
}

/// `x` is in `list`, or `list` is the wildcard alone.
fn listed(x: &str, list: &[String], wildcard: &str) -> bool {
    (list.len() == 1 && list[0] == wildcard) || list.iter().any(|y| y == x)
}

impl ResourceRule {
    fn matches(&self, what: &RequestInfo<'_>) -> bool {
        let resource = if what.subresource.is_empty() {
            std::borrow::Cow::Borrowed(what.resource)
        } else {
            std::borrow::Cow::Owned(format!("{}/{}", what.resource, what.subresource))
        };
        if !listed(&what.verb, &self.verbs, "*")
            || !listed(&resource, &self.resources, "*")
            || !listed(what.group, &self.groups, "*")
        {
            return false;
        }
        if what.namespace.is_empty() {
            self.cluster
        } else {
            listed(what.namespace, &self.namespaces, "*")
        }
    }
}

impl NonResourceRule {
    fn matches(&self, what: &RequestInfo<'_>) -> bool {
        if !listed(&what.verb, &self.verbs, "*") {
            return false;
        }
        self.urls.iter().any(|url| {
            if url == "*" || url == what.path {
                return true;
            }
            // `/apis/*` and `/apis` alike match every path under /apis/.
            let mut prefix = url.trim_end_matches('*').to_string();
            if !prefix.ends_with('/') {
                prefix.push('/');
            }
            what.path.starts_with(&prefix)
        })
    }
}

impl Config {
    /// From the stored FlowSchemas and PriorityLevelConfigurations, as
    /// kube-apiserver's controller digests them.
    pub(crate) fn build(schemas: &[&Value], levels: &[&Value]) -> Config {
        let mut out = Config {
            fixed: None,
            schemas: Vec::new(),
            levels: levels
                .iter()
                .filter(|pl| level_usable(pl))
                .map(|pl| Level::parse(pl))
                .collect(),
        };
        let stored_levels = out.levels.len();
        let mut kept: Vec<Schema> = schemas
            .iter()
            .filter_map(|fs| {
                let level = text(fs, "/spec/priorityLevelConfiguration/name");
                let level = out.levels[..stored_levels]
                    .iter()
                    .position(|l| l.name == level)?;
                Some(out.schema(fs, level))
            })
            .collect();
        kept.sort_by(|a, b| (a.precedence, &a.name).cmp(&(b.precedence, &b.name)));
        // The mandatory levels and schemas that are not stored are
        // imagined, as kube-apiserver's controller does (no uid).
        for pl in bootstrap::mandatory_levels() {
            let name = text(&pl, "/metadata/name");
            if !out.levels.iter().any(|l| l.name == name) {
                out.levels.push(Level::parse(&pl));
            }
        }
        let level_of = |out: &Config, name: &str| {
            out.levels
                .iter()
                .position(|l| l.name == name)
                .expect("mandatory levels are always there")
        };
        if !kept.iter().any(|s| s.name == "exempt") {
            let fs = bootstrap::exempt_schema();
            kept.insert(0, out.schema(&fs, level_of(&out, "exempt")));
        }
        if !kept.iter().any(|s| s.name == "catch-all") {
            let fs = bootstrap::catch_all_schema();
            kept.push(out.schema(&fs, level_of(&out, "catch-all")));
        }
        out.schemas = kept;
        out.fixed = out.fixed_for(&Requester::own()).and_then(|c| {
            Some((
                HeaderValue::from_str(c.flow_schema).ok()?,
                HeaderValue::from_str(c.priority_level).ok()?,
            ))
        });
        out
    }

    /// The classification of every request of `who`, when the first schema
    /// naming it among its subjects matches all of its requests (schemas
    /// before it match none of them); `None` when it depends on the request.
    fn fixed_for(&self, who: &Requester) -> Option<Classification<'_>> {
        for schema in &self.schemas {
            let naming: Vec<&Rule> = schema
                .rules
                .iter()
                .filter(|r| r.subjects.iter().any(|s| s.matches(who)))
                .collect();
            if naming.is_empty() {
                continue;
            }
            return naming
                .iter()
                .any(|r| r.universal())
                .then(|| Classification {
                    flow_schema: &schema.uid,
                    priority_level: &self.levels[schema.level].uid,
                });
        }
        None
    }

    /// [`Config::fixed`]: the header values of every request of fakeapi's
    /// own user, when they do not depend on the request.
    pub(crate) fn fixed(&self) -> Option<&(HeaderValue, HeaderValue)> {
        self.fixed.as_ref()
    }

    fn schema(&self, fs: &Value, level: usize) -> Schema {
        Schema {
            name: text(fs, "/metadata/name").to_string(),
            uid: text(fs, "/metadata/uid").to_string(),
            precedence: fs
                .pointer("/spec/matchingPrecedence")
                .and_then(Value::as_i64)
                .unwrap_or(1000),
            level,
            rules: fs
                .pointer("/spec/rules")
                .and_then(Value::as_array)
                .map(|rs| rs.iter().map(Rule::parse).collect())
                .unwrap_or_default(),
        }
    }

    /// The FlowSchema and level a request is classified as: the first
    /// schema in matching order one of whose rules matches, `catch-all`
    /// when none does.
    pub(crate) fn classify(&self, who: &Requester, what: &RequestInfo<'_>) -> Classification<'_> {
        let schema = self
            .schemas
            .iter()
            .find(|s| s.rules.iter().any(|r| r.matches(who, what)))
            .or_else(|| self.schemas.iter().find(|s| s.name == "catch-all"))
            .expect("catch-all is always there");
        Classification {
            flow_schema: &schema.uid,
            priority_level: &self.levels[schema.level].uid,
        }
    }

    /// Each level's seats, by name: the server's 600 shared in proportion
    /// of the levels' shares (rounded up), less what it lends, plus what
    /// it may borrow (without a limit, the whole server's).
    pub(crate) fn seats(&self) -> Vec<(&str, Seats)> {
        let sum: i64 = self.levels.iter().map(|l| l.shares).sum();
        let mut out: Vec<(&str, Seats)> = self
            .levels
            .iter()
            .map(|l| {
                let nominal = if sum == 0 {
                    0
                } else {
                    (SERVER_CONCURRENCY_LIMIT * l.shares as f64 / sum as f64).ceil() as i64
                };
                let lendable = (nominal as f64 * l.lendable as f64 / 100.0).round() as i64;
                let borrowing = match l.borrowing {
                    Some(p) => (nominal as f64 * p as f64 / 100.0).round() as i64,
                    None => SERVER_CONCURRENCY_LIMIT as i64,
                };
                (
                    l.name.as_str(),
                    Seats {
                        nominal,
                        lower: nominal - lendable,
                        upper: nominal + borrowing,
                    },
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }
}

/// The `Dangling` condition kube-apiserver's controller wants on a
/// FlowSchema: `True` (`NotFound`) when its level is missing or not
/// usable, `False` (`Found`) otherwise, without its time.
pub(crate) fn dangling_condition(level: &str, found: bool) -> (&'static str, &'static str, String) {
    if found {
        (
            "False",
            "Found",
            format!("This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" and it exists"),
        )
    } else {
        (
            "True",
            "NotFound",
            format!("This FlowSchema references the PriorityLevelConfiguration object named \"{level}\" but there is no such object"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn admin() -> Requester {
        Requester::from_headers(&axum::http::HeaderMap::new())
    }

    fn as_user(name: &str, groups: &[&str]) -> Requester {
        let mut h = axum::http::HeaderMap::new();
        h.insert("impersonate-user", name.parse().unwrap());
        for g in groups {
            h.append("impersonate-group", g.parse().unwrap());
        }
        Requester::from_headers(&h)
    }

    #[test]
    fn request_info_as_kube_apiserver_reads_it() {
        let r = RequestInfo::new("GET", "/api/v1/namespaces/ns/pods", None);
        assert_eq!(
            (r.resource_request, r.verb.as_str(), r.resource, r.namespace),
            (true, "list", "pods", "ns")
        );
        let r = RequestInfo::new("GET", "/api/v1/namespaces/ns/pods", Some("true"));
        assert_eq!(r.verb, "watch");
        let r = RequestInfo::new("GET", "/api/v1/watch/namespaces/ns/pods/p", None);
        assert_eq!((r.verb.as_str(), r.resource), ("watch", "pods"));
        let r = RequestInfo::new("PUT", "/api/v1/namespaces/ns/pods/p/status", None);
        assert_eq!((r.verb.as_str(), r.subresource), ("update", "status"));
        // A namespace is in itself; its status and finalize are its
        // subresources.
        let r = RequestInfo::new("PUT", "/api/v1/namespaces/ns/finalize", None);
        assert_eq!(
            (r.resource, r.subresource, r.namespace),
            ("namespaces", "finalize", "ns")
        );
        let r = RequestInfo::new("DELETE", "/apis/apps/v1/namespaces/ns/deployments", None);
        assert_eq!((r.group, r.verb.as_str()), ("apps", "deletecollection"));
        for p in ["/version", "/apis/apps/v1", "/api/v1", "/healthz/etcd"] {
            let r = RequestInfo::new("GET", p, None);
            assert!(!r.resource_request, "{p}");
            assert_eq!(r.verb, "get");
        }
        assert!(RequestInfo::new("POST", "/api/v1/namespaces/ns/pods/p/exec", None).unclassified());
        assert!(!RequestInfo::new("GET", "/api/v1/pods", Some("1")).unclassified());
    }

    #[test]
    fn impersonation_adds_the_groups_kube_apiserver_adds() {
        assert_eq!(admin().name, "system:admin");
        assert!(admin().groups.contains(&"system:masters".to_string()));
        let u = as_user("noxu", &["system:authenticated"]);
        assert_eq!(u.groups, ["system:authenticated"]);
        let u = as_user("noxu", &["team"]);
        assert_eq!(u.groups, ["team", "system:authenticated"]);
        let sa = as_user("system:serviceaccount:kube-system:ctl", &[]);
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                "system:authenticated"
            ]
        );
        assert_eq!(
            as_user("system:anonymous", &[]).groups,
            ["system:unauthenticated"]
        );
    }

    fn with_uid(mut o: Value) -> Value {
        let uid = format!("uid-{}", o["metadata"]["name"].as_str().unwrap());
        o["metadata"]["uid"] = json!(uid);
        o
    }

    fn bootstrap_config(extra_schemas: Vec<Value>, extra_levels: Vec<Value>) -> Config {
        let levels: Vec<Value> = bootstrap::suggested_levels()
            .into_iter()
            .chain(bootstrap::mandatory_levels())
            .chain(extra_levels)
            .map(with_uid)
            .collect();
        let schemas: Vec<Value> = bootstrap::suggested_schemas()
            .into_iter()
            .chain(bootstrap::mandatory_schemas())
            .chain(extra_schemas)
            .map(with_uid)
            .collect();
        Config::build(
            &schemas.iter().collect::<Vec<_>>(),
            &levels.iter().collect::<Vec<_>>(),
        )
    }

    fn classified(c: &Config, who: &Requester, method: &str, path: &str) -> (String, String) {
        let k = c.classify(who, &RequestInfo::new(method, path, None));
        (k.flow_schema.to_string(), k.priority_level.to_string())
    }

    fn pair(fs: &str, pl: &str) -> (String, String) {
        (format!("uid-{fs}"), format!("uid-{pl}"))
    }

    #[test]
    fn the_bootstrap_configuration_classifies_as_kube_apiserver() {
        let c = bootstrap_config(vec![], vec![]);
        let anyone = as_user("someone", &[]);
        assert_eq!(
            classified(&c, &admin(), "GET", "/api/v1/pods"),
            pair("exempt", "exempt")
        );
        assert_eq!(
            classified(&c, &anyone, "GET", "/readyz"),
            pair("probes", "exempt")
        );
        assert_eq!(
            classified(&c, &anyone, "GET", "/version"),
            pair("global-default", "global-default")
        );
        let scheduler = as_user("system:kube-scheduler", &[]);
        assert_eq!(
            classified(
                &c,
                &scheduler,
                "PUT",
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"
            ),
            pair("system-leader-election", "leader-election")
        );
        assert_eq!(
            classified(&c, &scheduler, "GET", "/api/v1/pods"),
            pair("kube-scheduler", "workload-high")
        );
        let sa = as_user("system:serviceaccount:default:app", &[]);
        assert_eq!(
            classified(&c, &sa, "GET", "/api/v1/namespaces/default/pods"),
            pair("service-accounts", "workload-low")
        );
        let node = as_user("system:node:n1", &["system:nodes"]);
        assert_eq!(
            classified(&c, &node, "PATCH", "/api/v1/nodes/n1/status"),
            pair("system-node-high", "node-high")
        );
        assert_eq!(
            classified(&c, &node, "GET", "/api/v1/namespaces/ns/pods"),
            pair("system-nodes", "system")
        );
    }

    fn e2e_schema(name: &str, precedence: i64, level: &str, user: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {
            "matchingPrecedence": precedence,
            "priorityLevelConfiguration": {"name": level},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})
    }

    /// The classification kept for fakeapi's own user (the answer without
    /// looking at the request) is what the full match gives for every kind
    /// of request, and is given up when a schema before `exempt` names
    /// that user for some requests only.
    #[test]
    fn the_own_users_fixed_classification_is_the_full_matchs() {
        let c = bootstrap_config(vec![], vec![]);
        let (fs, pl) = c.fixed().expect("exempt takes all of system:masters");
        let requests = [
            ("GET", "/api/v1/pods"),
            ("POST", "/api/v1/namespaces/default/pods/p/binding"),
            ("PATCH", "/api/v1/namespaces/default/pods/p/status"),
            ("GET", "/apis/batch/v1/namespaces/ns/jobs/j"),
            ("DELETE", "/api/v1/nodes/n"),
            ("GET", "/version"),
            ("GET", "/readyz"),
        ];
        for (method, path) in requests {
            let (full_fs, full_pl) = classified(&c, &admin(), method, path);
            assert_eq!(
                (fs.to_str().unwrap(), pl.to_str().unwrap()),
                (&*full_fs, &*full_pl)
            );
        }
        let mut pods_only = e2e_schema("admins-pods", 0, "e2e", "system:admin");
        pods_only["spec"]["rules"][0] = json!({
            "subjects": [{"kind": "Group", "group": {"name": "system:masters"}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["pods"],
                "clusterScope": true, "namespaces": ["*"]}]});
        let c = bootstrap_config(vec![pods_only], vec![e2e_level("e2e")]);
        assert!(c.fixed().is_none());
        assert_eq!(
            classified(&c, &admin(), "GET", "/api/v1/pods"),
            pair("admins-pods", "e2e")
        );
        assert_eq!(
            classified(&c, &admin(), "GET", "/api/v1/nodes"),
            pair("exempt", "exempt")
        );
        // Naming the user for everything, first: fixed again, to that schema.
        let c = bootstrap_config(
            vec![{
                let mut all = e2e_schema("admins-all", 0, "e2e", "system:admin");
                all["spec"]["rules"][0]["resourceRules"] = json!([{"verbs": ["*"],
                    "apiGroups": ["*"], "resources": ["*"], "clusterScope": true,
                    "namespaces": ["*"]}]);
                all
            }],
            vec![e2e_level("e2e")],
        );
        let (fs, _) = c.fixed().expect("a universal rule first");
        assert_eq!(fs.to_str().unwrap(), "uid-admins-all");
    }

    fn e2e_level(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1, "lendablePercent": 0, "limitResponse": {"type": "Reject"}}}})
    }

    #[test]
    fn precedence_then_name_and_dangling_schemas_left_out() {
        let noxu = as_user("noxu", &["system:authenticated"]);
        let c = bootstrap_config(
            vec![
                e2e_schema("b-second", 1000, "e2e", "noxu"),
                e2e_schema("a-first", 1000, "e2e", "noxu"),
                e2e_schema("earliest-but-dangling", 500, "missing", "noxu"),
            ],
            vec![e2e_level("e2e")],
        );
        assert_eq!(
            classified(&c, &noxu, "GET", "/version"),
            pair("a-first", "e2e")
        );
        // Another user goes on to global-default.
        let foo = as_user("foo", &["system:authenticated"]);
        assert_eq!(
            classified(&c, &foo, "GET", "/version"),
            pair("global-default", "global-default")
        );
        // A schema of lower precedence wins whatever its name.
        let c = bootstrap_config(
            vec![
                e2e_schema("a-first", 1000, "e2e", "noxu"),
                e2e_schema("z-earlier", 999, "e2e", "noxu"),
            ],
            vec![e2e_level("e2e")],
        );
        assert_eq!(
            classified(&c, &noxu, "GET", "/version"),
            pair("z-earlier", "e2e")
        );
    }

    #[test]
    fn missing_mandatory_objects_are_imagined_without_uids() {
        let c = Config::build(&[], &[]);
        assert_eq!(
            classified(&c, &admin(), "GET", "/api/v1/pods"),
            (String::new(), String::new())
        );
        let names: Vec<&str> = c.schemas.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["exempt", "catch-all"]);
        let foo = as_user("foo", &[]);
        assert_eq!(
            classified(&c, &foo, "GET", "/version"),
            (String::new(), String::new())
        );
    }

    #[test]
    fn seats_as_kube_apiservers_metrics_give_them() {
        let c = bootstrap_config(vec![], vec![e2e_level("e2e")]);
        let seats: std::collections::HashMap<&str, Seats> = c.seats().into_iter().collect();
        // 600 seats over 246 shares.
        assert_eq!(seats["global-default"].nominal, 49);
        assert_eq!(seats["e2e"].nominal, 3);
        assert_eq!(seats["exempt"].nominal, 0);
        assert_eq!(seats["workload-low"].nominal, 244);
        assert_eq!(seats["workload-low"].lower, 244 - 220);
        assert_eq!(seats["catch-all"].upper, 13 + 600);
    }

    #[test]
    fn resource_rules_match_verbs_groups_resources_and_scope() {
        let rule = Rule::parse(&json!({
            "subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "resourceRules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/status"],
                "namespaces": ["a"]}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics", "/apis/*"]}]}));
        let who = admin();
        let m =
            |method: &str, path: &str| rule.matches(&who, &RequestInfo::new(method, path, None));
        assert!(m("GET", "/api/v1/namespaces/a/pods"));
        assert!(m("GET", "/api/v1/namespaces/a/pods/p/status"));
        assert!(!m("GET", "/api/v1/namespaces/b/pods"));
        assert!(!m("GET", "/api/v1/pods"), "cluster scope not asked for");
        assert!(!m("DELETE", "/api/v1/namespaces/a/pods/p"));
        assert!(!m("GET", "/apis/apps/v1/namespaces/a/pods"));
        assert!(m("GET", "/metrics"));
        assert!(m("GET", "/metrics/slis"));
        assert!(m("GET", "/apis/apps"));
        assert!(!m("POST", "/metrics"));
    }
}
