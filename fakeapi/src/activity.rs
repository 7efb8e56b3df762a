//! Quiescence probe: is any client request in flight, or any watch event
//! queued but not yet handed to a client's socket?
//!
//! The broker's exact clock policy moves simulated time only when the
//! scheduler is quiescent; this is the API side of that question.
//!
//! The count of pending watch events is exact by construction: every event
//! queued to a watcher carries a [`PendingEvents`] token that counted it, and
//! the count goes down only when that token is consumed (the event flushed to
//! the client's socket) or dropped (the event discarded with its queue, its
//! watch or its connection, on any path). A count that would go below zero,
//! or a watch that ends with events still counted that nothing holds, is an
//! [`AccountingViolation`], recorded for the broker to fail the run on.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// Shared counters, updated by the store (watch events queued and written)
/// and the HTTP server (requests started and finished).
#[derive(Debug, Default)]
pub struct Activity {
    in_flight: AtomicUsize,
    /// Connections whose socket gave bytes that no request has taken up yet.
    reading: AtomicUsize,
    pending: AtomicUsize,
    served: AtomicU64,
    events_written: AtomicU64,
    /// Socket operations of the server on client connections (see
    /// [`Activity::socket_ops`]).
    socket_ops: AtomicU64,
    idle: Notify,
    /// Bumped whenever the API may have become idle or a change was
    /// published; a thread blocks on it in [`Activity::wait_idle_for`].
    news: AtomicU32,
    /// Threads blocked on `news` (no wake-up system call without one).
    news_waiters: AtomicU32,
    /// What each group of connections (the connections of one listener)
    /// asked and was sent, by group number.
    groups: Mutex<Vec<Arc<GroupCounts>>>,
    pub(crate) conns: Mutex<Conns>,
    /// The first accounting inconsistency seen, and how many there were.
    violation: Mutex<Option<AccountingViolation>>,
    violations: AtomicU64,
    /// Admission webhook calls sent and not yet answered (or timed out).
    webhook_calls: AtomicUsize,
    /// Admission webhook calls made since the start.
    webhook_calls_made: AtomicU64,
}

/// The activity counters were found inconsistent: a count released more
/// often than it was taken, or a watch that ended with events still counted
/// as pending that neither its queue nor its connection holds. Quiescence
/// can no longer be trusted, so the broker fails the run on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountingViolation {
    /// What was found.
    pub message: String,
    /// The connection involved, if any (its number in the server's registry
    /// of connections, counted from 1 in the order they were accepted).
    pub connection: Option<u64>,
    /// That connection's client address.
    pub client: Option<SocketAddr>,
}

impl std::fmt::Display for AccountingViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match (self.connection, self.client) {
            (Some(id), Some(peer)) => write!(f, " (connection #{id} from {peer})"),
            (Some(id), None) => write!(f, " (connection #{id})"),
            (None, Some(peer)) => write!(f, " (connection from {peer})"),
            (None, None) => f.write_str(" (no connection: the Rust API)"),
        }
    }
}

/// The server's sockets: its listener and the connections it accepted.
/// The listener accepts while holding this lock, so a connection is always
/// either in the accept queue or in `open` for whoever looks.
#[derive(Debug, Default)]
pub(crate) struct Conns {
    next: u64,
    open: HashMap<u64, Conn>,
    /// Every listener's socket (one per group, see [`Activity::group`]).
    pub(crate) listeners: Vec<RawFd>,
}

impl Conns {
    /// Registers an accepted connection: its number, and the count of the
    /// server's operations on it that its socket's reader and writer raise.
    pub(crate) fn opened(
        &mut self,
        local: SocketAddr,
        peer: SocketAddr,
        fd: RawFd,
    ) -> (u64, Arc<AtomicU64>) {
        self.next += 1;
        let ops = Arc::new(AtomicU64::new(0));
        self.open.insert(
            self.next,
            Conn {
                local,
                peer,
                fd,
                ops: ops.clone(),
            },
        );
        (self.next, ops)
    }
}

