//! The body of a watch response: one JSON event per line.
//!
//! Events arrive through a bounded channel filled by the store; their bytes
//! are shared by all watchers. Every event taken out of the channel is
//! reported to [`Activity`](crate::Activity) so the broker knows when all of
//! them reached the clients.

use crate::conn::ConnTrack;
use crate::resources::ResourceInfo;
use crate::store::{event_line, Store, WatchItem, WatchRegistration};
use crate::table;
use bytes::{Bytes, BytesMut};
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
use tokio::time::{Instant, Interval, Sleep};

/// How each event's object is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Render {
    Json,
    /// `meta.k8s.io/v1 Table` rows (kubectl get -w).
    Table {
        first: bool,
    },
}

pub(crate) struct WatchStream {
    store: Store,
    info: &'static ResourceInfo,
    initial: VecDeque<WatchItem>,
    rx: mpsc::Receiver<WatchItem>,
    overflow: Arc<AtomicBool>,
    gone: Option<String>,
    deadline: Option<Pin<Box<Sleep>>>,
    bookmarks: Option<Interval>,
    render: Render,
    done: bool,
    /// Events count as written when this connection flushes them.
    conn: Option<Arc<ConnTrack>>,
}

/// A `Status` 410 ERROR event line.
pub(crate) fn gone_line(message: &str) -> Bytes {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": "Expired", "code": 410,
    });
    event_line("ERROR", &serde_json::to_vec(&status).expect("json"))
}

fn bookmark_line(info: &ResourceInfo, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": metadata});
    event_line("BOOKMARK", &serde_json::to_vec(&obj).expect("json"))
}

/// Events ready together go out in one write: a single ready event is sent
/// as its shared bytes, several are copied into one buffer (one syscall and
/// one HTTP chunk instead of one each).
struct Batch {
    first: Bytes,
    rest: Option<BytesMut>,
    count: usize,
}

const BATCH_BYTES: usize = 256 * 1024;

impl Batch {
    fn new(first: Bytes) -> Self {
        Batch {
            first,
            rest: None,
            count: 1,
        }
    }
    fn len(&self) -> usize {
        self.rest.as_ref().map_or(self.first.len(), BytesMut::len)
    }
    fn has_room(&self) -> bool {
        self.len() < BATCH_BYTES
    }
    fn push(&mut self, b: Bytes) {
        let first = &self.first;
        let buf = self.rest.get_or_insert_with(|| {
            let mut m = BytesMut::with_capacity(BATCH_BYTES + b.len());
            m.extend_from_slice(first);
            m
        });
        buf.extend_from_slice(&b);
        self.count += 1;
    }
    fn finish(self) -> Bytes {
        match self.rest {
            Some(m) => m.freeze(),
            None => self.first,
        }
    }
}

impl WatchStream {
    pub(crate) fn new(
        store: Store,
        info: &'static ResourceInfo,
        reg: WatchRegistration,
        timeout: Option<Duration>,
        allow_bookmarks: bool,
        render: Render,
        conn: Option<Arc<ConnTrack>>,
    ) -> Self {
        let interval = store.config().bookmark_interval;
        let bookmarks = allow_bookmarks.then(|| {
            let mut i = tokio::time::interval_at(Instant::now() + interval, interval);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        });
        WatchStream {
            store,
            info,
            initial: reg.initial,
            rx: reg.rx,
            overflow: reg.overflow,
            gone: reg.gone,
            deadline: timeout.map(|t| Box::pin(tokio::time::sleep(t))),
            bookmarks,
            render,
            done: false,
            conn,
        }
    }

    fn render_item(&mut self, item: WatchItem) -> Bytes {
        match (self.render, item) {
            (_, WatchItem::Bookmark { rv, initial_end }) => {
                bookmark_line(self.info, rv, initial_end)
            }
            (Render::Json, WatchItem::Change(ty, e)) => e.line(ty),
            (Render::Json, WatchItem::Initial(s)) => event_line("ADDED", &s.json),
            (Render::Table { first }, item) => {
                let (ty, obj) = match item {
                    WatchItem::Change(ty, e) => (ty.as_str(), e.obj.clone()),
                    WatchItem::Initial(s) => ("ADDED", s.value.clone()),
                    WatchItem::Bookmark { .. } => unreachable!("handled above"),
                };
                self.render = Render::Table { first: false };
                let t = table::table(
                    self.info,
                    std::slice::from_ref(&obj),
                    self.store.now(),
                    first,
                    table::IncludeObject::Metadata,
                );
                event_line(ty, &serde_json::to_vec(&t).expect("json"))
            }
        }
    }

    /// The next event: initial ones (and any put back) first, then changes.
    fn next_item(&mut self, cx: &mut Context<'_>) -> Poll<Option<WatchItem>> {
        match self.initial.pop_front() {
            Some(item) => Poll::Ready(Some(item)),
            None => self.rx.poll_recv(cx),
        }
    }

    /// `n` events leave in the frame being returned to hyper.
    fn handed(&self, n: usize) {
        match &self.conn {
            Some(c) => c.events_handed(n),
            None => self.store.activity().events_done(n, true),
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
            return Poll::Ready(Some(Ok(gone_line(&msg))));
        }
        if this.overflow.load(Ordering::SeqCst) {
            this.done = true;
            return Poll::Ready(Some(Ok(gone_line(
                "the watch fell too far behind and was closed; relist to continue",
            ))));
        }
        // While the store holds delivery, events wait in the queue; an event
        // taken just as a hold began goes back to the front.
        if this.store.held(cx.waker()) {
            return Poll::Pending;
        }
        match this.next_item(cx) {
            Poll::Ready(Some(item)) => {
                if this.store.held(cx.waker()) {
                    this.initial.push_front(item);
                    return Poll::Pending;
                }
                let first = this.render_item(item);
                let mut batch = Batch::new(first);
                while batch.has_room() {
                    let Poll::Ready(Some(item)) = this.next_item(cx) else {
                        break;
                    };
                    if this.store.held(cx.waker()) {
                        this.initial.push_front(item);
                        break;
                    }
                    let bytes = this.render_item(item);
                    batch.push(bytes);
                }
                this.handed(batch.count);
                return Poll::Ready(Some(Ok(batch.finish())));
            }
            Poll::Ready(None) => {
                if this.overflow.load(Ordering::SeqCst) {
                    this.done = true;
                    return Poll::Ready(Some(Ok(gone_line(
                        "the watch fell too far behind and was closed; relist to continue",
                    ))));
                }
                return this.finish();
            }
            Poll::Pending => {}
        }
        if let Some(d) = this.deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                return this.finish();
            }
        }
        if let Some(b) = this.bookmarks.as_mut() {
            if b.poll_tick(cx).is_ready() {
                if let Some(rv) = this.store.bookmark_rv(&this.rx) {
                    if matches!(this.render, Render::Json) {
                        return Poll::Ready(Some(Ok(bookmark_line(this.info, rv, false))));
                    }
                }
                // A queued event: let the next poll deliver it.
                cx.waker().wake_by_ref();
            }
        }
        Poll::Pending
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        let mut dropped = self.initial.len();
        self.initial.clear();
        self.rx.close();
        while self.rx.try_recv().is_ok() {
            dropped += 1;
        }
        self.store.activity().events_done(dropped, false);
    }
}
