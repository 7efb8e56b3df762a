//! Knowing when the scheduler is done reacting.
//!
//! Under the shim, the scheduler is *quiescent* when all of these hold at
//! once: every thread of its process is parked (timeshim's probe: in a shim
//! wait, or asleep with every timed wait held by the seccomp supervisor), the
//! API has no request in flight and no watch event waiting to be written
//! (fakeapi's activity), and no byte is on its way between the two (the
//! client sockets' receive queues by sock_diag, fakeapi's unread requests,
//! the kernel's packet backlog), nor any connection in its handshake
//! ([`SockDiag::handshakes`]). Two probes with the same [`timeshim::Stamp`]
//! (the process's CPU time and its count of wait events) bracket the API and
//! socket checks: no scheduler thread ran in between, so nothing it could
//! have been woken by escaped them. Exact by construction, no grace period.
//!
//! With `--controller`, several processes are on simulated time, each with
//! its own clock page: all are quiescent, each one's two probes bracketing
//! the same API and socket checks, or none is; they share one gate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use timeshim::{Controller, Quiescence, SimTime};

/// What waiting for quiescence found.
#[derive(Debug, Clone, PartialEq)]
pub enum Quiet {
    /// Idle. The scheduler's next timer is at `earliest_deadline`, the
    /// controllers' (`--controller`) at `controllers` (the clock policy's
    /// fast-forward skips the scheduler's timers while nothing is pending;
    /// a controller's timer acts on its own, so it is always honoured).
    Yes {
        earliest_deadline: Option<SimTime>,
        controllers: Option<SimTime>,
        /// Each program's earliest timer, in [`ShimSide::procs`]' order.
        each: Vec<Option<SimTime>>,
    },
    /// Still busy after the wait.
    Busy,
    /// A process on simulated time is gone (which one: an index into
    /// [`ShimSide::procs`], 0 being the scheduler).
    Exited(usize),
}

/// One program on simulated time: the scheduler, or a controller of
/// `--controller` beside it, each with its own clock page (a page serves
/// one process: its waiting threads, its owner), all moved as one clock.
pub struct SimProcess {
    /// How the run names it: `the scheduler`, `controller 1 (vc-controller-manager …)`.
    pub name: String,
    pub controller: Arc<Controller>,
    /// A `controller_exited` ending rather than `scheduler_exited` when it exits.
    pub is_scheduler: bool,
    /// The API listener it talks to (`fakeapi::Activity::group_activity`).
    pub group: u32,
}

/// The scheduler (and the controllers beside it) under the shim, reached
/// through their clock pages; the API they all talk to.
pub struct ShimSide {
    /// The scheduler first, then the controllers in flag order.
    pub procs: Vec<SimProcess>,
    pub activity: Arc<fakeapi::Activity>,
    /// The API's ports: one per program (its own listener), the first
    /// shared with clients outside the run.
    pub api_ports: Vec<u16>,
    /// Opened at first use.
    pub diag: Arc<parking_lot::Mutex<Option<SockDiag>>>,
    /// The server's count of socket operations
    /// ([`fakeapi::Activity::socket_ops`]) read before the checks of the
    /// last quiescence [`wait`](Self::wait) found, if no gate was closed
    /// since (see [`Gate::deliver`]).
    pub proven: parking_lot::Mutex<Option<u64>>,
}

impl ShimSide {
    /// The scheduler alone.
    pub fn scheduler(
        controller: Arc<Controller>,
        activity: Arc<fakeapi::Activity>,
        api_port: u16,
    ) -> ShimSide {
        ShimSide {
            procs: vec![SimProcess {
                name: "the scheduler".into(),
                controller,
                is_scheduler: true,
                group: 0,
            }],
            activity,
            api_ports: vec![api_port],
            diag: Default::default(),
            proven: Default::default(),
        }
    }

