//! `/healthz`, `/livez` and `/readyz`, as kube-apiserver answers them:
//! `ok` alone; with `?verbose`, one line per named check (`[+]etcd ok`)
//! and `healthz check passed`; `/healthz/NAME` for one check (`ok`, or a
//! 404 for a name the endpoint does not have).
//!
//! The checks are kube-apiserver's own names (those Kubernetes' e2e suite
//! requires of a cluster, "health handlers should contain necessary
//! checks"). fakeapi has no etcd, no informers and no post-start hooks:
//! each check stands for what fakeapi does in their place, which is done
//! before its listener accepts anything, and so holds whenever a check is
//! answered. Why each holds is said beside it.

/// The checks of every endpoint, in kube-apiserver's order, each with why
/// it holds in fakeapi.
const CHECKS: &[&str] = &[
    // The server answers this request.
    "ping",
    // kube-apiserver checks that its log is not blocked; fakeapi logs
    // through `tracing`, which does not block a request.
    "log",
    // The store is in the process's memory: there is no connection to lose.
    "etcd",
    // Webhooks, policies and the built-in admission plugins are read from
    // the store at each request: nothing to initialise.
    "poststarthook/start-apiserver-admission-initializer",
    // Watches are served from the store's own history: no cache to fill.
    "poststarthook/generic-apiserver-start-informers",
    // A CRD is established by the write that creates it (its names
    // checked, its kind served at once), not by controllers.
    "poststarthook/start-apiextensions-informers",
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/crd-informer-synced",
    // The `default/kubernetes` Service and the system namespaces are
    // written when the store is made.
    "poststarthook/bootstrap-controller",
    "poststarthook/start-system-namespaces-controller",
    // Cluster IPs are allocated under the store's lock, in memory: none can
    // leak, so there is nothing to repair.
    "poststarthook/start-service-ip-repair-controllers",
    // `system-cluster-critical` and `system-node-critical` are written with
    // the store.
    "poststarthook/scheduling/bootstrap-system-priority-classes",
    // fakeapi authenticates nobody: there is no authentication information
    // to publish.
    "poststarthook/start-cluster-authentication-info-controller",
    // fakeapi serves every group itself and aggregates no other server:
    // there are no APIServices to register, watch or wait for.
    "poststarthook/start-kube-aggregator-informers",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-status-local-available-controller",
    "poststarthook/apiservice-status-remote-available-controller",
    "poststarthook/kube-apiserver-autoregistration",
    "autoregister-completion",
    // The OpenAPI documents are made from the served kinds at each request.
    "poststarthook/apiservice-openapi-controller",
];

/// The checks `/readyz` has besides [`CHECKS`]: informers synced (there are
/// none), and not shutting down (fakeapi answers until it stops).
const READY_ONLY: &[&str] = &["informer-sync", "shutdown"];

/// The names of the checks of `endpoint` (`healthz`, `livez`, `readyz`).
fn names(endpoint: &str) -> Vec<&'static str> {
    let mut v: Vec<&str> = CHECKS.to_vec();
    if endpoint == "readyz" {
        // kube-apiserver lists informer-sync after etcd, shutdown last.
        v.insert(3, READY_ONLY[0]);
        v.push(READY_ONLY[1]);
    }
    v
}

/// The answer to `GET /{endpoint}` (`check` empty) or
/// `/{endpoint}/{check}`: its status and text, or `None` for a check the
/// endpoint does not have (a 404). `verbose`: the `verbose` query
/// parameter; `exclude`: the checks `exclude` names (left out of the
/// verdict, listed as excluded).
pub(crate) fn answer(
    endpoint: &str,
    check: &str,
    verbose: bool,
    exclude: &[&str],
) -> Option<(u16, String)> {
    let all = names(endpoint);
    if !check.is_empty() {
        return all.contains(&check).then(|| (200, "ok".to_string()));
    }
    if !verbose {
        return Some((200, "ok".to_string()));
    }
    let mut out = String::new();
    for n in &all {
        if exclude.contains(n) {
            out.push_str(&format!("[+]{n} excluded: ok\n"));
        } else {
            out.push_str(&format!("[+]{n} ok\n"));
        }
    }
    out.push_str(&format!("{endpoint} check passed\n"));
    Some((200, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_readyz_has_its_own() {
        let mut seen = std::collections::HashSet::new();
        for n in CHECKS {
            assert!(seen.insert(*n), "{n}");
        }
        let ready = names("readyz");
        assert_eq!(ready[3], "informer-sync");
        assert_eq!(ready.last(), Some(&"shutdown"));
        assert!(!names("livez").contains(&"informer-sync"));
    }
}
