//! The versioned in-memory object store.
//!
//! One lock (`parking_lot::RwLock`) guards every table; writes take it for a
//! few microseconds (normalize, serialize once, fan out to watchers with
//! `try_send`), never across an `.await`. Each change gets the next global
//! resourceVersion, like etcd's revision.

use crate::activity::{Activity, PendingEvents, WatchTally};
use crate::crd;
use crate::error::{ApiError, FieldError, Result};
use crate::patch::{apply_patch, PatchKind};
use crate::registry::{self, Registry, Served};
use crate::resources::{self, ResourceInfo, RESOURCES};
use crate::selector::Selection;
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use parking_lot::RwLock;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

use crate::timers::WatchTimers;

mod admit;
mod binding;
mod builtin_admission;
mod compaction;
pub(crate) mod fields;
mod flowcontrol;
pub(crate) mod gc;
mod policies;
mod quota;
mod service_accounts;
pub use admit::Admitted;
pub(crate) use admit::PatchTarget;
pub(crate) use binding::BindRequest;
pub use gc::Propagation;

/// A create made ready to write ([`Store::prepare_create`]): what is
/// written under which (namespace, name).
#[derive(Debug)]
pub(crate) struct PreparedCreate {
    pub key: (String, String),
    pub obj: Value,
}

/// The store's source of "now" (creationTimestamp, deletionTimestamp,
/// condition transition times). The broker passes its simulated clock.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The request header by which a watch asks for instant markers (see
/// [`Store::hold`]); any value but `false` or `0`, and
/// `client=TOKEN; watch=NAME` for ends only where they are news (see
/// [`INSTANT_WATCHES`]). A real API server ignores it,
/// so a client that waits on markers must not wait for them before it
/// has seen one.
pub const INSTANTS_HEADER: &str = "x-batkube-instants";
/// The annotation of the bookmark before a held batch's changes.
pub const INSTANT_BEGIN: &str = "batkube.io/instant-begin";
/// The annotation of the bookmark after a held batch's changes.
pub const INSTANT_END: &str = "batkube.io/instant-end";
/// Beside [`INSTANT_END`] on the watches of a client that asked with
/// `client=TOKEN; watch=NAME`: the names of that client's watches that saw
/// a change of the instant, sorted and joined by commas (each of them, and
/// only they, get this end).
pub const INSTANT_WATCHES: &str = "batkube.io/instant-watches";

/// Which instant markers a watch asked for (see [`Store::hold`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum InstantMarks {
    /// None (no header).
    #[default]
    None,
    /// An end on every such watch after every instant.
    Every,
    /// An end only on the client's watches that saw a change of the
    /// instant, naming them: a client (its token) whose other watches saw
    /// nothing of an instant is not sent a frame on each of them to say so.
    Named { client: Arc<str>, watch: Arc<str> },
}

impl InstantMarks {
    /// From the header's value: `client=TOKEN; watch=NAME` (`,` or `;`
    /// between them, names without either), else any value but `false` or
    /// `0`.
    pub fn from_header(value: &str) -> InstantMarks {
        let v = value.trim();
        let (mut client, mut watch) = (None, None);
        for part in v.split([';', ',']) {
            match part.trim().split_once('=') {
                Some(("client", c)) if !c.trim().is_empty() => client = Some(c.trim()),
                Some(("watch", w)) if !w.trim().is_empty() => watch = Some(w.trim()),
                _ => {}
            }
        }
        match (client, watch) {
            (Some(c), Some(w)) => InstantMarks::Named {
                client: c.into(),
                watch: w.into(),
            },
            _ if matches!(v, "false" | "0") => InstantMarks::None,
            _ => InstantMarks::Every,
        }
    }
}

/// Store settings. `StoreConfig::default()` is right for most uses.
#[derive(Clone)]
pub struct StoreConfig {
    /// Source of timestamps; defaults to `Utc::now`.
    pub clock: Clock,
    /// Events kept per resource so a watch can resume from an older
    /// resourceVersion; older versions get 410 Gone (kube-apiserver's
    /// watch cache; compaction does not bound a watch).
    pub watch_history: usize,
    /// How often the store compacts its past, as kube-apiserver has etcd
    /// compacted (`--etcd-compaction-interval`, default 5 minutes): a
    /// version compacted away (one to two intervals after the next was
    /// written) can no longer be listed at or continued from (410
    /// Expired; a continue token gets one that continues inconsistently).
    /// On the watch timers' clock (`store/compaction.rs`). `None`: never,
    /// and continue tokens never expire.
    pub compaction_interval: Option<Duration>,
    /// How long an Event (`events`, `events.k8s.io`) lives after its last
    /// write, by the store's clock, as the API server's `--event-ttl`
    /// (default 1 h): a scheduler writes one per pod it binds, and without a
    /// TTL they would outlive the pods forever. Expired events are deleted
    /// by [`Store::expire_events`] (watchers see DELETED). `None`: forever.
    pub event_ttl: Option<Duration>,
    /// Events queued per watcher; a watcher that falls further behind gets a
    /// 410 ERROR event and must relist, so it never slows anyone else.
    pub watch_buffer: usize,
    /// How often a watch that asked for bookmarks gets one (besides the
    /// one 2 s before its timeout). Default: a minute, as kube-apiserver.
    pub bookmark_interval: Duration,
    /// The `DefaultTolerationSeconds` admission plugin: pods created
    /// without a toleration of the not-ready and unreachable NoExecute
    /// taints get one for this long (kube-apiserver's default, 300 s;
    /// `None`: not done).
    pub default_toleration_seconds: Option<u64>,
    /// The clock of periodic bookmarks and of watches ended after
    /// `timeoutSeconds` (default: the wall clock). A simulation puts them on
    /// its own clock ([`WatchTimers::Simulated`]): a bookmark or a watch's
    /// end written at a wall-clock instant would reach the scheduler at an
    /// arbitrary simulated one, outside any accounting, and runs would
    /// differ.
    pub watch_timers: WatchTimers,
    /// Namespaces that exist from the start.
    pub namespaces: Vec<String>,
    /// When true, an HTTP client deleting a bound, non-terminal pod with a
    /// non-zero grace period only sets `deletionTimestamp` (MODIFIED), as a
    /// real cluster does until the kubelet confirms; the broker finishes
    /// the deletion with [`Store::delete_pod`]. When false (default), every
    /// deletion is immediate.
    pub graceful_pod_deletion: bool,
    /// Where `metadata.uid` and the suffixes of `generateName` come from.
    /// `None` (default): random (UUID v4), as a real API server. `Some(seed)`:
    /// a deterministic stream from the seed, in the order objects are
    /// created, still shaped as UUID v4 and as the server's suffixes. A
    /// simulation wants this: programs key maps and caches by UID (the
    /// kube-scheduler's cache does), so random UIDs would make two runs of
    /// the same inputs iterate differently.
    pub id_seed: Option<u64>,
    /// A watch writes each event in its own frame (HTTP chunk), instead of
    /// every event queued when it writes in one. Batching depends on how far
    /// the queue has filled when the watch's task runs, so the bytes a
    /// client reads would differ from run to run: a deterministic
    /// simulation wants this (`batkube run --deterministic`).
    pub frame_per_event: bool,
    /// Where a webhook served on the loopback really listens: from the port
    /// its program sees to the port its socket is on (a simulation's
    /// `timeshim::Ports::real`: a program's fixed port taken by a process
    /// outside the run is elsewhere). `None`: where the Service says.
    pub loopback_ports: Option<LoopbackPorts>,
    /// Run kube-controller-manager's service-account controller: every
    /// namespace gets its `default` ServiceAccount
    /// (`store/service_accounts.rs`). Default: true, as on a cluster. A
    /// comparison with kube-apiserver alone (the differential harness,
    /// whose real server runs no controllers and which writes the account
    /// itself on both servers) turns it off.
    pub service_accounts: bool,
}

/// See [`StoreConfig::loopback_ports`].
pub type LoopbackPorts = Arc<dyn Fn(u16) -> u16 + Send + Sync>;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            clock: Arc::new(Utc::now),
            watch_history: 100_000,
            compaction_interval: Some(Duration::from_secs(300)),
            event_ttl: Some(Duration::from_secs(3600)),
            watch_buffer: 100_000,
            bookmark_interval: Duration::from_secs(60),
            default_toleration_seconds: Some(300),
            watch_timers: WatchTimers::Wall,
            namespaces: vec![
                "default".into(),
                "kube-system".into(),
                "kube-public".into(),
                "kube-node-lease".into(),
            ],
            graceful_pod_deletion: false,
            id_seed: None,
            frame_per_event: false,
            loopback_ports: None,
            service_accounts: true,
        }
    }
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("watch_history", &self.watch_history)
            .field("compaction_interval", &self.compaction_interval)
            .field("event_ttl", &self.event_ttl)
            .field("watch_buffer", &self.watch_buffer)
            .field("bookmark_interval", &self.bookmark_interval)
            .field(
                "default_toleration_seconds",
                &self.default_toleration_seconds,
            )
            .field("watch_timers", &self.watch_timers)
            .field("namespaces", &self.namespaces)
            .field("graceful_pod_deletion", &self.graceful_pod_deletion)
            .field("frame_per_event", &self.frame_per_event)
            .finish_non_exhaustive()
    }
}

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The Rust API (the broker).
    Api,
    /// An HTTP client (a scheduler, kubectl).
    Http,
    /// The store's garbage collector (owner references), acting as
    /// kube-controller-manager's does: a client of the API like `Http`.
    GarbageCollector,
    /// The store's resource-quota controller writing a ResourceQuota's
    /// status, as kube-controller-manager's does: a client of the API like
    /// `Http`.
    QuotaController,
    /// kube-apiserver's ValidatingAdmissionPolicy status controller
    /// writing a policy's type checking (`store/policies.rs`).
    PolicyStatusController,
    /// kube-controller-manager's service-account controller writing a
    /// namespace's `default` ServiceAccount (`store/service_accounts.rs`).
    ServiceAccountController,
    /// kube-apiserver's priority-and-fairness controllers: the bootstrap
    /// objects written when the store is made, and each FlowSchema's
    /// `Dangling` condition (`store/flowcontrol.rs`).
    FlowControl,
}

impl Origin {
    /// A change made by a client of the API rather than by its owner (the
    /// broker): a scheduler, a controller, kubectl, the garbage collector.
    pub fn is_client(self) -> bool {
        self != Origin::Api
    }
}

/// Kind of a change, as in a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, as seen by [`Store::subscribe`].
#[derive(Debug, Clone)]
pub struct Change {
    pub kind: EventType,
    pub resource: &'static ResourceInfo,
    /// Empty for cluster-scoped resources.
    pub namespace: String,
    pub name: String,
    /// The object after the change (for a deletion: the last state, with
    /// `deletionTimestamp` set).
    pub object: Arc<Value>,
    /// The object before the change, for modifications and deletions.
    pub old: Option<Arc<Value>>,
    pub resource_version: u64,
    pub origin: Origin,
    /// The client that made it, for an [`Origin::Http`] change: its
    /// `User-Agent` (client-go writes `PROGRAM/VERSION (OS/ARCH)
    /// kubernetes/COMMIT[/COMPONENT]`), if it sent one.
    pub client: Option<Arc<str>>,
}

tokio::task_local! {
    /// The `User-Agent` of the HTTP request being served (set by the
    /// server around each request): the [`Change::client`] of its writes.
    pub(crate) static CLIENT: Option<Arc<str>>;
    /// The field-ownership options of the HTTP request being served (set
    /// by the server around each request).
    pub(crate) static WRITE: WriteOptions;
}

/// What a request says of field ownership: its `fieldManager` and
/// `force` (server-side apply).
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteOptions {
    pub field_manager: Option<Arc<str>>,
    pub force: bool,
    /// The request is a server-side apply (its ownership is computed with
    /// the patch, not as an update's).
    pub apply: bool,
}

/// The manager a write by a client is recorded under: its `fieldManager`,
/// else its `User-Agent` up to the first `/` (what kube-apiserver takes),
/// else `unknown`.
fn request_manager() -> String {
    if let Ok(Some(m)) = WRITE.try_with(|w| w.field_manager.clone()) {
        return m.to_string();
    }
    let ua = CLIENT.try_with(|c| c.clone()).ok().flatten();
    let prefix: String = ua
        .as_deref()
        .unwrap_or("")
        .split('/')
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(128)
        .collect();
    if prefix.is_empty() {
        "unknown".to_string()
    } else {
        prefix
    }
}

/// Whether the request being served asks an apply to force.
fn request_forces() -> bool {
    WRITE.try_with(|w| w.force).unwrap_or(false)
}

/// Whether the request being served is a server-side apply.
fn request_applies() -> bool {
    WRITE.try_with(|w| w.apply).unwrap_or(false)
}

/// A stored object and its serialized JSON (serialized once per change).
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub value: Arc<Value>,
    pub json: Bytes,
    pub rv: u64,
}

/// A change as sent to watchers and kept in the watch history. It holds
/// the object's serialized bytes only (shared with the stored object while
/// it is current, and with every watcher), not its parsed form: the
/// history holds up to `watch_history` events per resource, and a parsed
/// pod weighs several times its JSON. The rare readers that need the
/// object (a selective watch replaying history, a watch as a Table) parse
/// it back.
#[derive(Debug)]
pub(crate) struct Event {
    pub ty: EventType,
    pub rv: u64,
    pub namespace: String,
    pub json: Bytes,
    /// The object before the change (modifications and deletions).
    pub old_json: Option<Bytes>,
    /// Its object in protobuf, encoded once for all protobuf watchers.
    pub proto: crate::protobuf::Encoded,
}

impl Event {
    /// The watch line of this event as `ty` (a selective watcher sees a
    /// modification as ADDED or DELETED when the object enters or leaves
    /// its selection). Built per watcher: a copy of bytes serialized once.
    pub fn line(&self, ty: EventType) -> Bytes {
        event_line(ty.as_str(), &self.json_as(ty))
    }