    /// What keeps the programs from being quiescent, for a warning: each
    /// one's probe, the API's counts and the bytes on their way (starts
    /// with "; ", or is empty if nothing can be read).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for p in &self.procs {
            match p.controller.probe() {
                Ok(q) => parts.push(format!(
                    "{}: {} threads, {} in a shim wait, {}{}",
                    p.name,
                    q.threads,
                    q.waiting,
                    if q.quiescent() {
                        "quiescent"
                    } else {
                        "not quiescent"
                    },
                    if q.all_sleeping {
                        ""
                    } else {
                        " (a thread runs or may run)"
                    }
                )),
                Err(e) => parts.push(format!("{}: {e}", p.name)),
            }
        }
        let a = self.activity.snapshot();
        parts.push(format!(
            "API: requests in flight {}, watch events not written {}, connections being read {}",
            a.requests_in_flight, a.watch_events_pending, a.connections_reading
        ));
        parts.push(format!(
            "bytes between the API and its clients {}, packets in the kernel's backlog {}",
            tcp_backlog(&self.activity, &mut self.diag.lock(), &self.api_ports, &[]),
            softnet().backlog
        ));
        format!("; {}", parts.join("; "))
    }

    /// The programs' processes (0 for one not attached).
    fn pids(&self) -> Vec<u32> {
        self.procs
            .iter()
            .map(|p| p.controller.attached_pid().unwrap_or(0))
            .collect()
    }

    /// Simulated time (every page reads the same).
    pub fn now(&self) -> SimTime {
        self.procs[0].controller.now()
    }

    /// Moves every process's clock to `t`.
    pub fn advance_to(&self, t: SimTime) -> Result<(), timeshim::ControlError> {
        for p in &self.procs {
            p.controller.advance_to(t)?;
        }
        Ok(())
    }

    /// The API is idle: no request in flight and no watch event pending.
    /// If fakeapi found its own counts inconsistent, quiescence cannot be
    /// trusted any more: the run fails, at this simulated time, naming the
    /// connection involved.
    fn idle_api(&self, s: &fakeapi::ActivitySnapshot) -> anyhow::Result<bool> {
        if self.activity.violation_count() != 0 {
            if let Some(v) = self.activity.violation() {
                return Err(super::BrokerError {
                    time: super::batsim_time(self.now()),
                    message: format!("the API's activity accounting is inconsistent: {v}"),
                }
                .into());
            }
        }
        Ok(s.is_idle())
    }

    /// Debugging aid (`BATKUBE_VERIFY_QUIET=1`): looks again 5 ms after a
    /// quiescence decision and logs whatever moved, which the decision
    /// should have seen coming.
    fn verify_quiet(&self, stamp: timeshim::Stamp, before: &fakeapi::ActivitySnapshot) {
        let conns_before = self.activity.connections();
        // What the scheduler's threads block in, and what moves first.
        let main = &self.procs[0].controller;
        let pid = main.attached_pid().unwrap_or(0);
        let syscalls: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.flatten()
                    .map(|e| {
                        std::fs::read_to_string(e.path().join("syscall"))
                            .unwrap_or_default()
                            .trim()
                            .to_string()
                    })
                    .collect()
            })
            .unwrap_or_default();
        let t0 = Instant::now();
        let mut first = None;
        while t0.elapsed() < Duration::from_millis(5) {
            let cpu = main.cpu_time_ns().unwrap_or(0);
            let act = self.activity.snapshot();
            let bytes = tcp_backlog(&self.activity, &mut self.diag.lock(), &self.api_ports, &[]);
            if cpu != stamp.cpu_ns || act != *before || bytes != 0 {
                first = Some((t0.elapsed(), cpu != stamp.cpu_ns, act.clone(), bytes));
                break;
            }
        }
        if first.is_some() {
            tracing::warn!(
                ?syscalls,
                ?first,
                "verify: first movement after a quiescence decision"
            );
        }
        std::thread::sleep(Duration::from_millis(5));
        let conns_after = self.activity.connections();
        let opened: Vec<_> = conns_after
            .iter()
            .filter(|c| !conns_before.contains(c))
            .collect();
        let closed: Vec<_> = conns_before
            .iter()
            .filter(|c| !conns_after.contains(c))
            .collect();
        let probe = main.probe();
        let after = self.activity.snapshot();
        let moved_stamp = probe.as_ref().map(|p| p.stamp != stamp).unwrap_or(true);
        if moved_stamp || after != *before {
            tracing::warn!(
                ?stamp,
                ?probe,
                ?before,
                ?after,
                ?opened,
                ?closed,
                "quiescence decided, yet the scheduler moved within 5 ms"
            );
        }
    }

    /// Waits at most `bound` of wall time for quiescence, or until
    /// `changed()` says the scheduler made a change through the API (then
    /// [`Quiet::Busy`]): the broker reacts to it at once (a binding starts
    /// its job, whose status the scheduler then sees while it is still
    /// awake) instead of after a quiescence that its reaction ends anyway.
    pub fn wait(&self, bound: Duration, changed: &dyn Fn() -> bool) -> anyhow::Result<Quiet> {
        let start = Instant::now();
        let mut skipped = 0u32;
        loop {
            if changed() {
                return Ok(Quiet::Busy);
            }
            // While the API is visibly busy (a request in flight, a watch
            // event not yet written), the scheduler cannot be quiescent:
            // looking at its threads and sockets now (a /proc scan and a
            // sock_diag lookup per connection) is wasted. The decision
            // below is made as before, from looks taken once it is idle.
            // Every 64th look goes through, so a scheduler that exited is
            // still seen whatever the API's state.
            if !self.activity.snapshot().is_idle()
                && self.activity.violation_count() == 0
                && skipped < 64
            {
                if start.elapsed() >= bound {
                    return Ok(Quiet::Busy);
                }
                skipped += 1;
                // Woken as soon as it is idle, or a change is published
                // (the broker reacts to it at once).
                let left = bound.saturating_sub(start.elapsed());
                self.activity
                    .wait_idle_for(left.min(Duration::from_millis(2)), changed);
                continue;
            }
            skipped = 0;
            // Each process quiescent in turn, its stamp kept; the final
            // probes below must find every stamp unchanged, so each
            // process's quiet interval spans the API and socket checks.
            let mut looks = Vec::with_capacity(self.procs.len());
            let mut retry = false;
            for (i, p) in self.procs.iter().enumerate() {
                let left = bound.saturating_sub(start.elapsed());
                let q = match p.controller.wait_quiescent_unconfirmed(left, changed) {
                    Err(timeshim::ControlError::NotAttached) => {
                        retry = true;
                        break;
                    }
                    other => other?,
                };
                match q {
                    Quiescence::Exited => return Ok(Quiet::Exited(i)),
                    Quiescence::TimedOut { .. } => return Ok(Quiet::Busy),
                    Quiescence::Quiescent {
                        earliest_deadline,
                        stamp,
                        ..
                    } => looks.push((earliest_deadline, stamp)),
                }
            }
            if retry {
                if start.elapsed() >= bound {
                    return Ok(Quiet::Busy);
                }
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            // Between two probes with the same stamp no thread of a
            // process ran and no wait of it moved; in between, nothing was
            // on its way to any of them: no request or watch event in the
            // API, no byte in a socket or in the kernel's packet backlog.
            // Whatever could wake one would have had to come through one
            // of those (they talk to each other only through the API).
            let before = self.activity.snapshot();
            if !self.idle_api(&before)? {
                if start.elapsed() >= bound {
                    return Ok(Quiet::Busy);
                }
                std::thread::sleep(Duration::from_micros(30));
                continue;
            }
            let net_before = softnet();
            // Each program quiescent with the stamp its last probe must
            // find again: its connections found clean since its threads
            // last ran are not looked up again.
            let quiet: Vec<(u32, Unmoved)> = self
                .procs
                .iter()
                .zip(self.pids())
                .zip(&looks)
                .filter(|((_, pid), _)| *pid != 0)
                .map(|((p, pid), l)| {
                    let since = match p.controller.deterministic_sends() {
                        // Its Go runtime wakes at every move of the clock
                        // (sysmon), so its stamp moves too; its sends do not.
                        Some(_) => Unmoved::Sends(l.1.sends),
                        None => Unmoved::Stamp(l.1),
                    };
                    (pid, since)
                })
                .collect();
            let ops_before = self.activity.socket_ops();
            if net_before.backlog == 0
                && tcp_backlog(
                    &self.activity,
                    &mut self.diag.lock(),
                    &self.api_ports,
                    &quiet,
                ) == 0
            {
                let mut unchanged = true;
                for (p, (deadline, stamp)) in self.procs.iter().zip(&looks) {
                    let probe = p.controller.probe()?;
                    if !(probe.quiescent()
                        && probe.stamp == *stamp
                        && probe.earliest_deadline == *deadline)
                    {
                        unchanged = false;
                        break;
                    }
                }
                if unchanged && self.activity.snapshot() == before && softnet() == net_before {
                    if *VERIFY_QUIET {
                        self.verify_quiet(looks[0].1, &before);
                    }
                    *self.proven.lock() = Some(ops_before);
                    let earliest = |scheduler: bool| {
                        self.procs
                            .iter()
                            .zip(&looks)
                            .filter(|(p, _)| p.is_scheduler == scheduler)
                            .filter_map(|(_, l)| l.0)
                            .min()
                    };
                    return Ok(Quiet::Yes {
                        earliest_deadline: earliest(true),
                        controllers: earliest(false),
                        each: looks.iter().map(|l| l.0).collect(),
                    });
                }
            }
            if start.elapsed() >= bound {
                return Ok(Quiet::Busy);
            }
            std::thread::sleep(Duration::from_micros(30));
        }
    }
}

