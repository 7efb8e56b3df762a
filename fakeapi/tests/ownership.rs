//! Owner references over real sockets, with kube-rs: the garbage collector
//! deletes a custom resource's dependents when it goes, and each of the
//! three propagation policies kube-rs sends (`DeleteParams::background`,
//! `foreground`, `orphan`) does what a real cluster does.

mod common;

use common::*;
use fakeapi::StoreConfig;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

async fn owner(api: &Api<ConfigMap>, name: &str) -> String {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &cm)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}

fn dependent(name: &str, owner: &str, uid: &str, block: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
            "name": owner, "uid": uid, "blockOwnerDeletion": block}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn propagation_policies_as_kube_rs_sends_them() {
    let (_store, _server, client) = start(StoreConfig::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();

    let uid = owner(&cms, "bg").await;
    pods.create(&pp, &dependent("bg-1", "bg", &uid, false))
        .await
        .unwrap();
    cms.delete("bg", &DeleteParams::background()).await.unwrap();
    assert_eq!(pods.get_opt("bg-1").await.unwrap(), None);

    let uid = owner(&cms, "orph").await;
    pods.create(&pp, &dependent("orph-1", "orph", &uid, true))
        .await
        .unwrap();
    cms.delete("orph", &DeleteParams::orphan()).await.unwrap();
    assert_eq!(cms.get_opt("orph").await.unwrap(), None);
    let kept = pods.get("orph-1").await.unwrap();
    assert_eq!(kept.metadata.owner_references, None);

    // Foreground: the owner answers with its finalizer and waits for the
    // dependent, whose own finalizer holds it.
    let uid = owner(&cms, "fg").await;
    let mut held = dependent("fg-1", "fg", &uid, true);
    held.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    pods.create(&pp, &held).await.unwrap();
    let answer = cms.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let marked = answer.left().expect("the owner is kept while it waits");
    assert_eq!(
        marked.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    assert!(cms
        .get("fg")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());
    let mut dep = pods.get("fg-1").await.unwrap();
    assert!(dep.metadata.deletion_timestamp.is_some());
    dep.metadata.finalizers = None;
    pods.replace("fg-1", &pp, &dep).await.unwrap();
    assert_eq!(pods.get_opt("fg-1").await.unwrap(), None);
    assert_eq!(cms.get_opt("fg").await.unwrap(), None);
}

#[tokio::test]
async fn a_custom_resource_takes_its_dependents_with_it() {
    let (_store, server, client) = start(StoreConfig::default()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(fakeapi::COSCHEDULING_PODGROUP_CRD).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup"),
        "podgroups",
    );
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut pg = DynamicObject::new("job-1", &ar);
    pg.data = json!({"spec": {"minMember": 2}});
    let uid = groups
        .create(&PostParams::default(), &pg)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    for i in 0..2 {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("job-1-{i}"), "ownerReferences": [{
                "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "name": "job-1", "uid": uid, "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    groups
        .delete("job-1", &DeleteParams::default())
        .await
        .unwrap();
    assert!(pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .is_empty());

    // An unknown policy, raw: 422 with the real message.
    let r = raw(
        server.addr(),
        "DELETE",
        "/api/v1/namespaces/default/pods/x?propagationPolicy=Sideways",
        &[],
        None,
    )
    .await;
    let body = String::from_utf8_lossy(&r.body).to_string();
    assert_eq!(r.status, 422, "{body}");
    assert!(
        body.contains("Unsupported value: \\\"Sideways\\\""),
        "{body}"
    );
}