    /// The object a watcher sees in this event as `ty`: the object after
    /// the change, except for one that leaves the watcher's selection,
    /// which kube-apiserver's watch cache sends as it was before, with
    /// the version of the change (re-serialized: such exits are rare).
    pub fn json_as(&self, ty: EventType) -> Bytes {
        if !self.leaves_as(ty) {
            return self.json.clone();
        }
        match (&self.old_json, ty, self.ty) {
            (Some(old), EventType::Deleted, EventType::Modified) => {
                let mut o: Value = serde_json::from_slice(old).expect("the store serialized it");
                meta_mut(&mut o).insert("resourceVersion".into(), json!(self.rv.to_string()));
                Bytes::from(serde_json::to_vec(&o).expect("a Value always serializes"))
            }
            _ => self.json.clone(),
        }
    }

    /// Whether a watcher seeing this event as `ty` sees an object leaving
    /// its selection (sent as it was before: see [`Event::json_as`]).
    pub fn leaves_as(&self, ty: EventType) -> bool {
        self.old_json.is_some() && ty == EventType::Deleted && self.ty == EventType::Modified
    }

    /// The object after the change.
    pub fn object(&self) -> Value {
        serde_json::from_slice(&self.json).expect("the store serialized it")
    }

    /// The object a watcher sees in this event as `ty` (see [`Event::json_as`]).
    pub fn object_as(&self, ty: EventType) -> Value {
        serde_json::from_slice(&self.json_as(ty)).expect("the store serialized it")
    }

    fn old_object(&self) -> Option<Value> {
        self.old_json
            .as_ref()
            .map(|j| serde_json::from_slice(j).expect("the store serialized it"))
    }
}

pub(crate) fn event_line(ty: &str, object_json: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(object_json.len() + 32);
    v.extend_from_slice(b"{\"type\":\"");
    v.extend_from_slice(ty.as_bytes());
    v.extend_from_slice(b"\",\"object\":");
    v.extend_from_slice(object_json);
    v.extend_from_slice(b"}\n");
    Bytes::from(v)
}

/// What a watch stream receives.
#[derive(Debug)]
pub(crate) enum WatchItem {
    Change(EventType, Arc<Event>),
    Initial(Stored),
    Bookmark { rv: u64, mark: Mark },
}

/// What a bookmark says besides its resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mark {
    /// A periodic one (nothing).
    Periodic,
    /// `k8s.io/initial-events-end`: the initial events are all sent.
    InitialEnd,
    /// `batkube.io/instant-begin`: the changes of held batch N follow
    /// (see [`Store::hold`]; only to watches that asked for instants).
    Begin(u64),
    /// `batkube.io/instant-end`: every change of batch N was sent before.
    End(u64),
    /// The same, to a client that asked for named ends: these of its
    /// watches (this one among them, their names joined) saw a change of
    /// batch N.
    EndOf(u64, Arc<str>),
}

/// An event queued to a watcher, counted as pending in [`Activity`] by its
/// token until it is written or dropped, wherever it is dropped.
#[derive(Debug)]
pub(crate) struct Queued {
    pub item: WatchItem,
    pub count: PendingEvents,
}

struct Watcher {
    /// To find it again when its stream ends.
    id: u64,
    selection: Selection,
    tx: mpsc::Sender<Queued>,
    overflow: Arc<AtomicBool>,
    tally: Arc<WatchTally>,
    /// Gets the instant markers around each held batch.
    instants: bool,
    /// Its client's token and its name, when it asked for named ends.
    client: Option<(Arc<str>, Arc<str>)>,
    /// The last instant whose begin marker it was sent.
    begun: u64,
}

struct Table {
    objects: BTreeMap<(String, String), Stored>,
    history: VecDeque<Arc<Event>>,
    /// Highest resourceVersion dropped from `history`.
    evicted_rv: u64,
    watchers: Vec<Watcher>,
    /// False once the CRD that made it is deleted: a request resolved
    /// before that finds nothing to serve.
    live: bool,
}

impl Table {
    /// A table whose watch history starts at `rv` (a resumed watch from
    /// before its resource existed relists).
    fn new(rv: u64) -> Self {
        Table {
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            evicted_rv: rv,
            watchers: Vec::new(),
            live: true,
        }
    }
}

struct State {
    /// The latest resourceVersion handed out: a change's, or a
    /// compaction round's.
    rv: u64,
    /// The resourceVersion of the last change (what subscribers have been
    /// sent up to).
    changed_rv: u64,
    /// The compaction rounds done (`store/compaction.rs`).
    compaction: compaction::Compaction,
    /// Events by expiry (their last write plus the TTL): (expiry, table,
    /// key, resourceVersion of that write; a later write queues again).
    event_expiry: VecDeque<(DateTime<Utc>, usize, (String, String), u64)>,
    /// Last watcher id handed out.
    watch_ids: u64,
    /// One per built-in row (same index as [`RESOURCES`]), then one per
    /// custom resource ever established.
    tables: Vec<Table>,
    subscribers: Vec<mpsc::UnboundedSender<Change>>,
    /// The custom rows.
    registry: Registry,
    /// Owner references and the garbage collector's work.
    gc: gc::Graph,
    /// The namespaces that have ResourceQuotas, with how many: a
    /// namespace not here costs quota nothing (`quota.rs`).
    quota_namespaces: std::collections::HashMap<String, u32>,
    /// The last held batch that changed something (its markers' number).
    instant: u64,
    /// Whether the current hold has sent its begin markers (it changed
    /// something) and owes its end markers.
    instant_open: bool,
}

impl State {
    /// Whether namespace `ns` exists.
    fn namespace_exists(&self, ns: &str) -> bool {
        let (ns_idx, _) = resources::builtin("", "v1", "namespaces").expect("namespaces row");
        self.tables[ns_idx]
            .objects
            .contains_key(&(String::new(), ns.to_string()))
    }

    /// Queues instant `n`'s end to every watch that asked for instants
    /// (a begin goes only to a watch that sees a change of it), or, to a
    /// client that asked for named ends, to each of its watches that saw a
    /// change of it, naming them. A watch whose queue is full overflows
    /// (it ends with a 410), as for a change.
    fn end_instant(&mut self, n: u64) {
        let rv = self.rv;
        // The named clients' watches that saw a change of `n`, per client
        // (few clients: a list).
        let mut named: Vec<(Arc<str>, Vec<&str>)> = Vec::new();
        for w in self.tables.iter().flat_map(|t| &t.watchers) {
            if let Some((c, name)) = w.client.as_ref().filter(|_| w.instants && w.begun == n) {
                match named.iter_mut().find(|(k, _)| k == c) {
                    Some((_, names)) => names.push(name),
                    None => named.push((c.clone(), vec![name])),
                }
            }
        }
        let named: Vec<(Arc<str>, Arc<str>)> = named
            .into_iter()
            .map(|(c, mut names)| {
                names.sort_unstable();
                (c, names.join(",").into())
            })
            .collect();
        for table in &mut self.tables {
            table.watchers.retain(|w| {
                if !w.instants {
                    return true;
                }
                let mark = match &w.client {
                    None => Mark::End(n),
                    Some(_) if w.begun != n => return true,
                    Some((c, _)) => match named.iter().find(|(k, _)| k == c) {
                        Some((_, names)) => Mark::EndOf(n, names.clone()),
                        None => Mark::End(n),
                    },
                };
                match w.tx.try_send(Queued {
                    item: WatchItem::Bookmark { rv, mark },
                    count: PendingEvents::one(&w.tally),
                }) {
                    Ok(()) => true,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        w.overflow.store(true, Ordering::SeqCst);
                        false
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => false,
                }
            });
        }
    }

    /// Does the compaction rounds due by now (`due`, from
    /// [`Store::compaction_due`]).
    fn compact(&mut self, due: u64) {
        let mut rv = self.rv;
        self.compaction.catch_up(&mut rv, due);
        self.rv = rv;
    }

    /// The table of `served`, if its resource is still served.
    fn live(&self, served: &Served) -> Result<usize> {
        if self.tables[served.table].live {
            Ok(served.table)
        } else {
            Err(not_served())
        }
    }

    /// The stored object `ns/name` of a served resource (`ns` ignored for
    /// a cluster-scoped one), with its key; NotFound as the API says it.
    fn existing(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
    ) -> Result<((String, String), Stored)> {
        let ns = if served.info.namespaced { ns } else { "" };
        let t = self.live(served)?;
        let key = (ns.to_string(), name.to_string());
        let old = self.tables[t]
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| kind_error(served.info, name))?;
        Ok((key, old))
    }
}

struct Inner {
    state: RwLock<State>,
    config: StoreConfig,
    activity: Arc<Activity>,
    hold: HoldState,
    /// The seeded stream of identifiers (`StoreConfig::id_seed`).
    ids: Option<parking_lot::Mutex<u64>>,
    /// Admission webhook calls by outcome.
    webhook_stats: crate::admission::Stats,
    /// The bound ValidatingAdmissionPolicies, compiled.
    policies: policies::PolicyCache,
    /// The priority-and-fairness classifier's configuration.
    flowcontrol: flowcontrol::FlowControlCache,
    /// Where the compaction rounds' clock stood when the store was made.
    compaction_origin: compaction::Origin,
    #[cfg(test)]
    pub(crate) test_hook: parking_lot::Mutex<Option<TestHook>>,
}

/// Called at named points of the store's code, so a test can interleave two
/// threads exactly.
#[cfg(test)]
pub(crate) type TestHook = Arc<dyn Fn(&str) + Send + Sync>;

/// Watch delivery held back while a batch of changes is made.
#[derive(Default)]
struct HoldState {
    depth: std::sync::atomic::AtomicUsize,
    wakers: parking_lot::Mutex<Vec<std::task::Waker>>,
}

/// Keeps watch events queued until dropped; see [`Store::hold`].
#[must_use = "events flow again as soon as the guard is dropped"]
pub struct HoldGuard {
    store: Store,
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        let h = &self.store.inner.hold;
        // The last release ends the batch: under the store's lock, so that
        // no change lands between the end markers and the release.
        let due = self.store.compaction_due();
        let mut st = self.store.inner.state.write();
        if h.depth.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            // The end markers carry the version now, rounds due included.
            st.compact(due);
            if std::mem::take(&mut st.instant_open) {
                let n = st.instant;
                st.end_instant(n);
            }
            drop(st);
            for w in std::mem::take(&mut *h.wakers.lock()) {
                w.wake();
            }
        }
    }
}

/// The object store. Cheap to clone; every clone is the same store.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("resource_version", &self.resource_version())
            .finish_non_exhaustive()
    }
}

/// Options of a deletion.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    /// `propagationPolicy`; unset, the kind's default (see
    /// [`gc`](self::gc): orphaning for v1 ReplicationControllers and Jobs,
    /// the background for the rest) unless a collector's finalizer on the
    /// object names one.
    pub propagation: Option<Propagation>,
    /// `orphanDependents`, deprecated but served: set, it decides over
    /// everything else (never together with `propagation`).
    pub orphan_dependents: Option<bool>,
    /// `dryRun=All`: answer as if, change nothing.
    pub dry_run: bool,
}

/// What a delete did: the object as it is now (marked for deletion), or
/// as it was when it went (`gone`).
pub(crate) struct Deletion {
    pub object: Stored,
    pub gone: bool,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// Synthetic ADDED events for every current object, then changes
    /// (resourceVersion unset or "0").
    Current,
    /// Changes after this resourceVersion.
    After(u64),
    /// `sendInitialEvents=true`: current objects, then a bookmark annotated
    /// `k8s.io/initial-events-end`, then changes.
    InitialEvents,
}

/// A registered watch, handed to the HTTP layer to stream.
pub(crate) struct WatchRegistration {
    /// The watcher's place in the store, for [`Store::unwatch`] (none when
    /// `gone`: nothing was registered).
    pub key: Option<WatchKey>,
    pub initial: VecDeque<Queued>,
    pub rx: mpsc::Receiver<Queued>,
    pub overflow: Arc<AtomicBool>,
    pub gone: Option<String>,
    pub tally: Arc<WatchTally>,
}

/// Where a registered watcher is: its resource's table and its id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchKey {
    table: usize,
    id: u64,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub(crate) struct ListPage {
    pub items: Vec<Stored>,
    pub rv: u64,
    pub continue_token: Option<String>,
    /// `remainingItemCount`: objects after this page, when only a
    /// namespace selects.
    pub remaining: Option<usize>,
}

/// How ownership reads `served`'s objects: by its CRD's schema, or as a
/// built-in kind.
fn field_ty(served: &Served) -> fields::Ty<'_> {
    fields::Ty::root(
        served.custom.as_ref().map(|cv| &*cv.def.schema),
        served.custom.is_some(),
    )
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata was just made an object")
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The next value of a splitmix64 stream.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn namespace_mismatch() -> ApiError {
    ApiError::BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request"
            .into(),
    )
}

/// A body's `apiVersion` and `kind` against the resource it is sent to,
/// refused in the words of kube-apiserver's decoder. Either may be left
/// out (the resource's are taken).
fn check_type(info: &ResourceInfo, obj: &Value) -> Result<()> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if resources::builtin_index(info).is_none() {
        // A custom kind: its versions are one kind.
        if !kind.is_empty() && kind != info.kind {
            return Err(ApiError::BadRequest(format!(
                "the kind {kind:?} does not match the resource {} (kind {})",
                info.qualified_name(),
                info.kind
            )));
        }
        return Ok(());
    }
    if (kind.is_empty() || kind == info.kind)
        && (api_version.is_empty() || api_version == info.api_version())
    {
        return Ok(());
    }
    let kind = if kind.is_empty() { info.kind } else { kind };
    let api_version = if api_version.is_empty() {
        info.api_version()
    } else {
        api_version.to_string()
    };
    let version = api_version.rsplit('/').next().unwrap_or("");
    let known = RESOURCES
        .iter()
        .any(|r| r.stored && r.kind == kind && r.api_version() == api_version);
    let why = if known {
        let internal = if info.group.is_empty() {
            "core"
        } else {
            info.group.split('.').next().unwrap_or(info.group)
        };
        format!(
            "converting ({version}.{kind}) to ({internal}.{}): unknown conversion",
            info.kind
        )
    } else {
        format!(
            "no kind \"{kind}\" is registered for version \"{api_version}\" in scheme \"pkg/runtime/scheme.go:111\""
        )
    };
    Err(ApiError::BadRequest(format!(
        "{kind} in version \"{version}\" cannot be handled as a {}: {why}",
        info.kind
    )))
}

