//! The supervisor: one thread in the controlling process that answers the
//! supervised program's time-related system calls from the simulated clock.
//!
//! - Clock reads are answered at once (the value is written into the
//!   caller's memory).
//! - Timed waits are *held*: the caller stays blocked inside its system call
//!   until the simulated clock reaches its deadline (the controller moves it)
//!   or what it waits for happens first:
//!   - epoll and poll waits: the supervisor takes a duplicate of the
//!     caller's descriptors (`pidfd_getfd`) and watches them in its own epoll
//!     set; when they are ready it collects the events itself (`epoll_wait`
//!     with no timeout on the same epoll instance, or `poll`), writes them
//!     into the caller's buffer and returns their count, as the kernel would;
//!   - futex waits: the word is compared first (`EAGAIN` if it changed, as
//!     the kernel does), and every futex wake of the program passes through
//!     the supervisor, which releases the held waiters it is meant for before
//!     letting the kernel wake the others.
//! - Everything held is known: thread, deadline, what it waits on. That is
//!   the earliest deadline the controller asks for, and, with the threads'
//!   kernel states and the process's CPU time, exact quiescence.
//!
//! Replies use `SECCOMP_IOCTL_NOTIF_SEND`; a caller interrupted by a signal
//! meanwhile makes the reply fail with `ENOENT` (its notification is gone)
//! and is dropped. Held notifications are revalidated
//! (`SECCOMP_IOCTL_NOTIF_ID_VALID`) before the earliest deadline is published.

mod det;
mod ports;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::filter::nr;
use super::remote;
use super::SeededBytes;
use crate::page::{Page, MODE_FROZEN};

const SECCOMP_IOCTL_NOTIF_RECV: libc::c_ulong = 0xc050_2100;
const SECCOMP_IOCTL_NOTIF_SEND: libc::c_ulong = 0xc018_2101;
const SECCOMP_IOCTL_NOTIF_ID_VALID: libc::c_ulong = 0x4008_2102;
const SECCOMP_USER_NOTIF_FLAG_CONTINUE: u32 = 1;
const SECCOMP_IOCTL_NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104;
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;

const TOKEN_LISTENER: u64 = 0;
const TOKEN_WAKE: u64 = 1;
/// The ensemble's wake-up (another member gave the baton or voided the
/// reports); unlike `TOKEN_WAKE` it says nothing about the clock.
const TOKEN_BATON: u64 = 2;
/// Tokens of held waits' descriptors: `TOKEN_HELD + hold sequence number`.
const TOKEN_HELD: u64 = 1 << 32;

const NO_DEADLINE: u64 = u64::MAX;
const NS: u64 = 1_000_000_000;
const TAI_OFFSET_NS: u64 = 37 * NS;

/// What the controller and the probe read, updated by the supervisor thread.
pub(crate) struct Shared {
    pub pid: u32,
    listener: OwnedFd,
    wake: OwnedFd,
    /// Written by the ensemble's other members (see `TOKEN_BATON`).
    baton: OwnedFd,
    /// The supervisor's epoll set: the listener, `wake`, and the descriptors
    /// of held waits. Readable while something is there for it to handle.
    ep: OwnedFd,
    page: *const Page,
    /// Earliest deadline (simulated realtime ns) of a held wait, or MAX.
    pub earliest: AtomicU64,
    /// Threads held in a timed wait.
    pub held: AtomicU32,
    /// Bumped on every notification received and every reply sent.
    pub generation: AtomicU64,
    /// Set from the moment the supervisor's `epoll_wait` returns until it
    /// has handled what woke it (notifications, ready descriptors of held
    /// waits, a clock move) and published the result.
    pub busy: AtomicBool,
    stop: AtomicBool,
    /// Counters for benchmarks and tests.
    pub clock_reads: AtomicU64,
    pub waits: AtomicU64,
    pub wakes: AtomicU64,
    /// Deterministic mode: the calls that may put bytes on a socket this
    /// program was let through, counted before each runs (its share of
    /// [`crate::deterministic_sends`]).
    pub sends: AtomicU64,
    /// Deterministic mode: one thread at a time (see `det`).
    pub deterministic: bool,
    /// Deterministic mode: the last decision found nothing to run.
    pub det_quiet: AtomicBool,
    /// How many times the controller closed the gate (the world outside
    /// moved: an instant, the clock). Deterministic mode counts a move of
    /// the world when it takes it in, not when the kernel wakes it.
    pub gate_closings: AtomicU64,
    /// Held while the supervisor takes in what the world outside did
    /// (deterministic mode); the controller takes it to close the gate.
    pub eval: Mutex<()>,
    /// The controller's word on the world outside (deterministic mode).
    pub settle: Mutex<Option<crate::Settle>>,
    /// Deterministic mode: the run's listening ports (see [`crate::Ports`]);
    /// the program's own until the controller gives the run's.
    pub ports: Mutex<crate::Ports>,
}

