//! The body of a watch response: one JSON event per line.
//!
//! Events arrive through a bounded channel filled by the store; their bytes
//! are shared by all watchers. Each carries the token that counts it as
//! pending in [`Activity`](crate::Activity); the tokens of a frame go with it
//! to the connection, which releases them when hyper has flushed the frame
//! to the socket, so the broker knows when all of them reached the clients.
//! However a watch ends (its client gone, its timeout, a 410, the server
//! shutting down), the tokens still queued are dropped with it and release
//! their count.

use crate::activity::{AccountingViolation, PendingEvents, WatchTally};
use crate::conn::ConnTrack;
use crate::negotiate::partial_json;
use crate::registry::Served;
use crate::resources::ResourceInfo;
use crate::store::{
    event_line, Mark, Queued, Store, WatchItem, WatchKey, WatchRegistration, INSTANT_BEGIN,
    INSTANT_END, INSTANT_WATCHES,
};
use crate::table;
use crate::timers::{next_tick, SimTimer, WatchTimers};
use bytes::{Bytes, BytesMut};
use chrono::{DateTime, Utc};
use futures_util::Stream;
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};

/// How each event's object is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Render {
    Json,
    /// `meta.k8s.io/v1 Table` rows (kubectl get -w).
    Table {
        first: bool,
    },
    /// `meta.k8s.io/v1 PartialObjectMetadata` (client-go's metadata
    /// informers), bookmarks included.
    Metadata,
    /// Protobuf frames (`application/vnd.kubernetes.protobuf;stream=watch`)
    /// of the objects or, `partial`, of their `PartialObjectMetadata`.
    Protobuf {
        partial: bool,
    },
}

pub(crate) struct WatchStream {
    store: Store,
    /// What is watched, in the version asked for (events are converted
    /// from the storage version when it differs).
    served: Served,
    /// Registered in the store until dropped.
    key: Option<WatchKey>,
    initial: VecDeque<Queued>,
    rx: mpsc::Receiver<Queued>,
    overflow: Arc<AtomicBool>,
    /// This watch's count of pending events.
    tally: Arc<WatchTally>,
    gone: Option<String>,
    deadline: Option<Deadline>,
    bookmarks: Option<Bookmarks>,
    render: Render,
    done: bool,
    /// Events count as written when this connection flushes them.
    conn: Option<Arc<ConnTrack>>,
}

/// When a watch ends by itself (`timeoutSeconds`).
enum Deadline {
    Wall(Pin<Box<Sleep>>),
    Sim(SimTimer),
}

/// When a watch that allows them gets a bookmark: every interval, and
/// once 2 s before its timeout (kube-apiserver's cacher: "right before the
/// watcher timeout", so that a client resumes from as close to now as
/// possible).
enum Bookmarks {
    /// The sleep to the next one, the interval, the pre-timeout instant.
    Wall(Pin<Box<Sleep>>, Duration, Option<Instant>),
    /// The timer of the next one, the interval, the pre-timeout instant.
    Sim(SimTimer, Duration, Option<DateTime<Utc>>),
}

/// The bookmark after `now`: the next periodic one, or the pre-timeout one
/// if it comes first and is still ahead (a watch of 2 s or less gets none
/// before its end).
fn next_bookmark<T: Ord + Copy>(now: T, periodic: T, pre: Option<T>) -> T {
    match pre {
        Some(p) if p > now && p < periodic => p,
        _ => periodic,
    }
}

/// A `Status` 410 ERROR event line.
pub(crate) fn gone_line(message: &str) -> Bytes {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": "Expired", "code": 410,
    });
    event_line("ERROR", &serde_json::to_vec(&status).expect("json"))
}

/// A BOOKMARK event, written straight into its line: one is sent on every
/// watch that asks for instant markers at every instant, so it is built
/// without a JSON tree (keys in kube-apiserver's order).
fn bookmark_line(info: &ResourceInfo, rv: u64, mark: Mark) -> Bytes {
    bookmark_line_as(info.kind, &info.api_version(), rv, mark)
}

