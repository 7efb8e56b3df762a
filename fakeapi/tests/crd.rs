//! Custom resources over real sockets, with kube-rs: CustomResourceDefinitions
//! created and deleted at run time (discovery, legacy and aggregated,
//! without a restart), their objects through every verb, watch, selector and
//! subresource, the schema's defaults, pruning and 422s, as a real API
//! server serves them.

mod common;

use common::*;
use fakeapi::{EventType, Origin, StoreConfig};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};
use serde_json::{json, Value};
use tokio::time::timeout;

const PG: &str = "podgroups.scheduling.x-k8s.io";

fn podgroup_crd() -> CustomResourceDefinition {
    serde_yaml::from_str(fakeapi::COSCHEDULING_PODGROUP_CRD).unwrap()
}

fn pg_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup"),
        "podgroups",
    )
}

/// A namespaced kind served in two versions (v1 stores), with status and
/// scale subresources, defaults, an enum, a pattern, an int-or-string, a
/// free-form part and an embedded object.
fn widget_crd() -> Value {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["size"], "properties": {
            "replicas": {"type": "integer", "default": 1, "minimum": 0},
            "size": {"type": "string", "enum": ["S", "M", "L"]},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 10},
            "quantity": {"x-kubernetes-int-or-string": true},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
        }},
        "status": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "selector": {"type": "string"},
            "phase": {"type": "string"},
            "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "required": ["type"], "properties": {
                    "type": {"type": "string"}, "status": {"type": "string"},
                    "reason": {"type": "string"}}}},
        }},
    }});
    let version = |name: &str, storage: bool| {
        json!({
            "name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": schema},
            "subresources": {"status": {}, "scale": {
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.selector"}},
            "selectableFields": [{"jsonPath": ".spec.size"}],
            "additionalPrinterColumns": [{"name": "Size", "type": "string", "jsonPath": ".spec.size"}],
        })
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [version("v1alpha1", false), version("v1", true)],
        },
    })
}

fn widget_resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", version, "Widget"),
        "widgets",
    )
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    widget_in("v1", name, spec)
}

fn widget_in(version: &str, name: &str, spec: Value) -> DynamicObject {
    DynamicObject::new(name, &widget_resource(version)).data(json!({ "spec": spec }))
}

fn api_status(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other}"),
    }
}

async fn install_widgets(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(widget_crd()).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
}

#[tokio::test]
async fn crd_lifecycle_discovery_and_cascading_delete() {
    let (store, server, client) = start(StoreConfig::default()).await;
    let mut changes = store.subscribe();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_watch_rv = crds
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();

    let created = crds
        .create(&PostParams::default(), &podgroup_crd())
        .await
        .unwrap();
    let status = created.status.clone().unwrap();
    let conditions = status.conditions.unwrap();
    let holds = |ty: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == ty && c.status == "True")
    };
    assert!(
        holds("NamesAccepted") && holds("Established"),
        "{conditions:?}"
    );
    let accepted = status.accepted_names.unwrap();
    assert_eq!(
        (accepted.kind.as_str(), accepted.plural.as_str()),
        ("PodGroup", "podgroups")
    );
    assert_eq!(accepted.short_names, Some(vec!["pg".into(), "pgs".into()]));
    assert_eq!(status.stored_versions, Some(vec!["v1alpha1".into()]));
    assert_eq!(crds.get(PG).await.unwrap().spec.names.kind, "PodGroup");
    assert_eq!(
        crds.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    // Discoverable at once, by both discovery protocols kube-rs speaks.
    for aggregated in [false, true] {
        let d = Discovery::new(client.clone());
        let d = if aggregated {
            d.run_aggregated().await
        } else {
            d.run().await
        }
        .unwrap();
        let group = d
            .get("scheduling.x-k8s.io")
            .expect("the PodGroup group is discovered");
        let (ar, caps) = group.recommended_kind("PodGroup").unwrap();
        assert_eq!(
            (ar.plural.as_str(), ar.version.as_str()),
            ("podgroups", "v1alpha1")
        );
        assert_eq!(caps.scope, Scope::Namespaced);
        assert!(
            caps.subresources.iter().any(|(s, _)| s.plural == "status"),
            "{caps:?}"
        );
        assert!(d.get("apiextensions.k8s.io").is_some());
    }
    // The raw documents client-go and kubectl ask for.
    for v in ["v2", "v2beta1"] {
        let accept =
            format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList");
        let r = raw(server.addr(), "GET", "/apis", &[("Accept", &accept)], None).await;
        assert_eq!(r.status, 200);
        let doc = r.json();
        assert_eq!(doc["apiVersion"], format!("apidiscovery.k8s.io/{v}"));
        let g = doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "scheduling.x-k8s.io")
            .unwrap();
        assert_eq!(g["versions"][0]["resources"][0]["resource"], "podgroups");
        assert_eq!(
            g["versions"][0]["resources"][0]["subresources"][0]["subresource"],
            "status"
        );
    }
    let doc = raw(
        server.addr(),
        "GET",
        "/apis/scheduling.x-k8s.io/v1alpha1",
        &[],
        None,
    )
    .await
    .json();
    let names: Vec<&str> = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["podgroups", "podgroups/status"]);
    let r = raw(server.addr(), "GET", "/apis/scheduling.x-k8s.io", &[], None).await;
    assert_eq!(r.json()["preferredVersion"]["version"], "v1alpha1");

    // The CRD watch sees the creation and an update.
    let mut w = crds
        .watch(&WatchParams::default(), &crd_watch_rv)
        .await
        .unwrap()
        .boxed();
    let mut crd = crds.get(PG).await.unwrap();
    crd.spec.names.categories = Some(vec!["batch".into()]);
    crds.replace(PG, &PostParams::default(), &crd)
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match timeout(PATIENCE, w.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(c) => seen.push(("ADDED", c)),
            WatchEvent::Modified(c) => seen.push(("MODIFIED", c)),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen[1].1.spec.names.categories, Some(vec!["batch".into()]));
    assert_eq!(seen[1].1.metadata.generation, Some(2));

    // Objects, then the CRD's deletion takes them and their watches along.
    let pgs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &pg_resource());
    let pg = DynamicObject::new("g1", &pg_resource()).data(json!({"spec": {"minMember": 2}}));
    pgs.create(&PostParams::default(), &pg).await.unwrap();
    let rv = pgs
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut pg_watch = pgs
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    crds.delete(PG, &DeleteParams::default()).await.unwrap();
    match timeout(PATIENCE, pg_watch.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(WatchEvent::Deleted(o)) => assert_eq!(o.metadata.name.as_deref(), Some("g1")),
        other => panic!("expected the PodGroup's deletion, got {other:?}"),
    }
    assert!(
        timeout(PATIENCE, pg_watch.try_next())
            .await
            .unwrap()
            .unwrap()
            .is_none(),
        "the watch ends with its CRD"
    );
    assert_eq!(api_status(pgs.get("g1").await.unwrap_err()).code, 404);
    assert_eq!(api_status(crds.get(PG).await.unwrap_err()).code, 404);
    let d = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    assert!(
        d.get("scheduling.x-k8s.io").is_none(),
        "discovery forgets a deleted CRD"
    );
    let r = raw(
        server.addr(),
        "GET",
        "/apis/scheduling.x-k8s.io/v1alpha1",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);

    // The broker's stream saw the PodGroup come and go under its qualified name.
    let mut pg_changes = Vec::new();
    while let Ok(c) = changes.try_recv() {
        if c.resource.qualified_name() == PG {
            pg_changes.push((c.kind, c.name.clone(), c.origin));
        }
    }
    assert_eq!(
        pg_changes,
        vec![
            (EventType::Added, "g1".to_string(), Origin::Http),
            (EventType::Deleted, "g1".to_string(), Origin::Http)
        ]
    );

    // Re-created: served again, empty.
    crds.create(&PostParams::default(), &podgroup_crd())
        .await
        .unwrap();
    assert!(pgs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
}