// SAFETY: the page is only accessed through atomics and outlives the
// supervisor (the controller joins the thread before unmapping it).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Something is there for the supervisor to handle, or being handled:
    /// a notification, a held wait whose descriptors became ready (a write
    /// to the eventfd Go's netpoller sleeps on, data on a socket), a clock
    /// move. The readiness stays until the supervisor consumes it, and it
    /// raises `busy` before consuming anything, so looking at the epoll set
    /// first and `busy` second leaves no gap: a thread released by a held
    /// wait is never invisible to the probe.
    pub fn pending(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.ep.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no timeout.
        let ready = unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLIN != 0 };
        ready || self.busy.load(Ordering::SeqCst)
    }

    /// Wakes the supervisor thread (the clock moved).
    pub fn kick(&self) {
        let one: u64 = 1;
        // SAFETY: 8-byte write to our eventfd.
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    /// Wakes the supervisor thread for the ensemble (see
    /// [`super::ensemble`]).
    pub(crate) fn kick_baton(&self) {
        let one: u64 = 1;
        // SAFETY: 8-byte write to our eventfd.
        unsafe {
            libc::write(
                self.baton.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.kick();
    }

    fn page(&self) -> &Page {
        // SAFETY: see the Send/Sync impl.
        unsafe { &*self.page }
    }
}

pub(crate) fn start(
    pid: u32,
    listener: OwnedFd,
    page: *const Page,
    seed: Option<u64>,
    deterministic: bool,
    ensemble: Option<(super::Ensemble, usize)>,
) -> io::Result<(Arc<Shared>, std::thread::JoinHandle<()>)> {
    let eventfd = || {
        // SAFETY: plain syscall; a non-negative result is a new fd we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let wake = eventfd()?;
    let baton = eventfd()?;
    // SAFETY: plain syscall.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    // Replies wake the caller on the supervisor's CPU (Linux 6.6+): a clock
    // read is then a hand-off between two threads, not two cross-CPU
    // wake-ups. Older kernels refuse the flag; nothing else changes.
    // SAFETY: SET_FLAGS reads one u64 of flags.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    epoll_add(
        ep.as_raw_fd(),
        listener.as_raw_fd(),
        libc::EPOLLIN as u32,
        TOKEN_LISTENER,
    )?;
    epoll_add(
        ep.as_raw_fd(),
        wake.as_raw_fd(),
        libc::EPOLLIN as u32,
        TOKEN_WAKE,
    )?;
    epoll_add(
        ep.as_raw_fd(),
        baton.as_raw_fd(),
        libc::EPOLLIN as u32,
        TOKEN_BATON,
    )?;
    let shared = Arc::new(Shared {
        pid,
        listener,
        wake,
        baton,
        ep,
        page,
        earliest: AtomicU64::new(NO_DEADLINE),
        held: AtomicU32::new(0),
        generation: AtomicU64::new(0),
        busy: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        clock_reads: AtomicU64::new(0),
        waits: AtomicU64::new(0),
        wakes: AtomicU64::new(0),
        sends: AtomicU64::new(0),
        deterministic,
        det_quiet: AtomicBool::new(false),
        gate_closings: AtomicU64::new(0),
        eval: Mutex::new(()),
        settle: Mutex::new(None),
        ports: Mutex::new(crate::Ports::new()),
    });
    let mut sup = Supervisor {
        shared: shared.clone(),
        held: Vec::new(),
        next_seq: 0,
        tgids: HashMap::new(),
        pidfds: HashMap::new(),
        rng: seed.map(SeededBytes::new),
        go_usleep: HashMap::new(),
        go_poll: HashMap::new(),
        go_poll_wanted: go_poll_wanted(),
        dirty: true,
        det: deterministic.then(|| det::Det::new(seed.unwrap_or(0))),
        ensemble: ensemble.filter(|_| deterministic),
    };
    if let Some((e, i)) = &sup.ensemble {
        e.join(*i, &shared);
    }
    let thread = std::thread::Builder::new()
        .name("timeshim-seccomp".into())
        .spawn(move || {
            sup.run();
            if let Some((e, i)) = &sup.ensemble {
                e.leave(*i);
            }
        })?;
    Ok((shared, thread))
}

fn epoll_add(ep: RawFd, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: valid epoll_event.
    if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[derive(Debug)]
enum Kind {
    Sleep,
    Futex {
        uaddr: u64,
        bitset: u32,
    },
    Epoll {
        dup: OwnedFd,
        events: u64,
        max: usize,
    },
    Poll {
        out: PollOut,
        pollfds: Vec<libc::pollfd>,
        dups: Vec<Option<OwnedFd>>,
    },
    /// Deterministic mode: a call the kernel would block in (a read of an
    /// empty pipe, `wait4` for a child still running), held until one of
    /// these descriptors (our duplicates, or pidfds of the children) is
    /// ready for `events`, then let through to the kernel, which no longer
    /// blocks.
    Blocked {
        dups: Vec<OwnedFd>,
        events: i16,
    },
    /// Deterministic mode: a blocking `write` to a pipe without room
    /// (its reader, a process of the program, runs only once this thread
    /// parks): held until the pipe has room, then written here without
    /// blocking, as much as fits (a short write, which writers loop on;
    /// see [`write_without_blocking`]).
    PipeWrite {
        dup: OwnedFd,
        addr: u64,
        len: usize,
    },
}

/// Deterministic mode: writes up to `len` bytes from the program's `addr`
/// to the pipe `dup` without blocking (its file's `O_NONBLOCK` set for the
/// call: no other thread of the program runs meanwhile). What fits is
/// written (all of a write of `PIPE_BUF` bytes or less, or none); an
/// error is the kernel's (`WouldBlock`: no room yet).
pub(super) fn write_without_blocking(
    tid: u32,
    dup: &OwnedFd,
    addr: u64,
    len: usize,
) -> io::Result<usize> {
    let raw = dup.as_raw_fd();
    // SAFETY: fcntl on our duplicate.
    let cap = unsafe { libc::fcntl(raw, libc::F_GETPIPE_SZ) };
    let n = len.min(if cap > 0 { cap as usize } else { 1 << 16 });
    let mut buf = vec![0u8; n];
    remote::read(tid, addr, &mut buf)?;
    // SAFETY: fcntl and write on our duplicate, from our buffer.
    unsafe {
        let fl = libc::fcntl(raw, libc::F_GETFL);
        if fl < 0 {
            return Err(io::Error::last_os_error());
        }
        libc::fcntl(raw, libc::F_SETFL, fl | libc::O_NONBLOCK);
        let r = libc::write(raw, buf.as_ptr().cast(), n);
        let e = io::Error::last_os_error();
        libc::fcntl(raw, libc::F_SETFL, fl);
        if r < 0 {
            Err(e)
        } else {
            Ok(r as usize)
        }
    }
}

/// Where a poll-like wait's result goes in the caller's memory.
#[derive(Debug, Clone, Copy)]
enum PollOut {
    /// `poll`/`ppoll`: the `struct pollfd` array.
    Array(u64),
    /// `select`/`pselect6`: the three descriptor sets (0 when absent), and
    /// for `select` the `struct timeval` the kernel updates.
    Sets {
        sets: [u64; 3],
        nfds: usize,
        timeval: u64,
    },
}

/// poll events that make a descriptor ready for each of select's sets
/// (read, write, except), as the kernel's `select` maps them.
const SELECT_IN: i16 =
    libc::POLLIN | libc::POLLRDNORM | libc::POLLRDBAND | libc::POLLHUP | libc::POLLERR;
const SELECT_OUT: i16 = libc::POLLOUT | libc::POLLWRNORM | libc::POLLWRBAND | libc::POLLERR;
const SELECT_EX: i16 = libc::POLLPRI;

#[derive(Debug)]
struct Held {
    id: u64,
    tid: u32,
    tgid: u32,
    seq: u64,
    /// Simulated realtime ns.
    deadline: u64,
    kind: Kind,
}

struct Supervisor {
    shared: Arc<Shared>,
    held: Vec<Held>,
    next_seq: u64,
    tgids: HashMap<u32, u32>,
    pidfds: HashMap<u32, OwnedFd>,
    rng: Option<SeededBytes>,
    /// Call sites of `nanosleep` seen so far: Go's `runtime.usleep` or not.
    go_usleep: HashMap<u64, bool>,
    /// Per process: where Go's runtime keeps its poller's deadline
    /// (`runtime.sched.lastpoll`, then `pollUntil`), or `None` (not Go, or
    /// not found); see [`Supervisor::go_poll_wait`].
    go_poll: HashMap<u32, Option<u64>>,
    /// [`go_poll_wanted`], when the supervisor started.
    go_poll_wanted: bool,
    /// The held set changed since it was last published.
    dirty: bool,
    /// Deterministic mode's scheduler.
    det: Option<det::Det>,
    /// Deterministic mode beside other programs: the baton they share, and
    /// this program's index among them.
    ensemble: Option<(super::Ensemble, usize)>,
}

/// The result of handling one call.
enum Answer {
    /// Return this value (>= 0) or error (errno > 0).
    Value(i64),
    Errno(i32),
    /// Let the kernel run the call as made.
    Continue,
    /// Held: the reply comes later.
    Held,
}

#[repr(C)]
#[derive(Default)]
struct Resp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

impl Supervisor {
    fn run(&mut self) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 32];
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return;
            }
            let timeout = self.loop_timeout_ms();
            // SAFETY: valid buffer of 32 events.
            let n = unsafe {
                libc::epoll_wait(
                    self.shared.ep.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    timeout,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                tracing::error!(error = %e, "seccomp supervisor: epoll_wait failed");
                return;
            }
            // While the controller delivers an instant (the page's gate),
            // nothing held is answered: then everything that became ready
            // meanwhile is taken with what woke us, so the program sees the
            // clock's move and the instant's I/O together.
            if n == 0 && self.det.is_some() {
                self.det_watch_stall();
            }
            let mut n = n as usize;
            let gated = self.pass_gate();
            if gated {
                if let Some(d) = self.det.as_mut() {
                    d.stale = true;
                }
            }
            if gated && n < events.len() {
                // SAFETY: the free tail of our buffer, no timeout.
                let more = unsafe {
                    libc::epoll_wait(
                        self.shared.ep.as_raw_fd(),
                        events.as_mut_ptr().add(n),
                        (events.len() - n) as i32,
                        0,
                    )
                };
                n += more.max(0) as usize;
            }
            // Raised before anything is consumed (see `Shared::pending`);
            // a sequentially consistent store is a full barrier on x86_64.
            self.shared.busy.store(true, Ordering::SeqCst);
            for ev in &events[..n] {
                let token = ev.u64;
                match token {
                    TOKEN_LISTENER => {
                        if ev.events & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0
                            && !self.listener_readable()
                        {
                            // Every supervised process has exited.
                            self.release_all();
                            self.publish();
                            self.shared.busy.store(false, Ordering::SeqCst);
                            return;
                        }
                        self.receive_all();
                    }
                    TOKEN_WAKE => {
                        if let Some(d) = self.det.as_mut() {
                            d.stale = true;
                        }
                        let mut buf = 0u64;
                        // SAFETY: 8-byte read from our nonblocking eventfd.
                        unsafe {
                            libc::read(
                                self.shared.wake.as_raw_fd(),
                                &mut buf as *mut u64 as *mut libc::c_void,
                                8,
                            )
                        };
                    }
                    TOKEN_BATON => {
                        let mut buf = 0u64;
                        // SAFETY: 8-byte read from our nonblocking eventfd.
                        unsafe {
                            libc::read(
                                self.shared.baton.as_raw_fd(),
                                &mut buf as *mut u64 as *mut libc::c_void,
                                8,
                            )
                        };
                    }
                    t if t >= TOKEN_HELD => self.io_ready(t - TOKEN_HELD),
                    _ => {}
                }
            }
            if self.det.is_some() {
                self.det_schedule();
            } else {
                self.release_due();
            }
            // A clock read changes nothing the controller looks at (the
            // stamp's count moved with the notification itself).
            if self.dirty {
                self.publish();
            }
            self.shared.busy.store(false, Ordering::SeqCst);
        }
    }

    /// Blocks while the page's gate is closed; whether it was.
    fn pass_gate(&self) -> bool {
        let gate = &self.shared.page().gate;
        let mut waited = false;
        loop {
            let g = gate.load(Ordering::Acquire);
            if g == 0 {
                return waited;
            }
            waited = true;
            // SAFETY: FUTEX_WAIT on a word of the shared mapping while it
            // holds the value read; the controller wakes it on opening.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    gate.as_ptr(),
                    libc::FUTEX_WAIT,
                    g,
                    std::ptr::null::<libc::timespec>(),
                    0,
                    0,
                )
            };
        }
    }

    fn now(&self) -> u64 {
        self.shared.page().snapshot().sim_realtime_ns(real_mono_ns)
    }

    /// How long the loop may sleep: forever with a frozen clock; until the
    /// earliest deadline in realtime mode.
    fn loop_timeout_ms(&self) -> i32 {
        if let Some(d) = &self.det {
            if d.retry {
                // Until the world outside may have settled (or 1 ms).
                crate::seccomp::progress::wait(d.settle_seen, std::time::Duration::from_millis(1));
                return 0;
            }
            if d.running().is_some() {
                // A look, every few seconds, at a thread that does not
                // come back (`det_watch_stall`).
                return det::STALL_LOOK_MS;
            }
        }
        let snap = self.shared.page().snapshot();
        if snap.mode == MODE_FROZEN {
            return -1;
        }
        let Some(d) = self.held.iter().map(|h| h.deadline).min() else {
            return -1;
        };
        let now = snap.sim_realtime_ns(real_mono_ns);
        (d.saturating_sub(now).div_ceil(1_000_000)).min(i32::MAX as u64) as i32
    }

    /// Receives and answers notifications until none is waiting. Each RECV
    /// is preceded by a look: a notification whose caller was interrupted
    /// meanwhile vanishes, and a RECV would then block the supervisor.
    fn receive_all(&mut self) {
        loop {
            if !self.listener_readable() {
                return;
            }
            let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            // SAFETY: RECV into a zeroed seccomp_notif of the kernel's size.
            let r = unsafe {
                libc::ioctl(
                    self.shared.listener.as_raw_fd(),
                    SECCOMP_IOCTL_NOTIF_RECV as _,
                    &mut req as *mut libc::seccomp_notif,
                )
            };
            self.shared.generation.fetch_add(1, Ordering::AcqRel);
            if r != 0 {
                // ENOENT: the caller was interrupted before we took it.
                continue;
            }
            if self.det.is_some() {
                self.det_receive(req);
                continue;
            }
            let answer = self.handle(&req);
            match answer {
                Answer::Held => {}
                Answer::Value(v) => {
                    self.reply(req.id, v, 0, 0);
                }
                Answer::Errno(e) => {
                    self.reply(req.id, 0, -e, 0);
                }
                Answer::Continue => {
                    self.reply(req.id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
                }
            }
        }
    }

    fn listener_readable(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.shared.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no timeout.
        unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLIN != 0 }
    }

    fn reply(&self, id: u64, val: i64, error: i32, flags: u32) -> bool {
        let mut resp = Resp {
            id,
            val,
            error,
            flags,
        };
        // SAFETY: SEND with a seccomp_notif_resp-shaped struct.
        let r = unsafe {
            libc::ioctl(
                self.shared.listener.as_raw_fd(),
                SECCOMP_IOCTL_NOTIF_SEND as _,
                &mut resp as *mut Resp,
            )
        };
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
        r == 0
    }

    fn id_valid(&self, id: u64) -> bool {
        let mut id = id;
        // SAFETY: ID_VALID reads one u64.
        unsafe {
            libc::ioctl(
                self.shared.listener.as_raw_fd(),
                SECCOMP_IOCTL_NOTIF_ID_VALID as _,
                &mut id as *mut u64,
            ) == 0
        }
    }

    fn tgid(&mut self, tid: u32) -> u32 {
        if let Some(&t) = self.tgids.get(&tid) {
            return t;
        }
        let t = remote::tgid_of(tid).unwrap_or(tid);
        self.tgids.insert(tid, t);
        t
    }

    /// Whether a `nanosleep` comes from Go's `runtime.usleep`, recognised by
    /// its code (the microseconds-to-timespec conversion, then
    /// `nanosleep(SP, NULL)`). The runtime sleeps so only to wait for other
    /// threads' progress (sysmon's polling, work stealing, waiting for a
    /// goroutine to stop): a computation, not a wait for simulated time, so
    /// it runs on real time. Held on a frozen clock, a thread stealing work
    /// would wait forever for an owner that waits for it. Go's timers
    /// (`time.Sleep`, tickers) never use it.
    fn is_go_runtime_usleep(&mut self, tid: u32, ip: u64) -> bool {
        /// `MOVL $1000, AX; MULL DX; MOVQ AX, 8(SP); MOVQ SP, DI;
        /// MOVL $0, SI; MOVL $SYS_nanosleep, AX; SYSCALL` (sys_linux_amd64.s).
        const GO_USLEEP: [u8; 27] = [
            0xb8, 0xe8, 0x03, 0x00, 0x00, 0xf7, 0xe2, 0x48, 0x89, 0x44, 0x24, 0x08, 0x48, 0x89,
            0xe7, 0xbe, 0x00, 0x00, 0x00, 0x00, 0xb8, 0x23, 0x00, 0x00, 0x00, 0x0f, 0x05,
        ];
        if let Some(&known) = self.go_usleep.get(&ip) {
            return known;
        }
        let mut code = [0u8; GO_USLEEP.len()];
        let hit = ip >= code.len() as u64
            && remote::read(tid, ip - code.len() as u64, &mut code).is_ok()
            && code == GO_USLEEP;
        self.go_usleep.insert(ip, hit);
        hit
    }

    /// How long to hold an `epoll_wait`/`epoll_pwait` of `timeout_ns` (whole
    /// milliseconds) under `--elide go-poller`: a Go poller's wait that
    /// would end before the timer it waits for is held a millisecond longer.
    ///
    /// Go's runtime waits for its earliest timer, due at `pollUntil`, in
    /// `epoll_pwait` for `(pollUntil - now) / 1 ms` milliseconds, rounded
    /// down (`runtime.netpoll`). Unless the timer is due on the
    /// millisecond, the wait ends before it: the runtime finds no timer due
    /// and waits again for the rest, which is less than a millisecond, so
    /// for exactly 1 ms (`delay < 1e6` gives 1). Holding the first wait
    /// until the second would end takes that wake-up's window away (a
    /// round trip, the other programs' quiescence checks). An I/O event in
    /// between ends the wait as it would have ended the second one.
    ///
    /// A model assumption, not a proof: the wake-up does more than wait
    /// again in some programs. In deterministic Volcano runs the exact run
    /// served a 1 s session at the timer's own instant (73.9992 s), the
    /// elided one up to 0.8 ms later (`experiments/README.md`, "Go's
    /// poller"); the runtime's other threads (sysmon's sleep until the next
    /// timer) see the poller's wake-ups. Hence opt-in.
    ///
    /// Used only when what is read is consistent: the caller's process is
    /// a Go program whose `runtime.sched` was found
    /// ([`super::gort::find_poll_until`]), `lastpoll` is 0 (a thread is in
    /// the poller's blocking wait, which is this one: timeouts of the
    /// poller's other calls are 0), and `pollUntil` lies strictly between
    /// the wait's end and a millisecond after it, as the rounding gives.
    fn go_poll_wait(&mut self, tid: u32, timeout_ns: u64) -> u64 {
        const MS: u64 = 1_000_000;
        if !self.go_poll_wanted || timeout_ns >= NO_DEADLINE / 2 {
            return timeout_ns;
        }
        let tgid = self.tgid(tid);
        let at = *self.go_poll.entry(tgid).or_insert_with(|| {
            let found = super::gort::find_poll_until(tgid);
            tracing::debug!(tgid, ?found, "seccomp supervisor: Go's poller deadline");
            found.ok().flatten()
        });
        let Some(at) = at else {
            return timeout_ns;
        };
        let mut both = [0u8; 16];
        if remote::read(tid, at, &mut both).is_err() {
            return timeout_ns;
        }
        let lastpoll = i64::from_le_bytes(both[..8].try_into().unwrap());
        let poll_until = i64::from_le_bytes(both[8..].try_into().unwrap());
        let Some(mono) = self.clock_ns(libc::CLOCK_MONOTONIC) else {
            return timeout_ns;
        };
        let end = mono.saturating_add(timeout_ns);
        tracing::trace!(
            tid,
            mono,
            timeout_ns,
            lastpoll,
            poll_until,
            "seccomp supervisor: Go's poller waits"
        );
        if lastpoll == 0
            && poll_until > 0
            && (poll_until as u64) > end
            && (poll_until as u64) < end + MS
        {
            crate::seccomp::EARLY_WAKES_PASSED.fetch_add(1, Ordering::Relaxed);
            timeout_ns + MS
        } else {
            timeout_ns
        }
    }

    fn remote_fd(&mut self, tid: u32, fd: i32) -> io::Result<OwnedFd> {
        let tgid = self.tgid(tid);
        if let std::collections::hash_map::Entry::Vacant(e) = self.pidfds.entry(tgid) {
            e.insert(remote::pidfd_open(tgid)?);
        }
        let r = remote::pidfd_getfd(self.pidfds[&tgid].as_raw_fd(), fd);
        if r.is_err() {
            // The process may have gone and its pid been reused: forget it.
            self.pidfds.remove(&tgid);
        }
        r
    }

    fn clock_ns(&self, clk: i32) -> Option<u64> {
        let snap = self.shared.page().snapshot();
        let rt = snap.sim_realtime_ns(real_mono_ns);
        match clk {
            libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_REALTIME_ALARM => {
                Some(rt)
            }
            libc::CLOCK_TAI => Some(rt + TAI_OFFSET_NS),
            libc::CLOCK_MONOTONIC
            | libc::CLOCK_MONOTONIC_RAW
            | libc::CLOCK_MONOTONIC_COARSE
            | libc::CLOCK_BOOTTIME
            | libc::CLOCK_BOOTTIME_ALARM => Some(rt.saturating_sub(snap.mono_offset_ns)),
            _ => None,
        }
    }

    /// An absolute time on `clk` as a simulated realtime deadline.
    fn abs_deadline(&self, clk: i32, abs: u64) -> Option<u64> {
        let snap = self.shared.page().snapshot();
        match clk {
            libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_REALTIME_ALARM => {
                Some(abs)
            }
            libc::CLOCK_TAI => Some(abs.saturating_sub(TAI_OFFSET_NS)),
            libc::CLOCK_MONOTONIC
            | libc::CLOCK_MONOTONIC_RAW
            | libc::CLOCK_MONOTONIC_COARSE
            | libc::CLOCK_BOOTTIME
            | libc::CLOCK_BOOTTIME_ALARM => Some(abs.saturating_add(snap.mono_offset_ns)),
            _ => None,
        }
    }

    fn handle(&mut self, req: &libc::seccomp_notif) -> Answer {
        let a = req.data.args;
        let tid = req.pid;
        let errno = |e: io::Error| Answer::Errno(e.raw_os_error().unwrap_or(libc::EFAULT));
        match req.data.nr as u32 {
            nr::CLOCK_GETTIME => {
                self.shared.clock_reads.fetch_add(1, Ordering::Relaxed);
                let Some(ns) = self.clock_ns(a[0] as i32) else {
                    return Answer::Continue;
                };
                match remote::write_timespec(tid, a[1], ns) {
                    Ok(()) => Answer::Value(0),
                    Err(e) => errno(e),
                }
            }
            nr::GETTIMEOFDAY => {
                self.shared.clock_reads.fetch_add(1, Ordering::Relaxed);
                let ns = self.now();
                if a[0] != 0 {
                    let mut b = [0u8; 16];
                    b[..8].copy_from_slice(&((ns / NS) as i64).to_ne_bytes());
                    b[8..].copy_from_slice(&(((ns % NS) / 1000) as i64).to_ne_bytes());
                    if let Err(e) = remote::write(tid, a[0], &b) {
                        return errno(e);
                    }
                }
                if a[1] != 0 {
                    if let Err(e) = remote::write(tid, a[1], &[0u8; 8]) {
                        return errno(e);
                    }
                }
                Answer::Value(0)
            }
            nr::TIME => {
                self.shared.clock_reads.fetch_add(1, Ordering::Relaxed);
                let secs = (self.now() / NS) as i64;
                if a[0] != 0 {
                    if let Err(e) = remote::write(tid, a[0], &secs.to_ne_bytes()) {
                        return errno(e);
                    }
                }
                Answer::Value(secs)
            }
            nr::NANOSLEEP if self.is_go_runtime_usleep(tid, req.data.instruction_pointer) => {
                Answer::Continue
            }
            nr::NANOSLEEP => match remote::read_timespec_ns(tid, a[0]) {
                Ok(0) => Answer::Value(0),
                Ok(d) => {
                    let deadline = self.now().saturating_add(d);
                    self.hold(req, deadline, Kind::Sleep)
                }
                Err(e) => errno(e),
            },
            nr::CLOCK_NANOSLEEP => {
                let clk = a[0] as i32;
                let Some(now) = self.clock_ns(clk) else {
                    return Answer::Continue;
                };
                let t = match remote::read_timespec_ns(tid, a[2]) {
                    Ok(t) => t,
                    Err(e) => return errno(e),
                };
                let deadline = if a[1] as i32 & libc::TIMER_ABSTIME != 0 {
                    self.abs_deadline(clk, t).unwrap_or(NO_DEADLINE)
                } else {
                    self.now().saturating_add(t)
                };
                let _ = now;
                if deadline <= self.now() {
                    return Answer::Value(0);
                }
                self.hold(req, deadline, Kind::Sleep)
            }
            nr::CONNECT => {
                self.count_connect(req);
                Answer::Continue
            }
            nr::FUTEX => self.futex(req),
            nr::EPOLL_WAIT | nr::EPOLL_PWAIT | nr::EPOLL_PWAIT2 => {
                let max = a[2] as i32;
                if max <= 0 {
                    return Answer::Errno(libc::EINVAL);
                }
                let timeout_ns = if req.data.nr as u32 == nr::EPOLL_PWAIT2 {
                    if a[3] == 0 {
                        NO_DEADLINE
                    } else {
                        match remote::read_timespec_ns(tid, a[3]) {
                            Ok(t) => t,
                            Err(e) => return errno(e),
                        }
                    }
                } else {
                    ms_timeout_ns(a[3])
                };
                if timeout_ns == 0 && self.det.is_none() {
                    return Answer::Continue;
                }
                let dup = match self.remote_fd(tid, a[0] as i32) {
                    Ok(d) => d,
                    Err(e) => return errno(e),
                };
                let kind = Kind::Epoll {
                    dup,
                    events: a[1],
                    max: (max as usize).min(1024),
                };
                if let Some(n) = self.collect(tid, &kind) {
                    return n;
                }
                if timeout_ns == 0 {
                    return Answer::Value(0); // a poll: nothing ready
                }
                let timeout_ns = if req.data.nr as u32 == nr::EPOLL_PWAIT2 {
                    timeout_ns
                } else {
                    self.go_poll_wait(tid, timeout_ns)
                };
                let deadline = self.now().saturating_add(timeout_ns);
                self.hold(req, deadline, kind)
            }
            nr::POLL | nr::PPOLL => {
                let nfds = a[1] as usize;
                if nfds > 65536 {
                    return Answer::Errno(libc::EINVAL);
                }
                let timeout_ns = if req.data.nr as u32 == nr::PPOLL {
                    if a[2] == 0 {
                        NO_DEADLINE
                    } else {
                        match remote::read_timespec_ns(tid, a[2]) {
                            Ok(t) => t,
                            Err(e) => return errno(e),
                        }
                    }
                } else {
                    ms_timeout_ns(a[2])
                };
                let mut raw = vec![0u8; nfds * 8];
                if let Err(e) = remote::read(tid, a[0], &mut raw) {
                    return errno(e);
                }
                let pollfds: Vec<libc::pollfd> = raw
                    .chunks_exact(8)
                    .map(|c| libc::pollfd {
                        fd: i32::from_ne_bytes(c[0..4].try_into().expect("4 bytes")),
                        events: i16::from_ne_bytes(c[4..6].try_into().expect("2 bytes")),
                        revents: 0,
                    })
                    .collect();
                let dups = pollfds
                    .iter()
                    .map(|p| {
                        if p.fd < 0 {
                            None
                        } else {
                            self.remote_fd(tid, p.fd).ok()
                        }
                    })
                    .collect();
                let kind = Kind::Poll {
                    out: PollOut::Array(a[0]),
                    pollfds,
                    dups,
                };
                self.ready_or_hold(req, kind, timeout_ns)
            }
            nr::SELECT | nr::PSELECT6 => {
                let nfds = a[0] as i32;
                if !(0..=libc::FD_SETSIZE as i32).contains(&nfds) {
                    return Answer::Errno(libc::EINVAL);
                }
                let nfds = nfds as usize;
                let timeout_ns = if a[4] == 0 {
                    Ok(NO_DEADLINE)
                } else if req.data.nr as u32 == nr::PSELECT6 {
                    remote::read_timespec_ns(tid, a[4])
                } else {
                    remote::read_timeval_ns(tid, a[4])
                };
                let timeout_ns = match timeout_ns {
                    Ok(t) => t,
                    Err(e) => return errno(e),
                };
                let words = nfds.div_ceil(64);
                let sets = [a[1], a[2], a[3]];
                let mut bits = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
                for (set, b) in sets.iter().zip(bits.iter_mut()) {
                    if *set == 0 {
                        continue;
                    }
                    let mut raw = vec![0u8; words * 8];
                    if let Err(e) = remote::read(tid, *set, &mut raw) {
                        return errno(e);
                    }
                    for (w, c) in b.iter_mut().zip(raw.chunks_exact(8)) {
                        *w = u64::from_ne_bytes(c.try_into().expect("8 bytes"));
                    }
                }
                let mut pollfds = Vec::new();
                for fd in 0..nfds {
                    let has = |b: &Vec<u64>| b[fd / 64] >> (fd % 64) & 1 == 1;
                    let mut events = 0;
                    if has(&bits[0]) {
                        events |= libc::POLLIN;
                    }
                    if has(&bits[1]) {
                        events |= libc::POLLOUT;
                    }
                    if has(&bits[2]) {
                        events |= libc::POLLPRI;
                    }
                    if events != 0 {
                        pollfds.push(libc::pollfd {
                            fd: fd as i32,
                            events,
                            revents: 0,
                        });
                    }
                }
                let mut dups = Vec::with_capacity(pollfds.len());
                for p in &pollfds {
                    match self.remote_fd(tid, p.fd) {
                        Ok(d) => dups.push(Some(d)),
                        // select, unlike poll, fails on a closed descriptor.
                        Err(_) => return Answer::Errno(libc::EBADF),
                    }
                }
                let timeval = if req.data.nr as u32 == nr::SELECT {
                    a[4]
                } else {
                    0
                };
                let kind = Kind::Poll {
                    out: PollOut::Sets {
                        sets,
                        nfds,
                        timeval,
                    },
                    pollfds,
                    dups,
                };
                self.ready_or_hold(req, kind, timeout_ns)
            }
            nr::GETRANDOM => {
                let Some(rng) = self.rng.as_mut() else {
                    return Answer::Continue;
                };
                let len = (a[1] as usize).min(1 << 20);
                let mut buf = vec![0u8; len];
                rng.fill(&mut buf);
                match remote::write(tid, a[0], &buf) {
                    Ok(()) => Answer::Value(len as i64),
                    Err(e) => errno(e),
                }
            }
            _ => Answer::Continue,
        }
    }

    /// A poll-like wait: answered at once if something is ready or it only
    /// polls, else held until ready or the simulated deadline.
    fn ready_or_hold(&mut self, req: &libc::seccomp_notif, kind: Kind, timeout_ns: u64) -> Answer {
        if let Some(n) = self.collect(req.pid, &kind) {
            return n;
        }
        if timeout_ns == 0 {
            return Answer::Continue;
        }
        let deadline = self.now().saturating_add(timeout_ns);
        self.hold(req, deadline, kind)
    }

    fn futex(&mut self, req: &libc::seccomp_notif) -> Answer {
        let a = req.data.args;
        let tid = req.pid;
        let op = a[1] as i32;
        let cmd = op & 0x7f;
        let realtime = op & libc::FUTEX_CLOCK_REALTIME != 0;
        let tgid = self.tgid(tid);
        match cmd {
            libc::FUTEX_WAIT | libc::FUTEX_WAIT_BITSET => {
                self.shared.waits.fetch_add(1, Ordering::Relaxed);
                let bitset = if cmd == libc::FUTEX_WAIT {
                    u32::MAX
                } else {
                    a[5] as u32
                };
                if bitset == 0 {
                    return Answer::Errno(libc::EINVAL);
                }
                // No timeout: only a deterministic run notifies such waits.
                let deadline = if a[3] == 0 {
                    NO_DEADLINE
                } else {
                    let t = match remote::read_timespec_ns(tid, a[3]) {
                        Ok(t) => t,
                        Err(e) => return Answer::Errno(e.raw_os_error().unwrap_or(libc::EFAULT)),
                    };
                    if cmd == libc::FUTEX_WAIT {
                        self.now().saturating_add(t)
                    } else {
                        let clk = if realtime {
                            libc::CLOCK_REALTIME
                        } else {
                            libc::CLOCK_MONOTONIC
                        };
                        self.abs_deadline(clk, t).unwrap_or(NO_DEADLINE)
                    }
                };
                // The kernel's check: block only if the word still holds `val`.
                match remote::read_u32(tid, a[0]) {
                    Ok(v) if v != a[2] as u32 => return Answer::Errno(libc::EAGAIN),
                    Ok(_) => {}
                    Err(e) => return Answer::Errno(e.raw_os_error().unwrap_or(libc::EFAULT)),
                }
                if !self.id_valid(req.id) {
                    return Answer::Held; // gone; nothing to answer
                }
                if deadline <= self.now() {
                    return Answer::Errno(libc::ETIMEDOUT);
                }
                self.hold(
                    req,
                    deadline,
                    Kind::Futex {
                        uaddr: a[0],
                        bitset,
                    },
                )
            }
            libc::FUTEX_WAKE | libc::FUTEX_WAKE_BITSET => {
                self.shared.wakes.fetch_add(1, Ordering::Relaxed);
                let n = (a[2] as i32).max(0) as usize;
                let mask = if cmd == libc::FUTEX_WAKE {
                    u32::MAX
                } else {
                    a[5] as u32
                };
                let woken = self.wake_futex(tgid, a[0], mask, n);
                if n > 0 && woken >= n {
                    Answer::Value(woken as i64)
                } else {
                    Answer::Continue
                }
            }
            libc::FUTEX_WAKE_OP | libc::FUTEX_REQUEUE | libc::FUTEX_CMP_REQUEUE => {
                self.shared.wakes.fetch_add(1, Ordering::Relaxed);
                // Held waiters of either word wake up (a spurious wake-up,
                // which futex users must tolerate), then the kernel does the rest.
                self.wake_futex(tgid, a[0], u32::MAX, usize::MAX);
                if cmd == libc::FUTEX_WAKE_OP {
                    self.wake_futex(tgid, a[4], u32::MAX, usize::MAX);
                }
                Answer::Continue
            }
            _ => Answer::Continue,
        }
    }

    /// Releases up to `n` held waiters of (`tgid`, `uaddr`) matching `mask`,
    /// oldest first.
    fn wake_futex(&mut self, tgid: u32, uaddr: u64, mask: u32, n: usize) -> usize {
        let mut woken = 0;
        let mut i = 0;
        while i < self.held.len() && woken < n {
            let h = &self.held[i];
            let hit = h.tgid == tgid
                && matches!(h.kind, Kind::Futex { uaddr: u, bitset } if u == uaddr && bitset & mask != 0);
            if hit {
                let h = self.held.remove(i);
                self.dirty = true;
                if self.det.is_some() {
                    self.finish(h, Answer::Value(0));
                    woken += 1;
                } else if self.reply(h.id, 0, 0, 0) {
                    woken += 1;
                }
            } else {
                i += 1;
            }
        }
        woken
    }

    fn hold(&mut self, req: &libc::seccomp_notif, deadline: u64, kind: Kind) -> Answer {
        self.shared.waits.fetch_add(1, Ordering::Relaxed);
        let seq = self.next_seq;
        self.next_seq += 1;
        let ep = self.shared.ep.as_raw_fd();
        match &kind {
            Kind::Epoll { dup, .. }
                if epoll_add(ep, dup.as_raw_fd(), libc::EPOLLIN as u32, TOKEN_HELD + seq)
                    .is_err() =>
            {
                return Answer::Continue;
            }
            Kind::Poll { pollfds, dups, .. } => {
                for (p, d) in pollfds.iter().zip(dups) {
                    if let Some(d) = d {
                        let ev = (p.events as u32)
                            & (libc::EPOLLIN | libc::EPOLLPRI | libc::EPOLLOUT | libc::EPOLLRDHUP)
                                as u32;
                        let _ = epoll_add(ep, d.as_raw_fd(), ev, TOKEN_HELD + seq);
                    }
                }
            }
            Kind::Blocked { dups, events } => {
                for d in dups {
                    let _ = epoll_add(ep, d.as_raw_fd(), *events as u16 as u32, TOKEN_HELD + seq);
                }
            }
            Kind::PipeWrite { dup, .. } => {
                let _ = epoll_add(ep, dup.as_raw_fd(), libc::EPOLLOUT as u32, TOKEN_HELD + seq);
            }
            _ => {}
        }
        let tgid = self.tgid(req.pid);
        self.dirty = true;
        self.held.push(Held {
            id: req.id,
            tid: req.pid,
            tgid,
            seq,
            deadline,
            kind,
        });
        Answer::Held
    }

    /// Ready events of an epoll or poll wait, written into the caller's
    /// memory; `None` when nothing is ready.
    fn collect(&self, tid: u32, kind: &Kind) -> Option<Answer> {
        match kind {
            Kind::Epoll { dup, events, max } => {
                let mut buf = vec![libc::epoll_event { events: 0, u64: 0 }; *max];
                // SAFETY: buffer of `max` events; no timeout.
                let n =
                    unsafe { libc::epoll_wait(dup.as_raw_fd(), buf.as_mut_ptr(), *max as i32, 0) };
                if n <= 0 {
                    return None;
                }
                let n = n as usize;
                if self.det.is_some() {
                    // The kernel lists ready descriptors in the order they
                    // became ready, which the other end's timing decides:
                    // a deterministic run gets them in the order of their
                    // user data (Go's: its poll descriptors' addresses,
                    // the same on every run).
                    buf[..n].sort_by_key(|e| ({ e.u64 }, { e.events }));
                }
                // SAFETY: epoll_event is a packed 12-byte struct on x86_64;
                // viewing the filled prefix as bytes.
                let bytes = unsafe {
                    std::slice::from_raw_parts(
                        buf.as_ptr() as *const u8,
                        n * std::mem::size_of::<libc::epoll_event>(),
                    )
                };
                // Events already taken from the instance: if the caller's
                // buffer is gone there is no one left to give them to.
                Some(match remote::write(tid, *events, bytes) {
                    Ok(()) => Answer::Value(n as i64),
                    Err(e) => Answer::Errno(e.raw_os_error().unwrap_or(libc::EFAULT)),
                })
            }
            Kind::Poll { out, pollfds, dups } => {
                let mut local: Vec<libc::pollfd> = pollfds
                    .iter()
                    .zip(dups)
                    .map(|(p, d)| libc::pollfd {
                        fd: d.as_ref().map_or(-1, |d| d.as_raw_fd()),
                        events: p.events,
                        revents: 0,
                    })
                    .collect();
                // SAFETY: valid array of pollfds; no timeout.
                let r = unsafe { libc::poll(local.as_mut_ptr(), local.len() as _, 0) };
                let mut ready = r.max(0) as i64;
                for (l, (p, d)) in local.iter_mut().zip(pollfds.iter().zip(dups)) {
                    if p.fd >= 0 && d.is_none() {
                        l.revents = libc::POLLNVAL;
                        ready += 1;
                    }
                }
                if ready == 0 {
                    return None;
                }
                let revents: Vec<i16> = local.iter().map(|l| l.revents).collect();
                let answer = write_poll_result(tid, *out, pollfds, &revents);
                match answer {
                    Answer::Value(0) => None, // ready for none of the sets asked
                    a => Some(a),
                }
            }
            Kind::Blocked { dups, events } => {
                let mut local: Vec<libc::pollfd> = dups
                    .iter()
                    .map(|d| libc::pollfd {
                        fd: d.as_raw_fd(),
                        events: *events,
                        revents: 0,
                    })
                    .collect();
                // SAFETY: valid array of pollfds; no timeout.
                let r = unsafe { libc::poll(local.as_mut_ptr(), local.len() as _, 0) };
                (r != 0).then_some(Answer::Continue)
            }
            Kind::PipeWrite { dup, addr, len } => {
                match write_without_blocking(tid, dup, *addr, *len) {
                    Ok(n) => Some(Answer::Value(n as i64)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                    // (EPIPE: the kernel's write says it, with its SIGPIPE)
                    Err(_) => Some(Answer::Continue),
                }
            }
            _ => None,
        }
    }

    fn io_ready(&mut self, seq: u64) {
        if let Some(d) = self.det.as_mut() {
            // Looked at by the next decision, once the world is settled.
            // Not an epoch: when the kernel tells us is timing, and the
            // epoch decides when a yielded thread goes again.
            d.stale = true;
            return;
        }
        let Some(i) = self.held.iter().position(|h| h.seq == seq) else {
            return;
        };
        super::testing::ready_delay();
        let h = &self.held[i];
        if let Some(answer) = self.collect(h.tid, &h.kind) {
            let h = self.held.remove(i);
            self.dirty = true;
            self.finish(h, answer);
        }
    }

    fn finish(&mut self, h: Held, answer: Answer) {
        if self.det.is_some() {
            self.unwatch(&h);
            return self.det_release(h.id, h.tid, answer);
        }
        let (val, err) = match answer {
            Answer::Value(v) => (v, 0),
            Answer::Errno(e) => (0, -e),
            _ => (0, 0),
        };
        self.unwatch(&h);
        self.reply(h.id, val, err, 0);
    }

    fn unwatch(&self, h: &Held) {
        let ep = self.shared.ep.as_raw_fd();
        let del = |fd: RawFd| {
            // SAFETY: removing a descriptor we added (an error is harmless).
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
        };
        match &h.kind {
            Kind::Epoll { dup, .. } => del(dup.as_raw_fd()),
            Kind::Poll { dups, .. } => dups.iter().flatten().for_each(|d| del(d.as_raw_fd())),
            Kind::Blocked { dups, .. } => dups.iter().for_each(|d| del(d.as_raw_fd())),
            Kind::PipeWrite { dup, .. } => del(dup.as_raw_fd()),
            _ => {}
        }
    }

    /// Replies to every held wait whose deadline has come.
    fn release_due(&mut self) {
        let now = self.now();
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].deadline <= now {
                let h = self.held.remove(i);
                self.dirty = true;
                self.dirty = true;
                let answer = match &h.kind {
                    Kind::Sleep => Answer::Value(0),
                    Kind::Futex { .. } => Answer::Errno(libc::ETIMEDOUT),
                    Kind::Epoll { .. } => self.collect(h.tid, &h.kind).unwrap_or(Answer::Value(0)),
                    Kind::Blocked { .. } | Kind::PipeWrite { .. } => Answer::Continue,
                    Kind::Poll { out, pollfds, .. } => {
                        self.collect(h.tid, &h.kind).unwrap_or_else(|| {
                            write_poll_result(h.tid, *out, pollfds, &vec![0; pollfds.len()])
                        })
                    }
                };
                self.finish(h, answer);
            } else {
                i += 1;
            }
        }
    }

    fn release_all(&mut self) {
        self.dirty = true;
        for h in std::mem::take(&mut self.held) {
            self.finish(h, Answer::Errno(libc::EINTR));
        }
    }

    /// Drops held waits whose caller went away (a signal interrupted it),
    /// then publishes the earliest deadline and wakes a waiting controller.
    fn publish(&mut self) {
        self.dirty = false;
        let mut i = 0;
        while i < self.held.len() {
            if self.id_valid(self.held[i].id) {
                i += 1;
            } else {
                let h = self.held.remove(i);
                self.dirty = true;
                self.dirty = true;
                self.unwatch(&h);
            }
        }
        let earliest = self
            .held
            .iter()
            // The program's own process; in deterministic mode, whose
            // quiescence covers them, its children's too (a shell's `sleep`).
            .filter(|h| self.det.is_some() || h.tgid == self.shared.pid)
            .map(|h| h.deadline)
            .min()
            .unwrap_or(NO_DEADLINE);
        self.shared.earliest.store(earliest, Ordering::Release);
        self.shared
            .held
            .store(self.held.len() as u32, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
        // In deterministic mode the controller waits for `det_quiet` (its
        // probe says "not quiescent" at once otherwise): waking it for
        // every decision would only take a CPU from the program.
        if !self.shared.deterministic || self.shared.det_quiet.load(Ordering::Acquire) {
            self.shared.page().wake_waiting_controller();
        }
    }
}