/// A BOOKMARK of `kind` in `api_version` (a metadata-only watch's are
/// `PartialObjectMetadata` in `meta.k8s.io/v1`).
fn bookmark_line_as(kind: &str, api_version: &str, rv: u64, mark: Mark) -> Bytes {
    use std::io::Write;
    let mut v = Vec::with_capacity(160 + kind.len() + api_version.len());
    v.extend_from_slice(b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":");
    serde_json::to_writer(&mut v, kind).expect("json");
    v.extend_from_slice(b",\"apiVersion\":");
    serde_json::to_writer(&mut v, api_version).expect("json");
    write!(v, ",\"metadata\":{{\"resourceVersion\":\"{rv}\"").expect("vec");
    match mark {
        Mark::Periodic => {}
        Mark::InitialEnd => {
            v.extend_from_slice(b",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}")
        }
        Mark::Begin(n) => {
            write!(v, ",\"annotations\":{{\"{INSTANT_BEGIN}\":\"{n}\"}}").expect("vec")
        }
        Mark::End(n) => write!(v, ",\"annotations\":{{\"{INSTANT_END}\":\"{n}\"}}").expect("vec"),
        Mark::EndOf(n, names) => {
            write!(
                v,
                ",\"annotations\":{{\"{INSTANT_END}\":\"{n}\",\"{INSTANT_WATCHES}\":"
            )
            .expect("vec");
            serde_json::to_writer(&mut v, &*names).expect("json");
            v.push(b'}');
        }
    }
    v.extend_from_slice(b"}}}\n");
    Bytes::from(v)
}

/// Events ready together go out in one write: a single ready event is sent
/// as its shared bytes, several are copied into one buffer (one syscall and
/// one HTTP chunk instead of one each).
struct Batch {
    first: Bytes,
    rest: Option<BytesMut>,
    count: PendingEvents,
}

const BATCH_BYTES: usize = 256 * 1024;

impl Batch {
    fn new(first: Bytes, count: PendingEvents) -> Self {
        Batch {
            first,
            rest: None,
            count,
        }
    }
    fn len(&self) -> usize {
        self.rest.as_ref().map_or(self.first.len(), BytesMut::len)
    }
    fn has_room(&self) -> bool {
        self.len() < BATCH_BYTES
    }
    fn push(&mut self, b: Bytes, count: PendingEvents) {
        let first = &self.first;
        let buf = self.rest.get_or_insert_with(|| {
            // Grown as needed: most batches are an instant's few small
            // frames, and a buffer of BATCH_BYTES each time (past malloc's
            // mmap threshold) cost a map and an unmap per frame.
            let mut m = BytesMut::with_capacity((2 * (first.len() + b.len())).max(4096));
            m.extend_from_slice(first);
            m
        });
        buf.extend_from_slice(&b);
        self.count.absorb(count);
    }
    fn finish(self) -> (Bytes, PendingEvents) {
        let bytes = match self.rest {
            Some(m) => m.freeze(),
            None => self.first,
        };
        (bytes, self.count)
    }
}

impl WatchStream {
    pub(crate) fn new(
        store: Store,
        served: Served,
        reg: WatchRegistration,
        timeout: Option<Duration>,
        allow_bookmarks: bool,
        render: Render,
        conn: Option<Arc<ConnTrack>>,
    ) -> Self {
        let interval = store.config().bookmark_interval;
        let pre_timeout = timeout.map(|t| t.saturating_sub(Duration::from_secs(2)));
        let (deadline, bookmarks) = match &store.config().watch_timers {
            WatchTimers::Off => (None, None),
            WatchTimers::Wall => {
                let now = Instant::now();
                let pre = pre_timeout.map(|p| now + p);
                (
                    timeout.map(|t| Deadline::Wall(Box::pin(tokio::time::sleep(t)))),
                    allow_bookmarks.then(|| {
                        let first = next_bookmark(now, now + interval, pre);
                        Bookmarks::Wall(Box::pin(tokio::time::sleep_until(first)), interval, pre)
                    }),
                )
            }
            WatchTimers::Simulated(timers) => {
                let now = store.now();
                let after = |d: Duration| {
                    now + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
                };
                let pre = pre_timeout.map(after);
                (
                    timeout.map(|t| Deadline::Sim(timers.arm(after(t), &reg.tally))),
                    allow_bookmarks.then(|| {
                        let first = next_bookmark(now, next_tick(now, interval), pre);
                        Bookmarks::Sim(timers.arm(first, &reg.tally), interval, pre)
                    }),
                )
            }
        };
        WatchStream {
            store,
            served,
            key: reg.key,
            initial: reg.initial,
            rx: reg.rx,
            overflow: reg.overflow,
            tally: reg.tally,
            gone: reg.gone,
            deadline,
            bookmarks,
            render,
            done: false,
            conn,
        }
    }