/// Bytes on their way between the API and the scheduler, both ways:
/// requests fakeapi has not read yet (its own sockets, `FIONREAD`, and its
/// accept queue), responses or watch events fakeapi has not sent yet
/// (`SIOCOUTQNSD`), and on the scheduler's end of each connection, looked
/// up with the kernel's sock_diag (one exact lookup per connection), what it
/// has not read (receive queue) and what it wrote that fakeapi's socket has
/// not acknowledged (write queue: not yet sent, deferred by Nagle or TCP
/// small queues, in flight, or parked in the server socket's backlog while
/// fakeapi holds its lock). Scanning `/proc/net/tcp` instead costs about
/// 4 ms per look on a kernel with a 256k-bucket table.
///
/// A connection still in its handshake counts too (one byte each, see
/// [`SockDiag::handshakes`]): no byte count covers the packets of a
/// handshake, and a client waiting for its connection looks idle. Under
/// load the kernel may hold one of them between its queues for as long
/// as the CPU delivering it is preempted; the scheduler then bound its
/// pod only after the broker had let the clock move on.
///
/// `quiet`: the programs found quiescent for this look, with their stamps
/// (see [`bytes_between`]; empty: every connection is looked up).
pub fn tcp_backlog(
    activity: &fakeapi::Activity,
    diag: &mut Option<SockDiag>,
    ports: &[u16],
    quiet: &[(u32, Unmoved)],
) -> u64 {
    let bytes = bytes_between(activity, diag, ports, quiet, true);
    if bytes != 0 {
        return bytes;
    }
    match diag.as_mut() {
        Some(d) => d
            .handshakes(ports, &|| activity.connections_established())
            .unwrap_or_else(|_| queued_bytes(ports)),
        None => 0, // the fallback of bytes_between counted them
    }
}

/// [`fakeapi::tcp_queued_bytes`] over every port of the API.
fn queued_bytes(ports: &[u16]) -> u64 {
    ports.iter().map(|&p| fakeapi::tcp_queued_bytes(p)).sum()
}

/// Bytes on their way between the API and the scheduler that have not
/// reached the other end's receive queue yet: [`tcp_backlog`] less what
/// sits in the scheduler's receive queues, ready for it to read.
/// `quiet` as for [`tcp_backlog`].
pub fn in_flight(
    activity: &fakeapi::Activity,
    diag: &mut Option<SockDiag>,
    ports: &[u16],
    quiet: &[(u32, Unmoved)],
) -> u64 {
    bytes_between(activity, diag, ports, quiet, false)
}

/// What shows that a program has not touched its sockets since a look (see
/// [`bytes_between`]): unchanged, it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmoved {
    /// The stamp of a quiescent probe taken before the look, that a probe
    /// after it must find again ([`ShimSide::wait`]): two quiescent probes
    /// with equal stamps mean no thread of the program ran in between.
    Stamp(timeshim::Stamp),
    /// Under the deterministic supervisor, the program's count of sends
    /// ([`timeshim::Controller::deterministic_sends`]) in the stamp of a
    /// quiescent probe taken before the look (`Stamp::sends`): every call
    /// of it that may put bytes on a socket moves it before it runs, and a
    /// quiescent probe saw none under way. Its threads may have run since
    /// (Go's sysmon wakes at every move of the clock) and read; a read
    /// changes nothing on a connection with nothing unread.
    Sends(u64),
}

/// A connection whose last look found nothing on its way and nothing
/// unread at either end, and what could have changed that since (see
/// [`bytes_between`]).
#[derive(Debug, Clone, Copy)]
struct Clean {
    /// The server's count of operations on its socket, read before that
    /// look ([`fakeapi::Activity::server_ends`]).
    server_ops: u64,
    /// The program (process id) whose socket the client's end is.
    owner: u32,
    /// What showed the owner unmoved at that look.
    owner_since: Unmoved,
}

/// `quiet`: programs (process ids) whose sockets the caller can show
/// untouched, each with its evidence ([`Unmoved`]): the stamp of a
/// quiescent probe taken before this look, that a probe after it must find
/// again for the caller's decision to hold (as [`ShimSide::wait`] does), or
/// under the deterministic supervisor the program's count of sends in that
/// stamp. A connection one of them owns is not looked at
/// again (no syscall at either end) while nothing can have changed on it
/// since a look that found it clean: both ends' queues empty, and each end
/// had received every byte the other sent. Nothing changes it unless one
/// end reads or writes: the server did not (its count of socket
/// operations, raised before and after each, is the same as before that
/// look, and was even then: none under way), and neither did the owner
/// (quiescent both then and now, with the same stamp: no thread of it ran
/// in between, [`timeshim::Probe::stamp`]; or no call of it that may write
/// was let through since, the count being the same). A read by the owner
/// changes nothing on a connection with nothing unread. Nothing was in a queue or on
/// its way for the kernel to move. So a quiescence check looks only at the
/// connections of the programs that ran since the last one: when a
/// controller's timer fires, not at the scheduler's watches.
///
/// (The owner's CPU time read on its own, outside a quiescent probe, would
/// not do: the kernel adds a running thread's time to its process's clock
/// only at a tick or a switch, so a thread that woke since and is still
/// running shows the old time. A quiescent probe saw every thread asleep,
/// each switched out with its time added.)
///
/// A connection of a process outside `quiet` (a user's kubectl, a program's
/// child, a program that is not quiescent) is always looked at. A socket is
/// taken for its owner's alone: a child sharing it (forked without exec;
/// Go's and Rust's sockets are close-on-exec) would be a hole.
fn bytes_between(
    activity: &fakeapi::Activity,
    diag: &mut Option<SockDiag>,
    ports: &[u16],
    quiet: &[(u32, Unmoved)],
    unread_by_client: bool,
) -> u64 {
    let stamp_of = |pid: u32| quiet.iter().find(|q| q.0 == pid).map(|q| q.1);
    let programs: Vec<u32> = quiet.iter().map(|q| q.0).collect();
    if diag.is_none() {
        *diag = SockDiag::open().ok();
    }
    let Some(d) = diag.as_mut() else {
        return activity.unread_by_server() + queued_bytes(ports);
    };
    let mut total = activity.accept_queues();
    let ends = {
        let clean = &d.clean;
        activity.server_ends(|c, ops| {
            !clean
                .get(&(c.client, c.server))
                .is_some_and(|k| k.server_ops == ops && stamp_of(k.owner) == Some(k.owner_since))
        })
    };
    if d.clean.len() > ends.len() || d.owners.len() > 2 * ends.len() + 64 {
        let open = |k: &(std::net::SocketAddr, std::net::SocketAddr)| {
            ends.iter().any(|e| (e.conn.client, e.conn.server) == *k)
        };
        d.clean.retain(|k, _| open(k));
        d.owners.retain(|k, _| open(k));
    }
    for e in ends {
        let Some(server) = e.look else {
            continue; // clean, and nothing moved it since
        };
        let (c, key) = (e.conn, (e.conn.client, e.conn.server));
        total += server.unread + server.unsent;

        match d.info(c.client, c.server) {
            Ok(Some(i)) => {
                if unread_by_client {
                    total += i.rqueue as u64;
                }
                total += i.wqueue as u64;
                // Bytes one end sent that the other has not received yet,
                // wherever they are (a softirq delayed mid-delivery, a
                // socket's backlog): exact, whatever the ACK timing.
                total += server.sent.saturating_sub(i.bytes_received);
                total += i.bytes_sent.saturating_sub(server.received);

                let clean = e.idle()
                    && server.unread == 0
                    && server.unsent == 0
                    && i.rqueue == 0
                    && i.wqueue == 0
                    && i.bytes_received == server.sent
                    && i.bytes_sent == server.received;
                let owner = if clean && !programs.is_empty() {
                    d.owner(key, i.inode, &programs)
                } else {
                    None
                };
                match owner.and_then(|pid| Some((pid, stamp_of(pid)?))) {
                    Some((owner, owner_since)) => {
                        d.clean.insert(
                            key,
                            Clean {
                                server_ops: e.ops,
                                owner,
                                owner_since,
                            },
                        );
                    }
                    None => {
                        d.clean.remove(&key);
                    }
                }
            }
            Ok(None) => {
                d.clean.remove(&key); // closed meanwhile
            }
            Err(_) => return activity.unread_by_server() + queued_bytes(ports),
        }
    }
    total
}