#[derive(Debug, Clone)]
struct Conn {
    local: SocketAddr,
    peer: SocketAddr,
    fd: RawFd,
    /// The server's reads, writes and shutdowns of the socket so far, each
    /// counted before and after the call: odd while one is under way (see
    /// [`Activity::server_ends`]).
    ops: Arc<AtomicU64>,
}

/// One connection as [`Activity::server_ends`] found it.
#[derive(Debug, Clone, Copy)]
pub struct ServerEnd {
    pub conn: Connection,
    /// The server's socket operations on it so far, twice each: odd while
    /// one is under way ([`ServerEnd::idle`]).
    pub ops: u64,
    /// What its socket holds, when looked at.
    pub look: Option<ServerLook>,
}

impl ServerEnd {
    /// No operation of the server on the socket was under way when its
    /// count was read. Only then can a look after that read stand for the
    /// socket until the count moves: a write whose count was raised before
    /// the read may reach the kernel after the look (found clean, then
    /// bytes on their way with the same count, which the look before the
    /// raise alone cannot tell).
    pub fn idle(&self) -> bool {
        self.ops % 2 == 0
    }
}

/// The server's socket of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLook {
    /// Received and not read by the server (`FIONREAD`).
    pub unread: u64,
    /// Written by the server and not sent yet (`SIOCOUTQNSD`).
    pub unsent: u64,
    /// Sent once each: `tcpi_bytes_sent` less retransmissions.
    pub sent: u64,
    /// `tcpi_bytes_received`.
    pub received: u64,
}

/// An open client connection: the server's end and the client's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    pub server: SocketAddr,
    pub client: SocketAddr,
}

/// The counts of one group of connections: those accepted by one listener
/// (a program that has a port of its own).
#[derive(Debug, Default)]
pub(crate) struct GroupCounts {
    requests: AtomicU64,
    events_written: AtomicU64,
}

impl GroupCounts {
    pub(crate) fn request(&self) {
        self.requests.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn events_written(&self, n: usize) {
        self.events_written.fetch_add(n as u64, Ordering::SeqCst);
    }
}

/// What the clients of one group did and were sent, since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupActivity {
    /// Requests taken up (each counted when its handler starts).
    pub requests: u64,
    /// Watch events that reached the group's sockets (bookmarks included).
    pub events_written: u64,
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
    /// Connections whose request bytes hyper has read from the socket and
    /// not yet handed to a handler (between the socket's queue, which the
    /// broker sees, and `requests_in_flight`).
    pub connections_reading: usize,
}

