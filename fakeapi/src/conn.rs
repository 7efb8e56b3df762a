//! Connections that report when their bytes reach the socket.
//!
//! A handler that returns a response, or a watch stream that yields a frame,
//! has only handed bytes to hyper; hyper writes them on its connection task a
//! moment later. Counting them as done at hand-over leaves a gap in which the
//! API looks idle, the client's socket is still empty, and a broker asking
//! "is the scheduler quiescent?" would get a wrong yes. So every accepted
//! connection carries a [`ConnTrack`]: responses and watch events handed over
//! are parked there and reported to [`Activity`] only when hyper flushes the
//! connection (`poll_flush` on the socket, which hyper calls after every
//! buffered byte has been written), or dropped when the connection closes.
//! Whatever is handed over after the connection closed (hyper drops a
//! connection's socket before the handler future it was running, and an
//! HTTP/2 stream's body runs on its own task) is released at once: nothing
//! stays counted on a connection that is gone.

use crate::activity::{Activity, ConnLabel, GroupCounts, PendingEvents, WatchTally};
use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use parking_lot::Mutex;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// What one connection has handed to hyper and not yet flushed.
#[derive(Debug)]
pub(crate) struct ConnTrack {
    activity: Arc<Activity>,
    pub(crate) label: ConnLabel,
    /// The listener it came in on (its group number) and the group's counts.
    pub(crate) group: u32,
    counts: Arc<GroupCounts>,
    parked: Mutex<Parked>,
    /// Bytes read from the socket that no handler has taken up yet.
    reading: AtomicBool,
}

#[derive(Debug, Default)]
struct Parked {
    /// The socket is gone: hand-overs are released at once.
    closed: bool,
    responses: usize,
    /// One token per watch with events in flight on this connection.
    events: Vec<PendingEvents>,
}

impl ConnTrack {
    fn new(activity: Arc<Activity>, label: ConnLabel, group: u32) -> Self {
        ConnTrack {
            reading: AtomicBool::new(false),
            counts: activity.group(group),
            group,
            activity,
            label,
            parked: Mutex::new(Parked::default()),
        }
    }

    /// Bytes were read from the socket (`true`), or the read found nothing
    /// more (`false`): see [`TrackedIo`]'s `AsyncRead`.
    fn reading(&self, bytes: bool) {
        if self.reading.swap(bytes, Ordering::SeqCst) != bytes {
            if bytes {
                self.activity.reading_started();
            } else {
                self.activity.reading_done();
            }
        }
    }

    fn is_reading(&self) -> bool {
        self.reading.load(Ordering::SeqCst)
    }

    /// A handler took up the request read on this connection.
    pub(crate) fn request_taken_up(&self) {
        self.counts.request();
        self.reading(false);
    }

    /// A response (or a watch's headers) was handed to hyper: the request
    /// it answers, body included, was read (its count stays until the
    /// response is flushed).
    pub(crate) fn response_handed(&self) {
        let mut p = self.parked.lock();
        if p.closed {
            drop(p);
            self.activity.request_finished(self.label);
        } else {
            p.responses += 1;
            drop(p);
        }
        self.reading(false);
    }

    /// Watch events were handed to hyper in one frame.
    pub(crate) fn events_handed(&self, events: PendingEvents) {
        let mut p = self.parked.lock();
        if p.closed {
            drop(p);
            drop(events); // released as not written
            return;
        }
        match p
            .events
            .iter_mut()
            .find(|e| Arc::ptr_eq(e.tally(), events.tally()))
        {
            Some(e) => e.absorb(events),
            None => p.events.push(events),
        }
    }

    /// Events of this watch handed over and not yet flushed (none once the
    /// connection is closed), read together with the watch's own count.
    pub(crate) fn parked_for<R>(&self, tally: &Arc<WatchTally>, f: impl FnOnce(usize) -> R) -> R {
        let p = self.parked.lock();
        let n = p
            .events
            .iter()
            .filter(|e| Arc::ptr_eq(e.tally(), tally))
            .map(PendingEvents::count)
            .sum();
        f(n)
    }

    /// Everything handed so far is in the socket (or lost with it). Tokens
    /// are released under the lock, so [`ConnTrack::parked_for`] never sees
    /// a token gone from here and not yet released.
    fn settle(&self, written: bool, close: bool) {
        let mut p = self.parked.lock();
        if close {
            p.closed = true;
        }
        if p.responses == 0 && p.events.is_empty() {
            return;
        }
        for e in p.events.drain(..) {
            if written {
                self.counts.events_written(e.count());
                e.written();
            } else {
                drop(e);
            }
        }
        let responses = std::mem::take(&mut p.responses);
        drop(p);
        for _ in 0..responses {
            self.activity.request_finished(self.label);
        }
    }
}

/// The connection a request came in on (an axum `ConnectInfo`).
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle {
    pub(crate) track: Arc<ConnTrack>,
    #[allow(dead_code)]
    pub(crate) peer: SocketAddr,
}

