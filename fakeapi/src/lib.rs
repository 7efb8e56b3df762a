//! fakeapi: a Kubernetes API over an in-memory versioned store.
//!
//! It owns the objects (pods, nodes, namespaces, events, leases and every
//! collection the upstream kube-scheduler lists) and serves them over plain
//! HTTP to real clients (kube-rs, kubectl, kube-scheduler). It knows nothing
//! of Batsim: the broker drives it through the Rust API below and learns what
//! clients did from [`Store::subscribe`].
//!
//! - [`Store`]: generic create/get/list/update/patch/delete on
//!   `serde_json::Value` addressed by resource name (`"pods"`,
//!   `"leases.coordination.k8s.io"`), typed helpers for k8s-openapi objects
//!   ([`Store::create_pod`], [`Store::update_pod_status`], ...), and a stream
//!   of [`Change`]s tagged with their [`Origin`].
//! - [`serve`]: the HTTP server ([`RunningServer`]), with
//!   [`RunningServer::activity`] telling when clients are quiescent, and
//!   [`kubeconfig_yaml`] for the clients.
//! - [`resources::RESOURCES`]: the table every handler and discovery
//!   document is generated from; a CustomResourceDefinition adds rows to a
//!   store's table at run time ([`Store::install_crd`], or a client
//!   creating one), its objects served by the same code with their schema's
//!   pruning, defaults and validation ([`Store::resources`] lists them).
//! - [`load_manifests`] / [`Store::install_manifests`]: CRDs and objects
//!   from the user's files, installed before a run; [`COSCHEDULING_PODGROUP_CRD`]
//!   the coscheduling plugin's PodGroup.
//! - [`protobuf`]: protobuf request bodies (client-go's default) read into
//!   the JSON the store keeps.
//! - API priority and fairness: every answer names the FlowSchema and
//!   priority level its request was classified as
//!   ([`FLOW_SCHEMA_UID_HEADER`], [`PRIORITY_LEVEL_UID_HEADER`]); nothing
//!   is queued nor rejected.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Pod;
//! let store = fakeapi::Store::new();
//! let mut changes = store.subscribe();
//! let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse()?).await?;
//! std::fs::write("/tmp/kubeconfig", fakeapi::kubeconfig_yaml(server.addr()))?;
//! let mut pod = Pod::default();
//! pod.metadata.name = Some("job-1".into());
//! store.create_pod(pod)?;
//! while let Some(change) = changes.recv().await {
//!     if change.origin == fakeapi::Origin::Http && change.object["spec"]["nodeName"].is_string() {
//!         println!("bound to {}", change.object["spec"]["nodeName"]);
//!     }
//! }
//! # Ok(()) }
//! ```

mod activity;
mod admission;
mod builtin_schema;
mod conn;
mod crd;
mod defaults;
mod discovery;
mod error;
mod flowcontrol;
mod health;
mod manifest;
pub mod negotiate;
mod openapi;
pub mod patch;
pub mod protobuf;
pub mod quantity;
mod registry;
pub mod resources;
mod reviews;
mod schema;
pub mod selector;
mod server;
mod store;
mod strategy;
mod strict;
mod table;
mod timers;
mod validation;
mod watch;

pub use activity::{
    tcp_queued_bytes, AccountingViolation, Activity, ActivitySnapshot, Connection, GroupActivity,
    ServerEnd, ServerLook,
};
pub use admission::WebhookCalls;
pub use crd::COSCHEDULING_PODGROUP_CRD;
pub use discovery::SERVER_VERSION;
pub use error::{ApiError, FieldError, FieldErrorKind, InvalidObject, Result, StatusError};
pub use flowcontrol::{FLOW_SCHEMA_UID_HEADER, PRIORITY_LEVEL_UID_HEADER};
pub use manifest::{check_manifests, load_manifests, Manifest, ManifestError};
pub use patch::PatchKind;
pub use resources::ResourceInfo;
pub use server::{kubeconfig_yaml, serve, RequestRecord, RunningServer};
pub use store::{
    Admitted, Change, Clock, DeleteOptions, EventType, HoldGuard, InstantMarks, LoopbackPorts,
    Origin, Propagation, Store, StoreConfig, WatchStart, INSTANTS_HEADER, INSTANT_BEGIN,
    INSTANT_END, INSTANT_WATCHES,
};
pub use timers::{SimTimers, WatchTimers};