/// The settle of a deterministic run (`--deterministic`, see
/// [`timeshim::Settle`]): the seccomp supervisor lets a thread of the
/// program write to or read from a socket only when this holds, so that
/// the API takes the program's requests one after the other in the order it
/// wrote them, and what a read returns is everything there is, whatever the
/// machine's load:
///
/// - the API has done all it can with what it was given: none of its
///   workers awake (`awake`, from the runtime's park and unpark hooks),
///   no byte of a request unread or read and not taken up (a request
///   whose body has not come yet waits, parked: the body's write may go);
/// - the broker has reacted to every change (its reactions write to the
///   API too);
/// - no byte is on its way between the API and any client, nor in the
///   kernel's packet backlog; bytes in a client's receive queue are what it
///   is meant to read. Or more than a client's receive buffer takes, held
///   by TCP until it reads (then what one read returns depends on TCP's
///   window: a limit; the supervisor makes clients' receive buffers large).
pub fn settle_hook(
    activity: Arc<fakeapi::Activity>,
    diag: Arc<parking_lot::Mutex<Option<SockDiag>>>,
    ports: Vec<u16>,
    store: fakeapi::Store,
    processed: Arc<std::sync::atomic::AtomicU64>,
    awake: Arc<std::sync::atomic::AtomicI64>,
    broker: Vec<Arc<Controller>>,
) -> timeshim::Settle {
    use std::sync::atomic::Ordering;
    // The last look that found everything settled, by what could change
    // it: the programs' sends, the server's socket operations, the store's
    // version and the API's counts. While none of them moved, nothing new
    // can be on its way, and the costly part (sock_diag lookups, the
    // kernel's packet backlog) is skipped: most decisions of a
    // deterministic run come between two sends.
    let settled_at: parking_lot::Mutex<Option<SettledLook>> = parking_lot::Mutex::new(None);
    let look = {
        let activity = activity.clone();
        let store = store.clone();
        move || SettledLook {
            sends: timeshim::deterministic_sends(),
            socket_ops: activity.socket_ops(),
            version: store.last_change_version(),
            activity: activity.snapshot(),
        }
    };
    // Since when the hook has said no without a yes in between, and
    // whether that was reported: a program held this long (10 s of wall
    // time) waits on something that does not come; the report names it.
    // (The supervisor asks again within milliseconds while a call waits:
    // a pause of a second between two asks starts a new episode.)
    let unsettled: parking_lot::Mutex<Unsettled> = Default::default();
    Arc::new(move || {
        let report = |why: &dyn Fn() -> String| {
            let mut u = unsettled.lock();
            let now = Instant::now();
            if u.last.is_none_or(|l| now - l > Duration::from_secs(1)) {
                *u = Unsettled::default();
            }
            u.last = Some(now);
            let since = *u.since.get_or_insert(now);
            if !u.reported && since.elapsed() >= Duration::from_secs(10) {
                u.reported = true;
                tracing::warn!(
                    waited = ?since.elapsed(),
                    "a program's deterministic read has waited for the API to settle: {}",
                    why()
                );
            }
        };
        let key = look();
        let version = processed.load(Ordering::Acquire);
        if key.version != version {
            // The broker has changes to react to, and may be asleep
            // waiting for the program's quiescence: wake it to take them.
            for c in &broker {
                c.nudge();
            }
            report(&|| {
                format!(
                    "the broker has not reacted to the store's changes (version {}, reacted to {version})",
                    key.version
                )
            });
            return false;
        }
        let before = key.activity;
        let workers = awake.load(Ordering::SeqCst);
        if workers != 0 || before.connections_reading != 0 || before.watch_events_pending != 0 {
            report(&|| {
                format!(
                    "API workers awake {workers}, connections being read {}, watch events not written {}",
                    before.connections_reading, before.watch_events_pending
                )
            });
            return false;
        }
        if settled_at.lock().as_ref() == Some(&key) {
            *unsettled.lock() = Unsettled::default();
            return true;
        }
        let backlog = softnet().backlog;
        let bytes = if backlog == 0 {
            in_flight(&activity, &mut diag.lock(), &ports, &[])
        } else {
            u64::MAX
        };
        let settled =
            backlog == 0 && bytes == 0 && awake.load(Ordering::SeqCst) == 0 && look() == key;
        if settled {
            *settled_at.lock() = Some(key);
            *unsettled.lock() = Unsettled::default();
        } else {
            report(&|| {
                format!(
                    "packets in the kernel's backlog {backlog}, bytes between the API and its clients {}",
                    if bytes == u64::MAX { "not looked at".to_string() } else { bytes.to_string() }
                )
            });
        }
        settled
    })
}

/// A run of refusals of [`settle_hook`]: since when, the last one, and
/// whether it was reported.
#[derive(Default)]
struct Unsettled {
    since: Option<Instant>,
    last: Option<Instant>,
    reported: bool,
}

/// What a settled look of [`settle_hook`] depended on.
#[derive(PartialEq, Eq)]
struct SettledLook {
    sends: u64,
    socket_ops: u64,
    version: u64,
    activity: fakeapi::ActivitySnapshot,
}

impl ShimSide {
    /// Closes the scheduler's gate (`Controller::close_gate`): until the
    /// returned guard is dropped, none of its waits returns. The broker
    /// moves the clock and applies an instant meanwhile, then
    /// [`Gate::deliver`]s it.
    pub fn close_gate(&self) -> Gate {
        for p in &self.procs {
            p.controller.close_gate();
        }
        // Taken by this gate: once it opens, the programs may run.
        let proven = self.proven.lock().take();
        Gate {
            proven: proven.filter(|&ops| ops == self.activity.socket_ops()),
            controllers: self.procs.iter().map(|p| p.controller.clone()).collect(),
            activity: self.activity.clone(),
            diag: self.diag.clone(),
            api_ports: self.api_ports.clone(),
        }
    }
}