impl ActivitySnapshot {
    pub fn is_idle(&self) -> bool {
        self.requests_in_flight == 0
            && self.watch_events_pending == 0
            && self.connections_reading == 0
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

    /// Connections waiting in the listeners' accept queues.
    pub fn accept_queues(&self) -> u64 {
        let conns = self.conns.lock();
        // For a listening socket, tcpi_unacked is the accept queue length.
        conns
            .listeners
            .iter()
            .filter_map(|&fd| tcp_info(fd))
            .map(|i| i.tcpi_unacked as u64)
            .sum()
    }

    /// The open connections, each with the count of the server's socket
    /// operations on it so far (reads, writes, shutdowns: raised before
    /// and after each call, so a count read before a look changes if any of
    /// them began after it, and is odd if one was under way), and, for
    /// those `look` asks for, what the server's socket holds
    /// ([`ServerLook`]). A connection whose count is even and the same as
    /// at an earlier look had nothing read from or written to it by the
    /// server since.
    pub fn server_ends(&self, look: impl Fn(&Connection, u64) -> bool) -> Vec<ServerEnd> {
        let conns = self.conns.lock();
        conns
            .open
            .values()
            .filter_map(|c| {
                let conn = Connection {
                    server: c.local,
                    client: c.peer,
                };
                let ops = c.ops.load(Ordering::SeqCst);
                if !look(&conn, ops) {
                    return Some(ServerEnd {
                        conn,
                        ops,
                        look: None,
                    });
                }
                // The registry keeps the socket open (an entry leaves
                // before its fd closes).
                let mut unread: libc::c_int = 0;
                let mut unsent: libc::c_int = 0;
                // SAFETY: FIONREAD and SIOCOUTQNSD on a socket this
                // registry keeps open.
                unsafe {
                    if libc::ioctl(c.fd, libc::FIONREAD, &mut unread) != 0 {
                        unread = 0;
                    }
                    if libc::ioctl(c.fd, libc::SIOCOUTQNSD, &mut unsent) != 0 {
                        unsent = 0;
                    }
                }
                let info = tcp_info(c.fd)?;
                Some(ServerEnd {
                    conn,
                    ops,
                    look: Some(ServerLook {
                        unread: unread.max(0) as u64,
                        unsent: unsent.max(0) as u64,
                        sent: info.tcpi_bytes_sent.saturating_sub(info.tcpi_bytes_retrans),
                        received: info.tcpi_bytes_received,
                    }),
                })
            })
            .collect()
    }

    /// Connections whose handshake the server's side has completed: every
    /// one accepted so far, plus those waiting in the listener's accept
    /// queue (read together, under the lock the listener accepts under).
    /// Set against the kernel's count of connections started, it tells
    /// whether one may still be in its handshake (see the broker's
    /// `SockDiag::handshakes`).
    pub fn connections_established(&self) -> u64 {
        let conns = self.conns.lock();
        let queued: u64 = conns
            .listeners
            .iter()
            .filter_map(|&fd| tcp_info(fd))
            .map(|i| i.tcpi_unacked as u64)
            .sum();
        conns.next + queued
    }

    /// Bytes clients sent that the server has not read yet (requests on
    /// their way in, not yet counted as in flight), bytes the server wrote
    /// that its sockets have not sent yet, plus one per connection waiting
    /// in the listener's accept queue.
    pub fn unread_by_server(&self) -> u64 {
        let conns = self.conns.lock();
        // For a listening socket, tcpi_unacked is the accept queue length.
        let mut total: u64 = conns
            .listeners
            .iter()
            .filter_map(|&fd| tcp_info(fd))
            .map(|i| i.tcpi_unacked as u64)
            .sum();
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

    /// Whether a connection holds bytes the server wrote that TCP cannot
    /// send until the client reads: written and not sent (`SIOCOUTQNSD`)
    /// while every byte sent was acknowledged (so neither Nagle nor the
    /// wire holds them: the client's receive window is full). Only the
    /// client reading can change that.
    pub fn window_limited(&self) -> bool {
        let conns = self.conns.lock();
        conns.open.values().any(|c| {
            let mut unsent: libc::c_int = 0;
            // SAFETY: SIOCOUTQNSD on a socket this registry keeps open.
            if unsafe { libc::ioctl(c.fd, libc::SIOCOUTQNSD, &mut unsent) } != 0 || unsent <= 0 {
                return false;
            }
            tcp_info(c.fd).is_some_and(|info| info.tcpi_unacked == 0)
        })
    }

    pub(crate) fn connection_closed(&self, id: u64) {
        let mut c = self.conns.lock();
        c.open.remove(&id);
        self.socket_op();
    }

    pub(crate) fn socket_op(&self) {
        self.socket_ops.fetch_add(1, Ordering::SeqCst);
    }

    /// How many times the server has put something on a client connection
    /// since start: accepted it, written bytes to it, shut it down or
    /// closed it. Bytes can be on their way from the server only if this
    /// moved since a look that found none: a cheap test of "nothing new
    /// from the server", for a caller that asks again and again.
    pub fn socket_ops(&self) -> u64 {
        self.socket_ops.load(Ordering::SeqCst)
    }

    pub fn snapshot(&self) -> ActivitySnapshot {
        ActivitySnapshot {
            requests_in_flight: self.in_flight.load(Ordering::SeqCst),
            watch_events_pending: self.pending.load(Ordering::SeqCst),
            requests_served: self.served.load(Ordering::Relaxed),
            watch_events_written: self.events_written.load(Ordering::Relaxed),
            connections_reading: self.reading.load(Ordering::SeqCst),
        }
    }

    /// Admission webhook calls waiting for a webhook's answer now. Each is
    /// part of a request in flight (the API call that waits on it); a
    /// simulator that sees every program quiescent while only such calls
    /// are in flight knows that the API waits on a webhook's program (or on
    /// the call's timeout, a deadline in [`crate::SimTimers`]).
    pub fn webhook_calls_waiting(&self) -> usize {
        self.webhook_calls.load(Ordering::SeqCst)
    }

    /// Admission webhook calls made since the start (answered or not): a
    /// program serving a webhook is reached by each, whichever client's
    /// request it admits.
    pub fn webhook_calls_made(&self) -> u64 {
        self.webhook_calls_made.load(Ordering::SeqCst)
    }

    /// Counts a webhook call as waiting until the guard is dropped.
    pub(crate) fn webhook_call(self: &std::sync::Arc<Self>) -> WebhookCallGuard {
        self.webhook_calls.fetch_add(1, Ordering::SeqCst);
        self.webhook_calls_made.fetch_add(1, Ordering::SeqCst);
        WebhookCallGuard(self.clone())
    }

    pub(crate) fn reading_started(&self) {
        self.reading.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn reading_done(&self) {
        if self.reading.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.maybe_notify();
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
            self.poke();
        }
    }

    /// The counts of group `g` (created at first use).
    pub(crate) fn group(&self, g: u32) -> Arc<GroupCounts> {
        let mut groups = self.groups.lock();
        while groups.len() <= g as usize {
            groups.push(Arc::default());
        }
        groups[g as usize].clone()
    }

    /// What group `g`'s clients did and were sent so far: the connections
    /// accepted by the server's listener number `g` (0 is the first one,
    /// see `RunningServer::add_listener`). Counts move when a request is
    /// taken up and when watch events reach the socket.
    pub fn group_activity(&self, g: u32) -> GroupActivity {
        let groups = self.groups.lock();
        groups
            .get(g as usize)
            .map_or(GroupActivity::default(), |c| GroupActivity {
                requests: c.requests.load(Ordering::SeqCst),
                events_written: c.events_written.load(Ordering::SeqCst),
            })
    }

    /// Wakes a thread blocked in [`Activity::wait_idle_for`] to look
    /// again: the API may be idle, or something it waits for (a change
    /// published to the store's subscribers) happened.
    pub fn poke(&self) {
        self.news.fetch_add(1, Ordering::SeqCst);
        if self.news_waiters.load(Ordering::SeqCst) != 0 {
            // SAFETY: FUTEX_WAKE on a word of ours; wakes every waiter.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.news.as_ptr(),
                    libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                    i32::MAX,
                    0,
                    0,
                    0,
                );
            }
        }
    }