fn kind_error(info: &ResourceInfo, name: &str) -> ApiError {
    ApiError::not_found(&info.qualified_name(), name)
}

fn conflict(info: &ResourceInfo, name: &str) -> ApiError {
    ApiError::conflict(
        &info.qualified_name(),
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    )
}

fn not_served() -> ApiError {
    ApiError::NotFoundPath("the server could not find the requested resource".into())
}

fn typed_served<K: k8s_openapi::Resource>() -> Result<Served> {
    resources::builtin(K::GROUP, K::VERSION, K::URL_PATH_SEGMENT)
        .map(|(i, info)| Served::builtin(i, info))
        .ok_or_else(|| {
            ApiError::NotFoundPath(format!(
                "resource {}/{} {} is not served",
                K::GROUP,
                K::VERSION,
                K::URL_PATH_SEGMENT
            ))
        })
}

/// An update's body: an object whose name, if given, is the URL's.
fn check_update_body(info: &ResourceInfo, ns: &str, name: &str, obj: &Value) -> Result<()> {
    if !obj.is_object() {
        return Err(ApiError::BadRequest(
            "the body must be a JSON object".into(),
        ));
    }
    check_type(info, obj)?;
    if info.namespaced && meta_str(obj, "namespace").is_some_and(|b| !b.is_empty() && b != ns) {
        return Err(namespace_mismatch());
    }
    if let Some(body_name) = meta_str(obj, "name") {
        if body_name != name {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
    }
    if let Some(rv) = meta_str(obj, "resourceVersion").filter(|r| !r.is_empty()) {
        if rv.parse::<u64>().is_err() {
            // What kube-apiserver's storage says, as a 500.
            return Err(ApiError::Storage(format!(
                "strconv.ParseUint: parsing {}: invalid syntax",
                crate::error::go_quote(rv)
            )));
        }
    }
    Ok(())
}

/// A write that names a resourceVersion must name the current one (409).
fn check_resource_version(
    info: &ResourceInfo,
    name: &str,
    obj: &Value,
    current: u64,
) -> Result<()> {
    match meta_str(obj, "resourceVersion") {
        Some(rv) if rv != current.to_string() => Err(conflict(info, name)),
        _ => Ok(()),
    }
}

/// Whether anything but `metadata` (and `status`, when it has its own
/// subresource) differs: what bumps `metadata.generation`.
fn spec_changed(new: &Value, old: &Value, status_apart: bool) -> bool {
    let (Some(n), Some(o)) = (new.as_object(), old.as_object()) else {
        return new != old;
    };
    let skip = |k: &str| k == "metadata" || (status_apart && k == "status");
    let differs = |a: &Map<String, Value>, b: &Map<String, Value>| {
        a.iter().any(|(k, v)| !skip(k) && b.get(k) != Some(v))
    };
    differs(n, o) || differs(o, n)
}

/// The `metadata.generation` an object being written gets: 1 when created
/// (`old` is `None`), else the old object's, one more when `changed(old)`
/// says its spec changed.
pub(crate) fn next_generation(old: Option<&Value>, changed: impl FnOnce(&Value) -> bool) -> i64 {
    match old {
        None => 1,
        Some(o) => {
            let g = o
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            g + i64::from(changed(o))
        }
    }
}

/// `metadata.generation`: 1 when created, one more whenever anything but
/// metadata (and status, when `status_apart`) changes.
fn set_generation(obj: &mut Value, old: Option<&Value>, status_apart: bool) {
    let generation = next_generation(old, |o| spec_changed(obj, o, status_apart));
    meta_mut(obj).insert("generation".into(), json!(generation));
}

/// A write of the scale subresource.
pub(crate) enum ScaleWrite<'a> {
    /// A whole `autoscaling/v1 Scale` (PUT).
    Replace(Value),
    /// A patch of the current Scale (PATCH).
    Patch(PatchKind, &'a [u8]),
}

/// What a dry run answers: the object as it would be written, with
/// `rv` (the current version; 0 for a create, which has none yet).
fn preview(mut obj: Value, rv: u64) -> Stored {
    let m = meta_mut(&mut obj);
    if rv == 0 {
        m.remove("resourceVersion");
    } else {
        m.insert("resourceVersion".into(), json!(rv.to_string()));
    }
    let json = Bytes::from(serde_json::to_vec(&obj).expect("a Value always serializes"));
    Stored {
        value: Arc::new(obj),
        json,
        rv,
    }
}

fn to_value<T: Serialize>(obj: &T) -> Result<Value> {
    serde_json::to_value(obj).map_err(|e| ApiError::BadRequest(format!("cannot serialize: {e}")))
}

fn from_value<T: DeserializeOwned>(v: &Value) -> Result<T> {
    T::deserialize(v).map_err(|e| ApiError::BadRequest(format!("cannot decode object: {e}")))
}

impl Store {
    /// A store with the default namespaces and the wall clock.
    pub fn new() -> Self {
        Self::with_config(StoreConfig::default())
    }

    pub fn with_config(config: StoreConfig) -> Self {
        let state = State {
            rv: 0,
            changed_rv: 0,
            compaction: Default::default(),
            event_expiry: VecDeque::new(),
            watch_ids: 0,
            tables: RESOURCES.iter().map(|_| Table::new(0)).collect(),
            subscribers: Vec::new(),
            registry: Registry::default(),
            gc: gc::Graph::default(),
            quota_namespaces: Default::default(),
            instant: 0,
            instant_open: false,
        };
        let namespaces = config.namespaces.clone();
        let compaction_origin = compaction::Origin::new(&config.watch_timers, (config.clock)());
        let ids = config
            .id_seed
            .map(|s| parking_lot::Mutex::new(s ^ 0x7569_6473_6565_6421));
        let store = Store {
            inner: Arc::new(Inner {
                state: RwLock::new(state),
                config,
                activity: Arc::new(Activity::default()),
                hold: HoldState::default(),
                ids,
                webhook_stats: Default::default(),
                policies: Default::default(),
                flowcontrol: Default::default(),
                compaction_origin,
                #[cfg(test)]
                test_hook: Default::default(),
            }),
        };
        for ns in namespaces {
            let _ = store.create(
                "namespaces",
                None,
                json!({"metadata": {"name": ns}, "spec": {"finalizers": ["kubernetes"]}}),
            );
        }
        for pc in builtin_admission::system_priority_classes() {
            let _ = store.create("priorityclasses.scheduling.k8s.io", None, pc);
        }
        // (Only with a `default` namespace to hold it.)
        let _ = store.create(
            "services",
            Some("default"),
            builtin_admission::kubernetes_service(),
        );
        store.write_flowcontrol_bootstrap();
        store
    }

    #[cfg(test)]
    pub(crate) fn test_hook(&self, point: &str) {
        let h = self.inner.test_hook.lock().clone();
        if let Some(h) = h {
            h(point);
        }
    }
    #[cfg(test)]
    pub(crate) fn inner_test_hook(&self) -> &parking_lot::Mutex<Option<TestHook>> {
        &self.inner.test_hook
    }
    #[cfg(not(test))]
    #[inline(always)]
    pub(crate) fn test_hook(&self, _point: &str) {}

    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    /// Current time by the configured clock.
    pub fn now(&self) -> DateTime<Utc> {
        (self.inner.config.clock)()
    }

    pub(crate) fn now_str(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// Holds watch delivery until the guard is dropped: changes made
    /// meanwhile are queued to their watchers as usual, and each watcher
    /// then writes all of them in one frame, so a client sees the batch at
    /// once (simultaneous simulated events reach the scheduler together,
    /// not one by one). Holds nest. Requests are served normally.
    ///
    /// A batch that changes anything is an *instant*, numbered from 1: a
    /// watch that asked for them (header [`INSTANTS_HEADER`], with
    /// `allowWatchBookmarks`) gets a bookmark annotated
    /// `batkube.io/instant-begin: N` before its first change of the batch
    /// (if it sees any) and one annotated `batkube.io/instant-end: N` at
    /// the release (whether or not it saw any), after its last. A client
    /// that has read a begin without its end, or whose watches have not
    /// all reached the same end, holds a partial view of the batch, however
    /// the bytes were cut on the way: it can wait for the rest instead of
    /// deciding on part of an instant.
    ///
    /// A client that asked with `client=TOKEN; watch=NAME`
    /// ([`InstantMarks::Named`]) gets the end only on its watches that saw
    /// a change of the batch, each end naming all of them
    /// ([`INSTANT_WATCHES`]): it has read the batch whole once it has read
    /// the end on each watch named and no begin without its end. Its idle
    /// watches are not sent a frame per instant. A watch it starts again
    /// gets the end of the last instant with its replay, without names:
    /// that watch has caught up to it (the end of a batch it was named in
    /// may have been lost with its previous stream).
    pub fn hold(&self) -> HoldGuard {
        self.inner
            .hold
            .depth
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        HoldGuard {
            store: self.clone(),
        }
    }

    /// Whether watch delivery is held; if so, `waker` is woken at release.
    pub(crate) fn held(&self, waker: &std::task::Waker) -> bool {
        let h = &self.inner.hold;
        if h.depth.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return false;
        }
        h.wakers.lock().push(waker.clone());
        // Released between the two looks: the waker may be missed, so go on.
        h.depth.load(std::sync::atomic::Ordering::SeqCst) != 0
    }

    /// The quiescence counters shared with the HTTP server.
    pub fn activity(&self) -> Arc<Activity> {
        self.inner.activity.clone()
    }

    /// The latest resourceVersion handed out (a list now would say it):
    /// a change's, or a compaction round's (`store/compaction.rs`).
    pub fn resource_version(&self) -> u64 {
        self.compact_due();
        self.inner.state.read().rv
    }

    /// The resourceVersion of the last change, the one [`Store::subscribe`]
    /// has sent last: what a subscriber has to have seen to be up to date
    /// (a compaction round takes a version and changes nothing).
    pub fn last_change_version(&self) -> u64 {
        self.inner.state.read().changed_rv
    }

    /// How many compaction rounds are due by now (all done so far, none
    /// without [`StoreConfig::compaction_interval`]).
    fn compaction_due(&self) -> u64 {
        match self.inner.config.compaction_interval {
            None => 0,
            Some(interval) => compaction::Compaction::due(
                interval,
                self.inner.compaction_origin.elapsed(|| self.now()),
            ),
        }
    }

    /// Does the compaction rounds due by now, if any: before a read that
    /// answers with the current version or depends on what is compacted.
    fn compact_due(&self) {
        let due = self.compaction_due();
        if self.inner.state.read().compaction.behind(due) {
            self.inner.state.write().compact(due);
        }
    }

    /// Every change from now on, in resourceVersion order, with its origin.
    /// Unbounded: the store never waits for the subscriber.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Change> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.inner.state.write().subscribers.push(tx);
        rx
    }

    /// Open watches of `resource` whose selection (namespace, label and
    /// field selectors) takes in `object`: none means no client watching
    /// that resource would hear of it (a scheduler whose field selector
    /// names another `spec.schedulerName`).
    pub fn watchers_selecting(&self, resource: &str, object: &Value) -> Result<usize> {
        let served = self.resolve(resource)?;
        let ns = meta_str(object, "namespace").unwrap_or("");
        let st = self.inner.state.read();
        Ok(st.tables[served.table]
            .watchers
            .iter()
            .filter(|w| w.selection.matches(ns, object))
            .count())
    }

    /// Open watches (a watch leaves when its stream ends).
    pub fn watcher_count(&self) -> usize {
        self.inner
            .state
            .read()
            .tables
            .iter()
            .map(|t| t.watchers.len())
            .sum()
    }

    /// Watch events waiting in watchers' queues, counted from the queues
    /// themselves (a cross-check of [`Activity`]'s running count).
    pub fn queued_watch_events(&self) -> usize {
        self.inner
            .state
            .read()
            .tables
            .iter()
            .flat_map(|t| t.watchers.iter())
            .map(|w| w.tx.max_capacity() - w.tx.capacity())
            .sum()
    }

    /// Ends every open watch stream (used on server shutdown).
    pub fn close_watches(&self) {
        let mut st = self.inner.state.write();
        for t in &mut st.tables {
            t.watchers.clear();
        }
    }

    // ---- the resource table: built-in rows, then the CRDs' ----

    /// Every served resource: the built-in rows, then the rows of the
    /// established CustomResourceDefinitions (one per served version).
    pub fn resources(&self) -> Vec<&'static ResourceInfo> {
        let st = self.inner.state.read();
        RESOURCES.iter().chain(st.registry.rows()).collect()
    }

    /// Every served version of every CRD (what the OpenAPI documents
    /// publish).
    pub(crate) fn custom_versions(&self) -> Vec<Arc<crate::registry::CustomVersion>> {
        self.inner.state.read().registry.served_versions()
    }

    /// The served resource of objects with this `apiVersion` and `kind`
    /// (`scheduling.x-k8s.io/v1alpha1`, `PodGroup`).
    pub fn resource_for_kind(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Option<&'static ResourceInfo> {
        if let Some(r) = RESOURCES
            .iter()
            .find(|r| r.stored && r.kind == kind && r.api_version() == api_version)
        {
            return Some(r);
        }
        let st = self.inner.state.read();
        st.registry.by_kind(api_version, kind).map(|c| c.info)
    }

    /// A served resource by URL coordinates; built-in rows need no lock.
    pub(crate) fn served(&self, group: &str, version: &str, plural: &str) -> Option<Served> {
        if let Some((i, info)) = resources::builtin(group, version, plural) {
            return Some(Served::builtin(i, info));
        }
        let st = self.inner.state.read();
        st.registry
            .served(group, version, plural)
            .map(Served::custom)
    }

    /// A resource by `plural` or `plural.group` (a custom one in its
    /// storage version).
    pub(crate) fn resolve(&self, resource: &str) -> Result<Served> {
        if let Some((i, info)) = resources::builtin_qualified(resource) {
            return Ok(Served::builtin(i, info));
        }
        let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
        let st = self.inner.state.read();
        st.registry
            .storage(group, plural)
            .map(Served::custom)
            .ok_or_else(|| {
                ApiError::NotFoundPath(format!(
                    "the server doesn't have a resource type \"{resource}\""
                ))
            })
    }

    /// The resource of a row handed out earlier ([`Change::resource`],
    /// [`Store::resources`]).
    pub(crate) fn served_for(&self, info: &'static ResourceInfo) -> Result<Served> {
        if let Some(i) = resources::builtin_index(info) {
            return Ok(Served::builtin(i, &RESOURCES[i]));
        }
        let st = self.inner.state.read();
        st.registry
            .by_info(info)
            .map(Served::custom)
            .ok_or_else(not_served)
    }

    /// Installs a CustomResourceDefinition: validated (a 422 names every
    /// bad field), established at once, its kinds served (discovery
    /// included) until it is deleted. Returns the stored CRD, with its
    /// status conditions. 409 if a CRD of that name exists.
    ///
    /// ```
    /// let store = fakeapi::Store::new();
    /// let crd: serde_json::Value =
    ///     serde_yaml::from_str(fakeapi::COSCHEDULING_PODGROUP_CRD).unwrap();
    /// let crd = store.install_crd(crd).unwrap();
    /// assert_eq!(crd["status"]["conditions"][1]["type"], "Established");
    /// let pg = store
    ///     .create(
    ///         "podgroups.scheduling.x-k8s.io",
    ///         Some("default"),
    ///         serde_json::json!({"metadata": {"name": "job-7"}, "spec": {"minMember": 4}}),
    ///     )
    ///     .unwrap();
    /// assert_eq!(pg["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
    /// ```
    pub fn install_crd(&self, crd: Value) -> Result<Value> {
        let (i, info) = resources::crd_row();
        self.create_in(&Served::builtin(i, info), None, crd, Origin::Api, false)
            .map(|s| (*s.value).clone())
    }

    // ---- generic API, by resource name (`pods`, `leases.coordination.k8s.io`) ----

    /// Creates an object. For namespaced resources the namespace comes from
    /// `namespace`, else from the object, else `default`.
    pub fn create(&self, resource: &str, namespace: Option<&str>, obj: Value) -> Result<Value> {
        let served = self.resolve(resource)?;
        self.create_in(&served, namespace, obj, Origin::Api, false)
            .map(|s| (*s.value).clone())
    }

    pub fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<Value> {
        let served = self.resolve(resource)?;
        self.get_in(&served, namespace.unwrap_or(""), name)
            .map(|s| (*s.value).clone())
    }

    /// Every object matching the selectors (namespace `None` = all).
    pub fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Vec<Value>> {
        let served = self.resolve(resource)?;
        let namespace = namespace.filter(|_| served.info.namespaced);
        let sel = Selection::parse(namespace, label_selector, field_selector)?;
        let page = self.list_in(&served, &sel, None, None)?;
        Ok(page.items.into_iter().map(|s| (*s.value).clone()).collect())
    }

    /// Replaces an object. If `metadata.resourceVersion` is set it must be
    /// current (else 409 Conflict).
    pub fn update(&self, resource: &str, namespace: Option<&str>, obj: Value) -> Result<Value> {
        let served = self.resolve(resource)?;
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        let ns = namespace
            .map(str::to_string)
            .or_else(|| meta_str(&obj, "namespace").map(str::to_string))
            .unwrap_or_else(|| "default".to_string());
        let ns = if served.info.namespaced {
            ns
        } else {
            String::new()
        };
        self.update_in(&served, &ns, &name, None, obj, Origin::Api, false)
            .map(|s| (*s.value).clone())
    }

    /// Patches an object (`body` in the format of `kind`).
    pub fn patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: &[u8],
    ) -> Result<Value> {
        let served = self.resolve(resource)?;
        self.patch_in(
            &served,
            namespace.unwrap_or(""),
            name,
            None,
            kind,
            body,
            None,
            Origin::Api,
            false,
        )
        .map(|(s, _)| (*s.value).clone())
    }

    /// Deletes an object at once (or marks it if it has finalizers).
    pub fn delete(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<Value> {
        self.delete_with(resource, namespace, name, &DeleteOptions::default())
    }

    /// Deletes an object with options (preconditions, grace period,
    /// propagation to its dependents).
    pub fn delete_with(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value> {
        let served = self.resolve(resource)?;
        self.delete_in(&served, namespace.unwrap_or(""), name, opts, Origin::Api)
            .map(|d| (*d.object.value).clone())
    }

    // ---- typed API ----

    /// Creates any served k8s-openapi object.
    pub fn create_typed<K>(&self, obj: &K) -> Result<K>
    where
        K: k8s_openapi::Resource + Serialize + DeserializeOwned,
    {
        let served = typed_served::<K>()?;
        let s = self.create_in(&served, None, to_value(obj)?, Origin::Api, false)?;
        from_value(&s.value)
    }

    pub fn get_typed<K>(&self, namespace: Option<&str>, name: &str) -> Result<K>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        let served = typed_served::<K>()?;
        from_value(&self.get_in(&served, namespace.unwrap_or(""), name)?.value)
    }

    pub fn list_typed<K>(&self, namespace: Option<&str>) -> Result<Vec<K>>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        let served = typed_served::<K>()?;
        let namespace = namespace.filter(|_| served.info.namespaced);
        let sel = Selection::parse(namespace, None, None)?;
        self.list_in(&served, &sel, None, None)?
            .items
            .iter()
            .map(|s| from_value(&s.value))
            .collect()
    }

    /// Replaces any served object (status included: the Rust API is the
    /// kubelet and the controllers).
    pub fn update_typed<K>(&self, obj: &K) -> Result<K>
    where
        K: k8s_openapi::Resource + Serialize + DeserializeOwned,
    {
        let served = typed_served::<K>()?;
        let v = to_value(obj)?;
        let name = meta_str(&v, "name").unwrap_or("").to_string();
        let ns = if served.info.namespaced {
            meta_str(&v, "namespace").unwrap_or("default").to_string()
        } else {
            String::new()
        };
        from_value(
            &self
                .update_in(&served, &ns, &name, None, v, Origin::Api, false)?
                .value,
        )
    }

    pub fn create_node(
        &self,
        node: k8s_openapi::api::core::v1::Node,
    ) -> Result<k8s_openapi::api::core::v1::Node> {
        self.create_typed(&node)
    }

    pub fn create_pod(
        &self,
        pod: k8s_openapi::api::core::v1::Pod,
    ) -> Result<k8s_openapi::api::core::v1::Pod> {
        self.create_typed(&pod)
    }

    /// As [`create_pod`](Self::create_pod), without reading the stored
    /// pod back into a typed one (the broker creates a pod per job and
    /// needs nothing back).
    pub fn add_pod(&self, pod: &k8s_openapi::api::core::v1::Pod) -> Result<()> {
        let served = typed_served::<k8s_openapi::api::core::v1::Pod>()?;
        self.create_in(&served, None, to_value(pod)?, Origin::Api, false)
            .map(|_| ())
    }

    pub fn get_pod(&self, namespace: &str, name: &str) -> Result<k8s_openapi::api::core::v1::Pod> {
        self.get_typed(Some(namespace), name)
    }

    /// Pods in `namespace` (`None`: all namespaces).
    pub fn list_pods(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<k8s_openapi::api::core::v1::Pod>> {
        self.list_typed(namespace)
    }

    /// Replaces a pod's status (the kubelet's job: Running, Succeeded, ...).
    pub fn update_pod_status(
        &self,
        namespace: &str,
        name: &str,
        status: k8s_openapi::api::core::v1::PodStatus,
    ) -> Result<k8s_openapi::api::core::v1::Pod> {
        from_value(&self.write_pod_status(namespace, name, &status)?.value)
    }

    /// As [`update_pod_status`](Self::update_pod_status), without reading
    /// the stored pod back (a kubelet writes a status per pod start and end).
    pub fn set_pod_status(
        &self,
        namespace: &str,
        name: &str,
        status: &k8s_openapi::api::core::v1::PodStatus,
    ) -> Result<()> {
        self.write_pod_status(namespace, name, status).map(|_| ())
    }

    fn write_pod_status(
        &self,
        namespace: &str,
        name: &str,
        status: &k8s_openapi::api::core::v1::PodStatus,
    ) -> Result<Stored> {
        let served = typed_served::<k8s_openapi::api::core::v1::Pod>()?;
        let status = to_value(status)?;
        self.modify(&served, namespace, name, Origin::Api, |pod| {
            pod["status"] = status;
            Ok(())
        })
    }

    pub fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<k8s_openapi::api::core::v1::Pod> {
        from_value(&self.delete("pods", Some(namespace), name)?)
    }

    /// Binds a pod to a node as the binding subresource does.
    pub fn bind_pod(&self, namespace: &str, name: &str, node: &str) -> Result<()> {
        let binding = json!({"metadata": {"name": name}, "target": {"kind": "Node", "name": node}});
        self.bind(
            binding::BindRequest {
                namespace,
                pod: Some(name),
                body: &binding,
                dry_run: false,
            },
            Origin::Api,
        )
    }

    // ---- internal operations, shared with the HTTP layer ----

    pub(crate) fn get_in(&self, served: &Served, ns: &str, name: &str) -> Result<Stored> {
        let (_, s) = self.inner.state.read().existing(served, ns, name)?;
        Ok(served.present(s))
    }

    pub(crate) fn list_in(
        &self,
        served: &Served,
        sel: &Selection,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage> {
        let info = served.info;
        // A token is `RV/NAMESPACE/NAME`, the last object of the page
        // before; RV -1 continues at the latest version (the token a
        // compacted one's 410 gives, as kube-apiserver's etcd3 store).
        let (start, list_rv) = match continue_token.filter(|c| !c.is_empty()) {
            None => (Bound::Unbounded, None),
            Some(tok) => {
                let mut parts = tok.splitn(3, '/');
                let rv = parts.next().and_then(|r| r.parse::<i64>().ok());
                let (ns, name) = (parts.next(), parts.next());
                match (rv, ns, name) {
                    (Some(rv), Some(ns), Some(name)) if rv != 0 => (
                        Bound::Excluded((ns.to_string(), name.to_string())),
                        u64::try_from(rv).ok(),
                    ),
                    _ => {
                        return Err(ApiError::BadRequest(format!(
                            "invalid continue token {tok:?}: pass back the one a list returned"
                        )))
                    }
                }
            }
        };
        self.compact_due();
        let st = self.inner.state.read();
        let table = &st.tables[st.live(served)?];
        if let (Some(rv), Bound::Excluded((ns, name))) = (list_rv, &start) {
            if st.compaction.is_compacted(rv) {
                return Err(ApiError::InconsistentContinue(format!("-1/{ns}/{name}")));
            }
        }
        let mut items = Vec::new();
        let mut continue_token = None;
        let rv = list_rv.unwrap_or(st.rv);
        let range = match &sel.namespace {
            Some(ns) if info.namespaced && matches!(start, Bound::Unbounded) => (
                Bound::Included((ns.clone(), String::new())),
                Bound::Unbounded,
            ),
            _ => (start, Bound::Unbounded),
        };
        // As etcd pages: a page ends after `limit` selected objects, and has
        // a continue token if any object (selected or not) follows it.
        let mut remaining = None;
        let mut iter = table.objects.range(range).peekable();
        let in_scope = |ns: &String| match &sel.namespace {
            Some(want) if info.namespaced => ns == want,
            _ => true,
        };
        while let Some(((ns, _), s)) = iter.next() {
            if let Some(want) = &sel.namespace {
                if info.namespaced && ns > want {
                    break;
                }
            }
            if !sel.matches(ns, &s.value) {
                continue;
            }
            items.push(s.clone());
            if limit.is_some_and(|l| items.len() >= l) {
                if iter.peek().is_some_and(|((ns, _), _)| in_scope(ns)) {
                    let last: &Stored = items.last().expect("limit > 0");
                    continue_token = Some(format!(
                        "{}/{}/{}",
                        rv,
                        meta_str(&last.value, "namespace").unwrap_or(""),
                        meta_str(&last.value, "name").unwrap_or("")
                    ));
                    // Counted only when nothing but a namespace selects.
                    if sel.labels.is_empty() && sel.fields.is_empty() {
                        remaining = Some(iter.take_while(|((ns, _), _)| in_scope(ns)).count());
                    }
                }
                break;
            }
        }
        drop(st);
        if served.converts() {
            items = items.into_iter().map(|s| served.present(s)).collect();
        }
        Ok(ListPage {
            items,
            rv,
            continue_token,
            remaining,
        })
    }

    /// A list at exactly version `rv` (`resourceVersionMatch=Exact`): 410
    /// Expired once it is compacted away, as etcd answers kube-apiserver.
    /// (Otherwise the list is of the objects as they are now.)
    pub(crate) fn check_list_at(&self, rv: u64) -> Result<()> {
        self.compact_due();
        if self.inner.state.read().compaction.is_compacted(rv) {
            return Err(ApiError::Gone(
                "The resourceVersion for the provided list is too old.".into(),
            ));
        }
        Ok(())
    }

    /// 16 identifier bytes: random, or the seeded stream's next.
    fn id_bytes(&self) -> [u8; 16] {
        match &self.inner.ids {
            None => *uuid::Uuid::new_v4().as_bytes(),
            Some(state) => {
                let mut st = state.lock();
                let (a, b) = (splitmix64(&mut st), splitmix64(&mut st));
                let mut bytes = [0; 16];
                bytes[..8].copy_from_slice(&a.to_le_bytes());
                bytes[8..].copy_from_slice(&b.to_le_bytes());
                bytes
            }
        }
    }

    /// A new object's `metadata.uid` (a version 4 UUID).
    fn new_uid(&self) -> uuid::Uuid {
        uuid::Builder::from_random_bytes(self.id_bytes()).into_uuid()
    }

    /// A `generateName` suffix: five characters of the API server's
    /// alphabet (no vowels, no look-alikes).
    fn name_suffix(&self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        self.id_bytes()[..5]
            .iter()
            .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
            .collect()
    }

    fn normalize_new(
        &self,
        info: &ResourceInfo,
        ns: &str,
        obj: &mut Value,
        origin: Origin,
    ) -> Result<String> {
        if !obj.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of a {} must be a JSON object",
                info.kind
            )));
        }
        check_type(info, obj)?;
        obj["kind"] = json!(info.kind);
        obj["apiVersion"] = json!(info.api_version());
        let now = self.now_str();
        let m = meta_mut(obj);
        let mut name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty() {
            match m.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => {
                    name = format!("{prefix}{}", self.name_suffix());
                }
                _ => {
                    return Err(ApiError::invalid(
                        info.group,
                        info.kind,
                        "",
                        vec![FieldError::required(
                            "metadata.name",
                            "name or generateName is required",
                        )],
                    ))
                }
            }
        }
        m.insert("name".into(), json!(name));
        if info.namespaced {
            m.insert("namespace".into(), json!(ns));
        } else {
            m.remove("namespace");
        }
        if origin == Origin::Http || !m.get("uid").is_some_and(|u| u.is_string()) {
            m.insert("uid".into(), json!(self.new_uid().to_string()));
        }
        if origin == Origin::Http || !m.get("creationTimestamp").is_some_and(|u| u.is_string()) {
            m.insert("creationTimestamp".into(), json!(now));
        }
        if origin == Origin::Http {
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
        }
        m.remove("resourceVersion");
        if resources::builtin_index(info).is_some() {
            crate::defaults::default_object(info.group, info.kind, obj, origin == Origin::Http);
        }
        match (info.group, info.kind) {
            ("", "Pod") => default_pod(obj, &now),
            ("", "Namespace") => {
                if obj.pointer("/status/phase").is_none() {
                    obj["status"] = json!({"phase": "Active"});
                }
                // The namespace controller's finalizer (kube-apiserver's
                // namespace strategy adds it).
                if obj.pointer("/spec/finalizers").is_none() {
                    if !obj.get("spec").is_some_and(Value::is_object) {
                        obj["spec"] = json!({});
                    }
                    obj["spec"]["finalizers"] = json!(["kubernetes"]);
                }
                label_namespace(obj, &name);
            }
            _ => {}
        }
        crate::strategy::prepare_create(info, obj)?;
        Ok(name)
    }

    /// What the server does to an object before writing it, beyond the
    /// metadata rules every kind shares: a CRD is defaulted and validated,
    /// a custom object pruned, defaulted and validated against its CRD's
    /// schema. `old` is the stored object of an update.
    fn admit(
        &self,
        served: &Served,
        obj: &mut Value,
        old: Option<&Value>,
        origin: Origin,
    ) -> Result<()> {
        if let Some(cv) = &served.custom {
            // In the version of the request, with that version's schema.
            obj["apiVersion"] = json!(cv.info.api_version());
            if old.is_none() && origin == Origin::Http && cv.def.status {
                // With a status subresource, a create cannot set status.
                if let Some(o) = obj.as_object_mut() {
                    o.remove("status");
                }
            }
            cv.def.schema.coerce(obj);
            let mut errs: Vec<FieldError> = cv.def.schema.validate(obj);
            if let Some(old) = old.filter(|_| !errs.is_empty()) {
                cv.def.schema.ratchet(&mut errs, obj, old);
            }
            if cv.def.schema.has_rules() {
                // The old object read in this request's version.
                let old = old.map(|o| {
                    let mut o = o.clone();
                    o["apiVersion"] = json!(cv.info.api_version());
                    o
                });
                errs.extend(cv.def.schema.validate_rules(obj, old.as_ref()));
            }
            if !errs.is_empty() {
                let name = meta_str(obj, "name").unwrap_or("");
                return Err(ApiError::invalid(cv.info.group, cv.info.kind, name, errs));
            }
            obj["apiVersion"] = json!(cv.storage.api_version());
            set_generation(obj, old, cv.def.status);
        } else if served.is_crd() {
            crd::admit(obj, old)?;
            set_generation(obj, old, true);
        } else {
            let info = served.info;
            if let Some(old) = old {
                let pod = (info.group, info.kind) == ("", "Pod");
                if pod && obj.get("spec") == old.get("spec") {
                    // The stored spec (a status write, the kubelet's or the
                    // broker's): defaulted when written, as it stays.
                    crate::defaults::default_pod_status(obj);
                } else {
                    crate::defaults::default_object(info.group, info.kind, obj, false);
                }
                if pod {
                    // `Priority` on update: what the pod had stays.
                    for f in ["priority", "preemptionPolicy"] {
                        if obj.pointer(&format!("/spec/{f}")).is_none() {
                            if let Some(v) = old.pointer(&format!("/spec/{f}")) {
                                obj["spec"][f] = v.clone();
                            }
                        }
                    }
                }
            }
            if origin == Origin::Http {
                let errs = crate::validation::validate(info.group, info.kind, obj, old);
                if !errs.is_empty() {
                    let name = meta_str(obj, "name").unwrap_or("");
                    // Events are validated in their internal (core) form,
                    // and named so.
                    let group = if info.kind == "Event" { "" } else { info.group };
                    return Err(ApiError::invalid(group, info.kind, name, errs));
                }
            }
            if let Some(status_apart) = crate::defaults::generation(info.group, info.kind) {
                set_generation(obj, old, status_apart);
            }
        }
        Ok(())
    }

    pub(crate) fn create_in(
        &self,
        served: &Served,
        namespace: Option<&str>,
        obj: Value,
        origin: Origin,
        dry_run: bool,
    ) -> Result<Stored> {
        let prepared = self.prepare_create(served, namespace, obj, origin)?;
        self.commit_create(served, prepared, origin, dry_run)
    }

    /// The namespace a create writes into: the request's, the body's, or
    /// `default`; `""` for a cluster-scoped resource.
    fn create_namespace(
        info: &ResourceInfo,
        namespace: Option<&str>,
        obj: &Value,
    ) -> Result<String> {
        if !info.namespaced {
            return Ok(String::new());
        }
        let body_ns = meta_str(obj, "namespace").map(str::to_string);
        match (namespace, body_ns) {
            (Some(p), Some(b)) if p != b && !b.is_empty() => Err(namespace_mismatch()),
            (Some(p), _) => Ok(p.to_string()),
            (None, Some(b)) if !b.is_empty() => Ok(b),
            (None, _) => Ok("default".to_string()),
        }
    }

    /// A create up to what is written (metadata, defaults, the kind's
    /// strategy, validation), before the store is looked at.
    pub(crate) fn prepare_create(
        &self,
        served: &Served,
        namespace: Option<&str>,
        mut obj: Value,
        origin: Origin,
    ) -> Result<PreparedCreate> {
        let info = served.info;
        let ns = Self::create_namespace(info, namespace, &obj)?;
        let name = self.normalize_new(info, &ns, &mut obj, origin)?;
        // `NamespaceLifecycle` admits before anything is validated.
        if info.namespaced && !self.inner.state.read().namespace_exists(&ns) {
            return Err(ApiError::not_found("namespaces", &ns));
        }
        self.admit(served, &mut obj, None, origin)?;
        self.own_created(served, &mut obj, origin);
        Ok(PreparedCreate {
            key: (ns, name),
            obj,
        })
    }

    /// Writes a prepared create (`dry_run`: answers what would be
    /// written): 404 if its namespace is gone, 409 if the name is taken.
    pub(crate) fn commit_create(
        &self,
        served: &Served,
        prepared: PreparedCreate,
        origin: Origin,
        dry_run: bool,
    ) -> Result<Stored> {
        let info = served.info;
        let PreparedCreate { key, mut obj } = prepared;
        let mut st = self.inner.state.write();
        let t = st.live(served)?;
        if info.namespaced && !st.namespace_exists(&key.0) {
            return Err(ApiError::not_found("namespaces", &key.0));
        }
        if st.tables[t].objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists {
                resource: info.qualified_name(),
                name: key.1,
            });
        }
        if served.custom.is_none() && (info.group, info.kind) == ("", "Pod") {
            self.admit_pod(&st, &mut obj, origin)?;
        }
        if served.custom.is_none() && (info.group, info.kind) == ("", "Service") {
            builtin_admission::allocate_service_ip(&st, &mut obj);
        }
        self.admit_quota(&st, served.storage_info(), &key.0, &obj, None, origin)?;
        if dry_run {
            return Ok(served.present(preview(obj, 0)));
        }
        let stored = self.commit(&mut st, served, key, obj, None, EventType::Added, origin);
        drop(st);
        if served.custom.is_none() && info.kind == "Event" {
            self.expire_events();
        }
        Ok(served.present(stored))
    }

    /// Assigns the next resourceVersion, stores, records history, fans out.
    /// The change is stored and reported in the storage version.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        st: &mut State,
        served: &Served,
        key: (String, String),
        mut obj: Value,
        old: Option<Stored>,
        ty: EventType,
        origin: Origin,
    ) -> Stored {
        if served.is_crd() {
            match ty {
                EventType::Deleted => self.retire_crd(st, &key.1, origin),
                _ => self.establish_crd(st, &mut obj),
            }
        }
        if !st.instant_open
            && self
                .inner
                .hold
                .depth
                .load(std::sync::atomic::Ordering::SeqCst)
                > 0
        {
            st.instant += 1;
            st.instant_open = true;
        }
        // The begin marker goes to a watch just before its first change of
        // the instant: a watch that sees none of it gets only the end.
        let open_instant = st.instant_open.then_some(st.instant);
        // The compaction rounds due come first: theirs are the versions
        // before this change's.
        st.compact(self.compaction_due());
        let begin_rv = st.rv;
        let info = served.storage_info();
        let idx = served.table;
        st.rv += 1;
        let rv = st.rv;
        st.changed_rv = rv;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let json = Bytes::from(serde_json::to_vec(&obj).expect("a Value always serializes"));
        let value = Arc::new(obj);
        let stored = Stored {
            value: value.clone(),
            json: json.clone(),
            rv,
        };
        let (old_value, old_json) = match old {
            Some(o) => (Some(o.value), Some(o.json)),
            None => (None, None),
        };
        let event = Arc::new(Event {
            ty,
            rv,
            namespace: key.0.clone(),
            json,
            old_json,
            proto: Default::default(),
        });
        let history_cap = self.inner.config.watch_history;
        let change = Change {
            kind: ty,
            resource: info,
            namespace: key.0.clone(),
            name: key.1.clone(),
            object: value.clone(),
            old: old_value.clone(),
            resource_version: rv,
            origin,
            client: match origin {
                Origin::Http => CLIENT.try_with(Clone::clone).ok().flatten(),
                _ => None,
            },
        };
        st.gc.changed(idx, &key, old_value.as_deref(), &value, ty);
        let quota_tracked = !key.0.is_empty()
            && (st.quota_namespaces.contains_key(&key.0)
                || (info.group.is_empty() && info.plural == "resourcequotas"));
        let quota_key = quota_tracked.then(|| key.clone());
        let sa_key = (served.custom.is_none()
            && info.group.is_empty()
            && matches!(info.plural, "namespaces" | "serviceaccounts"))
        .then(|| key.clone());
        let policy_key = (served.custom.is_none()
            && crate::admission::policy::is_policy_resource(info.group, info.plural))
        .then(|| key.clone());
        let flowcontrol_key = (served.custom.is_none() && info.group == crate::flowcontrol::GROUP)
            .then(|| key.clone());
        st.subscribers.retain(|s| s.send(change.clone()).is_ok());
        if !st.subscribers.is_empty() {
            // A subscriber's thread may be blocked waiting for the API.
            self.inner.activity.poke();
        }
        if served.custom.is_none() && info.kind == "Event" && ty != EventType::Deleted {
            if let Some(ttl) = self.inner.config.event_ttl {
                let expiry =
                    self.now() + chrono::Duration::from_std(ttl).unwrap_or(chrono::TimeDelta::MAX);
                st.event_expiry.push_back((expiry, idx, key.clone(), rv));
            }
        }
        let table = &mut st.tables[idx];
        match ty {
            EventType::Deleted => {
                table.objects.remove(&key);
            }
            _ => {
                table.objects.insert(key, stored.clone());
            }
        }
        table.history.push_back(event.clone());
        while table.history.len() > history_cap {
            if let Some(e) = table.history.pop_front() {
                table.evicted_rv = e.rv;
            }
        }
        // Each event is counted (by its token) before it can be seen in the
        // queue, and released by whoever ends up with it: the stream that
        // writes it, or the drop of a queue no one will read.
        table.watchers.retain_mut(|w| {
            let Some(t) = effective_type(
                &w.selection,
                ty,
                &event.namespace,
                &value,
                old_value.as_deref(),
            ) else {
                return true;
            };
            if let Some(n) = open_instant.filter(|&n| w.instants && w.begun != n) {
                w.begun = n;
                match w.tx.try_send(Queued {
                    item: WatchItem::Bookmark {
                        rv: begin_rv,
                        mark: Mark::Begin(n),
                    },
                    count: PendingEvents::one(&w.tally),
                }) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        w.overflow.store(true, Ordering::SeqCst);
                        return false;
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return false,
                }
            }
            match w.tx.try_reserve() {
                Ok(permit) => {
                    self.test_hook("reserved");
                    permit.send(Queued {
                        item: WatchItem::Change(t, event.clone()),
                        count: PendingEvents::one(&w.tally),
                    });
                    true
                }
                Err(mpsc::error::TrySendError::Full(())) => {
                    w.overflow.store(true, Ordering::SeqCst);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(())) => false,
            }
        });
        if let Some(key) = policy_key {
            self.policies_after_change(st, served, &key, &stored, ty, origin);
        }
        if let Some(key) = flowcontrol_key {
            self.flowcontrol_after_change(st, info, &key, ty);
        }
        if let Some(key) = quota_key {
            let new = (ty != EventType::Deleted).then_some(&*value);
            let old = if ty == EventType::Added {
                None
            } else {
                old_value.as_deref()
            };
            self.quota_after_change(st, info, &key, old, new, origin);
        }
        if let Some(key) = sa_key.filter(|_| self.inner.config.service_accounts) {
            self.service_accounts_after_change(st, served, &key, ty);
        }
        self.collect_garbage(st);
        stored
    }

    /// A CRD is being written: its names are checked against the other
    /// CRDs of its group, its status set, and its versions served (the
    /// naming and establishing controllers, at once).
    fn establish_crd(&self, st: &mut State, crd_obj: &mut Value) {
        let now = self.now_str();
        let def = match crd::Definition::parse(crd_obj) {
            Ok(d) => d,
            Err(e) => {
                // Admitted CRDs parse; a store written around admission
                // (none today) would see its CRD not established.
                crd::set_status(crd_obj, Some(("InvalidSchema", e.to_string())), &now);
                return;
            }
        };
        if let Some(conflict) = st.registry.conflict(&def) {
            crd::set_status(crd_obj, Some(conflict), &now);
            return;
        }
        crd::set_status(crd_obj, None, &now);
        let existing = st.registry.table_of(&def.name);
        let table = existing.unwrap_or_else(|| {
            st.tables.push(Table::new(st.rv));
            st.tables.len() - 1
        });
        st.registry.install(&def, table);
        if existing.is_some() {
            // Objects stored before this definition read as it would store
            // them (storage version, pruning, defaults), as the real server
            // reads them from etcd; nothing is written, no event is sent.
            let cv = st.registry.storage_of(&def.name).expect("just installed");
            for s in st.tables[table].objects.values_mut() {
                let mut v = (*s.value).clone();
                v["apiVersion"] = json!(cv.storage.api_version());
                cv.def.schema.coerce(&mut v);
                if v != *s.value {
                    s.json = Bytes::from(serde_json::to_vec(&v).expect("a Value serializes"));
                    s.value = Arc::new(v);
                }
            }
        }
    }

    /// A CRD is being deleted: its objects are deleted (watchers and
    /// subscribers see each go), its watches end, and its kinds leave the
    /// resource table and discovery.
    fn retire_crd(&self, st: &mut State, name: &str, origin: Origin) {
        let gone = st.registry.remove(name);
        let Some(cv) = gone.into_iter().find(|c| c.def.storage) else {
            return; // never established
        };
        let served = Served::custom(cv);
        let now = self.now_str();
        let objects: Vec<((String, String), Stored)> = st.tables[served.table]
            .objects
            .iter()
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        // The collector waits until the table is empty: it must not delete
        // an object of this list before the loop reaches it.
        let collecting = std::mem::replace(&mut st.gc.working, true);
        for (key, old) in objects {
            let mut obj = (*old.value).clone();
            let m = meta_mut(&mut obj);
            if !m.contains_key("deletionTimestamp") {
                m.insert("deletionTimestamp".into(), json!(now));
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
            }
            self.commit(st, &served, key, obj, Some(old), EventType::Deleted, origin);
        }
        st.gc.working = collecting;
        let t = &mut st.tables[served.table];
        t.live = false;
        t.watchers.clear();
        t.history.clear();
    }

    pub(crate) fn update_in(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
        subresource: Option<&str>,
        mut obj: Value,
        origin: Origin,
        dry_run: bool,
    ) -> Result<Stored> {
        let info = served.info;
        check_update_body(info, ns, name, &obj)?;
        let ns = if info.namespaced { ns } else { "" };
        let mut st = self.inner.state.write();
        let t = st.live(served)?;
        let key = (ns.to_string(), name.to_string());
        let old = st.tables[t]
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| kind_error(info, name))?;
        check_resource_version(info, name, &obj, old.rv)?;
        obj["kind"] = json!(info.kind);
        obj["apiVersion"] = json!(info.api_version());
        let s = self.finish_update(&mut st, served, key, old, obj, subresource, origin, dry_run)?;
        drop(st);
        Ok(served.present(s))
    }

    /// Applies the status-subresource rules, keeps immutable metadata,
    /// admits the result, skips no-op writes, and completes deletions whose
    /// finalizers are gone.
    #[allow(clippy::too_many_arguments)]
    fn finish_update(
        &self,
        st: &mut State,
        served: &Served,
        key: (String, String),
        old: Stored,
        obj: Value,
        subresource: Option<&str>,
        origin: Origin,
        dry_run: bool,
    ) -> Result<Stored> {
        let obj = self.shape_update(served, &key, &old, obj, subresource, origin)?;
        self.commit_shaped(st, served, key, old, obj, origin, dry_run)
    }

    /// An update up to what is written (the status rules, immutable
    /// metadata, the kind's strategy, validation), without the store.
    pub(crate) fn shape_update(
        &self,
        served: &Served,
        key: &(String, String),
        old: &Stored,
        mut obj: Value,
        subresource: Option<&str>,
        origin: Origin,
    ) -> Result<Value> {
        let info = served.info;
        let old_v = &*old.value;
        let incoming = fields::take_incoming(&mut obj);
        let namespace = served.custom.is_none() && (info.group, info.kind) == ("", "Namespace");
        // The field a write keeps from the stored object, if any.
        let keep = |obj: &mut Value, field: &str| match old_v.get(field) {
            Some(s) => obj[field] = s.clone(),
            None => {
                obj.as_object_mut().map(|o| o.remove(field));
            }
        };
        match subresource {
            // kube-apiserver's namespace strategies: `status` keeps the
            // stored spec and takes the rest (metadata included), `finalize`
            // (what the namespace controller writes) keeps the stored
            // status and takes the rest.
            Some("status") if namespace => keep(&mut obj, "spec"),
            Some("finalize") if namespace => keep(&mut obj, "status"),
            // A CertificateSigningRequest's approval (kube-apiserver's
            // csrApprovalStrategy): the stored spec and status but the
            // status's conditions, which are the write's.
            Some("approval") if info.subresources.contains(&"approval") => {
                let conditions = obj.pointer("/status/conditions").cloned();
                keep(&mut obj, "spec");
                keep(&mut obj, "status");
                if let Some(c) = conditions {
                    if !obj.get("status").is_some_and(Value::is_object) {
                        obj["status"] = json!({});
                    }
                    obj["status"]["conditions"] = c;
                } else if let Some(s) = obj.get_mut("status").and_then(Value::as_object_mut) {
                    s.remove("conditions");
                }
            }
            Some("status") => {
                let status = obj.get("status").cloned();
                obj = old_v.clone();
                match status {
                    Some(s) => obj["status"] = s,
                    None => {
                        obj.as_object_mut().map(|o| o.remove("status"));
                    }
                }
            }
            Some(other) => {
                return Err(ApiError::NotFoundPath(format!(
                    "subresource {other:?} of {} cannot be updated",
                    info.qualified_name()
                )))
            }
            None if namespace && origin == Origin::Http => {
                // Only `finalize` changes a namespace's finalizers.
                keep(&mut obj, "status");
                match old_v.pointer("/spec/finalizers") {
                    Some(f) => {
                        if !obj.get("spec").is_some_and(Value::is_object) {
                            obj["spec"] = json!({});
                        }
                        obj["spec"]["finalizers"] = f.clone();
                    }
                    None => {
                        if let Some(s) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                            s.remove("finalizers");
                        }
                    }
                }
            }
            None if info.has_status() && origin == Origin::Http => match old_v.get("status") {
                Some(s) => obj["status"] = s.clone(),
                None => {
                    obj.as_object_mut().map(|o| o.remove("status"));
                }
            },
            None => {}
        }
        {
            let m = meta_mut(&mut obj);
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generateName",
            ] {
                match meta(old_v).and_then(|om| om.get(f)) {
                    Some(v) => {
                        m.insert(f.into(), v.clone());
                    }
                    None => {
                        m.remove(f);
                    }
                }
            }
            m.insert("name".into(), json!(key.1));
            if info.namespaced {
                m.insert("namespace".into(), json!(key.0));
            } else {
                m.remove("namespace");
            }
            m.insert("resourceVersion".into(), json!(old.rv.to_string()));
        }
        if (info.group, info.kind) == ("", "Namespace") {
            label_namespace(&mut obj, &key.1);
        }
        if served.custom.is_none() {
            crate::strategy::prepare_update(info, &mut obj, old_v, subresource)?;
        }
        self.admit(served, &mut obj, Some(old_v), origin)?;
        let deleting = meta(old_v).is_some_and(|m| m.contains_key("deletionTimestamp"));
        if deleting {
            let finalizers = |o: &Value| -> Vec<String> {
                meta(o)
                    .and_then(|m| m.get("finalizers"))
                    .and_then(Value::as_array)
                    .map(|f| {
                        f.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let (now_f, then_f) = (finalizers(&obj), finalizers(old_v));
            let added: Vec<&String> = now_f.iter().filter(|f| !then_f.contains(f)).collect();
            if !added.is_empty() {
                let list: Vec<String> = added.iter().map(|f| crate::error::go_quote(f)).collect();
                let cause = FieldError::forbidden(
                    "metadata.finalizers",
                    format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        list.join(", ")
                    ),
                );
                // kube-apiserver checks it twice (object meta, then the
                // update's), and says so twice.
                return Err(ApiError::invalid(
                    info.group,
                    info.kind,
                    &key.1,
                    vec![cause.clone(), cause],
                ));
            }
        }
        self.own_updated(served, old_v, &mut obj, incoming, subresource, origin);
        Ok(obj)
    }

    /// A new object's `managedFields`: a client's create is its manager's
    /// (`store/fields.rs`); an apply's were computed with the patch; the
    /// store's owner's writes keep what they carry.
    fn own_created(&self, served: &Served, obj: &mut Value, origin: Origin) {
        if origin == Origin::Http && request_applies() {
            return;
        }
        let incoming = fields::take_incoming(obj);
        if origin != Origin::Http {
            if let fields::Incoming::Entries(es) = incoming {
                fields::encode(obj, es);
            }
            return;
        }
        let manager = request_manager();
        let now = self.now_str();
        let api_version = served.info.api_version();
        let w = fields::Writer {
            manager: &manager,
            api_version: &api_version,
            subresource: "",
            now: &now,
        };
        fields::record_update(None, obj, incoming, &w, field_ty(served));
    }

    /// An updated object's `managedFields` (`incoming`: what the request
    /// carried): a client's update gives its manager what it changed; an
    /// apply's were computed with the patch; the store's owner's writes
    /// keep what the object had.
    fn own_updated(
        &self,
        served: &Served,
        old: &Value,
        obj: &mut Value,
        incoming: fields::Incoming,
        subresource: Option<&str>,
        origin: Origin,
    ) {
        if origin == Origin::Http && !request_applies() {
            let manager = request_manager();
            let now = self.now_str();
            let api_version = served.info.api_version();
            let w = fields::Writer {
                manager: &manager,
                api_version: &api_version,
                subresource: subresource.unwrap_or(""),
                now: &now,
            };
            fields::record_update(Some(old), obj, incoming, &w, field_ty(served));
            return;
        }
        let entries = match incoming {
            // An apply's, computed with the patch (none left: all empty).
            fields::Incoming::Entries(es) if origin == Origin::Http => es,
            _ if origin == Origin::Http => Vec::new(),
            _ => fields::decode(old),
        };
        fields::encode(obj, entries);
    }

    /// Writes a shaped update of `old` (nothing when it changes nothing;
    /// `dry_run`: answers what would be written). When it removes the last
    /// finalizer of an object being deleted, the object goes as it was
    /// stored, and the writer gets what it wrote (the version it wrote to).
    fn commit_shaped(
        &self,
        st: &mut State,
        served: &Served,
        key: (String, String),
        old: Stored,
        obj: Value,
        origin: Origin,
        dry_run: bool,
    ) -> Result<Stored> {
        if obj == *old.value {
            return Ok(old);
        }
        self.admit_quota(
            st,
            served.storage_info(),
            &key.0,
            &obj,
            Some(&old.value),
            origin,
        )?;
        if dry_run {
            return Ok(preview(obj, old.rv));
        }
        let deleting = meta(&old.value).is_some_and(|m| m.contains_key("deletionTimestamp"));
        let finalizers_left = meta(&obj)
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if deleting && !finalizers_left {
            let answer = preview(obj, old.rv);
            let gone = (*old.value).clone();
            self.commit(st, served, key, gone, Some(old), EventType::Deleted, origin);
            return Ok(answer);
        }
        Ok(self.commit(st, served, key, obj, Some(old), EventType::Modified, origin))
    }

    /// Read-modify-write under the lock (for the Rust API and bindings).
    pub(crate) fn modify(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
        origin: Origin,
        f: impl FnOnce(&mut Value) -> Result<()>,
    ) -> Result<Stored> {
        let mut st = self.inner.state.write();
        let (key, old) = st.existing(served, ns, name)?;
        let mut obj = (*served.present(old.clone()).value).clone();
        f(&mut obj)?;
        let s = self.finish_update(&mut st, served, key, old, obj, None, origin, false)?;
        drop(st);
        Ok(served.present(s))
    }

    /// Patches; returns the object and whether it was created (apply).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch_in(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
        subresource: Option<&str>,
        kind: PatchKind,
        body: &[u8],
        manager: Option<&str>,
        origin: Origin,
        dry_run: bool,
    ) -> Result<(Stored, bool)> {
        let mut st = self.inner.state.write();
        let (key, old, patched) =
            match self.patch_target(&st, served, ns, name, subresource, kind, body, manager)? {
                PatchTarget::Existing { key, old, patched } => (key, old, patched),
                PatchTarget::Create(obj) => {
                    drop(st);
                    let ns = served.info.namespaced.then_some(ns);
                    return self
                        .create_in(served, ns, obj, origin, dry_run)
                        .map(|s| (s, true));
                }
            };
        // Patches through the main resource of an object with a status
        // subresource cannot change status over HTTP; the status path can
        // change only status. `finish_update` enforces both.
        let s = self.finish_update(
            &mut st,
            served,
            key,
            old,
            patched,
            subresource,
            origin,
            dry_run,
        )?;
        drop(st);
        Ok((served.present(s), false))
    }

    /// The `autoscaling/v1 Scale` of a custom object with a scale subresource.
    pub(crate) fn get_scale(&self, served: &Served, ns: &str, name: &str) -> Result<Value> {
        // Without a scale subresource, kube-apiserver's answer names the
        // object as not found.
        let cv = served
            .custom
            .as_ref()
            .filter(|c| c.def.scale.is_some())
            .ok_or_else(|| {
                if served.custom.is_some() {
                    kind_error(served.info, name)
                } else {
                    not_served()
                }
            })?;
        let s = self.get_in(served, ns, name)?;
        Ok(cv.scale_of(&s.value).expect("a scale subresource"))
    }

    /// Writes the scale subresource: the replicas of the new Scale (sent
    /// whole, or a patch of the current one) go to the object's
    /// `specReplicasPath`, as an update of the object; returns the new Scale.
    pub(crate) fn write_scale(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
        write: ScaleWrite<'_>,
        origin: Origin,
    ) -> Result<Value> {
        let cv = served
            .custom
            .as_ref()
            .filter(|c| c.def.scale.is_some())
            .ok_or_else(not_served)?;
        let spec_path = cv
            .def
            .scale
            .as_ref()
            .expect("filtered")
            .spec_replicas
            .clone();
        let mut st = self.inner.state.write();
        let (key, old) = st.existing(served, ns, name)?;
        let current = served.present(old.clone());
        let scale = match write {
            ScaleWrite::Replace(v) => v,
            ScaleWrite::Patch(kind, body) => crate::patch::apply_patch_custom(
                kind,
                &cv.scale_of(&current.value).expect("a scale subresource"),
                body,
                None,
            )?,
        };
        if let Some(rv) = meta_str(&scale, "resourceVersion") {
            if rv != old.rv.to_string() {
                return Err(conflict(served.info, name));
            }
        }
        let replicas = match scale.pointer("/spec/replicas") {
            None | Some(Value::Null) => 0,
            Some(r) => r.as_i64().ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "Scale in version \"v1\" cannot be handled as a Scale: spec.replicas: expected an integer, got {r}"
                ))
            })?,
        };
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                vec![FieldError::invalid(
                    "spec.replicas",
                    &json!(replicas),
                    "must be greater than or equal to 0",
                )],
            ));
        }
        let mut obj = (*current.value).clone();
        registry::set_path(&mut obj, &spec_path, json!(replicas));
        let s = self.finish_update(&mut st, served, key, old, obj, None, origin, false)?;
        drop(st);
        Ok(cv
            .scale_of(&served.present(s).value)
            .expect("a scale subresource"))
    }

    pub(crate) fn delete_in(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
        origin: Origin,
    ) -> Result<Deletion> {
        let mut st = self.inner.state.write();
        let (key, old) = st.existing(served, ns, name)?;
        let d = self.delete_locked(&mut st, served, key, old, opts, origin)?;
        drop(st);
        Ok(Deletion {
            object: served.present(d.object),
            gone: d.gone,
        })
    }

    /// A deletion under the lock, as kube-apiserver's generic store does
    /// it: preconditions (`BeforeDelete`'s words), then the object goes at
    /// once, or is marked (`deletionTimestamp`, `deletionGracePeriodSeconds`,
    /// `generation` one more) while finalizers, a pod's grace period, or its
    /// dependents (foreground, orphan) keep it. An object that goes leaves
    /// as it was stored (a pod with the marks of its deletion, a pod being
    /// the one kind deleted gracefully); watchers see it DELETED with a
    /// new resourceVersion.
    fn delete_locked(
        &self,
        st: &mut State,
        served: &Served,
        key: (String, String),
        old: Stored,
        opts: &DeleteOptions,
        origin: Origin,
    ) -> Result<Deletion> {
        let info = served.info;
        // `GroupResource{Group, Resource: Kind}`, as BeforeDelete names it.
        let kind_resource = if info.group.is_empty() {
            info.kind.to_string()
        } else {
            format!("{}.{}", info.kind, info.group)
        };
        if let Some(uid) = &opts.precondition_uid {
            let current = meta_str(&old.value, "uid").unwrap_or("");
            if uid != current {
                return Err(ApiError::conflict(
                    &kind_resource,
                    &key.1,
                    format!(
                        "the UID in the precondition ({uid}) does not match the UID in record ({current}). The object might have been deleted and then recreated"
                    ),
                ));
            }
        }
        if let Some(rv) = &opts.precondition_resource_version {
            if *rv != old.rv.to_string() {
                return Err(ApiError::conflict(
                    &kind_resource,
                    &key.1,
                    format!(
                        "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                        old.rv
                    ),
                ));
            }
        }
        let graceful_kind = served.custom.is_none() && (info.group, info.plural) == ("", "pods");
        let mut obj = (*old.value).clone();
        let pod_grace = graceful_kind
            .then(|| self.pod_grace_period(&obj, opts, origin))
            .flatten();
        let m = meta_mut(&mut obj);
        let already = m.contains_key("deletionTimestamp");
        // The collector's finalizers for the policy, as the API server sets
        // them.
        let current: &[Value] = m
            .get("finalizers")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let default = crate::strategy::gc_default(info.group, info.plural, served.custom.is_some());
        let finalizers = gc::deletion_finalizers(current, opts, default);
        if finalizers.as_slice() != current {
            if finalizers.is_empty() {
                m.remove("finalizers");
            } else {
                m.insert("finalizers".into(), Value::Array(finalizers));
            }
        }
        let has_finalizers = m
            .get("finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        let now = self.now();
        let stamp = |at: DateTime<Utc>| json!(at.to_rfc3339_opts(SecondsFormat::Secs, true));
        let bump_generation = |m: &mut Map<String, Value>| {
            if let Some(g) = m
                .get("generation")
                .and_then(Value::as_i64)
                .filter(|g| *g > 0)
            {
                m.insert("generation".into(), json!(g + 1));
            }
        };
        // What keeps the object: its grace period (pods), its finalizers.
        let mut grace_left = false;
        if graceful_kind {
            let grace = pod_grace.unwrap_or(0);
            if !already {
                m.insert(
                    "deletionTimestamp".into(),
                    stamp(now + chrono::Duration::seconds(grace)),
                );
                m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                bump_generation(m);
                grace_left = grace > 0;
            } else {
                let current = m
                    .get("deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                // A shorter grace period shortens a pending one; the
                // broker (or a store without graceful pod deletion) ends it.
                let forced =
                    (!self.inner.config.graceful_pod_deletion || !origin.is_client()).then_some(0);
                match forced.or(opts.grace_period_seconds) {
                    Some(g) if g < current => {
                        let g = g.max(0);
                        let since = m
                            .get("deletionTimestamp")
                            .and_then(Value::as_str)
                            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                            .map(|t| t.with_timezone(&Utc) - chrono::Duration::seconds(current))
                            .unwrap_or(now);
                        let at = (since + chrono::Duration::seconds(g)).max(now);
                        m.insert("deletionTimestamp".into(), stamp(at));
                        m.insert("deletionGracePeriodSeconds".into(), json!(g));
                        grace_left = g > 0;
                    }
                    _ => grace_left = current > 0,
                }
            }
        } else if !already && has_finalizers {
            m.insert("deletionTimestamp".into(), stamp(now));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            bump_generation(m);
        }
        if has_finalizers || grace_left {
            if obj == *old.value || opts.dry_run {
                let object = if opts.dry_run {
                    preview(obj, old.rv)
                } else {
                    old
                };
                return Ok(Deletion {
                    object,
                    gone: false,
                });
            }
            let object = self.commit(st, served, key, obj, Some(old), EventType::Modified, origin);
            return Ok(Deletion {
                object,
                gone: false,
            });
        }
        if opts.dry_run {
            return Ok(Deletion {
                object: preview(obj, old.rv),
                gone: true,
            });
        }
        // kube-apiserver writes a pod's deletion marks, then deletes it: two
        // changes. With the broker's immediate deletions (no
        // `graceful_pod_deletion`), one: the marks are only in what goes.
        let old = if graceful_kind
            && self.inner.config.graceful_pod_deletion
            && origin.is_client()
            && obj != *old.value
        {
            let marked = obj.clone();
            self.commit(
                st,
                served,
                key.clone(),
                marked,
                Some(old),
                EventType::Modified,
                origin,
            )
        } else {
            old
        };
        let object = self.commit(st, served, key, obj, Some(old), EventType::Deleted, origin);
        Ok(Deletion { object, gone: true })
    }

    /// A pod's grace period, as kube-apiserver's pod strategy sets it: the
    /// request's, else the pod's `terminationGracePeriodSeconds` (30); 0
    /// for a pod not bound or already terminated; 1 for a negative one.
    /// Without [`StoreConfig::graceful_pod_deletion`] (the broker's runs,
    /// where no kubelet would finish it) or from the Rust API (the broker
    /// playing that kubelet), the grace is 0: the pod goes at once.
    fn pod_grace_period(&self, pod: &Value, opts: &DeleteOptions, origin: Origin) -> Option<i64> {
        if !self.inner.config.graceful_pod_deletion || !origin.is_client() {
            return Some(0);
        }
        let bound = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        let terminal = matches!(
            pod.pointer("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        );
        let grace = opts.grace_period_seconds.unwrap_or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30)
        });
        Some(if !bound || terminal {
            0
        } else if grace < 0 {
            1
        } else {
            grace
        })
    }

    /// Deletes the Events whose TTL ([`StoreConfig::event_ttl`]) ran out
    /// by the store's clock, as the API server's storage does; returns how
    /// many. The store calls it on every write of an Event; an owner whose
    /// clock jumps (a simulation) calls it as time moves on.
    pub fn expire_events(&self) -> usize {
        let now = self.now();
        let mut st = self.inner.state.write();
        let mut expired = 0;
        while st.event_expiry.front().is_some_and(|e| e.0 <= now) {
            let (_, idx, key, rv) = st.event_expiry.pop_front().expect("checked");
            let Some(old) = st.tables[idx].objects.get(&key).cloned() else {
                continue;
            };
            if old.rv != rv {
                continue; // written again since: queued again then
            }
            let served = Served::builtin(idx, &RESOURCES[idx]);
            let obj = (*old.value).clone();
            self.commit(
                &mut st,
                &served,
                key,
                obj,
                Some(old),
                EventType::Deleted,
                Origin::Api,
            );
            expired += 1;
        }
        expired
    }

    /// Registers a watch; initial events and history replay are computed
    /// under the same lock as the registration, so nothing is missed. Its
    /// events are counted in `tally` (one watch, on one connection).
    pub(crate) fn watch_in(
        &self,
        served: &Served,
        selection: Selection,
        start: WatchStart,
        tally: Arc<WatchTally>,
        marks: InstantMarks,
    ) -> Result<WatchRegistration> {
        let instants = marks != InstantMarks::None;
        let client = match marks {
            InstantMarks::Named { client, watch } => Some((client, watch)),
            _ => None,
        };
        let (tx, rx) = mpsc::channel(self.inner.config.watch_buffer.max(1));
        let overflow = Arc::new(AtomicBool::new(false));
        let mut initial = VecDeque::new();
        let mut gone = None;
        let due = self.compaction_due();
        let mut st = self.inner.state.write();
        st.compact(due);
        let idx = st.live(served)?;
        let current_rv = st.rv;
        let (instant, instant_open) = (st.instant, st.instant_open);
        st.watch_ids += 1;
        let id = st.watch_ids;
        let table = &mut st.tables[idx];
        let queued = |item| Queued {
            item,
            count: PendingEvents::one(&tally),
        };
        match start {
            WatchStart::Current | WatchStart::InitialEvents => {
                for ((ns, _), s) in &table.objects {
                    if selection.matches(ns, &s.value) {
                        initial.push_back(queued(WatchItem::Initial(s.clone())));
                    }
                }
                if start == WatchStart::InitialEvents {
                    initial.push_back(queued(WatchItem::Bookmark {
                        rv: current_rv,
                        mark: Mark::InitialEnd,
                    }));
                }
            }
            WatchStart::After(rv) => {
                if rv < table.evicted_rv {
                    gone = Some(format!(
                        "too old resource version: {rv} ({})",
                        table.evicted_rv
                    ));
                } else {
                    let first = table.history.partition_point(|e| e.rv <= rv);
                    for e in table.history.iter().skip(first) {
                        let t = if selection.is_everything() {
                            Some(e.ty)
                        } else {
                            let old = e.old_object();
                            effective_type(
                                &selection,
                                e.ty,
                                &e.namespace,
                                &e.object(),
                                old.as_ref(),
                            )
                        };
                        if let Some(t) = t {
                            initial.push_back(queued(WatchItem::Change(t, e.clone())));
                        }
                    }
                }
            }
        }
        // A watch that asks for instants starts inside the open one (its
        // end comes at the release) or at the end of the last one: what it
        // replays is then bracketed like what comes after, and a client
        // that watches again (a watch's timeout) keeps its place. A replay
        // between instants is bracketed too, as part of the last instant:
        // a client whose watches all ended at one instant (they time out
        // together) and start again one by one must not take the first
        // replay for a whole view while the others' are still on the way.
        // The begin's version is where the replay starts: a client whose
        // stream breaks before the replay's end resumes before it.
        let begin_rv = match start {
            WatchStart::After(rv) => rv.min(current_rv),
            _ => current_rv,
        };
        let mut begun = 0;
        if instants && gone.is_none() && instant > 0 {
            if instant_open || !initial.is_empty() {
                initial.push_front(queued(WatchItem::Bookmark {
                    rv: begin_rv,
                    mark: Mark::Begin(instant),
                }));
                begun = instant;
            }
            if !instant_open {
                initial.push_back(queued(WatchItem::Bookmark {
                    rv: current_rv,
                    mark: Mark::End(instant),
                }));
            }
        }
        let key = gone.is_none().then(|| {
            table.watchers.push(Watcher {
                id,
                selection,
                tx,
                overflow: overflow.clone(),
                tally: tally.clone(),
                instants,
                client,
                begun,
            });
            WatchKey { table: idx, id }
        });
        Ok(WatchRegistration {
            key,
            initial,
            rx,
            overflow,
            gone,
            tally,
        })
    }

    /// Removes a watcher (its stream ended), dropping its queue's sender.
    /// Under the store's lock, like every send: once this returns, no event
    /// is on its way into that queue, and every event in it can be drained.
    pub(crate) fn unwatch(&self, key: WatchKey) {
        let mut st = self.inner.state.write();
        st.tables[key.table].watchers.retain(|w| w.id != key.id);
    }

    /// The current resourceVersion if `rx` holds nothing (so a bookmark at
    /// that version cannot overtake a queued event).
    pub(crate) fn bookmark_rv(&self, rx: &mpsc::Receiver<Queued>) -> Option<u64> {
        self.compact_due();
        let st = self.inner.state.read();
        rx.is_empty().then_some(st.rv)
    }
}