/// The scheduler's gate, closed while an instant is delivered: it sees the
/// clock's move and every change of the instant as one step, never the
/// first bytes of a frame or one watch's events before another's, however
/// loaded the machine (the cause of results that changed under load).
pub struct Gate {
    /// The server's count of socket operations when the programs were last
    /// found quiescent, if they cannot have run since and the server has
    /// put nothing on a connection since: then nothing was on its way
    /// between the API and a program then (the look found nothing), and
    /// nothing is now unless the server has written since.
    proven: Option<u64>,
    controllers: Vec<Arc<Controller>>,
    activity: Arc<fakeapi::Activity>,
    diag: Arc<parking_lot::Mutex<Option<SockDiag>>>,
    api_ports: Vec<u16>,
}

impl Gate {
    /// Waits until every watch event of the instant has been written and
    /// every byte of it sits in the scheduler's receive queues (exact: the
    /// API's counts and both ends' TCP byte counts), then opens the gate.
    ///
    /// An instant larger than what a connection's receive window takes
    /// (a fresh connection takes about 64 KiB: 50 new pods) cannot all be
    /// there before the scheduler reads: once a connection is
    /// window-limited (bytes written that TCP holds while everything sent
    /// is acknowledged, which only the scheduler's reading changes), the
    /// gate opens and the rest arrives as it reads. Returns whether that
    /// happened: the scheduler may then act on part of the instant before
    /// the rest arrives. `bound` keeps a scheduler that stopped reading
    /// from hanging the run (the gate opens, with a warning).
    pub fn deliver(self, bound: Duration) -> bool {
        let start = Instant::now();
        let mut last = (u64::MAX, usize::MAX);
        let mut since = Instant::now();
        let mut looks = 0u32;
        loop {
            looks += 1;
            let s = self.activity.snapshot();
            // While the API is still writing the instant's frames, the
            // sockets cannot hold all of it yet: the byte counts (a
            // sock_diag lookup per connection) wait until it is done. A
            // write blocked on a full receive window keeps it busy for
            // good: looked for after a few rounds. A request waiting on an
            // admission webhook (the broker's create of a JobSet, whose
            // webhook JobSet's manager serves) waits on a program behind
            // this gate: it ends once the gate is open, in the window.
            let waiting = self.activity.webhook_calls_waiting();
            let writing = s.watch_events_pending != 0 || s.requests_in_flight > waiting;
            // An instant that wrote nothing (a timer's, a completion whose
            // status no watch is sent): nothing is on its way, no lookup.
            if !writing
                && self
                    .proven
                    .is_some_and(|ops| ops == self.activity.socket_ops())
            {
                return false;
            }
            let bytes = if writing {
                u64::MAX
            } else {
                in_flight(&self.activity, &mut self.diag.lock(), &self.api_ports, &[])
            };
            if bytes == 0 {
                return false;
            }
            if (!writing || looks > 4) && self.activity.window_limited() {
                tracing::debug!(bytes, "an instant larger than a receive window: the gate opens for the scheduler to read it");
                return true;
            }
            if (bytes, s.watch_events_pending) != last {
                last = (bytes, s.watch_events_pending);
                since = Instant::now();
            } else if since.elapsed() >= bound {
                tracing::warn!(
                    waited = ?start.elapsed(),
                    bytes,
                    "an instant's changes did not reach the scheduler; its gate opens without them"
                );
                return true;
            }
            // The API's workers write an instant within microseconds (it
            // wakes this thread when done); the kernel then delivers the
            // bytes: yield to it first, sleep only if it takes longer.
            if writing {
                self.activity
                    .wait_idle_for(Duration::from_micros(500), &|| false);
            } else if looks < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(10));
            }
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        for c in &self.controllers {
            c.open_gate();
        }
    }
}

/// `BATKUBE_VERIFY_QUIET` set: read once, not on every window.
static VERIFY_QUIET: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| std::env::var_os("BATKUBE_VERIFY_QUIET").is_some());

/// The kernel's packet backlog (`/proc/net/softnet_stat`): packets queued
/// between a sender and a receiving socket (loopback traffic waits there
/// when softirqs are deferred to ksoftirqd on a busy machine), and packets
/// processed so far, summed over CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Softnet {
    pub backlog: u64,
    pub processed: u64,
}

pub fn softnet() -> Softnet {
    use std::os::unix::fs::FileExt;
    thread_local! {
        // Kept open and read again at offset 0 (procfs regenerates it):
        // read twice per window.
        static FILE: std::cell::RefCell<Option<std::fs::File>> = const { std::cell::RefCell::new(None) };
    }
    let mut s = Softnet::default();
    let mut buf = [0u8; 64 * 1024];
    let n = FILE.with_borrow_mut(|f| {
        if f.is_none() {
            *f = std::fs::File::open("/proc/net/softnet_stat").ok();
        }
        let f = f.as_ref()?;
        let mut n = 0;
        while n < buf.len() {
            match f.read_at(&mut buf[n..], n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(_) => return None,
            }
        }
        Some(n)
    });
    let Some(text) = n.and_then(|n| std::str::from_utf8(&buf[..n]).ok()) else {
        return s;
    };
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let hex = |i: usize| {
            f.get(i)
                .and_then(|v| u64::from_str_radix(v, 16).ok())
                .unwrap_or(0)
        };
        s.processed += hex(0);
        // Column 12 (since Linux 5.10): input + process queue lengths.
        s.backlog += hex(11);
    }
    s
}

/// `INET_DIAG_INFO`: the attribute (and request extension bit) for `tcp_info`.
const INET_DIAG_INFO: u8 = 2;

/// One TCP socket as sock_diag reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockInfo {
    /// Bytes received and not read.
    pub rqueue: u32,
    /// Bytes written and not acknowledged.
    pub wqueue: u32,
    /// Bytes sent once each: `tcpi_bytes_sent` less `tcpi_bytes_retrans`
    /// (Linux 4.19+).
    pub bytes_sent: u64,
    /// `tcpi_bytes_received`.
    pub bytes_received: u64,
    /// The socket's inode (`idiag_inode`), as `/proc/<pid>/fd` names it.
    pub inode: u32,
}

/// A sock_diag request for TCP sockets of `family`: the netlink header
/// (`flags`), then inet_diag_req_v2 (family, protocol, `ext`, pad,
/// `states`, a zeroed inet_diag_sockid without cookie).
fn request(flags: libc::c_int, family: u8, ext: u8, states: u32) -> [u8; 72] {
    let mut req = [0u8; 72];
    req[0..4].copy_from_slice(&72u32.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&(flags as u16).to_ne_bytes());
    req[16] = family;
    req[17] = libc::IPPROTO_TCP as u8;
    req[18] = ext;
    req[20..24].copy_from_slice(&states.to_ne_bytes());
    req[64..72].copy_from_slice(&[0xff; 8]); // INET_DIAG_NOCOOKIE
    req
}