    /// Blocks the calling thread until the API is idle, `interrupt` says
    /// to stop (asked after each wake-up: [`Activity::poke`] wakes it),
    /// or `timeout` passes; returns whether the API is idle. For a
    /// thread that is not on the runtime (the broker's loop): no polling
    /// interval between the request's end and its waking.
    pub fn wait_idle_for(
        &self,
        timeout: std::time::Duration,
        interrupt: &dyn Fn() -> bool,
    ) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let seen = self.news.load(Ordering::SeqCst);
            if self.is_idle() {
                return true;
            }
            if interrupt() {
                return false;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            let ts = libc::timespec {
                tv_sec: left.as_secs() as _,
                tv_nsec: left.subsec_nanos() as _,
            };
            self.news_waiters.fetch_add(1, Ordering::SeqCst);
            // SAFETY: FUTEX_WAIT on a word of ours with a relative timeout;
            // it returns at once if the word moved since `seen` was read.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.news.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    seen,
                    &ts,
                    0,
                    0,
                );
            }
            self.news_waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    pub(crate) fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn request_finished(&self, conn: ConnLabel) {
        self.served.fetch_add(1, Ordering::Relaxed);
        if self.release(&self.in_flight, 1, "requests in flight", conn) {
            self.maybe_notify();
        }
    }

    /// The first accounting inconsistency found, if any (see
    /// [`AccountingViolation`]); the broker checks it with quiescence.
    pub fn violation(&self) -> Option<AccountingViolation> {
        self.violation.lock().clone()
    }

    /// How many accounting inconsistencies were found.
    pub fn violation_count(&self) -> u64 {
        self.violations.load(Ordering::SeqCst)
    }

    pub(crate) fn record_violation(&self, v: AccountingViolation) {
        tracing::error!(violation = %v, "fakeapi activity accounting is inconsistent");
        self.violations.fetch_add(1, Ordering::SeqCst);
        self.violation.lock().get_or_insert(v);
    }

    /// Takes `n` from `counter`; going below zero is a violation (and
    /// leaves the counter at zero). Whether the counter is now zero.
    fn release(&self, counter: &AtomicUsize, n: usize, what: &str, conn: ConnLabel) -> bool {
        let prev = counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                Some(v.saturating_sub(n))
            })
            .expect("the update always succeeds");
        if prev < n {
            self.record_violation(AccountingViolation {
                message: format!("{what}: {n} released with only {prev} counted"),
                connection: conn.id,
                client: conn.peer,
            });
        }
        prev <= n
    }

    fn events_counted(&self, n: usize) {
        self.pending.fetch_add(n, Ordering::SeqCst);
    }

    fn events_released(&self, n: usize, written: bool, conn: ConnLabel) {
        if n == 0 {
            return;
        }
        if written {
            self.events_written.fetch_add(n as u64, Ordering::Relaxed);
        }
        if self.release(&self.pending, n, "watch events pending", conn) {
            self.maybe_notify();
        }
    }
}