    /// A 410 ERROR event in this watch's encoding.
    fn gone(&self, message: &str) -> Bytes {
        match self.render {
            Render::Protobuf { .. } => {
                let line = gone_line(message);
                let ev: serde_json::Value = serde_json::from_slice(&line).expect("a line is JSON");
                crate::protobuf::watch_frame_json("ERROR", &ev["object"], false)
            }
            _ => gone_line(message),
        }
    }

    fn render_item(&mut self, item: WatchItem) -> Bytes {
        match (self.render, item) {
            (Render::Protobuf { partial }, WatchItem::Bookmark { rv, mark }) => {
                // Built as the JSON one is, then encoded: bookmarks are
                // small.
                let line = bookmark_line(self.served.info, rv, mark);
                let ev: serde_json::Value = serde_json::from_slice(&line).expect("a line is JSON");
                crate::protobuf::watch_frame_json("BOOKMARK", &ev["object"], partial)
            }
            (Render::Protobuf { partial }, WatchItem::Change(ty, e)) => {
                if !e.leaves_as(ty) {
                    // The object after the change: encoded once for every
                    // protobuf watcher.
                    crate::protobuf::watch_frame(ty.as_str(), &e.proto.get(&e.json, partial))
                } else {
                    let obj = crate::protobuf::encode_json(&e.json_as(ty), partial);
                    crate::protobuf::watch_frame(ty.as_str(), &obj)
                }
            }
            (Render::Protobuf { partial }, WatchItem::Initial(s)) => {
                let obj = if partial {
                    crate::protobuf::encode_partial(&s.value)
                } else {
                    crate::protobuf::encode(&s.value)
                        .unwrap_or_else(|| crate::protobuf::encode_partial(&s.value))
                };
                crate::protobuf::watch_frame("ADDED", &obj)
            }
            (Render::Metadata, WatchItem::Bookmark { rv, mark }) => {
                bookmark_line_as("PartialObjectMetadata", "meta.k8s.io/v1", rv, mark)
            }
            (Render::Table { first }, WatchItem::Bookmark { rv, mark }) => {
                // kube-apiserver turns every event of a Table watch into a
                // Table, bookmarks too: one row, whose object is the
                // bookmark's metadata (its annotation with it, which is how
                // a client sees the end of a streaming list's initial
                // events; a reflector, which looks for it on the event's
                // object, never does, and never syncs on Tables).
                let line = bookmark_line(self.served.info, rv, mark);
                let event: serde_json::Value = serde_json::from_slice(&line).expect("json");
                self.table_event("BOOKMARK", Arc::new(event["object"].clone()), first)
            }
            (_, WatchItem::Bookmark { rv, mark }) => bookmark_line(self.served.info, rv, mark),
            (Render::Metadata, WatchItem::Change(ty, e)) => {
                event_line(ty.as_str(), &partial_json(&e.json))
            }
            (Render::Metadata, WatchItem::Initial(s)) => {
                event_line("ADDED", &partial_json(&s.json))
            }
            (Render::Json, WatchItem::Change(ty, e)) if !self.served.converts() => e.line(ty),
            (Render::Json, WatchItem::Change(ty, e)) => {
                event_line(ty.as_str(), &self.served.present_json(&e.json_as(ty)))
            }
            (Render::Json, WatchItem::Initial(s)) => {
                event_line("ADDED", &self.served.present_json(&s.json))
            }
            (Render::Table { first }, item) => {
                let (ty, obj) = match item {
                    WatchItem::Change(ty, e) => (ty.as_str(), Arc::new(e.object_as(ty))),
                    WatchItem::Initial(s) => ("ADDED", s.value.clone()),
                    WatchItem::Bookmark { .. } => unreachable!("handled above"),
                };
                self.table_event(ty, obj, first)
            }
        }
    }

    /// An event of a Table watch: `obj` as a Table, with the column
    /// definitions only in the watch's first (`null` after, as
    /// kube-apiserver's encoder leaves them out of every later event).
    fn table_event(&mut self, ty: &str, obj: Arc<serde_json::Value>, first: bool) -> Bytes {
        self.render = Render::Table { first: false };
        let mut t = table::table(
            &self.served,
            std::slice::from_ref(&obj),
            self.store.now(),
            first,
            table::IncludeObject::Metadata,
        );
        // The version of the object the event is about.
        if let Some(rv) = obj.pointer("/metadata/resourceVersion") {
            t["metadata"]["resourceVersion"] = rv.clone();
        }
        event_line(ty, &serde_json::to_vec(&t).expect("json"))
    }