/// A NETLINK_SOCK_DIAG socket for exact TCP socket lookups.
pub struct SockDiag {
    fd: std::os::fd::OwnedFd,
    /// When [`SockDiag::handshakes`] last found none in progress: whose
    /// count of connections started (the run's or the kernel's), that
    /// count, and the server's of connections established.
    quiet: Option<(bool, u64, u64)>,
    /// `/proc/net/snmp`, kept open and read again at offset 0.
    snmp: Option<std::fs::File>,
    /// The run's own count of connections started, when every program of
    /// the run counts its own ([`SockDiag::counting_run`]): the seccomp
    /// supervisors' (`Ports`), and the shims' of the linked programs (their
    /// clocks).
    run: Option<(timeshim::Ports, Vec<Arc<timeshim::Controller>>)>,
    /// Connections (client's end, server's end) found clean by their last
    /// lookup ([`bytes_between`]).
    clean: std::collections::HashMap<(std::net::SocketAddr, std::net::SocketAddr), Clean>,
    /// Which program's socket a connection's client end is (`None`: no
    /// program's), found once per connection.
    owners: std::collections::HashMap<(std::net::SocketAddr, std::net::SocketAddr), Option<u32>>,
    /// Lookups of one socket made so far.
    lookups: u64,
}

/// Netlink message types of sock_diag.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;

/// TCP states as sock_diag numbers them.
const TCP_SYN_SENT: u8 = 2;
const TCP_SYN_RECV: u8 = 3;
const TCP_NEW_SYN_RECV: u8 = 12;