/// Which connection something belongs to, for violation reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConnLabel {
    pub(crate) id: Option<u64>,
    pub(crate) peer: Option<SocketAddr>,
}

/// One watch's share of the pending count: how many of its events are
/// counted now (queued, or handed to its connection and not yet flushed).
#[derive(Debug)]
pub(crate) struct WatchTally {
    activity: Arc<Activity>,
    outstanding: AtomicUsize,
    pub(crate) conn: ConnLabel,
}

impl WatchTally {
    pub(crate) fn new(activity: Arc<Activity>, conn: ConnLabel) -> Arc<Self> {
        Arc::new(WatchTally {
            activity,
            outstanding: AtomicUsize::new(0),
            conn,
        })
    }

    /// Events of this watch counted as pending now.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::SeqCst)
    }

    pub(crate) fn activity(&self) -> &Activity {
        &self.activity
    }
}

/// Watch events of one watch counted as pending for exactly as long as this
/// token lives: [`PendingEvents::written`] releases them as written to the
/// client, dropping the token (a closed watch, a closed connection, a queue
/// freed, an unwinding panic) releases them as discarded. Either happens
/// exactly once, whichever path the events take.
#[must_use = "dropping the token releases its events as not written"]
#[derive(Debug)]
pub(crate) struct PendingEvents {
    tally: Arc<WatchTally>,
    n: usize,
}