/// Which event a watcher with this selection sees for a change, if any:
/// an object leaving the selection is DELETED for it, one entering is ADDED.
fn effective_type(
    sel: &Selection,
    ty: EventType,
    ns: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Option<EventType> {
    if sel.is_everything() {
        return Some(ty);
    }
    let now = sel.matches(ns, obj);
    match ty {
        EventType::Added => now.then_some(EventType::Added),
        EventType::Deleted => {
            let before = old.is_none_or(|o| sel.matches(ns, o));
            (now || before).then_some(EventType::Deleted)
        }
        EventType::Modified => {
            let before = old.is_some_and(|o| sel.matches(ns, o));
            match (before, now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            }
        }
    }
}

/// The defaults the real API server fills in for a new pod.
fn default_pod(obj: &mut Value, now: &str) {
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    let spec = obj["spec"].as_object_mut().expect("spec is an object");
    let defaults = [
        ("schedulerName", json!("default-scheduler")),
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("securityContext", json!({})),
        ("enableServiceLinks", json!(true)),
    ];
    for (k, v) in defaults {
        spec.entry(k).or_insert(v);
    }
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let gated = obj
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    let qos = crate::defaults::qos_class(&obj["spec"]);
    let status = obj["status"].as_object_mut().expect("status is an object");
    status.entry("phase").or_insert(json!("Pending"));
    status.entry("qosClass").or_insert(json!(qos));
    // As kube-apiserver's pod strategy: a pod created with scheduling gates
    // says why it waits (controllers such as Kueue gate pods until they
    // admit them; the scheduler leaves gated pods alone).
    if gated {
        let conditions = status.entry("conditions").or_insert(json!([]));
        if let Some(cs) = conditions.as_array_mut() {
            if !cs.iter().any(|c| c["type"] == "PodScheduled") {
                cs.push(json!({
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": null,
                    "lastTransitionTime": now,
                }));
            }
        }
    }
}

/// The label the real API server keeps on every namespace
/// (`kubernetes.io/metadata.name`, its name): namespace selectors, such as
/// Kueue's `managedJobsNamespaceSelector`, select on it.
fn label_namespace(obj: &mut Value, name: &str) {
    if !obj
        .pointer("/metadata/labels")
        .is_some_and(Value::is_object)
    {
        obj["metadata"]["labels"] = json!({});
    }
    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_carry_their_name_label_and_gated_pods_say_why_they_wait() {
        let s = Store::new();
        let ns = s.get("namespaces", None, "default").unwrap();
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "default"
        );
        let mut upd = ns.clone();
        upd["metadata"]["labels"] = json!({"team": "a"});
        let upd = s.update("namespaces", None, upd).unwrap();
        assert_eq!(
            upd["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "default"
        );
        assert_eq!(upd["metadata"]["labels"]["team"], "a");

        let gated = s
            .create(
                "pods",
                Some("default"),
                json!({"metadata": {"name": "g"}, "spec": {"containers": [],
                    "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}),
            )
            .unwrap();
        let c = &gated["status"]["conditions"][0];
        assert_eq!(c["type"], "PodScheduled");
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "SchedulingGated");
        let plain = s
            .create(
                "pods",
                Some("default"),
                json!({"metadata": {"name": "p"}, "spec": {"containers": []}}),
            )
            .unwrap();
        assert!(plain["status"].get("conditions").is_none());
    }

    #[test]
    fn create_get_update_conflict_delete() {
        let s = Store::new();
        let p = s
            .create(
                "pods",
                Some("default"),
                json!({"metadata": {"generateName": "p-"}, "spec": {"containers": []}}),
            )
            .unwrap();
        let name = p["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with("p-") && name.len() == 7);
        assert_eq!(p["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(p["status"]["phase"], "Pending");
        let mut stale = p.clone();
        let mut upd = p.clone();
        upd["metadata"]["labels"] = json!({"a": "b"});
        let upd = s.update("pods", Some("default"), upd).unwrap();
        assert!(
            upd["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                > p["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
        );
        stale["metadata"]["labels"] = json!({"a": "c"});
        assert_eq!(
            s.update("pods", Some("default"), stale).unwrap_err().code(),
            409
        );
        assert_eq!(s.list("pods", None, Some("a=b"), None).unwrap().len(), 1);
        assert_eq!(s.list("pods", None, Some("a=c"), None).unwrap().len(), 0);
        s.delete("pods", Some("default"), &name).unwrap();
        assert_eq!(
            s.get("pods", Some("default"), &name).unwrap_err().code(),
            404
        );
        assert_eq!(
            s.create("pods", Some("nope"), json!({"metadata": {"name": "x"}}))
                .unwrap_err()
                .code(),
            404
        );
    }

    #[test]
    fn binding_and_subscribe() {
        let s = Store::new();
        let mut rx = s.subscribe();
        s.create("pods", None, json!({"metadata": {"name": "a"}}))
            .unwrap();
        s.bind_pod("default", "a", "n1").unwrap();
        assert_eq!(s.bind_pod("default", "a", "n2").unwrap_err().code(), 409);
        let pod = s.get_pod("default", "a").unwrap();
        assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some("n1"));
        let conds = pod.status.unwrap().conditions.unwrap();
        assert_eq!(conds[0].type_, "PodScheduled");
        assert_eq!(rx.try_recv().unwrap().kind, EventType::Added);
        let c = rx.try_recv().unwrap();
        assert_eq!(c.kind, EventType::Modified);
        assert_eq!(c.object["spec"]["nodeName"], "n1");
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn seeded_ids_repeat_per_seed_and_keep_their_shape() {
        let ids = |seed: Option<u64>| {
            let s = Store::with_config(StoreConfig {
                id_seed: seed,
                ..Default::default()
            });
            (0..3)
                .map(|_| {
                    let o = s
                        .create("pods", None, json!({"metadata": {"generateName": "p-"}}))
                        .unwrap();
                    let m = &o["metadata"];
                    (
                        m["uid"].as_str().unwrap().to_string(),
                        m["name"].as_str().unwrap().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let a = ids(Some(1));
        assert_eq!(a, ids(Some(1)), "one seed, one stream");
        assert_ne!(a, ids(Some(2)));
        assert_ne!(ids(None), ids(None), "unseeded: random, as a real server");
        for (uid, name) in &a {
            let u = uuid::Uuid::parse_str(uid).unwrap();
            assert_eq!(u.get_version_num(), 4);
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
            assert_eq!(name.len(), "p-".len() + 5);
            assert!(name[2..]
                .bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)));
        }
    }

    #[test]
    fn graceful_pod_deletion_waits_for_the_rust_api() {
        let s = Store::with_config(StoreConfig {
            graceful_pod_deletion: true,
            ..Default::default()
        });
        let info = &s.resolve("pods").unwrap();
        for name in ["bound", "pending"] {
            s.create("pods", None, json!({"metadata": {"name": name}}))
                .unwrap();
        }
        s.bind_pod("default", "bound", "n1").unwrap();
        let opts = DeleteOptions::default();
        let marked = s
            .delete_in(info, "default", "bound", &opts, Origin::Http)
            .unwrap();
        assert_eq!(
            marked.object.value["metadata"]["deletionGracePeriodSeconds"],
            30
        );
        assert!(s.get("pods", Some("default"), "bound").is_ok());
        s.delete_in(info, "default", "pending", &opts, Origin::Http)
            .unwrap();
        assert_eq!(
            s.get("pods", Some("default"), "pending")
                .unwrap_err()
                .code(),
            404
        );
        s.delete_pod("default", "bound").unwrap();
        assert_eq!(
            s.get("pods", Some("default"), "bound").unwrap_err().code(),
            404
        );
    }

    #[test]
    fn the_shipped_podgroup_crd_installs_and_validates_podgroups() {
        let s = Store::new();
        let crd: Value = serde_yaml::from_str(crate::COSCHEDULING_PODGROUP_CRD).unwrap();
        let crd = s.install_crd(crd).unwrap();
        assert_eq!(crd["status"]["conditions"][0]["type"], "NamesAccepted");
        assert_eq!(crd["status"]["conditions"][1]["status"], "True");
        let pg = "podgroups.scheduling.x-k8s.io";
        let e = s
            .create(
                pg,
                None,
                json!({"metadata": {"name": "g"}, "spec": {"minMember": "x"}}),
            )
            .unwrap_err();
        assert_eq!(e.code(), 422);
        assert_eq!(e.causes()[0].field, "spec.minMember");
        assert_eq!(
            e.to_string(),
            "PodGroup.scheduling.x-k8s.io \"g\" is invalid: spec.minMember: Invalid value: \"string\": spec.minMember in body must be of type integer: \"string\""
        );
        let e = s
            .create(
                pg,
                None,
                json!({"metadata": {"name": "g"}, "spec": {"minMember": 0}}),
            )
            .unwrap_err();
        assert_eq!(
            e.causes()[0].to_string(),
            "spec.minMember: Invalid value: 0: spec.minMember in body should be greater than or equal to 1"
        );
        let g = s
            .create(
                pg,
                None,
                json!({"metadata": {"name": "g", "labels": {"app": "x"}}, "spec": {"minMember": 4,
                    "minResources": {"cpu": "8", "memory": "16Gi"}, "scheduleTimeoutSeconds": 10, "extra": 1},
                    "status": {"phase": "Pending", "scheduleStartTime": "2024-01-01T00:00:00Z"}}),
            )
            .unwrap();
        assert_eq!(g["metadata"]["namespace"], "default");
        assert!(g["spec"].get("extra").is_none(), "pruned");
        assert_eq!(g["status"]["phase"], "Pending");
        let e = s
            .create(
                pg,
                None,
                json!({"metadata": {"name": "h"}, "spec": {"minMember": 1},
                "status": {"scheduleStartTime": "yesterday"}}),
            )
            .unwrap_err();
        assert_eq!(e.causes()[0].field, "status.scheduleStartTime");
    }

    #[test]
    fn list_pages() {
        let s = Store::new();
        for i in 0..25 {
            s.create(
                "pods",
                None,
                json!({"metadata": {"name": format!("p{i:02}")}}),
            )
            .unwrap();
        }
        let info = &s.resolve("pods").unwrap();
        let sel = Selection::default();
        let mut tok: Option<String> = None;
        let mut seen = 0;
        loop {
            let page = s.list_in(info, &sel, Some(10), tok.as_deref()).unwrap();
            seen += page.items.len();
            match page.continue_token {
                Some(t) => tok = Some(t),
                None => break,
            }
        }
        assert_eq!(seen, 25);
    }

    /// Under wall-clock watch timers (`batkube serve`, whose store clock is
    /// Batsim's and stands still without it) compaction rounds go by
    /// tokio's clock; a change is not a subscriber's change.
    #[tokio::test(start_paused = true)]
    async fn compaction_rounds_go_by_the_wall_clock_under_wall_timers() {
        let s = Store::with_config(StoreConfig {
            // A store clock that never moves.
            clock: Arc::new(|| DateTime::<Utc>::UNIX_EPOCH),
            compaction_interval: Some(Duration::from_secs(300)),
            ..Default::default()
        });
        for i in 0..3 {
            s.create("pods", None, json!({"metadata": {"name": format!("p{i}")}}))
                .unwrap();
        }
        let info = &s.resolve("pods").unwrap();
        let sel = Selection::default();
        let page = s.list_in(info, &sel, Some(1), None).unwrap();
        let tok = page.continue_token.unwrap();
        let rv = s.resource_version();
        assert_eq!(s.last_change_version(), rv);
        tokio::time::advance(Duration::from_secs(300)).await;
        assert!(s.list_in(info, &sel, Some(1), Some(&tok)).is_ok());
        assert_eq!(s.resource_version(), rv + 1);
        assert_eq!(s.last_change_version(), rv, "a round is no change");
        tokio::time::advance(Duration::from_secs(300)).await;
        match s.list_in(info, &sel, Some(1), Some(&tok)) {
            Err(ApiError::InconsistentContinue(t)) => {
                let page = s.list_in(info, &sel, Some(1), Some(&t)).unwrap();
                assert_eq!(page.items[0].value["metadata"]["name"], "p1");
                assert_eq!(page.rv, rv + 2);
            }
            other => panic!(
                "expected an inconsistent continue, got {:?}",
                other.map(|p| p.rv)
            ),
        }
    }
}