impl SockDiag {
    pub fn open() -> std::io::Result<SockDiag> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain socket(2) call; the fd is owned from here on.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(SockDiag {
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            quiet: None,
            snmp: None,
            run: None,
            clean: Default::default(),
            owners: Default::default(),
            lookups: 0,
        })
    }

    /// Counts connections started with the run's own count instead of the
    /// kernel's: only when every program of the run counts its own, each
    /// before its `connect` reaches the kernel. Those under the seccomp
    /// supervisor share `ports` ([`timeshim::Ports::connects_to`]); those
    /// with a linked or preloaded shim count on their clock page
    /// (`linked`, [`timeshim::Controller::connects_started`]; a shim that
    /// does not count, from an older build, leaves the kernel's count in
    /// use). Connections other processes of the machine open (a run
    /// beside, a build) then cost no dump, and no `/proc/net/snmp` read.
    pub fn counting_run(
        mut self,
        ports: timeshim::Ports,
        linked: Vec<Arc<timeshim::Controller>>,
    ) -> SockDiag {
        self.run = Some((ports, linked));
        self
    }

    /// The run's own count of connections started to `ports`, if every
    /// program counts its own.
    fn run_connects(&self, ports: &[u16]) -> Option<u64> {
        let (run, linked) = self.run.as_ref()?;
        let shims = linked
            .iter()
            .map(|c| c.connects_started())
            .sum::<Option<u64>>()?;
        Some(run.connects_to(ports).wrapping_add(shims))
    }

    /// `Tcp: ActiveOpens` of this network namespace: connections started
    /// (counted once the client's socket is hashed, `SYN_SENT`, before its
    /// first packet leaves).
    fn active_opens(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        if self.snmp.is_none() {
            self.snmp = std::fs::File::open("/proc/net/snmp").ok();
        }
        let mut buf = [0u8; 8192];
        let mut n = 0;
        let f = self.snmp.as_ref()?;
        while n < buf.len() {
            match f.read_at(&mut buf[n..], n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(_) => return None,
            }
        }
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
        let (names, values) = (tcp.next()?, tcp.next()?);
        let i = names.split_whitespace().position(|w| w == "ActiveOpens")?;
        values.split_whitespace().nth(i)?.parse().ok()
    }

    /// Connections to or from `port` still in their handshake: a client's
    /// socket in `SYN_SENT`, the server's half-open one (`SYN_RECV`, a
    /// request socket). Once the server's side is established it sits in
    /// the listener's accept queue, which fakeapi counts, until accepted.
    ///
    /// A dump of the TCP sockets walks the kernel's whole connection table
    /// (about half a millisecond), and clients open
    /// connections all the time (an HTTP/1 pool drops one idle for 90
    /// simulated seconds): it is made only when counts say a handshake may
    /// be in progress. Since the last dump that found none, as many
    /// connections were started (read after) as the server established
    /// (`established`: its accepted ones and its accept queue, read
    /// before): then every one started is done (each established one was
    /// started after that dump, and one started elsewhere would leave the
    /// counts apart). Started: the kernel's count of this network
    /// namespace (`Tcp: ActiveOpens`), which every other process's
    /// connections move too (a run beside, a build: a dump at nearly every
    /// look on a shared machine); or, when every program counts its own
    /// ([`counting_run`](Self::counting_run): supervised, or a shim that
    /// counts), the run's own count of its programs' `connect`s (to `ports`
    /// for the supervised ones, to any IPv4 or IPv6 address for a shim's),
    /// made before the kernel starts them.
    /// With the run's count, a client from outside the run (a user's
    /// `kubectl`) is not counted: its connection leaves the counts apart (a
    /// dump), unless it completes at the very look at which a program's
    /// handshake is in progress, which it then hides; clients from outside
    /// are not part of what a run keeps exact.
    pub fn handshakes(
        &mut self,
        ports: &[u16],
        established: &dyn Fn() -> u64,
    ) -> std::io::Result<u64> {
        let done = established();
        let opens = match self.run_connects(ports) {
            Some(o) => Some((true, o)),
            None => self.active_opens().map(|o| (false, o)),
        };
        if let (Some((run0, o0, d0)), Some((run, o))) = (self.quiet, opens) {
            if run == run0 && o.wrapping_sub(o0) == done.wrapping_sub(d0) {
                return Ok(0);
            }
        }
        // IPv4 sockets only: the API listens on 127.0.0.1 alone (`batkube
        // run` refuses to start otherwise), so both ends of a connection to
        // it are AF_INET sockets (a client dialing 127.0.0.1 opens one; only
        // a v4-mapped IPv6 address in its kubeconfig would not). IPv4 and
        // IPv6 share the kernel's connection table, each dump walks all of
        // it: a second one for IPv6 doubled the cost for nothing.
        let mut n = 0;
        self.dump(libc::AF_INET as u8, |state, sport, dport| {
            if (state == TCP_SYN_SENT && ports.contains(&dport))
                || (matches!(state, TCP_SYN_RECV | TCP_NEW_SYN_RECV) && ports.contains(&sport))
            {
                n += 1;
            }
        })?;
        // A baseline only if no handshake ended while the dump looked: one
        // started before `opens` was read and established after `done`
        // would otherwise leave the counts apart the other way.
        self.quiet = match opens {
            Some((run, o)) if n == 0 && established() == done => Some((run, o, done)),
            _ => None,
        };
        Ok(n)
    }

    /// The program among `programs` whose open files include the socket
    /// `inode` (the client's end of `conn`), looked for once per
    /// connection in their `/proc/<pid>/fd`.
    fn owner(
        &mut self,
        conn: (std::net::SocketAddr, std::net::SocketAddr),
        inode: u32,
        programs: &[u32],
    ) -> Option<u32> {
        if let Some(o) = self.owners.get(&conn) {
            return *o;
        }
        let target = format!("socket:[{inode}]");
        let found = programs.iter().copied().filter(|&p| p != 0).find(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| {
                    d.flatten().any(|e| {
                        std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == target.as_str())
                    })
                })
                .unwrap_or(false)
        });
        // A connection no program is found to own yet may be one whose
        // owner had not been attached: asked again while the list grows.
        if found.is_some() || programs.iter().all(|&p| p != 0) {
            self.owners.insert(conn, found);
        }
        found
    }

    /// Sends one request to the kernel.
    fn send(&self, req: &[u8]) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: sending our buffer on our netlink socket (kernel address).
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as u16;
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                req.as_ptr() as *const libc::c_void,
                req.len(),
                0,
                &kernel as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if sent < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Every TCP socket of `family` in a handshake state, as (state,
    /// source port, destination port).
    fn dump(&self, family: u8, mut each: impl FnMut(u8, u16, u16)) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let flags = libc::NLM_F_REQUEST | libc::NLM_F_DUMP;
        let states: u32 = 1 << TCP_SYN_SENT | 1 << TCP_SYN_RECV | 1 << TCP_NEW_SYN_RECV;
        let req = request(flags, family, 0, states);
        self.send(&req)?;
        let fd = self.fd.as_raw_fd();
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            // SAFETY: receiving into our buffer.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
            if n < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let n = n as usize;
            let mut at = 0;
            while at + 16 <= n {
                let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes")) as usize;
                let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
                if len < 16 || at + len > n {
                    return Err(std::io::Error::other("truncated sock_diag dump"));
                }
                match kind {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        let err = i32::from_ne_bytes(buf[at + 16..at + 20].try_into().expect("4"));
                        return Err(std::io::Error::from_raw_os_error(-err));
                    }
                    SOCK_DIAG_BY_FAMILY if len >= 16 + 8 => {
                        // inet_diag_msg: family, state, timer, retrans, then
                        // sport and dport (big endian).
                        let m = &buf[at + 16..at + len];
                        each(
                            m[1],
                            u16::from_be_bytes([m[4], m[5]]),
                            u16::from_be_bytes([m[6], m[7]]),
                        );
                    }
                    _ => {}
                }
                at += (len + 3) & !3;
            }
        }
    }

    /// Unread bytes in the receive queue of the TCP socket bound to `src`
    /// and connected to `dst`; `None` if there is no such socket.
    pub fn rqueue(
        &mut self,
        src: std::net::SocketAddr,
        dst: std::net::SocketAddr,
    ) -> std::io::Result<Option<u32>> {
        Ok(self.info(src, dst)?.map(|i| i.rqueue))
    }

    /// Queues and byte counts of the TCP socket bound to `src` and
    /// connected to `dst` (the INET_DIAG_INFO extension: its `tcp_info`);
    /// `None` if there is no such socket.
    pub fn info(
        &mut self,
        src: std::net::SocketAddr,
        dst: std::net::SocketAddr,
    ) -> std::io::Result<Option<SockInfo>> {
        use std::net::SocketAddr;
        use std::os::fd::AsRawFd;
        let (family, put_addr): (u8, fn(&mut [u8], &SocketAddr)) = match src {
            SocketAddr::V4(_) => (libc::AF_INET as u8, |b, a| {
                if let SocketAddr::V4(a) = a {
                    b[..4].copy_from_slice(&a.ip().octets());
                }
            }),
            SocketAddr::V6(_) => (libc::AF_INET6 as u8, |b, a| {
                if let SocketAddr::V6(a) = a {
                    b[..16].copy_from_slice(&a.ip().octets());
                }
            }),
        };
        self.lookups += 1;
        // idiag_ext: the tcp_info.
        let mut req = request(
            libc::NLM_F_REQUEST,
            family,
            1 << (INET_DIAG_INFO - 1),
            u32::MAX,
        );
        // inet_diag_sockid at 24: sport, dport (big endian), src[16], dst[16], if, cookie.
        req[24..26].copy_from_slice(&src.port().to_be_bytes());
        req[26..28].copy_from_slice(&dst.port().to_be_bytes());
        put_addr(&mut req[28..44], &src);
        put_addr(&mut req[44..60], &dst);
        self.send(&req)?;
        let fd = self.fd.as_raw_fd();
        let mut buf = [0u8; 2048];
        // SAFETY: receiving into our buffer.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = n as usize;
        if n < 20 {
            return Err(std::io::Error::other("short sock_diag reply"));
        }
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if kind == NLMSG_ERROR {
            let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            return if err == -libc::ENOENT {
                Ok(None)
            } else {
                Err(std::io::Error::from_raw_os_error(-err))
            };
        }
        if kind != SOCK_DIAG_BY_FAMILY || n < 16 + 64 {
            return Err(std::io::Error::other("unexpected sock_diag reply"));
        }
        // inet_diag_msg at 16: 4 bytes, sockid (48), expires, rqueue, wqueue.
        let at = 16 + 4 + 48 + 4;
        let word = |at: usize| u32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
        let mut info = SockInfo {
            rqueue: word(at),
            wqueue: word(at + 4),
            bytes_sent: 0,
            bytes_received: 0,
            // ... uid, inode.
            inode: word(at + 12),
        };
        // Attributes follow the 72-byte inet_diag_msg: (len u16, type u16, data), 4-aligned.
        let end = (u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize).min(n);
        let mut a = 16 + 72;
        let mut found = false;
        while a + 4 <= end {
            let len = u16::from_ne_bytes([buf[a], buf[a + 1]]) as usize;
            let kind = u16::from_ne_bytes([buf[a + 2], buf[a + 3]]);
            if len < 4 {
                break;
            }
            if kind == INET_DIAG_INFO as u16 {
                let data = &buf[a + 4..(a + len).min(end)];
                let u64_at = |off: usize| {
                    data.get(off..off + 8)
                        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
                };
                let retrans = u64_at(std::mem::offset_of!(libc::tcp_info, tcpi_bytes_retrans));
                let sent = u64_at(std::mem::offset_of!(libc::tcp_info, tcpi_bytes_sent))
                    .zip(retrans)
                    .map(|(s, r)| s.saturating_sub(r));
                let received = u64_at(std::mem::offset_of!(libc::tcp_info, tcpi_bytes_received));
                if let (Some(s), Some(r)) = (sent, received) {
                    info.bytes_sent = s;
                    info.bytes_received = r;
                    found = true;
                }
            }
            a += (len + 3) & !3;
        }
        if !found {
            // A closed connection's TIME_WAIT minisocket (its state shown
            // as FIN_WAIT2 or TIME_WAIT, `inet_twsk_diag_fill`) or a
            // half-open one's request socket has no tcp_info and nothing
            // in its queues: as good as gone. A full socket always has it.
            const FIN_WAIT2: u8 = 5;
            const TIME_WAIT: u8 = 6;
            const CLOSE: u8 = 7;
            const NEW_SYN_RECV: u8 = 12;
            if matches!(buf[16 + 1], FIN_WAIT2 | TIME_WAIT | CLOSE | NEW_SYN_RECV) {
                return Ok(None);
            }
            return Err(std::io::Error::other(
                "sock_diag reply without tcp_info byte counts",
            ));
        }
        Ok(Some(info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn sock_diag_sees_unread_bytes_of_one_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut server, _) = l.accept().unwrap();
        let mut d = SockDiag::open().unwrap();
        let (c, s) = (client.local_addr().unwrap(), server.local_addr().unwrap());
        assert_eq!(d.rqueue(c, s).unwrap(), Some(0));
        server.write_all(b"hello").unwrap();
        let mut seen = None;
        for _ in 0..100 {
            seen = d.rqueue(c, s).unwrap();
            if seen == Some(5) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(seen, Some(5));
        let mut b = [0u8; 5];
        client.read_exact(&mut b).unwrap();
        assert_eq!(d.rqueue(c, s).unwrap(), Some(0));
        // Byte counts on both ends: what the server sent, the client received.
        let ci = d.info(c, s).unwrap().unwrap();
        let si = d.info(s, c).unwrap().unwrap();
        assert_eq!((ci.bytes_received, si.bytes_sent), (5, 5));
        assert_eq!((ci.bytes_sent, si.bytes_received), (0, 0));
        // The server's end, seen from the other side.
        assert_eq!(d.rqueue(s, c).unwrap(), Some(0));
        drop(client);
        drop(server);
        let gone: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(d.rqueue(gone, s).unwrap(), None);
    }

    /// A connection closed by one end leaves a TIME_WAIT minisocket there
    /// (no tcp_info): gone, not an error (an error made every look fall
    /// back to scanning /proc/net/tcp).
    #[test]
    fn sock_diag_takes_a_closed_connection_for_gone() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut server, _) = l.accept().unwrap();
        let mut d = SockDiag::open().unwrap();
        let (c, s) = (client.local_addr().unwrap(), server.local_addr().unwrap());
        drop(client);
        // The server reads the end of stream, then closes: the client's
        // end goes through FIN_WAIT2 to TIME_WAIT.
        let mut b = [0u8; 1];
        assert_eq!(server.read(&mut b).unwrap(), 0);
        drop(server);
        for _ in 0..100 {
            assert!(
                matches!(d.info(c, s), Ok(None) | Ok(Some(_))),
                "{:?}",
                d.info(c, s)
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(d.info(c, s).unwrap().is_none());
    }

    /// A program's connection found clean is not looked up again while
    /// neither end touches it; a request the program then sends, and the
    /// answer waiting in its socket, are seen.
    #[test]
    fn a_clean_connection_is_looked_up_again_only_once_an_end_moved() {
        use std::io::BufRead;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let api = rt
            .block_on(fakeapi::serve(
                fakeapi::Store::new(),
                "127.0.0.1:0".parse().unwrap(),
            ))
            .unwrap();
        let port = api.addr().port();
        // The program: asks once and reads the answer; on a line of its
        // input asks again and leaves the answer unread.
        let script = format!(
            r#"
import socket, sys
s = socket.create_connection(("127.0.0.1", {port}))
req = b"GET /api HTTP/1.1\r\nHost: x\r\n\r\n"
s.sendall(req)
got = b""
while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}}"):
    got += s.recv(65536)
print("asked", flush=True)
sys.stdin.readline()
s.sendall(req)
print("again", flush=True)
sys.stdin.readline()
"#
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 (the CI installs it)");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "asked");
        // Asleep in its read of the input (its CPU time still moves on its
        // way there, beside other tests): only then is its connection clean
        // for good.
        let asleep = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, rest)| rest.trim_start().starts_with('S'))
                })
                .unwrap_or(false)
        };
        let t0 = Instant::now();
        while !asleep(child.id()) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the program never waits for its input"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let activity = api.activity();
        let ports = [port];
        // What a quiescent probe of it would stamp: its CPU time (it sleeps,
        // so no thread of it is running) and no wait events (no shim).
        let pid = child.id();
        let stamp = || timeshim::Stamp {
            cpu_ns: timeshim::seccomp::remote::process_cpu_time_ns(pid).unwrap(),
            events: 0,
            sends: 0,
        };
        let mut diag = None;
        let settle = |diag: &mut Option<SockDiag>| {
            for _ in 0..5000 {
                if tcp_backlog(&activity, diag, &ports, &[(pid, Unmoved::Stamp(stamp()))]) == 0 {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            panic!("the program's connection never settled");
        };
        settle(&mut diag);
        // Its owner is asleep with the same stamp and the server idle:
        // looked at again without a lookup.
        let before = diag.as_ref().unwrap().lookups;
        let quiet = [(pid, Unmoved::Stamp(stamp()))];
        for _ in 0..10 {
            assert_eq!(tcp_backlog(&activity, &mut diag, &ports, &quiet), 0);
        }
        assert_eq!(diag.as_ref().unwrap().lookups, before);
        // A look whose proof carries another stamp (the owner ran since)
        // looks it up.
        let Unmoved::Stamp(then) = quiet[0].1 else {
            unreachable!()
        };
        let moved = [(
            pid,
            Unmoved::Stamp(timeshim::Stamp {
                cpu_ns: then.cpu_ns + 1,
                ..then
            }),
        )];
        assert_eq!(tcp_backlog(&activity, &mut diag, &ports, &moved), 0);
        assert_eq!(diag.as_ref().unwrap().lookups, before + 1);
        // Asked again: the answer stays in its socket, unread. The program
        // ran: its stamp moved, so the connection is looked up again.
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin).unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "again");
        let mut seen = 0;
        for _ in 0..5000 {
            seen = tcp_backlog(
                &activity,
                &mut diag,
                &ports,
                &[(pid, Unmoved::Stamp(stamp()))],
            );
            if seen > 0 && activity.snapshot().is_idle() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(seen > 0, "the unread answer is seen");
        assert!(diag.as_ref().unwrap().lookups > before);
        // Without its owner among the quiet programs, every look looks it up.
        let n = diag.as_ref().unwrap().lookups;
        tcp_backlog(&activity, &mut diag, &ports, &[]);
        assert_eq!(diag.as_ref().unwrap().lookups, n + 1);
        drop(stdin);
        child.kill().ok();
        child.wait().unwrap();
        rt.block_on(api.shutdown());
    }
}