/// Writes a poll-like wait's result into the caller's memory and answers
/// as the kernel would: for `poll`, the array with the new `revents` and
/// the count of entries with any; for `select`, the three sets reduced to
/// the ready descriptors, the count of bits set, and (for `select`) the
/// time left, zero when nothing was ready.
fn write_poll_result(tid: u32, out: PollOut, fds: &[libc::pollfd], revents: &[i16]) -> Answer {
    let result = match out {
        PollOut::Array(addr) => {
            let mut raw = Vec::with_capacity(fds.len() * 8);
            for (p, r) in fds.iter().zip(revents) {
                raw.extend_from_slice(&p.fd.to_ne_bytes());
                raw.extend_from_slice(&p.events.to_ne_bytes());
                raw.extend_from_slice(&r.to_ne_bytes());
            }
            let ready = revents.iter().filter(|r| **r != 0).count() as i64;
            remote::write(tid, addr, &raw).map(|()| ready)
        }
        PollOut::Sets {
            sets,
            nfds,
            timeval,
        } => (|| {
            let words = nfds.div_ceil(64);
            let mut bits = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
            let mut ready = 0i64;
            for (p, r) in fds.iter().zip(revents) {
                let fd = p.fd as usize;
                for (i, mask) in [(0, SELECT_IN), (1, SELECT_OUT), (2, SELECT_EX)] {
                    let asked = [libc::POLLIN, libc::POLLOUT, libc::POLLPRI][i];
                    if p.events & asked != 0 && r & mask != 0 {
                        bits[i][fd / 64] |= 1 << (fd % 64);
                        ready += 1;
                    }
                }
            }
            if ready == 0 && revents.iter().any(|r| *r != 0) {
                return Ok(0); // ready for nothing asked: keep waiting
            }
            for (addr, b) in sets.iter().zip(&bits) {
                if *addr != 0 {
                    let raw: Vec<u8> = b.iter().flat_map(|w| w.to_ne_bytes()).collect();
                    remote::write(tid, *addr, &raw)?;
                }
            }
            if timeval != 0 && ready == 0 {
                remote::write(tid, timeval, &[0u8; 16])?;
            }
            Ok(ready)
        })(),
    };
    match result {
        Ok(n) => Answer::Value(n),
        Err(e) => Answer::Errno(e.raw_os_error().unwrap_or(libc::EFAULT)),
    }
}

/// Whether Go's poller's early wake-ups are passed over
/// ([`Supervisor::go_poll_wait`]): when [`crate::set_go_poller_elision`]
/// said so, or `TIMESHIM_GO_EARLY_WAKE=pass` (`=keep` never).
fn go_poll_wanted() -> bool {
    match std::env::var("TIMESHIM_GO_EARLY_WAKE").as_deref() {
        Ok("pass") => true,
        Ok("keep") => false,
        _ => super::GO_POLLER_ELISION.load(Ordering::Relaxed),
    }
}

/// An `int` timeout in milliseconds: negative waits without one.
fn ms_timeout_ns(arg: u64) -> u64 {
    let ms = arg as i32;
    if ms < 0 {
        NO_DEADLINE
    } else {
        ms as u64 * 1_000_000
    }
}

fn real_mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer (this process has no page: real clock).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * NS + ts.tv_nsec as u64
}
