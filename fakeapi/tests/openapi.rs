//! The OpenAPI documents, as kube-apiserver publishes them: each served
//! version of a CRD in `/openapi/v2` and in its group/version's
//! `/openapi/v3` document, gone when the version is no longer served or is
//! renamed; the built-in kinds' schemas beside them. What the suite's
//! CustomResourcePublishOpenAPI and OpenAPIV3 tests read.

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;

/// The suite's `schemaFoo` (crd_publish_openapi.go), as JSON.
fn schema_foo() -> Value {
    json!({
        "description": "Foo CRD for Testing",
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "description": "Specification of Foo",
                "properties": {
                    "bars": {
                        "description": "List of Bars and their specs.",
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"description": "Name of Bar.", "type": "string"},
                                "age": {"description": "Age of Bar.", "type": "string"},
                                "feeling": {"description": "Whether Bar is feeling great.",
                                            "type": "string", "enum": ["Great", "Down"]},
                                "bazs": {"description": "List of Bazs.",
                                         "items": {"type": "string"}, "type": "array"},
                            },
                        },
                    },
                },
            },
            "status": {
                "description": "Status of Foo",
                "type": "object",
                "properties": {
                    "quxType": {"description": "Indicates to external qux type.",
                                "pattern": "in-tree|out-of-tree", "type": "string"},
                },
            },
        },
    })
}

fn crd(versions: &[&str], schema: &Value) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({"name": v, "served": true, "storage": i == 0,
                   "schema": {"openAPIV3Schema": schema}})
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.publish.example.com"},
        "spec": {
            "group": "publish.example.com",
            "scope": "Namespaced",
            "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
            "versions": versions,
        },
    })
}

const CRD_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