    /// The next event: initial ones (and any put back) first, then changes.
    fn next_item(&mut self, cx: &mut Context<'_>) -> Poll<Option<Queued>> {
        match self.initial.pop_front() {
            Some(item) => Poll::Ready(Some(item)),
            None => self.rx.poll_recv(cx),
        }
    }

    /// These events leave in the frame being returned to hyper.
    fn handed(&self, events: PendingEvents) {
        match &self.conn {
            Some(c) => c.events_handed(events),
            None => events.written(),
        }
    }

    fn finish(&mut self) -> Poll<Option<Result<Bytes, Infallible>>> {
        self.done = true;
        Poll::Ready(None)
    }
}

impl Stream for WatchStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(msg) = this.gone.take() {
            this.done = true;
            return Poll::Ready(Some(Ok(this.gone(&msg))));
        }
        if this.overflow.load(Ordering::SeqCst) {
            this.done = true;
            return Poll::Ready(Some(Ok(
                this.gone("the watch fell too far behind and was closed; relist to continue")
            )));
        }
        // While the store holds delivery, events wait in the queue; an event
        // taken just as a hold began goes back to the front.
        if this.store.held(cx.waker()) {
            return Poll::Pending;
        }
        match this.next_item(cx) {
            Poll::Ready(Some(q)) => {
                if this.store.held(cx.waker()) {
                    this.initial.push_front(q);
                    return Poll::Pending;
                }
                let first = this.render_item(q.item);
                let mut batch = Batch::new(first, q.count);
                let batching = !this.store.config().frame_per_event;
                while batching && batch.has_room() {
                    let Poll::Ready(Some(q)) = this.next_item(cx) else {
                        break;
                    };
                    if this.store.held(cx.waker()) {
                        this.initial.push_front(q);
                        break;
                    }
                    let bytes = this.render_item(q.item);
                    batch.push(bytes, q.count);
                }
                let (bytes, count) = batch.finish();
                this.handed(count);
                return Poll::Ready(Some(Ok(bytes)));
            }
            Poll::Ready(None) => {
                if this.overflow.load(Ordering::SeqCst) {
                    this.done = true;
                    return Poll::Ready(Some(Ok(this.gone(
                        "the watch fell too far behind and was closed; relist to continue",
                    ))));
                }
                return this.finish();
            }
            Poll::Pending => {}
        }
        match this.deadline.as_mut() {
            Some(Deadline::Wall(d)) => {
                if d.as_mut().poll(cx).is_ready() {
                    return this.finish();
                }
            }
            Some(Deadline::Sim(t)) => {
                if let Some(fired) = t.poll_fired(cx.waker()) {
                    // Counted until the end is flushed to the client.
                    this.handed(fired);
                    return this.finish();
                }
            }
            None => {}
        }
        let tick = match this.bookmarks.as_mut() {
            Some(Bookmarks::Wall(sleep, interval, pre)) => {
                if sleep.as_mut().poll(cx).is_ready() {
                    let now = Instant::now();
                    let next = next_bookmark(now, now + *interval, *pre);
                    sleep.as_mut().reset(next);
                    Some(None)
                } else {
                    None
                }
            }
            Some(Bookmarks::Sim(t, interval, pre)) => match t.poll_fired(cx.waker()) {
                Some(fired) => {
                    let at = this.store.now().max(t.deadline());
                    let next = next_bookmark(at, next_tick(at, *interval), *pre);
                    t.rearm(next, &this.tally);
                    Some(Some(fired))
                }
                None => None,
            },
            None => None,
        };
        if let Some(fired) = tick {
            if let Some(rv) = this.store.bookmark_rv(&this.rx) {
                if !matches!(this.render, Render::Table { .. }) {
                    if let Some(f) = fired {
                        this.handed(f);
                    }
                    let line = this.render_item(WatchItem::Bookmark {
                        rv,
                        mark: Mark::Periodic,
                    });
                    return Poll::Ready(Some(Ok(line)));
                }
            }
            // A queued event: let the next poll deliver it (a fired count
            // is released here, as nothing was written for it).
            drop(fired);
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        // Out of the store first: under its lock, so no change is being
        // queued to this watch meanwhile, and the queue's only sender goes
        // with the watcher. Every event still queued is then in the queue
        // and is released (as not written) with it.
        if let Some(key) = self.key.take() {
            self.store.test_hook("unwatching");
            self.store.unwatch(key);
        }
        self.rx.close();
        while self.rx.try_recv().is_ok() {}
        self.initial.clear();
        // A timer that fired and was not yet taken up releases its count.
        self.deadline = None;
        self.bookmarks = None;
        // What this watch still counts must be events handed to its
        // connection and not yet flushed (released with the flush or the
        // connection); anything more is a count nothing holds.
        let check = |parked: usize| {
            let left = self.tally.outstanding();
            (left != parked).then_some((left, parked))
        };
        let wrong = match &self.conn {
            Some(c) => c.parked_for(&self.tally, check),
            None => check(0),
        };
        if let Some((left, parked)) = wrong {
            self.tally.activity().record_violation(AccountingViolation {
                message: format!(
                    "a watch of {} ended with {left} events still counted as pending, \
                     {parked} of them held by its connection",
                    self.served.info.plural
                ),
                connection: self.tally.conn.id,
                client: self.tally.conn.peer,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::Selection;
    use crate::store::WatchStart;
    use std::sync::mpsc as std_mpsc;
    use std::time::Duration;

    fn pod(name: &str) -> serde_json::Value {
        json!({"metadata": {"name": name, "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "i"}]}})
    }

    /// The bookmark written by hand is the object a JSON tree makes, for
    /// every mark and for core and grouped kinds, its keys in the order
    /// kube-apiserver writes them (kind, apiVersion, metadata) whether or
    /// not serde_json preserves insertion order in this build.
    #[test]
    fn bookmark_lines_are_the_serialized_objects() {
        let store = Store::new();
        for plural in ["pods", "leases.coordination.k8s.io"] {
            let info = store.resolve(plural).unwrap().info;
            for mark in [
                Mark::Periodic,
                Mark::InitialEnd,
                Mark::Begin(7),
                Mark::End(12),
                Mark::EndOf(12, "nodes,pods".into()),
            ] {
                let mut metadata = json!({"resourceVersion": "42"});
                match mark.clone() {
                    Mark::Periodic => {}
                    Mark::InitialEnd => {
                        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"})
                    }
                    Mark::Begin(n) => {
                        metadata["annotations"] = json!({ INSTANT_BEGIN: n.to_string() })
                    }
                    Mark::End(n) => metadata["annotations"] = json!({ INSTANT_END: n.to_string() }),
                    Mark::EndOf(n, names) => {
                        metadata["annotations"] =
                            json!({ INSTANT_END: n.to_string(), INSTANT_WATCHES: &*names })
                    }
                }
                let obj = json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": metadata});
                let line = bookmark_line(info, 42, mark.clone());
                let got: serde_json::Value = serde_json::from_slice(&line).unwrap();
                assert_eq!(
                    got,
                    json!({"type": "BOOKMARK", "object": obj}),
                    "{plural} {mark:?}"
                );
                assert!(line.ends_with(b"}\n"));
            }
        }
        let info = store.resolve("pods").unwrap().info;
        assert_eq!(
            &bookmark_line(info, 3, Mark::End(2))[..],
            &b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"3\",\"annotations\":{\"batkube.io/instant-end\":\"2\"}}}}\n"[..]
        );
    }

    fn open_watch(store: &Store) -> WatchStream {
        let info = store.resolve("pods").unwrap();
        let tally = WatchTally::new(store.activity(), Default::default());
        let reg = store
            .watch_in(
                &info,
                Selection::default(),
                WatchStart::After(store.resource_version()),
                tally,
                crate::store::InstantMarks::None,
            )
            .unwrap();
        WatchStream::new(store.clone(), info, reg, None, false, Render::Json, None)
    }

    /// The leak of issue #18, made deterministic: a change is being queued to
    /// a watcher (the store has reserved room in its queue, the event is not
    /// in it yet) at the very moment the watch stream is dropped (its client
    /// went away, or its timeout ended it). The event must not stay counted
    /// as pending once both are done.
    #[test]
    fn a_watch_dropped_while_an_event_is_being_queued_leaves_nothing_pending() {
        let store = Store::new();
        store.create("pods", None, pod("a")).unwrap();
        let stream = open_watch(&store);
        assert!(store.activity().is_idle());

        // The writer stops inside the fan-out, room reserved, until the
        // stream's drop has either finished or started waiting for it.
        let (to_writer, writer_rx) = std_mpsc::channel::<&'static str>();
        let (to_test, test_rx) = std_mpsc::channel::<()>();
        let writer_rx = parking_lot::Mutex::new(writer_rx);
        let to_writer_hook = to_writer.clone();
        *store.inner_test_hook().lock() = Some(Arc::new(move |point: &str| match point {
            "reserved" => {
                to_test.send(()).unwrap();
                let why = writer_rx.lock().recv().unwrap();
                assert!(why == "dropped" || why == "unwatching", "{why}");
            }
            "unwatching" => {
                let _ = to_writer_hook.send("unwatching");
            }
            _ => {}
        }));
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut p = store.get("pods", Some("default"), "a").unwrap();
                p["metadata"]["labels"] = json!({"x": "1"});
                store.update("pods", Some("default"), p).unwrap();
            })
        };
        test_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        drop(stream);
        let _ = to_writer.send("dropped");
        writer.join().unwrap();
        *store.inner_test_hook().lock() = None;

        let snap = store.activity().snapshot();
        assert_eq!(
            snap.watch_events_pending, 0,
            "an event queued to a dropped watch is still counted: {snap:?}"
        );
        assert_eq!(store.watcher_count(), 0);
        assert_eq!(store.activity().violation(), None);
    }

    /// A count that outlives its watch (here a token leaked on purpose) is
    /// reported, with the connection, rather than left for the broker to
    /// wait on.
    #[test]
    fn a_watch_ending_with_events_counted_that_nothing_holds_is_a_violation() {
        let store = Store::new();
        let info = store.resolve("pods").unwrap();
        let conn = crate::activity::ConnLabel {
            id: Some(7),
            peer: Some("127.0.0.1:4242".parse().unwrap()),
        };
        let tally = WatchTally::new(store.activity(), conn);
        let reg = store
            .watch_in(
                &info,
                Selection::default(),
                WatchStart::Current,
                tally,
                crate::store::InstantMarks::None,
            )
            .unwrap();
        let mut stream =
            WatchStream::new(store.clone(), info, reg, None, false, Render::Json, None);
        store.create("pods", None, pod("a")).unwrap();
        let q = stream.rx.try_recv().unwrap();
        std::mem::forget(q);
        drop(stream);
        let v = store.activity().violation().expect("a violation");
        assert_eq!(v.connection, Some(7));
        assert_eq!(
            v.to_string(),
            "a watch of pods ended with 1 events still counted as pending, 0 of them held \
             by its connection (connection #7 from 127.0.0.1:4242)"
        );
        assert_eq!(store.activity().violation_count(), 1);
    }

    /// Without a violation, every way out releases the count: written,
    /// left in the queue, put back by a hold.
    #[test]
    fn every_event_is_released_once() {
        let store = Store::new();
        store.create("pods", None, pod("a")).unwrap();
        let info = store.resolve("pods").unwrap();
        let tally = WatchTally::new(store.activity(), Default::default());
        let reg = store
            .watch_in(
                &info,
                Selection::default(),
                WatchStart::Current,
                tally,
                crate::store::InstantMarks::None,
            )
            .unwrap();
        let mut stream =
            WatchStream::new(store.clone(), info, reg, None, false, Render::Json, None);
        assert_eq!(store.activity().snapshot().watch_events_pending, 1);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(matches!(
            Pin::new(&mut stream).poll_next(&mut cx),
            Poll::Ready(Some(Ok(_)))
        ));
        let snap = store.activity().snapshot();
        assert_eq!(
            (snap.watch_events_pending, snap.watch_events_written),
            (0, 1)
        );
        let hold = store.hold();
        store.create("pods", None, pod("b")).unwrap();
        store.create("pods", None, pod("c")).unwrap();
        assert!(Pin::new(&mut stream).poll_next(&mut cx).is_pending());
        assert_eq!(store.activity().snapshot().watch_events_pending, 2);
        drop(stream);
        drop(hold);
        let snap = store.activity().snapshot();
        assert_eq!(
            (snap.watch_events_pending, snap.watch_events_written),
            (0, 1)
        );
        assert_eq!(store.watcher_count(), 0);
        assert_eq!(store.activity().violation(), None);
    }
}