/// A TCP listener whose connections carry a [`ConnTrack`].
pub(crate) struct TrackedListener {
    pub(crate) inner: TcpListener,
    pub(crate) activity: Arc<Activity>,
    /// Its number among the server's listeners: the group of the
    /// connections it accepts.
    pub(crate) group: u32,
}

impl Listener for TrackedListener {
    type Io = TrackedIo;
    type Addr = ConnHandle;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // Accepted and registered under the registry's lock: someone
            // looking at the accept queue and the open connections together
            // never misses a connection in between.
            let accepted = std::future::poll_fn(|cx| {
                let mut conns = self.activity.conns.lock();
                let fd = self.inner.as_raw_fd();
                if !conns.listeners.contains(&fd) {
                    conns.listeners.push(fd);
                }
                match self.inner.poll_accept(cx) {
                    Poll::Ready(Ok((stream, peer))) => {
                        let local = stream.local_addr().unwrap_or(peer);
                        let (id, ops) = conns.opened(local, peer, stream.as_raw_fd());
                        self.activity.socket_op();
                        Poll::Ready(Ok((stream, peer, id, ops)))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await;
            match accepted {
                Ok((stream, peer, id, ops)) => {
                    let _ = stream.set_nodelay(true);
                    let label = ConnLabel {
                        id: Some(id),
                        peer: Some(peer),
                    };
                    let track = Arc::new(ConnTrack::new(self.activity.clone(), label, self.group));
                    let io = TrackedIo {
                        inner: stream,
                        track: track.clone(),
                        id,
                        ops,
                        start: Vec::new(),
                        h2: false,
                    };
                    return (io, ConnHandle { track, peer });
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait, as axum does.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        let addr = self.inner.local_addr()?;
        Ok(ConnHandle {
            track: Arc::new(ConnTrack::new(
                self.activity.clone(),
                ConnLabel::default(),
                self.group,
            )),
            peer: addr,
        })
    }
}

impl Connected<IncomingStream<'_, TrackedListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, TrackedListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// A socket that settles its connection's counts on every completed flush.
pub(crate) struct TrackedIo {
    inner: TcpStream,
    track: Arc<ConnTrack>,
    /// Entry in the activity's connection registry.
    id: u64,
    /// Its count of socket operations, raised before and after each read,
    /// write and shutdown: odd while one is under way
    /// ([`crate::Activity::server_ends`]).
    ops: Arc<std::sync::atomic::AtomicU64>,
    /// The connection's first bytes, up to the length of the HTTP/2 preface.
    start: Vec<u8>,
    /// It spoke HTTP/2.
    h2: bool,
}

/// Bytes hyper read from the socket count as activity until a handler
/// takes the request up, its response is handed back (a body read after
/// the handler started), or the connection closes: in between they are in
/// neither the socket's queue nor `requests_in_flight`.
///
/// Every hand-over raises the next count before the previous one falls, so
/// no instant exists where a request is on its way and nothing shows it:
/// the flag goes up before the socket is read (the kernel dequeues the
/// bytes inside the call), and a read that finds nothing puts it back as it
/// was rather than down (hyper may read again, and find nothing, before it
/// calls the handler for a request it already holds). The broker may look
/// at any instant, and this task may be preempted between any two
/// instructions for milliseconds on a busy machine.
///
/// HTTP/2 sends frames that are no request (settings, pings, window
/// updates): on such a connection (it starts with the HTTP/2 preface) a
/// read that finds nothing clears the flag, as no HTTP/1 client needs.
impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let was = self.track.is_reading();
        self.track.reading(true);
        self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let got = buf.filled().len() - before;
        if got > 0 && self.start.len() < H2_PREFACE.len() {
            let take = (H2_PREFACE.len() - self.start.len()).min(got);
            let new = buf.filled()[before..before + take].to_vec();
            self.start.extend_from_slice(&new);
            if self.start.len() == H2_PREFACE.len() && self.start == H2_PREFACE {
                self.h2 = true;
            }
        }
        match &r {
            Poll::Ready(Ok(())) if got > 0 => {}
            _ if self.h2 => self.track.reading(false),
            _ => self.track.reading(was),
        }
        r
    }
}

/// The first bytes of an HTTP/2 connection (RFC 9113, 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.track.activity.socket_op();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.track.activity.socket_op();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        if let Poll::Ready(Ok(())) = r {
            self.track.settle(true, false);
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.track.activity.socket_op();
        self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.ops.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        r
    }
}

impl Drop for TrackedIo {
    fn drop(&mut self) {
        // Out of the registry before the socket closes (the field drops
        // after this body), so the registry never names a closed fd.
        self.track.activity.connection_closed(self.id);
        self.track.reading(false);
        self.track.settle(false, true);
    }
}

impl Drop for TrackedListener {
    fn drop(&mut self) {
        // Out of the registry before the listener's socket closes.
        let fd = self.inner.as_raw_fd();
        self.activity.conns.lock().listeners.retain(|&l| l != fd);
    }
}