#[tokio::test]
async fn bad_crds_get_the_real_422_with_field_paths() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let post = |crd: Value| {
        let addr = server.addr();
        async move {
            let body = serde_json::to_vec(&crd).unwrap();
            raw(
                addr,
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                &[("Content-Type", "application/json")],
                Some(&body),
            )
            .await
        }
    };
    let fields = |r: &RawResponse| -> Vec<String> {
        r.json()["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap().to_string())
            .collect()
    };

    let mut bad = widget_crd();
    bad["metadata"]["name"] = json!("gadgets.example.com");
    bad["spec"]["scope"] = json!("Planet");
    bad["spec"]["versions"][0]["storage"] = json!(true);
    let r = post(bad).await;
    assert_eq!(r.status, 422);
    let s = r.json();
    assert_eq!(
        (s["reason"].as_str(), s["details"]["kind"].as_str()),
        (Some("Invalid"), Some("CustomResourceDefinition"))
    );
    assert_eq!(
        fields(&r),
        vec!["metadata.name", "spec.scope", "spec.versions"]
    );
    assert!(s["message"].as_str().unwrap().starts_with(
        "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\" is invalid: [metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group, spec.scope: Unsupported value: \"Planet\": supported values: \"Cluster\", \"Namespaced\", spec.versions: Invalid value: "
    ), "{s}");

    let mut bad = widget_crd();
    bad["spec"]["versions"][1]["schema"] = json!({});
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["size"]
        .as_object_mut()
        .unwrap()
        .remove("type");
    bad["spec"]["names"].as_object_mut().unwrap().remove("kind");
    let r = post(bad).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        fields(&r),
        vec![
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type",
            "spec.versions[1].schema.openAPIV3Schema",
            "spec.names.kind",
            "spec.names.listKind",
        ]
    );

    let mut bad = widget_crd();
    bad["spec"]["group"] = json!("example");
    bad["metadata"]["name"] = json!("widgets.example");
    let r = post(bad).await;
    assert_eq!(fields(&r), vec!["spec.group"]);
    assert!(r.json()["message"].as_str().unwrap().ends_with(
        "spec.group: Invalid value: \"example\": should be a domain with at least one dot"
    ));

    // A typed field of the wrong JSON type cannot even be decoded.
    let mut bad = widget_crd();
    bad["spec"]["versions"][0]["served"] = json!("yes");
    assert_eq!(post(bad).await.status, 400);

    // Names already taken in the group: accepted as an object, not established.
    assert_eq!(post(widget_crd()).await.status, 201);
    let mut twin = widget_crd();
    twin["metadata"]["name"] = json!("gadgets.example.com");
    twin["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget", "kind": "Widget"});
    let r = post(twin).await;
    assert_eq!(r.status, 201);
    let conds = r.json()["status"]["conditions"].clone();
    assert_eq!(conds[0]["status"], "False");
    assert_eq!(conds[0]["reason"], "KindConflict");
    assert_eq!(conds[0]["message"], "\"Widget\" is already in use");
    assert_eq!(
        raw(
            server.addr(),
            "GET",
            "/apis/example.com/v1/gadgets",
            &[],
            None
        )
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn custom_resources_through_every_verb() {
    let (store, server, client) = start(StoreConfig::default()).await;
    install_widgets(&client).await;
    let v1: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1"));
    let v1alpha1: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1alpha1"));
    let pp = PostParams::default();

    let a = v1
        .create(&pp, &widget("a", json!({"size": "S"})))
        .await
        .unwrap();
    assert_eq!(a.metadata.generation, Some(1));
    v1.create(&pp, &widget("b", json!({"size": "M"})))
        .await
        .unwrap();
    let mut c = widget_in("v1alpha1", "c", json!({"size": "L"}));
    c.metadata.labels = Some([("tier".to_string(), "gold".to_string())].into());
    v1alpha1.create(&pp, &c).await.unwrap();
    assert_eq!(
        api_status(
            v1.create(&pp, &widget("a", json!({"size": "S"})))
                .await
                .unwrap_err()
        )
        .code,
        409
    );

    // One storage, every served version: the other one is the same object with its apiVersion.
    let c_v1 = v1.get("c").await.unwrap();
    assert_eq!(c_v1.types.as_ref().unwrap().api_version, "example.com/v1");
    let a_old = v1alpha1.get("a").await.unwrap();
    assert_eq!(
        a_old.types.as_ref().unwrap().api_version,
        "example.com/v1alpha1"
    );
    assert_eq!(a_old.metadata.uid, a.metadata.uid);
    let listed = v1alpha1.list(&ListParams::default()).await.unwrap();
    assert!(listed
        .items
        .iter()
        .all(|w| w.types.as_ref().unwrap().api_version == "example.com/v1alpha1"));
    assert_eq!(
        store
            .get("widgets.example.com", Some("default"), "c")
            .unwrap()["apiVersion"],
        "example.com/v1"
    );

    // Selectors: labels, metadata fields, selectable fields; nothing else.
    let names = |l: kube::core::ObjectList<DynamicObject>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|o| o.metadata.name.unwrap())
            .collect()
    };
    assert_eq!(
        names(
            v1.list(&ListParams::default().labels("tier=gold"))
                .await
                .unwrap()
        ),
        vec!["c"]
    );
    assert_eq!(
        names(
            v1.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .unwrap()
        ),
        vec!["b"]
    );
    assert_eq!(
        names(
            v1.list(&ListParams::default().fields("spec.size!=S"))
                .await
                .unwrap()
        ),
        vec!["b", "c"]
    );
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &widget_resource("v1"));
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("metadata.namespace=default"))
                .await
                .unwrap()
        )
        .len(),
        3
    );
    let e = api_status(
        v1.list(&ListParams::default().fields("spec.name=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "field label not supported: spec.name")
    );

    // Updates: optimistic concurrency.
    let mut stale = v1.get("a").await.unwrap();
    let mut fresh = stale.clone();
    fresh.data["spec"]["size"] = json!("M");
    let fresh = v1.replace("a", &pp, &fresh).await.unwrap();
    assert_eq!(fresh.metadata.generation, Some(2));
    stale.data["spec"]["size"] = json!("L");
    assert_eq!(
        api_status(v1.replace("a", &pp, &stale).await.unwrap_err()).code,
        409
    );

    // Patches: merge and JSON yes, strategic merge 415, apply creates and merges.
    let patched = v1
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tags": ["x"]}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["tags"], json!(["x"]));
    let patched = v1
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(
                    json!([{"op": "replace", "path": "/spec/size", "value": "L"}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["size"], "L");
    let e = api_status(
        v1.patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": "S"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 415);
    assert_eq!(e.reason, "UnsupportedMediaType");
    assert_eq!(e.message, "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml");
    let applied = v1
        .patch(
            "d",
            &PatchParams::apply("test"),
            &Patch::Apply(
                json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": "S"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["spec"]["replicas"], 1);
    let applied = v1
        .patch("d", &PatchParams::apply("test"), &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": "M", "tags": ["t"]}})))
        .await
        .unwrap();
    assert_eq!(
        (
            applied.data["spec"]["size"].as_str(),
            applied.data["spec"]["tags"].clone()
        ),
        (Some("M"), json!(["t"]))
    );

    // Deletes, one and by collection.
    v1.delete("d", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_status(v1.get("d").await.unwrap_err()).code, 404);
    v1.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("tier=gold"),
    )
    .await
    .unwrap();
    assert_eq!(
        names(v1.list(&ListParams::default()).await.unwrap()),
        vec!["a", "b"]
    );

    // A cluster-scoped kind.
    let mut gizmo = widget_crd();
    gizmo["metadata"]["name"] = json!("gizmos.example.com");
    gizmo["spec"]["scope"] = json!("Cluster");
    gizmo["spec"]["names"] = json!({"plural": "gizmos", "kind": "Gizmo"});
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&pp, &serde_json::from_value(gizmo).unwrap())
        .await
        .unwrap();
    let gr = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gizmo"),
        "gizmos",
    );
    let gizmos: Api<DynamicObject> = Api::all_with(client.clone(), &gr);
    let g = gizmos
        .create(
            &pp,
            &DynamicObject::new("g", &gr).data(json!({"spec": {"size": "S"}})),
        )
        .await
        .unwrap();
    assert_eq!(g.metadata.namespace, None);
    assert_eq!(
        gizmos
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let r = raw(
        server.addr(),
        "GET",
        "/apis/example.com/v1/namespaces/default/gizmos",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(
        store.get("gizmos.example.com", None, "g").unwrap()["spec"]["size"],
        "S"
    );
}

/// Server-side apply merges a `x-kubernetes-list-type: map` list entry by
/// entry: two managers applying different conditions keep both (Kueue's
/// job reconciler applies `Finished` and its scheduler `QuotaReserved` on a
/// Workload's status; a list replaced whole made each erase the other's,
/// the Workload flipping between finished and pending every 20 ms). An
/// atomic list is still replaced.
#[tokio::test]
async fn apply_merges_map_lists_by_key() {
    let (_store, _server, client) = start(StoreConfig::default()).await;
    install_widgets(&client).await;
    let w: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1"));
    w.create(
        &PostParams::default(),
        &widget("a", json!({"size": "S", "tags": ["x", "y"]})),
    )
    .await
    .unwrap();
    let apply = |manager: &str, status: Value| {
        let w = w.clone();
        let pp = PatchParams::apply(manager).force();
        let body = json!({"apiVersion": "example.com/v1", "kind": "Widget", "status": status});
        async move { w.patch_status("a", &pp, &Patch::Apply(body)).await.unwrap() }
    };
    apply(
        "admission",
        json!({"conditions": [{"type": "QuotaReserved", "status": "True"}]}),
    )
    .await;
    let both = apply(
        "job",
        json!({"conditions": [{"type": "Finished", "status": "True"}]}),
    )
    .await;
    assert_eq!(
        both.data["status"]["conditions"],
        json!([{"type": "QuotaReserved", "status": "True"}, {"type": "Finished", "status": "True"}])
    );
    // An entry applied again is merged in place, the others stay.
    let again = apply(
        "admission",
        json!({"phase": "Done", "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Ended"}]}),
    )
    .await;
    assert_eq!(
        (
            again.data["status"]["phase"].as_str(),
            again.data["status"]["conditions"].clone()
        ),
        (
            Some("Done"),
            json!([{"type": "QuotaReserved", "status": "False", "reason": "Ended"},
                   {"type": "Finished", "status": "True"}])
        )
    );
    // spec.tags has no list type: atomic, replaced.
    let tags = w
        .patch(
            "a",
            &PatchParams::apply("other").force(),
            &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": "S", "tags": ["z"]}})),
        )
        .await
        .unwrap();
    assert_eq!(tags.data["spec"]["tags"], json!(["z"]));
}

#[tokio::test]
async fn status_and_scale_subresources_as_declared() {
    let (_store, server, client) = start(StoreConfig::default()).await;
    install_widgets(&client).await;
    let w: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1"));
    let pp = PostParams::default();
    let mut obj = widget("a", json!({"size": "S", "replicas": 2}));
    obj.data["status"] = json!({"phase": "ignored on create"});
    let created = w.create(&pp, &obj).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "a create cannot set status: {:?}",
        created.data
    );

    // The main resource ignores status; the status subresource ignores the rest.
    let mut main = created.clone();
    main.data["status"] = json!({"phase": "Running"});
    main.data["spec"]["size"] = json!("M");
    let after = w.replace("a", &pp, &main).await.unwrap();
    assert_eq!(
        (
            after.data["spec"]["size"].as_str(),
            after.data.get("status")
        ),
        (Some("M"), None)
    );
    assert_eq!(after.metadata.generation, Some(2));
    let mut st = after.clone();
    st.data["status"] = json!({"phase": "Running", "replicas": 2, "selector": "app=w"});
    st.data["spec"]["size"] = json!("L");
    let after = w.replace_status("a", &pp, &st).await.unwrap();
    assert_eq!(
        (
            after.data["spec"]["size"].as_str(),
            after.data["status"]["phase"].as_str()
        ),
        (Some("M"), Some("Running"))
    );
    assert_eq!(
        after.metadata.generation,
        Some(2),
        "status does not bump the generation"
    );
    let after = w
        .patch_status(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Done"}, "spec": {"size": "S"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            after.data["spec"]["size"].as_str(),
            after.data["status"]["phase"].as_str()
        ),
        (Some("M"), Some("Done"))
    );
    assert_eq!(
        w.get_status("a").await.unwrap().data["status"]["phase"],
        "Done"
    );

    // Scale: spec.replicas, status.replicas, status.selector as autoscaling/v1 Scale.
    let scale = w.get_scale("a").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(2));
    let status = scale.status.clone().unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (2, Some("app=w"))
    );
    let mut s2: Scale = scale.clone();
    s2.spec.as_mut().unwrap().replicas = Some(5);
    let s2 = w.replace_scale("a", &pp, &s2).await.unwrap();
    assert_eq!(s2.spec.unwrap().replicas, Some(5));
    assert_eq!(w.get("a").await.unwrap().data["spec"]["replicas"], 5);
    let s3 = w
        .patch_scale(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(s3.spec.unwrap().replicas, Some(7));
    // A stale Scale is a conflict, a negative one invalid.
    let e = api_status(w.replace_scale("a", &pp, &scale).await.unwrap_err());
    assert_eq!(e.code, 409);
    let mut neg = w.get_scale("a").await.unwrap();
    neg.spec.as_mut().unwrap().replicas = Some(-1);
    let e = api_status(w.replace_scale("a", &pp, &neg).await.unwrap_err());
    assert_eq!(
        (e.code, e.details.unwrap().causes[0].field.as_str()),
        (422, "spec.replicas")
    );

    // PodGroups declare status only: no scale path.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&pp, &podgroup_crd()).await.unwrap();
    let pgs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &pg_resource());
    pgs.create(
        &pp,
        &DynamicObject::new("g", &pg_resource()).data(json!({"spec": {"minMember": 1}})),
    )
    .await
    .unwrap();
    let r = raw(
        server.addr(),
        "GET",
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/g/scale",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn schema_defaults_pruning_and_validation() {
    let (store, server, client) = start(StoreConfig::default()).await;
    install_widgets(&client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &podgroup_crd())
        .await
        .unwrap();
    let w: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1"));
    let pp = PostParams::default();

    let mut obj = widget(
        "a",
        json!({
            "size": "S", "unknown": 1, "quantity": "500m",
            "free": {"anything": {"goes": [1, 2]}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"x": "y"}}, "spec": {"k": "v"}, "junk": 1},
        }),
    );
    obj.data["unknownTop"] = json!(true);
    let a = w.create(&pp, &obj).await.unwrap();
    let spec = &a.data["spec"];
    assert_eq!(spec["replicas"], 1, "default filled in: {spec}");
    assert!(
        spec.get("unknown").is_none() && a.data.get("unknownTop").is_none(),
        "unknown fields pruned: {}",
        a.data
    );
    assert_eq!(spec["free"], json!({"anything": {"goes": [1, 2]}}));
    assert_eq!(spec["quantity"], "500m");
    assert_eq!(
        spec["template"],
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"x": "y"}}, "spec": {"k": "v"}})
    );
    let q = w
        .create(&pp, &widget("q", json!({"size": "S", "quantity": 3})))
        .await
        .unwrap();
    assert_eq!(q.data["spec"]["quantity"], 3);

    // The real server's 422: message, field paths, one cause per field.
    let e = api_status(w.create(&pp, &widget("bad", json!({"size": "XL", "replicas": -1, "name": "Caps", "tags": ["a", "b", "c"], "quantity": true}))).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let d = e.details.unwrap();
    assert_eq!(
        (d.kind.as_str(), d.group.as_str(), d.name.as_str()),
        ("Widget", "example.com", "bad")
    );
    let causes: Vec<(String, String)> = d
        .causes
        .iter()
        .map(|c| (c.field.clone(), c.message.clone()))
        .collect();
    assert_eq!(causes, vec![
        ("spec.name".into(), "Invalid value: \"Caps\": spec.name in body should match '^[a-z]+$'".into()),
        ("spec.quantity".into(), "Invalid value: \"boolean\": spec.quantity in body must be of type integer,string: \"boolean\"".into()),
        ("spec.replicas".into(), "Invalid value: -1: spec.replicas in body should be greater than or equal to 0".into()),
        ("spec.size".into(), "Unsupported value: \"XL\": supported values: \"S\", \"M\", \"L\"".into()),
        ("spec.tags".into(), "Too many: 3: must have at most 2 items".into()),
    ]);
    assert!(
        e.message.starts_with(
            "Widget.example.com \"bad\" is invalid: [spec.name: Invalid value: \"Caps\""
        ),
        "{}",
        e.message
    );
    let e = api_status(w.create(&pp, &widget("bad", json!({}))).await.unwrap_err());
    assert_eq!(
        e.message,
        "Widget.example.com \"bad\" is invalid: spec.size: Required value"
    );

    // The PodGroup of the brief: minMember must be an int32 of at least 1.
    let pgs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &pg_resource());
    let e = api_status(
        pgs.create(
            &pp,
            &DynamicObject::new("g", &pg_resource()).data(json!({"spec": {"minMember": "string"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "PodGroup.scheduling.x-k8s.io \"g\" is invalid: spec.minMember: Invalid value: \"string\": spec.minMember in body must be of type integer: \"string\""
    );
    let cause = &e.details.unwrap().causes[0];
    assert_eq!(
        (cause.field.as_str(), cause.reason.as_str()),
        ("spec.minMember", "FieldValueTypeInvalid")
    );
    let g = pgs
        .create(&pp, &DynamicObject::new("g", &pg_resource()).data(json!({"spec": {"minMember": 3, "minResources": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1}, "scheduleTimeoutSeconds": 60}})))
        .await
        .unwrap();
    assert_eq!(g.data["spec"]["minResources"]["memory"], "1Gi");
    let e = api_status(
        pgs.patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minResources": {"cpu": "two"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.details.unwrap().causes[0].field, "spec.minResources.cpu");

    // fieldValidation=Strict refuses unknown fields instead of pruning them.
    let body = serde_json::to_vec(&json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s"}, "spec": {"size": "S", "bogus": 1}})).unwrap();
    let r = raw(
        server.addr(),
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets?fieldValidation=Strict",
        &[("Content-Type", "application/json")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.bogus\""
    );

    // A default added to the schema later shows on objects stored before it.
    let mut crd = crds.get("widgets.example.com").await.unwrap();
    let mut v = serde_json::to_value(&crd).unwrap();
    for i in 0..2 {
        v["spec"]["versions"][i]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["color"] = json!({"type": "string", "default": "blue"});
    }
    crd = serde_json::from_value(v).unwrap();
    crds.replace("widgets.example.com", &pp, &crd)
        .await
        .unwrap();
    assert_eq!(w.get("a").await.unwrap().data["spec"]["color"], "blue");
    assert_eq!(
        store
            .get("widgets.example.com", Some("default"), "q")
            .unwrap()["spec"]["color"],
        "blue"
    );
}

#[tokio::test]
async fn custom_resource_watches_resume_bookmark_and_expire() {
    let (store, server, client) = start(StoreConfig {
        watch_history: 3,
        ..Default::default()
    })
    .await;
    install_widgets(&client).await;
    let w: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1"));
    let old: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1alpha1"));
    let pp = PostParams::default();
    let start_rv = w
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut from_v1 = w
        .watch(&WatchParams::default(), &start_rv)
        .await
        .unwrap()
        .boxed();
    let mut from_old = old
        .watch(&WatchParams::default().fields("metadata.name=a"), &start_rv)
        .await
        .unwrap()
        .boxed();
    w.create(&pp, &widget("a", json!({"size": "S"})))
        .await
        .unwrap();
    w.create(&pp, &widget("b", json!({"size": "S"})))
        .await
        .unwrap();
    w.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": "M"}})),
    )
    .await
    .unwrap();
    w.delete("a", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let e = timeout(PATIENCE, from_v1.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push(match e {
            WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.unwrap()),
            WatchEvent::Modified(o) => format!(
                "MODIFIED {} {}",
                o.metadata.name.unwrap(),
                o.data["spec"]["size"]
            ),
            WatchEvent::Deleted(o) => format!("DELETED {}", o.metadata.name.unwrap()),
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(
        seen,
        vec!["ADDED a", "ADDED b", "MODIFIED a \"M\"", "DELETED a"]
    );
    // The older version's watcher gets the same changes of `a`, in its version.
    for want in ["ADDED", "MODIFIED", "DELETED"] {
        let e = timeout(PATIENCE, from_old.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let (ty, o) = match e {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(
            (ty, o.types.unwrap().api_version.as_str()),
            (want, "example.com/v1alpha1")
        );
    }

    // A streaming list: current objects, then the initial-events-end bookmark.
    let mut s = w
        .watch(&WatchParams::streaming_lists(), "")
        .await
        .unwrap()
        .boxed();
    match timeout(PATIENCE, s.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("b")),
        other => panic!("expected b, got {other:?}"),
    }
    match timeout(PATIENCE, s.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Bookmark(b) => {
            assert_eq!(b.types.kind, "Widget");
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!("expected the bookmark, got {other:?}"),
    }

    // Older than the history kept: 410 Expired, as for built-in kinds.
    for i in 0..4 {
        w.create(&pp, &widget(&format!("x{i}"), json!({"size": "S"})))
            .await
            .unwrap();
    }
    let path = format!(
        "/apis/example.com/v1/namespaces/default/widgets?watch=1&resourceVersion={start_rv}"
    );
    let r = raw(server.addr(), "GET", &path, &[], None).await;
    let lines = r.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        (
            lines[0]["type"].as_str(),
            lines[0]["object"]["code"].as_i64()
        ),
        (Some("ERROR"), Some(410))
    );
    assert_eq!(lines[0]["object"]["reason"], "Expired");
    drop(store);
}

#[tokio::test]
async fn custom_resources_are_json_only() {
    let (_store, server, client) = start(StoreConfig::default()).await;
    install_widgets(&client).await;
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let r = raw(
        server.addr(),
        "POST",
        path,
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        Some(b"k8s\0garbage"),
    )
    .await;
    assert_eq!(r.status, 415);
    assert_eq!(r.json()["reason"], "UnsupportedMediaType");
    // client-go's default Accept gets JSON; protobuf only is 406.
    let r = raw(
        server.addr(),
        "GET",
        path,
        &[("Accept", "application/vnd.kubernetes.protobuf, */*")],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r
        .headers
        .to_ascii_lowercase()
        .contains("content-type: application/json"));
    assert_eq!(r.json()["kind"], "WidgetList");
    let r = raw(
        server.addr(),
        "GET",
        path,
        &[("Accept", "application/vnd.kubernetes.protobuf")],
        None,
    )
    .await;
    assert_eq!(r.status, 406);
    // kubectl's table of a custom kind: name and the CRD's printer columns.
    let body = br#"{"metadata": {"name": "t"}, "spec": {"size": "M"}}"#;
    raw(
        server.addr(),
        "POST",
        path,
        &[("Content-Type", "application/json")],
        Some(body),
    )
    .await;
    let r = raw(
        server.addr(),
        "GET",
        path,
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        None,
    )
    .await;
    let t = r.json();
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, vec!["Name", "Size"]);
    assert_eq!(t["rows"][0]["cells"], json!(["t", "M"]));
}

#[tokio::test]
async fn the_store_api_serves_custom_resources() {
    let (store, _server, _client) = start(StoreConfig::default()).await;
    let mut changes = store.subscribe();
    let crd: Value = serde_yaml::from_str(fakeapi::COSCHEDULING_PODGROUP_CRD).unwrap();
    store.install_crd(crd.clone()).unwrap();
    assert_eq!(store.install_crd(crd).unwrap_err().code(), 409);
    let info = store
        .resource_for_kind("scheduling.x-k8s.io/v1alpha1", "PodGroup")
        .unwrap();
    assert_eq!(info.qualified_name(), PG);
    assert!(store.resources().iter().any(|r| std::ptr::eq(*r, info)));

    let g = store
        .create(
            PG,
            Some("default"),
            json!({"metadata": {"name": "job-1", "labels": {"j": "1"}}, "spec": {"minMember": 2}}),
        )
        .unwrap();
    assert_eq!(
        (g["kind"].as_str(), g["metadata"]["generation"].as_i64()),
        (Some("PodGroup"), Some(1))
    );
    let mut g = store.get(PG, Some("default"), "job-1").unwrap();
    g["status"] = json!({"phase": "Running", "running": 2});
    let g = store.update(PG, Some("default"), g).unwrap();
    assert_eq!(
        g["status"]["phase"], "Running",
        "the Rust API writes status, as the controllers do"
    );
    let g = store
        .patch(
            PG,
            Some("default"),
            "job-1",
            fakeapi::PatchKind::Merge,
            br#"{"spec": {"minMember": 3}}"#,
        )
        .unwrap();
    assert_eq!(g["spec"]["minMember"], 3);
    assert_eq!(
        store
            .patch(
                PG,
                Some("default"),
                "job-1",
                fakeapi::PatchKind::StrategicMerge,
                b"{}"
            )
            .unwrap_err()
            .code(),
        415
    );
    let e = store
        .create(
            PG,
            Some("default"),
            json!({"metadata": {"name": "bad"}, "spec": {"minMember": 0}}),
        )
        .unwrap_err();
    assert_eq!(e.code(), 422);
    assert_eq!(e.causes()[0].field, "spec.minMember");
    assert_eq!(store.list(PG, None, Some("j=1"), None).unwrap().len(), 1);
    assert_eq!(
        store
            .list(PG, Some("kube-system"), None, None)
            .unwrap()
            .len(),
        0
    );
    store.delete(PG, Some("default"), "job-1").unwrap();
    let kinds: Vec<(EventType, String)> = std::iter::from_fn(|| changes.try_recv().ok())
        .filter(|c| c.resource.qualified_name() == PG)
        .map(|c| (c.kind, c.name.clone()))
        .collect();
    assert_eq!(
        kinds.iter().map(|k| k.0).collect::<Vec<_>>(),
        vec![
            EventType::Added,
            EventType::Modified,
            EventType::Modified,
            EventType::Deleted
        ]
    );
    store
        .delete("customresourcedefinitions.apiextensions.k8s.io", None, PG)
        .unwrap();
    assert_eq!(
        store.get(PG, Some("default"), "job-1").unwrap_err().code(),
        404
    );
    assert!(store
        .resource_for_kind("scheduling.x-k8s.io/v1alpha1", "PodGroup")
        .is_none());
}

/// A CRD whose versions convert through a webhook (Kueue's, with the
/// caBundle its own cert controller patches in): accepted and checked as the
/// real server checks it, its caBundle updated like any field, its objects
/// served in the storage version; the webhook is never called, so a request
/// in the other version is refused with a message saying what to do,
/// instead of a silent `apiVersion` rewrite.
#[tokio::test]
async fn a_conversion_webhook_crd_is_served_in_its_storage_version() {
    let (_store, server, client) = start(StoreConfig::default()).await;
    let post = |crd: Value| {
        let addr = server.addr();
        async move {
            let body = serde_json::to_vec(&crd).unwrap();
            raw(
                addr,
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                &[("Content-Type", "application/json")],
                Some(&body),
            )
            .await
        }
    };
    let webhook = json!({"clientConfig": {"service": {"namespace": "kueue-system",
        "name": "kueue-webhook-service", "path": "/convert"}},
        "conversionReviewVersions": ["v1"]});
    // Bad conversions: the real server's field paths.
    let mut bad = widget_crd();
    bad["spec"]["conversion"] = json!({"strategy": "Webhook"});
    let r = post(bad).await;
    assert_eq!(r.status, 422);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("spec.conversion.webhook: Required value"),
        "{}",
        r.json()
    );
    let mut bad = widget_crd();
    bad["spec"]["conversion"] = json!({"strategy": "Webhook",
        "webhook": {"clientConfig": {}, "conversionReviewVersions": ["v2"]}});
    let r = post(bad).await;
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("spec.conversion.webhook.clientConfig: Required value: exactly one of url or service is required")
            && msg.contains("spec.conversion.webhook.conversionReviewVersions: Required value: must include at least one of v1, v1beta1"),
        "{msg}"
    );
    let mut bad = widget_crd();
    bad["spec"]["conversion"] = json!({"strategy": "None", "webhook": webhook});
    let r = post(bad).await;
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("spec.conversion.webhook: Forbidden"),
        "{}",
        r.json()
    );
    let mut bad = widget_crd();
    bad["spec"]["conversion"] = json!({"strategy": "Magic"});
    let r = post(bad).await;
    assert!(
        r.json()["message"].as_str().unwrap().contains(
            "spec.conversion.strategy: Unsupported value: \"Magic\": supported values: \"None\", \"Webhook\""
        ),
        "{}",
        r.json()
    );

    let mut crd = widget_crd();
    crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": webhook});
    assert_eq!(post(crd).await.status, 201);
    // The caBundle, patched in as Kueue's cert controller does (an update).
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut got = crds.get("widgets.example.com").await.unwrap();
    got.spec
        .conversion
        .as_mut()
        .unwrap()
        .webhook
        .as_mut()
        .unwrap()
        .client_config
        .as_mut()
        .unwrap()
        .ca_bundle = Some(k8s_openapi::ByteString(b"a CA".to_vec()));
    crds.replace("widgets.example.com", &PostParams::default(), &got)
        .await
        .unwrap();
    // The storage version serves every verb.
    let v1: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1"));
    v1.create(&PostParams::default(), &widget("w", json!({"size": "S"})))
        .await
        .unwrap();
    assert_eq!(
        v1.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    // The other version would need the webhook.
    let r = raw(
        server.addr(),
        "GET",
        "/apis/example.com/v1alpha1/namespaces/default/widgets",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 500, "{}", r.json());
    assert_eq!(
        r.json()["message"],
        "Internal error occurred: conversion webhook for example.com/v1, Kind=Widget failed: \
         batkube does not call conversion webhooks (service kueue-system/kueue-webhook-service, \
         of the CustomResourceDefinition widgets.example.com): request the storage version \
         example.com/v1 instead"
    );
}

/// Server-side apply removes what a manager applied before and no longer
/// applies, as kube-apiserver does through field ownership: Kueue clears a
/// Workload's admission by applying its status without it (a stale one kept
/// Kueue admitting and evicting the Workload for ever). A field another
/// manager applies, or another client changed since, stays.
#[tokio::test]
async fn an_apply_removes_what_its_manager_no_longer_applies() {
    let (_store, server, client) = start(StoreConfig::default()).await;
    install_widgets(&client).await;
    let v1: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1"));
    v1.create(&PostParams::default(), &widget("w", json!({"size": "S"})))
        .await
        .unwrap();
    let apply = |manager: &'static str, status: Value| {
        let addr = server.addr();
        async move {
            let body = serde_json::to_vec(&json!({"apiVersion": "example.com/v1",
                "kind": "Widget", "metadata": {"name": "w", "namespace": "default"},
                "status": status}))
            .unwrap();
            let r = raw(
                addr,
                "PATCH",
                &format!(
                    "/apis/example.com/v1/namespaces/default/widgets/w/status?fieldManager={manager}&force=true"
                ),
                &[("Content-Type", "application/apply-patch+yaml")],
                Some(&body),
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.json());
            r.json()["status"].clone()
        }
    };
    apply(
        "admission",
        json!({"phase": "Admitted", "conditions": [{"type": "QuotaReserved", "status": "True"}]}),
    )
    .await;
    apply(
        "jobs",
        json!({"conditions": [{"type": "Finished", "status": "False"}]}),
    )
    .await;
    // The admission manager leaves out its phase: gone; its condition
    // changes; the other manager's condition stays.
    let st = apply(
        "admission",
        json!({"conditions": [{"type": "QuotaReserved", "status": "False"}]}),
    )
    .await;
    assert_eq!(
        st,
        json!({"conditions": [{"type": "QuotaReserved", "status": "False"},
            {"type": "Finished", "status": "False"}]})
    );
    // A field another client has changed since is no longer the
    // manager's alone: it stays.
    let reserved = json!([{"type": "QuotaReserved", "status": "False"}]);
    apply(
        "admission",
        json!({"phase": "Admitted", "conditions": reserved}),
    )
    .await;
    v1.patch_status(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let st = apply("admission", json!({"conditions": reserved})).await;
    assert_eq!(st["phase"], "Running", "{st}");
    // The jobs manager leaves its condition out: it goes, the other's stays.
    let st = apply("jobs", json!({})).await;
    assert_eq!(
        st["conditions"],
        json!([{"type": "QuotaReserved", "status": "False"}]),
        "{st}"
    );
}