async fn send(a: SocketAddr, method: &str, path: &str, ctype: &str, body: &Value) -> Value {
    let b = serde_json::to_vec(body).unwrap();
    let r = raw(a, method, path, &[("Content-Type", ctype)], Some(&b)).await;
    assert!(
        r.status < 300,
        "{method} {path}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

async fn v2_definitions(a: SocketAddr) -> serde_json::Map<String, Value> {
    let r = raw(
        a,
        "GET",
        "/openapi/v2",
        &[("Accept", "application/json")],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["swagger"], "2.0");
    doc["definitions"].as_object().unwrap().clone()
}

/// What the suite compares: the definition without what the server adds.
fn without_defaults(d: &Value) -> Value {
    let mut d = d.clone();
    let m = d.as_object_mut().unwrap();
    for p in ["metadata", "apiVersion", "kind"] {
        m["properties"].as_object_mut().unwrap().remove(p);
    }
    m.remove("x-kubernetes-group-version-kind");
    d
}

const V2: &str = "com.example.publish.v2.Foo";
const V3: &str = "com.example.publish.v3.Foo";
const V4: &str = "com.example.publish.v4.Foo";

#[tokio::test]
async fn a_crds_served_versions_are_published_in_openapi_v2() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    send(
        a,
        "POST",
        CRD_PATH,
        "application/json",
        &crd(&["v2", "v3"], &schema_foo()),
    )
    .await;

    let defs = v2_definitions(a).await;
    for name in [V2, V3] {
        let d = &defs[name];
        assert_eq!(without_defaults(d), schema_foo(), "{name}");
        assert_eq!(
            d["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(d["properties"]["apiVersion"]["type"], "string");
        assert_eq!(
            d["x-kubernetes-group-version-kind"],
            json!([{"group": "publish.example.com", "kind": "Foo", "version": name.split('.').nth(3).unwrap()}])
        );
    }
    assert_eq!(
        defs["com.example.publish.v2.FooList"]["properties"]["items"]["items"]["$ref"],
        format!("#/definitions/{V2}")
    );
    // The types they refer to, and the built-in kinds, are there too.
    assert!(defs.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    assert_eq!(
        defs["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "Pod", "version": "v1"}])
    );

    // Renamed: v3 goes, v4 comes, v2 stays.
    send(
        a,
        "PATCH",
        &format!("{CRD_PATH}/foos.publish.example.com"),
        "application/json-patch+json",
        &json!([{"op": "test", "path": "/spec/versions/1/name", "value": "v3"},
                {"op": "replace", "path": "/spec/versions/1/name", "value": "v4"}]),
    )
    .await;
    let defs = v2_definitions(a).await;
    assert!(defs.contains_key(V4) && defs.contains_key(V2));
    assert!(!defs.contains_key(V3));

    // No longer served: gone.
    send(
        a,
        "PATCH",
        &format!("{CRD_PATH}/foos.publish.example.com"),
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/spec/versions/1/served", "value": false}]),
    )
    .await;
    let defs = v2_definitions(a).await;
    assert!(defs.contains_key(V2));
    assert!(!defs.contains_key(V4));

    // Deleted: all gone.
    let r = raw(
        a,
        "DELETE",
        &format!("{CRD_PATH}/foos.publish.example.com"),
        &[],
        None,
    )
    .await;
    assert!(r.status < 300);
    let defs = v2_definitions(a).await;
    assert!(!defs.contains_key(V2));
}

/// A schema that keeps unknown fields, nullable fields and int-or-string
/// ones is published in v2 without what kubectl's v2 validation cannot
/// read (apiextensions-apiserver's `ToStructuralOpenAPIV2`), and whole in v3.
#[tokio::test]
async fn v2_leaves_out_what_swagger_cannot_read() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["n"],
                "properties": {
                    "n": {"type": "string", "nullable": true},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                             "properties": {"a": {"type": "string"}}},
                    "port": {"x-kubernetes-int-or-string": true},
                },
            },
        },
    });
    send(
        a,
        "POST",
        CRD_PATH,
        "application/json",
        &crd(&["v2"], &schema),
    )
    .await;
    let defs = v2_definitions(a).await;
    assert_eq!(
        without_defaults(&defs[V2])["properties"]["spec"],
        json!({"type": "object", "properties": {
            "n": {},
            "free": {"x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true},
        }})
    );
    let r = raw(
        a,
        "GET",
        "/openapi/v3/apis/publish.example.com/v2",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let d = &r.json()["components"]["schemas"][V2]["properties"]["spec"];
    assert_eq!(d["required"], json!(["n"]));
    assert_eq!(d["properties"]["n"]["nullable"], true);
    assert_eq!(d["properties"]["free"]["properties"]["a"]["type"], "string");
    assert_eq!(
        d["properties"]["port"]["anyOf"],
        json!([{"type": "integer"}, {"type": "string"}])
    );
}

#[tokio::test]
async fn openapi_v2_has_an_etag_and_refuses_protobuf_only() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let r = raw(a, "GET", "/openapi/v2", &[], None).await;
    assert_eq!(r.status, 200);
    let etag = r
        .headers
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("etag:")
                .then(|| l[5..].trim().to_string())
        })
        .expect("an ETag");
    let r = raw(a, "GET", "/openapi/v2", &[("If-None-Match", &etag)], None).await;
    assert_eq!(r.status, 304);
    send(
        a,
        "POST",
        CRD_PATH,
        "application/json",
        &crd(&["v2"], &schema_foo()),
    )
    .await;
    let r = raw(a, "GET", "/openapi/v2", &[("If-None-Match", &etag)], None).await;
    assert_eq!(r.status, 200, "the document changed with the CRD");
    let r = raw(
        a,
        "GET",
        "/openapi/v2",
        &[(
            "Accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )],
        None,
    )
    .await;
    assert_eq!(r.status, 406);
}

/// `/openapi/v3` names a document per group/version; a CRD's holds its
/// schema (with `ObjectMeta` and what it refers to, which `kubectl explain`
/// reads), its hash changes with the CRD, and it is gone with the CRD.
#[tokio::test]
async fn a_crds_versions_are_published_in_openapi_v3() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let url_of = |root: &Value, key: &str| {
        root["paths"][key]["serverRelativeURL"]
            .as_str()
            .map(str::to_string)
    };
    let root = raw(a, "GET", "/openapi/v3", &[], None).await.json();
    assert!(url_of(&root, "apis/publish.example.com/v2").is_none());
    assert!(url_of(&root, "api/v1").is_some());

    send(
        a,
        "POST",
        CRD_PATH,
        "application/json",
        &crd(&["v2"], &schema_foo()),
    )
    .await;
    let root = raw(a, "GET", "/openapi/v3", &[], None).await.json();
    let url = url_of(&root, "apis/publish.example.com/v2").expect("the CRD's group/version");
    let r = raw(a, "GET", &url, &[], None).await;
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.0.0");
    let schemas = &doc["components"]["schemas"];
    let foo = &schemas[V2];
    assert_eq!(foo["description"], "Foo CRD for Testing");
    assert_eq!(
        foo["properties"]["spec"]["properties"]["bars"]["items"]["properties"]["feeling"]["enum"],
        json!(["Great", "Down"])
    );
    // As kube-apiserver's v3 documents: the reference with a description
    // beside it as allOf, so that kubectl explain shows the field's.
    assert_eq!(
        foo["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert!(foo["properties"]["metadata"]["description"]
        .as_str()
        .unwrap()
        .starts_with("Standard object's metadata"));
    let meta = &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"];
    assert!(meta["properties"]["creationTimestamp"]["description"]
        .as_str()
        .unwrap()
        .starts_with("CreationTimestamp is a timestamp"));
    assert_eq!(
        schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]["format"],
        "date-time"
    );
    let patch =
        &doc["paths"]["/apis/publish.example.com/v2/namespaces/{namespace}/foos/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Foo");
    assert!(patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"));

    // Changed: another hash, so that kubectl's cache of it is not reused.
    let mut changed = schema_foo();
    changed["description"] = json!("Foo, changed");
    send(
        a,
        "PATCH",
        &format!("{CRD_PATH}/foos.publish.example.com"),
        "application/merge-patch+json",
        &json!({"spec": {"versions": [{"name": "v2", "served": true, "storage": true,
                                       "schema": {"openAPIV3Schema": changed}}]}}),
    )
    .await;
    let root = raw(a, "GET", "/openapi/v3", &[], None).await.json();
    let url2 = url_of(&root, "apis/publish.example.com/v2").unwrap();
    assert_ne!(url, url2);
    let doc = raw(a, "GET", &url2, &[], None).await.json();
    assert_eq!(
        doc["components"]["schemas"][V2]["description"],
        "Foo, changed"
    );

    let r = raw(
        a,
        "DELETE",
        &format!("{CRD_PATH}/foos.publish.example.com"),
        &[],
        None,
    )
    .await;
    assert!(r.status < 300);
    let root = raw(a, "GET", "/openapi/v3", &[], None).await.json();
    assert!(url_of(&root, "apis/publish.example.com/v2").is_none());
    let r = raw(
        a,
        "GET",
        "/openapi/v3/apis/publish.example.com/v2",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
}

/// A built-in group's document holds its kinds' schemas, with their
/// group-version-kind and the definitions they refer to.
#[tokio::test]
async fn built_in_groups_publish_their_schemas_in_openapi_v3() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let doc = raw(a, "GET", "/openapi/v3/apis/apps/v1", &[], None)
        .await
        .json();
    let schemas = &doc["components"]["schemas"];
    let d = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        d["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    // A reference with a description beside it is written as allOf.
    assert_eq!(
        d["properties"]["spec"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
    );
    assert_eq!(
        schemas["io.k8s.api.apps.v1.DeploymentSpec"]["type"],
        "object"
    );
    assert!(schemas.get("io.k8s.api.core.v1.PodSpec").is_some());
    // Only what the group's kinds refer to.
    assert!(schemas.get("io.k8s.api.batch.v1.JobSpec").is_none());
    let core = raw(a, "GET", "/openapi/v3/api/v1", &[], None).await.json();
    assert!(core["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object());
}

/// Discovery gives each resource its storageVersionHash, as kube-apiserver
/// computes it (the suite's "Custom resource should have storage version
/// hash": a CRD's is its storage version's).
#[tokio::test]
async fn discovery_has_storage_version_hashes() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let mut c = crd(&["v2", "v3"], &schema_foo());
    c["spec"]["versions"][0]["storage"] = json!(false);
    c["spec"]["versions"][1]["storage"] = json!(true);
    send(a, "POST", CRD_PATH, "application/json", &c).await;
    let hash_of = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["storageVersionHash"].clone())
            .unwrap()
    };
    // discovery.StorageVersionHash("publish.example.com", "v3", "Foo"),
    // and the hashes kube-apiserver v1.35.8 gives pods and deployments.
    for v in ["v2", "v3"] {
        let r = raw(
            a,
            "GET",
            &format!("/apis/publish.example.com/{v}"),
            &[],
            None,
        )
        .await;
        assert_eq!(hash_of(&r.json(), "foos"), "X3IoyhPztJQ=", "{v}");
    }
    let r = raw(a, "GET", "/api/v1", &[], None).await;
    assert_eq!(hash_of(&r.json(), "pods"), "xPOwRZ+Yhw8=");
    let r = raw(a, "GET", "/apis/apps/v1", &[], None).await;
    assert_eq!(hash_of(&r.json(), "deployments"), "8aSe+NMegvE=");
}

/// A field named as a schema keyword (`JSONSchemaProps` has `$ref` and
/// `allOf` fields) stays a field in the v3 documents: only schemas'
/// references become `allOf` (client-go's OpenAPI v3 types refused the
/// document, the suite's "OpenAPIV3 should round trip").
#[tokio::test]
async fn fields_named_as_keywords_stay_fields() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let doc = raw(
        server.addr(),
        "GET",
        "/openapi/v3/apis/apiextensions.k8s.io/v1",
        &[],
        None,
    )
    .await
    .json();
    let props = &doc["components"]["schemas"]
        ["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"]["properties"];
    assert_eq!(props["$ref"]["type"], "string");
    assert_eq!(props["allOf"]["type"], "array");
}
