//! Quiescence probe: is any client request in flight, or any watch event
//! queued but not yet handed to a client's socket?
//!
//! The broker's exact clock policy moves simulated time only when the
//! scheduler is quiescent; this is the API side of that question.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// Shared counters, updated by the store (watch events queued and written)
/// and the HTTP server (requests started and finished).
#[derive(Debug, Default)]
pub struct Activity {
    in_flight: AtomicUsize,
    pending: AtomicUsize,
    served: AtomicU64,
    events_written: AtomicU64,
    idle: Notify,
    pub(crate) conns: Mutex<Conns>,
}

/// The server's sockets: its listener and the connections it accepted.
/// The listener accepts while holding this lock, so a connection is always
/// either in the accept queue or in `open` for whoever looks.
#[derive(Debug, Default)]
pub(crate) struct Conns {
    next: u64,
    open: HashMap<u64, Conn>,
    pub(crate) listener: Option<RawFd>,
}

impl Conns {
    pub(crate) fn opened(&mut self, local: SocketAddr, peer: SocketAddr, fd: RawFd) -> u64 {
        self.next += 1;
        self.open.insert(self.next, Conn { local, peer, fd });
        self.next
    }
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    local: SocketAddr,
    peer: SocketAddr,
    fd: RawFd,
}

/// An open client connection: the server's end and the client's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    pub server: SocketAddr,
    pub client: SocketAddr,
}

/// A point-in-time copy of [`Activity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActivitySnapshot {
    /// HTTP requests received whose response has not been produced yet
    /// (a watch counts until its response headers are produced).
    pub requests_in_flight: usize,
    /// Watch events queued to watchers and not yet written to their sockets.
    pub watch_events_pending: usize,
    /// HTTP requests served since start.
    pub requests_served: u64,
    /// Watch events written since start.
    pub watch_events_written: u64,
}

impl ActivitySnapshot {
    pub fn is_idle(&self) -> bool {
        self.requests_in_flight == 0 && self.watch_events_pending == 0
    }
}

impl Activity {
    /// The client connections open now (to look at their sockets' queues).
    pub fn connections(&self) -> Vec<Connection> {
        self.conns
            .lock()
            .open
            .values()
            .map(|c| Connection {
                server: c.local,
                client: c.peer,
            })
            .collect()
    }

    /// Bytes clients sent that the server has not read yet (requests on
    /// their way in, not yet counted as in flight), bytes the server wrote
    /// that its sockets have not sent yet, plus one per connection waiting
    /// in the listener's accept queue.
    pub fn unread_by_server(&self) -> u64 {
        let conns = self.conns.lock();
        let mut total = 0u64;
        if let Some(fd) = conns.listener {
            // SAFETY: getsockopt into a zeroed tcp_info of the right size,
            // on the listener, which outlives the registry entry.
            let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
            let r = unsafe {
                libc::getsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_INFO,
                    &mut info as *mut libc::tcp_info as *mut libc::c_void,
                    &mut len,
                )
            };
            // For a listening socket, tcpi_unacked is the accept queue length.
            if r == 0 {
                total += info.tcpi_unacked as u64;
            }
        }
        for c in conns.open.values() {
            let mut n: libc::c_int = 0;
            // SAFETY: FIONREAD on a socket this registry keeps open (an
            // entry leaves the registry before its socket is closed).
            if unsafe { libc::ioctl(c.fd, libc::FIONREAD, &mut n) } == 0 && n > 0 {
                total += n as u64;
            }
            // Written by the server but not yet sent (TCP small queues can
            // defer transmission to a tasklet after write() returned).
            let mut unsent: libc::c_int = 0;
            // SAFETY: as above; SIOCOUTQNSD reads the not-sent byte count.
            if unsafe { libc::ioctl(c.fd, libc::SIOCOUTQNSD, &mut unsent) } == 0 && unsent > 0 {
                total += unsent as u64;
            }
        }
        total
    }

    pub(crate) fn connection_closed(&self, id: u64) {
        let mut c = self.conns.lock();
        c.open.remove(&id);
    }

    pub fn snapshot(&self) -> ActivitySnapshot {
        ActivitySnapshot {
            requests_in_flight: self.in_flight.load(Ordering::SeqCst),
            watch_events_pending: self.pending.load(Ordering::SeqCst),
            requests_served: self.served.load(Ordering::Relaxed),
            watch_events_written: self.events_written.load(Ordering::Relaxed),
        }
    }

    pub fn is_idle(&self) -> bool {
        self.snapshot().is_idle()
    }

    /// Resolves once no request is in flight and no watch event is pending.
    /// Returns at once if that is already the case.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_idle() {
                return;
            }
            notified.await;
        }
    }

    fn maybe_notify(&self) {
        if self.is_idle() {
            self.idle.notify_waiters();
        }
    }

    pub(crate) fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn request_finished(&self) {
        self.served.fetch_add(1, Ordering::Relaxed);
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.maybe_notify();
        }
    }

    pub(crate) fn events_queued(&self, n: usize) {
        if n > 0 {
            self.pending.fetch_add(n, Ordering::SeqCst);
        }
    }

    /// `n` queued events left the queue; `written` says whether they went to
    /// a client (rather than being dropped with a closed watch).
    pub(crate) fn events_done(&self, n: usize, written: bool) {
        if n == 0 {
            return;
        }
        if written {
            self.events_written.fetch_add(n as u64, Ordering::Relaxed);
        }
        if self.pending.fetch_sub(n, Ordering::SeqCst) == n {
            self.maybe_notify();
        }
    }
}

/// Counts a request as in flight until dropped; with a tracked connection,
/// until the response is flushed to its socket.
pub(crate) struct InFlight<'a> {
    activity: &'a Activity,
    conn: Option<std::sync::Arc<crate::conn::ConnTrack>>,
}

impl<'a> InFlight<'a> {
    pub(crate) fn new(
        a: &'a Activity,
        conn: Option<std::sync::Arc<crate::conn::ConnTrack>>,
    ) -> Self {
        a.request_started();
        InFlight { activity: a, conn }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        match &self.conn {
            Some(c) => c.response_handed(),
            None => self.activity.request_finished(),
        }
    }
}