impl PendingEvents {
    /// Counts one event of this watch as pending.
    pub(crate) fn one(tally: &Arc<WatchTally>) -> Self {
        tally.outstanding.fetch_add(1, Ordering::SeqCst);
        tally.activity.events_counted(1);
        PendingEvents {
            tally: tally.clone(),
            n: 1,
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.n
    }

    pub(crate) fn tally(&self) -> &Arc<WatchTally> {
        &self.tally
    }

    /// Takes over `other`'s events (of the same watch).
    pub(crate) fn absorb(&mut self, mut other: PendingEvents) {
        debug_assert!(Arc::ptr_eq(&self.tally, &other.tally));
        if Arc::ptr_eq(&self.tally, &other.tally) {
            self.n += std::mem::take(&mut other.n);
        }
        // Otherwise `other` releases its own events when dropped here.
    }

    /// The events reached the client's socket.
    pub(crate) fn written(mut self) {
        self.release(true);
    }

    fn release(&mut self, written: bool) {
        let n = std::mem::take(&mut self.n);
        if n == 0 {
            return;
        }
        let t = &self.tally;
        t.activity
            .release(&t.outstanding, n, "a watch's events pending", t.conn);
        t.activity.events_released(n, written, t.conn);
    }
}

impl Drop for PendingEvents {
    fn drop(&mut self) {
        self.release(false);
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
        if let Some(c) = &conn {
            c.request_taken_up();
        }
        InFlight { activity: a, conn }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        match &self.conn {
            Some(c) => c.response_handed(),
            None => self.activity.request_finished(ConnLabel::default()),
        }
    }
}

/// Bytes queued on the established TCP connections to or from `port`,
/// either way (`/proc/net/tcp` and `tcp6`: each socket's send queue, not
/// yet acknowledged by its peer, and receive queue, not yet read): zero
/// when every byte either end wrote has been read by the other. The slow
/// look, for when the kernel's sock_diag cannot be asked, and for tests
/// that drive a client on simulated time. A connection still in its
/// handshake (a client's socket in `SYN_SENT`, the server's in
/// `SYN_RECV`) counts as one byte: its first bytes are on their way.
pub fn tcp_queued_bytes(port: u16) -> u64 {
    const ESTABLISHED: &str = "01";
    const SYN_SENT: &str = "02";
    const SYN_RECV: &str = "03";
    let port_of = |addr: &str| {
        addr.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    let mut total = 0;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 5 {
                continue;
            }
            if (f[3] == SYN_SENT && port_of(f[2]) == Some(port))
                || (f[3] == SYN_RECV && port_of(f[1]) == Some(port))
            {
                total += 1;
                continue;
            }
            if f[3] != ESTABLISHED {
                continue;
            }
            if port_of(f[1]) != Some(port) && port_of(f[2]) != Some(port) {
                continue;
            }
            if let Some((tx, rx)) = f[4].split_once(':') {
                total += u64::from_str_radix(tx, 16).unwrap_or(0);
                total += u64::from_str_radix(rx, 16).unwrap_or(0);
            }
        }
    }
    total
}

/// A webhook call counted as waiting (see [`Activity::webhook_calls_waiting`]).
pub(crate) struct WebhookCallGuard(std::sync::Arc<Activity>);

impl Drop for WebhookCallGuard {
    fn drop(&mut self) {
        self.0.webhook_calls.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread blocked in `wait_idle_for` wakes when the last request
    /// ends (not at its timeout), and when poked it asks its interrupt.
    #[test]
    fn waiting_for_idle_wakes_when_the_request_ends() {
        let a = Arc::new(Activity::default());
        a.request_started();
        let (tx, rx) = std::sync::mpsc::channel();
        let other = a.clone();
        let t = std::thread::spawn(move || {
            rx.recv().unwrap();
            other.request_finished(ConnLabel::default());
        });
        let start = std::time::Instant::now();
        tx.send(()).unwrap();
        assert!(a.wait_idle_for(std::time::Duration::from_secs(60), &|| false));
        assert!(start.elapsed() < std::time::Duration::from_secs(60));
        t.join().unwrap();
        // Busy again: a poke makes it ask its interrupt, which ends the wait.
        a.request_started();
        let asked = std::sync::atomic::AtomicBool::new(false);
        let poker = a.clone();
        let t = std::thread::spawn(move || poker.poke());
        let idle = a.wait_idle_for(std::time::Duration::from_secs(60), &|| {
            let again = asked.swap(true, Ordering::SeqCst);
            again
        });
        assert!(!idle);
        t.join().unwrap();
        assert!(!a.wait_idle_for(std::time::Duration::from_millis(1), &|| false));
    }

    #[test]
    fn releasing_more_than_was_counted_is_a_violation() {
        let a = Activity::default();
        let conn = ConnLabel {
            id: Some(3),
            peer: Some("127.0.0.1:5000".parse().unwrap()),
        };
        a.request_started();
        a.request_finished(conn);
        assert_eq!(a.violation(), None);
        a.request_finished(conn);
        let v = a.violation().expect("a violation");
        assert_eq!(
            v.to_string(),
            "requests in flight: 1 released with only 0 counted (connection #3 from 127.0.0.1:5000)"
        );
        // The counter stays at zero rather than wrapping around.
        assert!(a.is_idle());
    }
}

/// TCP_INFO of an open TCP socket.
fn tcp_info(fd: std::os::fd::RawFd) -> Option<libc::tcp_info> {
    // SAFETY: getsockopt into a zeroed tcp_info of the right size; the
    // caller keeps `fd` open.
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
    (r == 0).then_some(info)
}
