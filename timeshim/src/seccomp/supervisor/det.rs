//! Deterministic execution (`--deterministic`): the supervised program's
//! threads run one at a time, and which one runs next is decided here, from
//! the program's own state and a seed, never by the OS's scheduler.
//!
//! Under the deterministic filter every system call but a few local ones
//! (`filter::DETERMINISTIC_ALLOW`) is a notification, so a thread runs user
//! code only between two of its calls that the supervisor let through. At
//! any time at most one thread is *running*: the one released last. Its
//! calls are answered at once while they neither block nor observe another
//! thread or the network (a clock read, a write, a futex wake); a call that
//! blocks (a futex wait, a timed or untimed poll, a sleep) or yields
//! (`sched_yield`, Go's `runtime.usleep`) parks it, and a call that looks at
//! what others did (a read, a poll, `connect`, `accept`) is *deferred*: it is
//! answered at the next decision, after the world outside has settled.
//!
//! A **decision** is taken once no thread runs and no new thread is on its
//! way (a `clone` is followed by its child's first call, `gettid` for Go,
//! `rseq` or `set_robust_list` for glibc). It takes, in this order: the
//! deferred calls (after the **settle**: the controller's hook says that
//! nothing the program sent is still being answered, no byte is in flight
//! and the controller has reacted to every change; the gate is open and
//! cannot close meanwhile), the timed waits that are due, the waits whose
//! descriptors are ready, in thread order. Among the threads then ready to
//! go, a seeded generator picks one; threads are named by the order in which
//! they were first seen, which is the same on every run. A thread that
//! yielded goes again once another thread has run, or the clock moved, or
//! something arrived. Nothing ready and nothing due: the program is
//! quiescent, and says so exactly (`Shared::det_quiet`).
//!
//! A program busy at one instant past the **busy bound**
//! (`crate::set_spin_bound`: calls since it was last quiet, last sent on a
//! socket it connected, or saw the clock move) is spinning: its ready
//! threads are held, it is quiet, and they go on once the clock has moved.
//! Until it is quiet of its own accord, it is held again after a
//! sixteenth of the bound (`crate::SPIN_REHOLD_DIVISOR`).
//!
//! Futexes are emulated (wait queues here, in the order waiters came), so
//! a wake releases a waiter into the ready set rather than onto a CPU.
//! Signals a thread sends to another are delivered when the target is
//! released (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`).
//!
//! Calls the kernel would block in until another thread or process of the
//! program has run (a read of an empty pipe, `wait4`, a `vfork` parent, a
//! thread's exit futex that `pthread_join` waits on) are held here too.
//!
//! Limits (see `timeshim/README.md`): other calls left to the kernel that
//! block there (a write to a full pipe) stall the program (reported after
//! 10 s, `det_watch_stall`), as does a thread that spins on memory another
//! thread must change without ever making a system call; the time stamp
//! counter (`rdtsc`) is not trapped outside Go's runtime.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering;

use std::os::fd::AsRawFd;

use super::{nr, remote, Answer, Kind, Supervisor};

/// Whether process `pid` has ended (a zombie), or is gone.
fn is_zombie(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// The processes whose parent is a thread of `tgid` (its threads'
/// `/proc/…/children`).
fn children_of(tgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{tgid}/task")) else {
        return out;
    };
    for e in dir.flatten() {
        if let Ok(text) = std::fs::read_to_string(e.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|w| w.parse::<u32>().ok()),
            );
        }
    }
    out.sort_unstable();
    out
}

static TRACE: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| std::env::var_os("TIMESHIM_DET_TRACE").is_some());
static PEEK: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| std::env::var_os("TIMESHIM_DET_PEEK").is_some());

/// System call numbers (x86_64) the deterministic mode treats specially.
mod call {
    pub const READ: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const CLOSE: u32 = 3;
    pub const IOCTL: u32 = 16;
    pub const READV: u32 = 19;
    pub const WRITEV: u32 = 20;
    pub const SCHED_YIELD: u32 = 24;
    pub const PAUSE: u32 = 34;
    pub const WAIT4: u32 = 61;
    pub const RT_SIGSUSPEND: u32 = 130;
    pub const WAITID: u32 = 247;
    pub const CONNECT: u32 = 42;
    pub const BIND: u32 = 49;
    pub const GETSOCKNAME: u32 = 51;
    pub const GETPEERNAME: u32 = 52;
    pub const ACCEPT: u32 = 43;
    pub const SENDTO: u32 = 44;
    pub const RECVFROM: u32 = 45;
    pub const SENDMSG: u32 = 46;
    pub const RECVMSG: u32 = 47;
    pub const SHUTDOWN: u32 = 48;
    pub const GETSOCKOPT: u32 = 55;
    pub const CLONE: u32 = 56;
    pub const FORK: u32 = 57;
    pub const VFORK: u32 = 58;
    pub const EXIT: u32 = 60;
    pub const EXIT_GROUP: u32 = 231;
    pub const ACCEPT4: u32 = 288;
    pub const RECVMMSG: u32 = 299;
    pub const SENDMMSG: u32 = 307;
    pub const CLONE3: u32 = 435;
    pub const TKILL: u32 = 200;
    pub const TGKILL: u32 = 234;
    pub const ALARM: u32 = 37;
    pub const SETITIMER: u32 = 38;
    pub const TIMER_SETTIME: u32 = 223;
    pub const TIMERFD_SETTIME: u32 = 286;
    pub const IO_URING_SETUP: u32 = 425;
}

/// What [`Supervisor::det_pipe_write`] did with a write.
enum PipeWrite {
    /// Nothing: the kernel answers it without blocking.
    Kernel,
    /// Wrote this many bytes for it.
    Wrote(usize),
    /// No room: the wait to hold.
    Hold(Kind),
}

/// A parked thread the next decision may release.
#[derive(Clone, Copy)]
pub(super) struct Ready {
    pub tid: u32,
    /// For a yielded thread: the epoch at which it yielded.
    pub epoch: u64,
    pub go: Go,
}

/// How a picked thread goes on.
#[derive(Clone, Copy)]
pub(super) enum Go {
    /// With this reply.
    Reply {
        id: u64,
        val: i64,
        err: i32,
        flags: u32,
    },
    /// Its call is handled when it is picked, as if made then.
    Call(libc::seccomp_notif),
}

#[derive(Default)]
pub(super) struct Det {
    /// Thread id -> the order in which it was first seen.
    index: HashMap<u32, u32>,
    next_index: u32,
    /// The thread released last, until its next notification.
    running: Option<u32>,
    /// Children of a `clone` (or fork) not seen yet.
    in_transit: u32,
    /// Released by a decision: answer ready.
    pub ready: Vec<Ready>,
    /// Yielded: released once the epoch moved past theirs.
    yielded: Vec<Ready>,
    /// Calls to handle at the next decision, after the settle.
    deferred: Vec<libc::seccomp_notif>,
    /// Bumped whenever a thread is released or the world outside moves.
    epoch: u64,
    /// The world outside as last taken in (gate closings, the clock): when
    /// it differs at an evaluation, the world moved (a new epoch).
    seen_world: (u64, u64),
    /// The picks' generator.
    rng: crate::seccomp::SeededBytes,
    /// Something may have become ready since the last evaluation: held
    /// waits are looked at again at the next decision.
    pub stale: bool,
    /// The last decision found nothing to do.
    quiet: bool,
    /// A settle that did not hold yet: the supervisor loop comes back soon.
    pub retry: bool,
    /// The progress word when the last settle was asked.
    pub settle_seen: u32,
    /// Picked, waiting for the settle before its call is handled.
    chosen: Option<Ready>,
    /// A thread that made a `clone`: its next call is a decision whether
    /// its child's first call came before it or not.
    parent: Option<u32>,
    /// A thread just sent a signal: it goes next, to take it.
    priority: Option<u32>,
    /// Beside other programs (an ensemble): this program holds the baton.
    has_baton: bool,
    /// The ensemble's generation this program's state was last looked at.
    seen_gen: u64,
    /// Processes of the program that called `exit_group`: the next
    /// decision waits until each has ended (a parent's `wait4` then finds
    /// it ended on every run).
    exiting: Vec<std::os::fd::OwnedFd>,
    /// A thread in `vfork` (or `clone` with `CLONE_VFORK`), and its child
    /// once seen.
    vfork: Option<Vfork>,
    /// Threads seen, then gone through `exit` (no longer in `index`).
    exited: std::collections::HashSet<u32>,
    /// Stalls reported (`det_watch_stall`): thread, system call.
    stall_warned: std::collections::HashSet<(u32, i64)>,
    /// The `CLONE_CHILD_CLEARTID` word of the thread being created.
    pending_ctid: Option<u64>,
    /// Threads' `CLONE_CHILD_CLEARTID` words.
    clear_tid: HashMap<u32, u64>,
    /// Calls received since the program last sent on a socket, was quiet,
    /// or saw the clock move.
    busy_calls: u64,
    /// Descriptors the program connected (process, descriptor), until
    /// closed: a write on one is a send to the world outside.
    sockets: std::collections::HashSet<(u32, i32)>,
    /// The busy bound (`crate::set_spin_bound`), 0 for none.
    spin_bound: u64,
    /// Held at the busy bound: ready, and released when the clock moves.
    spinning: Vec<Ready>,
    /// Held at the busy bound since it was last quiet with nothing held: a
    /// spinner, held again after a [`crate::SPIN_REHOLD_DIVISOR`]th of the
    /// bound.
    spun: bool,
    /// Threads that called `exit` with such a word: process, thread, word.
    thread_exits: Vec<(u32, u32, u64)>,
}

#[derive(Clone, Copy)]
struct Vfork {
    parent: u32,
    child: Option<u32>,
}

/// How often (wall ms) the supervisor looks at a released thread that has
/// made no call since.
pub(super) const STALL_LOOK_MS: i32 = 10_000;

impl Det {
    /// The thread released last, until its next call.
    pub fn running(&self) -> Option<u32> {
        self.running
    }

    pub fn new(seed: u64) -> Det {
        Det {
            rng: crate::seccomp::SeededBytes::new(seed ^ 0x6465_7465_726d_696e),
            stale: true,
            spin_bound: crate::seccomp::SPIN_BOUND.load(Ordering::Relaxed),
            ..Det::default()
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        self.rng.below(n)
    }

    fn index_of(&self, tid: u32) -> u32 {
        self.index.get(&tid).copied().unwrap_or(u32::MAX)
    }

    /// The program was quiet, or the clock moved: the busy count starts
    /// again (the most it reached, unless it has spun, is kept for
    /// `crate::spin_stats`).
    fn busy_ends(&mut self) {
        if !self.spun {
            crate::seccomp::BUSIEST.fetch_max(self.busy_calls, Ordering::Relaxed);
        }
        self.busy_calls = 0;
    }

    /// The busy bound now: the whole one, or, for a program that has spun
    /// and not been quiet since, a [`crate::SPIN_REHOLD_DIVISOR`]th of it.
    fn bound(&self) -> u64 {
        if self.spun {
            (self.spin_bound / crate::SPIN_REHOLD_DIVISOR).max(1)
        } else {
            self.spin_bound
        }
    }
}

/// Which calls wait for the settle: those that look at what others did,
/// and those that send (the other end then takes each send after it has
/// done all it could with the previous ones, in the program's order).
fn observes(nr_: u32) -> bool {
    sends(nr_)
        || matches!(
            nr_,
            call::READ
                | call::READV
                | call::RECVFROM
                | call::RECVMSG
                | call::RECVMMSG
                | call::ACCEPT
                | call::ACCEPT4
                | call::CONNECT
                | call::GETSOCKOPT
                | call::IOCTL
        )
        || matches!(
            nr_,
            nr::EPOLL_WAIT
                | nr::EPOLL_PWAIT
                | nr::EPOLL_PWAIT2
                | nr::POLL
                | nr::PPOLL
                | nr::SELECT
                | nr::PSELECT6
        )
}

/// Calls after which bytes may be on their way to the API.
fn sends(nr_: u32) -> bool {
    matches!(
        nr_,
        call::WRITE
            | call::WRITEV
            | call::SENDTO
            | call::SENDMSG
            | call::SENDMMSG
            | call::CLOSE
            | call::SHUTDOWN
            | call::CONNECT
    )
}

impl Supervisor {
    fn det(&mut self) -> &mut Det {
        self.det.as_mut().expect("deterministic mode")
    }

    /// One notification in deterministic mode.
    pub(super) fn det_receive(&mut self, req: libc::seccomp_notif) {
        let tid = req.pid;
        let tgid = self.tgid(tid); // known, for `det_children_gone` too
        if *TRACE {
            let d = self.det.as_ref().expect("det");
            eprintln!(
                "det {}: call {} ({:x} {:x} {:x}) from #{} (ready {}, deferred {})",
                self.shared.pid,
                req.data.nr,
                req.data.args[0],
                req.data.args[1],
                req.data.args[2],
                d.index_of(tid),
                d.ready.len(),
                d.deferred.len()
            );
            // Calls that name a file: which (openat, unlinkat, mkdirat,
            // newfstatat, renameat, faccessat).
            if matches!(req.data.nr, 257 | 263 | 258 | 262 | 264 | 269) {
                let mut buf = [0u8; 256];
                if remote::read(tid, req.data.args[1], &mut buf).is_ok() {
                    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
                    eprintln!(
                        "det {}: path {}",
                        self.shared.pid,
                        String::from_utf8_lossy(&buf[..end])
                    );
                }
            }
        }
        let d = self.det();
        d.quiet = false;
        d.busy_calls += 1;
        // A send to the world outside is progress: the busy count is of
        // calls since the last one (writes to files and pipes, a log, are not).
        let fd = req.data.args[0] as i32;
        match req.data.nr as u32 {
            call::CONNECT => {
                d.sockets.insert((tgid, fd));
            }
            call::CLOSE => {
                d.sockets.remove(&(tgid, fd));
            }
            call::SENDTO | call::SENDMSG | call::SENDMMSG => d.busy_ends(),
            call::WRITE | call::WRITEV if d.sockets.contains(&(tgid, fd)) => d.busy_ends(),
            _ => {}
        }
        if !d.index.contains_key(&tid) {
            let i = d.next_index;
            d.next_index += 1;
            d.index.insert(tid, i);
            d.exited.remove(&tid);
            d.in_transit = d.in_transit.saturating_sub(1);
            if let Some(addr) = d.pending_ctid.take() {
                d.clear_tid.insert(tid, addr);
            }
            if let Some(v) = d.vfork.as_mut() {
                if v.child.is_none() && tid != v.parent {
                    v.child = Some(tid);
                }
            }
        }
        if d.vfork.is_some_and(|v| v.parent == tid) {
            d.vfork = None; // back from vfork
        }
        let current = d.running == Some(tid);
        if current {
            d.running = None;
        }
        let after_clone = d.parent == Some(tid);
        if after_clone {
            d.parent = None;
        }
        let nr_ = req.data.nr as u32;
        // Only the running thread, with no child on its way, is answered
        // now, and only for calls that neither block nor observe.
        if !current || after_clone || d.in_transit > 0 || observes(nr_) {
            d.deferred.push(req);
            return;
        }
        self.det_handle(req);
    }

    /// Handles a call of the thread allowed to go: answers it (the thread
    /// runs on), parks it, or makes it yield.
    fn det_handle(&mut self, req: libc::seccomp_notif) {
        let tid = req.pid;
        let nr_ = req.data.nr as u32;
        if sends(nr_) {
            self.det_sent();
        }
        let answer = match nr_ {
            // Goes again at once when no other thread is ready.
            call::SCHED_YIELD => return self.det_yield(req, 0),
            // Go's runtime sleeps so to wait for other threads' progress:
            // it goes again once another thread ran or the world moved.
            nr::NANOSLEEP if self.is_go_runtime_usleep(tid, req.data.instruction_pointer) => {
                let epoch = self.det().epoch;
                return self.det_yield(req, epoch);
            }
            nr::FUTEX => self.det_futex(&req),
            call::CLONE | call::CLONE3 | call::FORK | call::VFORK => {
                // A new task: its first call (and its parent's next one)
                // wait until it has come, so that it is named the same way
                // on every run.
                let a = req.data.args;
                let vfork = match nr_ {
                    call::VFORK => true,
                    call::CLONE => a[0] & libc::CLONE_VFORK as u64 != 0,
                    // clone_args.flags, the struct's first field
                    call::CLONE3 => {
                        remote::read_u64(tid, a[0]).is_ok_and(|f| f & libc::CLONE_VFORK as u64 != 0)
                    }
                    _ => false,
                };
                let d = self.det();
                d.in_transit += 1;
                if vfork {
                    // The parent stays in the kernel until its child has
                    // exec'd or exited: not running meanwhile, and awaited
                    // once it is free (see `det_vfork_pending`).
                    d.vfork = Some(Vfork {
                        parent: tid,
                        child: None,
                    });
                    if *TRACE {
                        let i = d.index_of(tid);
                        eprintln!("det {}: #{i} vforks", self.shared.pid);
                    }
                    self.reply(req.id, 0, 0, super::SECCOMP_USER_NOTIF_FLAG_CONTINUE);
                    return;
                }
                // A thread whose exit the kernel announces by clearing
                // and waking a futex word (`CLONE_CHILD_CLEARTID`, what
                // `pthread_join` waits on): its waiters are ours, so the
                // wake is ours to give (see `det_thread_exits`).
                d.pending_ctid = match nr_ {
                    call::CLONE => (a[0]
                        & (libc::CLONE_THREAD | libc::CLONE_CHILD_CLEARTID) as u64
                        == (libc::CLONE_THREAD | libc::CLONE_CHILD_CLEARTID) as u64)
                        .then_some(a[3]),
                    call::CLONE3 => {
                        let flags = remote::read_u64(tid, a[0]).unwrap_or(0);
                        let both = (libc::CLONE_THREAD | libc::CLONE_CHILD_CLEARTID) as u64;
                        if flags & both == both {
                            remote::read_u64(tid, a[0] + 16).ok()
                        } else {
                            None
                        }
                    }
                    _ => None,
                };
                let d = self.det();
                d.parent = Some(tid);
                Answer::Continue
            }
            call::TGKILL | call::TKILL => {
                let a = req.data.args;
                let (target, sig) = if nr_ == call::TGKILL {
                    (a[1] as u32, a[2] as i32)
                } else {
                    (a[0] as u32, a[1] as i32)
                };
                if target != tid && self.det().index.contains_key(&target) {
                    return self.det_signal(req, target, sig);
                }
                Answer::Continue
            }
            // A port's outcome is the run's, not the machine's (`ports.rs`).
            call::BIND => self.det_bind(&req),
            call::GETSOCKNAME => self.det_sockname(&req, false),
            call::GETPEERNAME => self.det_sockname(&req, true),
            call::WAIT4 | call::WAITID | call::RT_SIGSUSPEND | call::PAUSE => {
                match self.det_child_wait(&req) {
                    Some(kind) => self.hold(&req, super::NO_DEADLINE, kind),
                    None => Answer::Continue,
                }
            }
            call::EXIT => {
                let tgid = self.tgid(tid);
                let d = self.det();
                d.index.remove(&tid);
                d.exited.insert(tid);
                if let Some(addr) = d.clear_tid.remove(&tid) {
                    d.thread_exits.push((tgid, tid, addr));
                }
                self.reply(req.id, 0, 0, super::SECCOMP_USER_NOTIF_FLAG_CONTINUE);
                return;
            }
            call::EXIT_GROUP => {
                let tgid = self.tgid(tid);
                if let Ok(fd) = remote::pidfd_open(tgid) {
                    self.det().exiting.push(fd);
                }
                self.reply(req.id, 0, 0, super::SECCOMP_USER_NOTIF_FLAG_CONTINUE);
                return;
            }
            // io_uring's operations run on the kernel's own workers, in an
            // order no one decides (and without system calls under
            // SQPOLL): answered as by a kernel built without it, so that
            // a program falls back to plain calls (liburing's users, libuv).
            call::IO_URING_SETUP => {
                if *TRACE {
                    eprintln!("det {}: io_uring_setup answered ENOSYS", self.shared.pid);
                }
                Answer::Errno(libc::ENOSYS)
            }
            call::ALARM | call::SETITIMER | call::TIMER_SETTIME | call::TIMERFD_SETTIME
                if self.det_arms_kernel_timer(&req) =>
            {
                self.det_refuse(&req)
            }
            _ => self.handle(&req),
        };
        self.det_answer(&req, answer);
    }

    /// Whether `req` arms a timer the kernel runs on real time (`alarm`,
    /// `setitimer`, `timer_settime`, `timerfd_settime` with a non-zero
    /// expiry): its signal or expiry would come at a moment no one
    /// decides. Disarming is harmless.
    fn det_arms_kernel_timer(&self, req: &libc::seccomp_notif) -> bool {
        let a = req.data.args;
        // `struct itimerval` and `struct itimerspec` both hold the
        // interval, then the value, two 8-byte words each.
        let value = match req.data.nr as u32 {
            call::ALARM => return a[0] as u32 != 0,
            call::SETITIMER => a[1],
            _ => a[2],
        };
        if value == 0 {
            return false; // setitimer(NULL): a query
        }
        let word = |off| remote::read_u64(req.pid, value + off);
        // (unreadable: the kernel answers EFAULT)
        matches!((word(16), word(24)), (Ok(s), Ok(ns)) if s != 0 || ns != 0)
    }

    /// Refuses the mode for the program: a call it cannot order (see
    /// [`Self::det_arms_kernel_timer`]). Says so on the program's stderr
    /// (its log, which `batkube run` quotes when it exits) and in ours,
    /// then ends the program: its outcome would not follow the seed.
    fn det_refuse(&mut self, req: &libc::seccomp_notif) -> Answer {
        let name = match req.data.nr as u32 {
            call::ALARM => "alarm",
            call::SETITIMER => "setitimer",
            call::TIMER_SETTIME => "timer_settime",
            _ => "timerfd_settime",
        };
        let tgid = self.tgid(req.pid);
        let message = format!(
            "--deterministic refused: process {tgid} armed a timer the kernel runs on real \
             time ({name}), whose expiry no one orders; the mode cannot make this program \
             deterministic, so it was stopped. Run it with --no-deterministic (the timer \
             then fires on real time, as without the mode)."
        );
        tracing::error!("{message}");
        if let Ok(fd) = self.remote_fd(req.pid, 2) {
            let mut f = std::fs::File::from(fd);
            let _ = std::io::Write::write_all(&mut f, format!("\n{message}\n").as_bytes());
        }
        // SAFETY: signals to processes of the supervised program.
        unsafe {
            libc::kill(tgid as i32, libc::SIGKILL);
            if self.shared.pid != tgid {
                libc::kill(self.shared.pid as i32, libc::SIGKILL);
            }
        }
        Answer::Errno(libc::ENOSYS)
    }

    /// The thread of `req` goes on with `answer`, or stays held.
    fn det_answer(&mut self, req: &libc::seccomp_notif, answer: Answer) {
        let (id, tid) = (req.id, req.pid);
        match answer {
            Answer::Held => {}
            Answer::Value(v) => self.det_go(id, tid, v, 0, 0),
            Answer::Errno(e) => self.det_go(id, tid, 0, -e, 0),
            Answer::Continue => self.det_go(id, tid, 0, 0, super::SECCOMP_USER_NOTIF_FLAG_CONTINUE),
        }
    }

    /// Lets `tid` run on with this answer.
    fn det_go(&mut self, id: u64, tid: u32, val: i64, err: i32, flags: u32) {
        if *TRACE {
            let i = self.det.as_ref().expect("det").index_of(tid);
            eprintln!(
                "det {}: #{i} goes on ({val}, {err}, {flags})",
                self.shared.pid
            );
        }
        if self.reply(id, val, err, flags) {
            self.det().running = Some(tid);
        }
    }

    /// A signal to another thread of the program (Go preempts a goroutine
    /// so, then spins until it has stopped): the supervisor sends it, the
    /// target goes next to take it (on leaving the call it is parked in;
    /// a futex or poll wait ends with `EINTR`, as the kernel would end
    /// it), and the sender waits for the following decision.
    fn det_signal(&mut self, req: libc::seccomp_notif, target: u32, sig: i32) {
        let tgid = self.tgid(target);
        // SAFETY: a signal to a thread of our supervised child.
        let r = unsafe { libc::syscall(libc::SYS_tgkill, tgid as i64, target as i64, sig as i64) };
        let answer = if r < 0 {
            Answer::Errno(
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EINVAL),
            )
        } else {
            Answer::Value(0)
        };
        if let Some(i) = self.held.iter().position(|h| {
            h.tid == target
                && matches!(
                    h.kind,
                    Kind::Futex { .. }
                        | Kind::Epoll { .. }
                        | Kind::Poll { .. }
                        | Kind::Blocked { .. }
                        | Kind::PipeWrite { .. }
                )
        }) {
            let h = self.held.remove(i);
            self.dirty = true;
            self.finish(h, Answer::Errno(libc::EINTR));
        }
        let d = self.det();
        if let Some(i) = d.yielded.iter().position(|r| r.tid == target) {
            let r = d.yielded.remove(i);
            d.ready.push(r);
        }
        d.priority = Some(target);
        self.det_release(req.id, req.pid, answer);
    }

    fn det_yield(&mut self, req: libc::seccomp_notif, epoch: u64) {
        let d = self.det();
        d.yielded.push(Ready {
            tid: req.pid,
            epoch,
            go: Go::Reply {
                id: req.id,
                val: 0,
                err: 0,
                flags: 0,
            },
        });
    }

    /// A held wait ends with `answer`: its thread joins the ready set.
    pub(super) fn det_release(&mut self, id: u64, tid: u32, answer: Answer) {
        let (val, err, flags) = match answer {
            Answer::Value(v) => (v, 0, 0),
            Answer::Errno(e) => (0, -e, 0),
            Answer::Continue => (0, 0, super::SECCOMP_USER_NOTIF_FLAG_CONTINUE),
            Answer::Held => (0, 0, 0),
        };
        self.det().ready.push(Ready {
            tid,
            epoch: 0,
            go: Go::Reply {
                id,
                val,
                err,
                flags,
            },
        });
    }

    /// Futexes, emulated: every waiter is held here, so every wake is
    /// answered here too.
    fn det_futex(&mut self, req: &libc::seccomp_notif) -> Answer {
        let a = req.data.args;
        let tid = req.pid;
        let op = a[1] as i32;
        let cmd = op & 0x7f;
        let tgid = self.tgid(tid);
        let eno = |e: std::io::Error| Answer::Errno(e.raw_os_error().unwrap_or(libc::EFAULT));
        match cmd {
            // The wait is the non-deterministic mode's (which also takes
            // untimed waits, notified here only).
            libc::FUTEX_WAIT | libc::FUTEX_WAIT_BITSET => self.futex(req),
            libc::FUTEX_WAKE | libc::FUTEX_WAKE_BITSET => {
                self.shared.wakes.fetch_add(1, Ordering::Relaxed);
                let n = (a[2] as i32).max(0) as usize;
                let mask = if cmd == libc::FUTEX_WAKE {
                    u32::MAX
                } else {
                    a[5] as u32
                };
                Answer::Value(self.wake_futex(tgid, a[0], mask, n) as i64)
            }
            libc::FUTEX_WAKE_OP => {
                self.shared.wakes.fetch_add(1, Ordering::Relaxed);
                // *uaddr2 = op(*uaddr2, oparg); wake val on uaddr; if
                // cmp(old, cmparg), wake val2 on uaddr2 (as the kernel does;
                // no other thread runs, so read-modify-write is atomic).
                let val3 = a[5] as u32;
                let (opk, cmp) = ((val3 >> 28) & 0xf, (val3 >> 24) & 0xf);
                let mut oparg = (val3 >> 12) & 0xfff;
                let cmparg = val3 & 0xfff;
                if opk & 8 != 0 {
                    oparg = 1u32.checked_shl(oparg).unwrap_or(0);
                }
                let old = match remote::read_u32(tid, a[4]) {
                    Ok(v) => v,
                    Err(e) => return eno(e),
                };
                let new = match opk & 7 {
                    0 => oparg,
                    1 => old.wrapping_add(oparg),
                    2 => old | oparg,
                    3 => old & !oparg,
                    4 => old ^ oparg,
                    _ => return Answer::Errno(libc::ENOSYS),
                };
                if let Err(e) = remote::write(tid, a[4], &new.to_ne_bytes()) {
                    return eno(e);
                }
                let (o, c) = (old as i32, cmparg as i32);
                let hit = match cmp {
                    0 => o == c,
                    1 => o != c,
                    2 => o < c,
                    3 => o <= c,
                    4 => o > c,
                    5 => o >= c,
                    _ => return Answer::Errno(libc::ENOSYS),
                };
                let n1 = (a[2] as i32).max(0) as usize;
                let n2 = (a[3] as i32).max(0) as usize;
                let mut woken = self.wake_futex(tgid, a[0], u32::MAX, n1);
                if hit {
                    woken += self.wake_futex(tgid, a[4], u32::MAX, n2);
                }
                Answer::Value(woken as i64)
            }
            libc::FUTEX_REQUEUE | libc::FUTEX_CMP_REQUEUE => {
                self.shared.wakes.fetch_add(1, Ordering::Relaxed);
                if cmd == libc::FUTEX_CMP_REQUEUE {
                    match remote::read_u32(tid, a[0]) {
                        Ok(v) if v != a[5] as u32 => return Answer::Errno(libc::EAGAIN),
                        Ok(_) => {}
                        Err(e) => return eno(e),
                    }
                }
                let n1 = (a[2] as i32).max(0) as usize;
                let n2 = (a[3] as i64).max(0) as usize;
                let woken = self.wake_futex(tgid, a[0], u32::MAX, n1);
                let mut moved = 0;
                for h in self.held.iter_mut() {
                    if moved >= n2 {
                        break;
                    }
                    if h.tgid != tgid {
                        continue;
                    }
                    if let Kind::Futex { uaddr, .. } = &mut h.kind {
                        if *uaddr == a[0] {
                            *uaddr = a[4];
                            moved += 1;
                        }
                    }
                }
                Answer::Value(if cmd == libc::FUTEX_CMP_REQUEUE {
                    (woken + moved) as i64
                } else {
                    woken as i64
                })
            }
            // Priority-inheritance futexes block in the kernel: not
            // modelled (a program using them may stall).
            _ => Answer::Continue,
        }
    }

    /// Whether the world outside is settled: the controller's hook, and the
    /// gate open (checked under the evaluation lock by the caller).
    fn det_settled(&mut self) -> bool {
        // Read before the hook looks: progress made after its look wakes
        // the retry's sleep (`Supervisor::loop_timeout_ms`).
        self.det().settle_seen = crate::seccomp::progress::WORD.load(Ordering::SeqCst);
        let hook = self.shared.settle.lock().unwrap_or_else(|e| e.into_inner());
        hook.as_ref().is_none_or(|f| f())
    }

    /// Takes decisions until a thread runs or the program is quiescent.
    pub(super) fn det_schedule(&mut self) {
        loop {
            let d = self.det();
            d.retry = false;
            if d.running.is_some() {
                return;
            }
            if d.in_transit > 0 && !self.det_children_gone() {
                return;
            }
            if !self.det_thread_exits() {
                self.det().retry = true; // gone within moments
                return;
            }
            if self.det_vfork_pending() {
                self.det().retry = true; // back within moments
                return;
            }
            let d = self.det();
            if !d.exiting.is_empty() {
                d.exiting.retain(|fd| {
                    let mut p = libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd, no timeout.
                    unsafe { libc::poll(&mut p, 1, 0) == 0 }
                });
                if !d.exiting.is_empty() {
                    d.retry = true; // ends within moments
                    return;
                }
                // Its end may have made a wait ready (a parent's `wait4`,
                // the read end of its pipe).
                d.stale = true;
            }
            let d = self.det();
            // Calls that came from parked threads (or that observe): each
            // thread goes in turn, its call handled when it is picked.
            if !d.deferred.is_empty() {
                let mut deferred = std::mem::take(&mut d.deferred);
                deferred.sort_by_key(|r| d.index_of(r.pid));
                for req in deferred {
                    d.ready.push(Ready {
                        tid: req.pid,
                        epoch: 0,
                        go: Go::Call(req),
                    });
                }
            }
            // Beside other programs: the turn ends when the thread that
            // had it parks (unless a thread it signalled must take the
            // signal first), and what the others did since this program
            // last looked makes it look again.
            let ensemble = self.ensemble.clone();
            if let Some((e, i)) = &ensemble {
                let d = self.det();
                if d.has_baton && d.chosen.is_none() {
                    let keep = d
                        .priority
                        .is_some_and(|p| d.ready.iter().any(|r| r.tid == p));
                    if !keep {
                        d.has_baton = false;
                        e.release(*i);
                    }
                }
                let gen = e.generation();
                let d = self.det();
                if gen != d.seen_gen {
                    d.seen_gen = gen;
                    d.stale = true;
                    d.quiet = false;
                }
            }
            let closings = self.shared.gate_closings.load(Ordering::Acquire);
            let d = self.det();
            if closings != d.seen_world.0 {
                d.stale = true; // taken in at the evaluation
            }
            if d.chosen.is_none() && d.ready.is_empty() && d.stale && !self.det_evaluate() {
                self.det().retry = true;
                return;
            }
            let d = self.det();
            if d.chosen.is_none() && d.ready.is_empty() {
                let epoch = d.epoch;
                let mut i = 0;
                while i < d.yielded.len() {
                    if d.yielded[i].epoch < epoch {
                        let r = d.yielded.remove(i);
                        d.ready.push(r);
                    } else {
                        i += 1;
                    }
                }
            }
            if d.chosen.is_none()
                && !d.ready.is_empty()
                && d.spin_bound > 0
                && d.busy_calls >= d.bound()
            {
                // Busy at one instant past the bound without once being
                // quiet: spinning on a frozen clock. Held until it moves.
                let calls = d.busy_calls;
                let ready = std::mem::take(&mut d.ready);
                d.spinning.extend(ready);
                d.busy_calls = 0;
                let again = std::mem::replace(&mut d.spun, true);
                crate::seccomp::SPINS_HELD.fetch_add(1, Ordering::Relaxed);
                let now = self.now();
                // Once per spin: the holds after it are counted, not told.
                if !again {
                    tracing::warn!(
                        program = self.shared.pid,
                        calls,
                        at_ns = now,
                        "a deterministic program was busy for {calls} system calls at one \
                         simulated instant without ever being quiet (spinning until time \
                         passes); held until the clock moves (the busy bound, --spin-bound)"
                    );
                }
            }
            let d = self.det();
            if let Some((e, i)) = &ensemble {
                if d.chosen.is_none() && !d.has_baton {
                    let ready = !d.ready.is_empty();
                    let seen = d.seen_gen;
                    match e.report(*i, seen, ready) {
                        super::super::ensemble::Verdict::Go => self.det().has_baton = true,
                        super::super::ensemble::Verdict::Wait if ready => {
                            // Ready, and waiting for the baton.
                            self.det().quiet = false;
                            self.shared.det_quiet.store(false, Ordering::Release);
                            return;
                        }
                        super::super::ensemble::Verdict::Wait => {}
                    }
                }
            }
            let d = self.det();
            if d.chosen.is_none() && d.ready.is_empty() {
                if !d.quiet {
                    if *TRACE {
                        let held: Vec<String> = self
                            .held
                            .iter()
                            .map(|h| {
                                let k = match h.kind {
                                    Kind::Sleep => "sleep",
                                    Kind::Futex { .. } => "futex",
                                    Kind::Epoll { .. } => "epoll",
                                    Kind::Poll { .. } => "poll",
                                    Kind::Blocked { .. } => "blocked",
                                    Kind::PipeWrite { .. } => "pipe-write",
                                };
                                format!("{}:{k}@{}", h.tid, h.deadline)
                            })
                            .collect();
                        eprintln!(
                            "det {}: quiet (held {held:?}, {} yielded, now {})",
                            self.shared.pid,
                            self.det.as_ref().expect("det").yielded.len(),
                            self.now()
                        );
                    }
                    let d = self.det();
                    d.quiet = true;
                    d.busy_ends();
                    if d.spinning.is_empty() {
                        d.spun = false; // quiet of its own accord
                    }
                    self.shared.det_quiet.store(true, Ordering::Release);
                    self.dirty = true;
                }
                return;
            }
            d.quiet = false;
            self.shared.det_quiet.store(false, Ordering::Release);
            let d = self.det();
            if d.chosen.is_none() {
                // Threads in the order they were first seen, then a seeded pick.
                let mut ready = std::mem::take(&mut d.ready);
                ready.sort_by_key(|r| d.index.get(&r.tid).copied().unwrap_or(u32::MAX));
                let first = d
                    .priority
                    .take()
                    .and_then(|p| ready.iter().position(|r| r.tid == p));
                let k = match first {
                    Some(k) => k,
                    None => d.pick(ready.len()),
                };
                d.chosen = Some(ready.remove(k));
                d.ready = ready;
                d.epoch += 1;
            }
            let r = d.chosen.expect("chosen above");
            match r.go {
                Go::Reply {
                    id,
                    val,
                    err,
                    flags,
                } => {
                    self.det().chosen = None;
                    if *TRACE {
                        eprintln!(
                            "det {}: picked #{} ({val}, {err})",
                            self.shared.pid,
                            self.det.as_ref().expect("det").index_of(r.tid)
                        );
                    }
                    if self.reply(id, val, err, flags) {
                        self.det().running = Some(r.tid);
                        return;
                    }
                    // Its caller is gone (killed): decide again.
                }
                Go::Call(req) if observes(req.data.nr as u32) => {
                    // What it reads must be all there is to read: the
                    // world settled, and the gate kept open until the
                    // thread has it.
                    let shared = self.shared.clone();
                    let _eval = shared.eval.lock().unwrap_or_else(|e| e.into_inner());
                    if !self.det_outside_settled() {
                        self.det().retry = true;
                        return;
                    }
                    self.det().chosen = None;
                    if !self.id_valid(req.id) {
                        continue;
                    }
                    if req.data.nr as u32 == call::CONNECT {
                        self.det_large_receive_buffer(req.pid, req.data.args[0] as i32);
                    }
                    if *TRACE && req.data.nr as u32 == call::READ {
                        self.det_trace_read(&req);
                    }
                    // A read the kernel would block in (an empty pipe or
                    // socket, without O_NONBLOCK) waits here instead,
                    // parked: what it waits for comes from another thread
                    // or process of the program, which must run first.
                    if let Some(kind) = self.det_read_would_block(&req) {
                        self.hold(&req, super::NO_DEADLINE, kind);
                        continue;
                    }
                    // A write to a pipe the kernel could block in, likewise
                    // (written here, as much as fits, or held).
                    match self.det_pipe_write(&req) {
                        PipeWrite::Kernel => {}
                        PipeWrite::Wrote(n) => {
                            self.det_sent();
                            self.det_answer(&req, Answer::Value(n as i64));
                            if self.det().running.is_some() {
                                return;
                            }
                            continue;
                        }
                        PipeWrite::Hold(kind) => {
                            self.hold(&req, super::NO_DEADLINE, kind);
                            continue;
                        }
                    }
                    if sends(req.data.nr as u32) {
                        self.det_sent();
                    }
                    let answer = match req.data.nr as u32 {
                        call::CONNECT => match self.det_connect(&req) {
                            Answer::Continue => self.handle(&req),
                            made => made,
                        },
                        _ => self.handle(&req),
                    };
                    self.det_answer(&req, answer);
                    if self.det().running.is_some() {
                        return;
                    }
                }
                Go::Call(req) => {
                    self.det().chosen = None;
                    if self.id_valid(req.id) {
                        self.det_handle(req);
                    }
                    if self.det().running.is_some() {
                        return;
                    }
                }
            }
        }
    }

    /// Threads that exited with a `CLONE_CHILD_CLEARTID` word: once each
    /// is gone (the kernel has cleared the word), its waiters (`pthread_join`)
    /// are woken here, where every futex wait of the program is held. False
    /// while one is still on its way out.
    fn det_thread_exits(&mut self) -> bool {
        let exits = std::mem::take(&mut self.det().thread_exits);
        let mut left = Vec::new();
        for (tgid, tid, addr) in exits {
            if std::path::Path::new(&format!("/proc/{tgid}/task/{tid}")).exists() {
                left.push((tgid, tid, addr));
            } else {
                let woken = self.wake_futex(tgid, addr, u32::MAX, usize::MAX);
                if *TRACE {
                    eprintln!(
                        "det {}: thread {tid} gone, its exit word {addr:x} wakes {woken}",
                        self.shared.pid
                    );
                }
                self.det().stale = true;
            }
        }
        let done = left.is_empty();
        self.det().thread_exits = left;
        done
    }

    /// A thread in `vfork` whose child has exec'd or exited (it no longer
    /// shares its parent's memory: `kcmp`) is on its way back: its next
    /// call is awaited before anything is decided, so that it is there on
    /// every run. While the child still shares the memory, the parent
    /// stays in the kernel, and decisions go on without it.
    fn det_vfork_pending(&mut self) -> bool {
        let Some(v) = self.det().vfork else {
            return false;
        };
        let Some(child) = v.child else {
            return false; // the child's first call is awaited (in transit)
        };
        const KCMP_VM: i64 = 1;
        // SAFETY: plain syscall on two pids, no memory passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_kcmp,
                v.parent as i64,
                child as i64,
                KCMP_VM,
                0i64,
                0i64,
            )
        };
        r != 0
    }

    /// The running thread made no call for `STALL_LOOK_MS`: if it is
    /// blocked in the kernel (not computing), it waits for something only
    /// another thread of the program could do, which the mode does not let
    /// run meanwhile (a call it does not model): say so, once per thread
    /// and call, rather than hang silently.
    pub(super) fn det_watch_stall(&mut self) {
        let Some(tid) = self.det().running else {
            return;
        };
        let tgid = self.tgid(tid);
        let Ok(text) = std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/syscall")) else {
            return;
        };
        let Some(nr_) = text
            .split_whitespace()
            .next()
            .and_then(|w| w.parse::<i64>().ok())
        else {
            return; // "running": computing, not blocked
        };
        let d = self.det();
        if d.stall_warned.insert((tid, nr_)) {
            tracing::warn!(
                pid = tgid,
                tid,
                syscall = nr_,
                "--deterministic: a thread of the program has been blocked in system call {nr_} \
                 for {} s of wall time while no other thread may run; the mode does not model \
                 this call (timeshim/README.md, \"Deterministic mode\"), so the program may \
                 not progress: run without --deterministic (--no-deterministic)",
                STALL_LOOK_MS / 1000
            );
        }
    }

    /// A read-like call (`read`, `readv`, `recvfrom`, `recvmsg`, `accept`)
    /// on a blocking descriptor with nothing to read: the wait to hold.
    fn det_read_would_block(&mut self, req: &libc::seccomp_notif) -> Option<Kind> {
        let a = req.data.args;
        let nr_ = req.data.nr as u32;
        match nr_ {
            // (accept4's SOCK_NONBLOCK is for the new socket)
            call::READ | call::READV | call::ACCEPT | call::ACCEPT4 => {}
            call::RECVFROM if a[3] as i32 & libc::MSG_DONTWAIT == 0 => {}
            call::RECVMSG if a[2] as i32 & libc::MSG_DONTWAIT == 0 => {}
            _ => return None,
        }
        let dup = self.remote_fd(req.pid, a[0] as i32).ok()?;
        // SAFETY: F_GETFL on our duplicate (the same open file).
        let fl = unsafe { libc::fcntl(dup.as_raw_fd(), libc::F_GETFL) };
        if fl < 0 || fl & libc::O_NONBLOCK != 0 {
            return None;
        }
        let mut p = libc::pollfd {
            fd: dup.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no timeout.
        if unsafe { libc::poll(&mut p, 1, 0) } != 0 {
            return None; // something to read, or an end, or an error
        }
        Some(Kind::Blocked {
            dups: vec![dup],
            events: libc::POLLIN,
        })
    }

    /// A `write` to a pipe without `O_NONBLOCK`: when the kernel could
    /// block in it (no room for a small write, or a write larger than
    /// `PIPE_BUF`, which the kernel writes in pieces as its reader
    /// drains), the supervisor writes what fits, without blocking, and the
    /// call returns that count; none fits: held until the pipe has room.
    /// The reader is a process of the program, which runs only once this
    /// thread parks: left to the kernel, both would wait forever.
    fn det_pipe_write(&mut self, req: &libc::seccomp_notif) -> PipeWrite {
        let a = req.data.args;
        let len = a[2] as usize;
        if req.data.nr as u32 != call::WRITE || len == 0 {
            return PipeWrite::Kernel;
        }
        let Ok(dup) = self.remote_fd(req.pid, a[0] as i32) else {
            return PipeWrite::Kernel;
        };
        let raw = dup.as_raw_fd();
        // SAFETY: fstat and fcntl on our duplicate, into a local.
        let (fifo, nonblocking) = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            let fifo = libc::fstat(raw, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO;
            (
                fifo,
                libc::fcntl(raw, libc::F_GETFL) & libc::O_NONBLOCK != 0,
            )
        };
        if !fifo || nonblocking {
            return PipeWrite::Kernel;
        }
        if len <= libc::PIPE_BUF {
            let mut p = libc::pollfd {
                fd: raw,
                events: libc::POLLOUT,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no timeout.
            if unsafe { libc::poll(&mut p, 1, 0) } != 0 {
                return PipeWrite::Kernel; // room for it (or an error to say)
            }
        }
        match super::write_without_blocking(req.pid, &dup, a[1], len) {
            Ok(n) => PipeWrite::Wrote(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                PipeWrite::Hold(Kind::PipeWrite {
                    dup,
                    addr: a[1],
                    len,
                })
            }
            Err(_) => PipeWrite::Kernel,
        }
    }

    /// `wait4`, `waitid`, `rt_sigsuspend` or `pause` while the process has
    /// children: the wait to hold, until one of them ends (`None`: the
    /// kernel answers at once, no child running, or none to wait for).
    fn det_child_wait(&mut self, req: &libc::seccomp_notif) -> Option<Kind> {
        let a = req.data.args;
        let nr_ = req.data.nr as u32;
        // Which children: a pid, or any (a process group counts as any).
        let (pid, nohang) = match nr_ {
            call::WAIT4 => (a[0] as i32, a[2] as i32 & libc::WNOHANG != 0),
            call::WAITID => (
                if a[0] as u32 == libc::P_PID {
                    a[1] as i32
                } else {
                    -1
                },
                a[3] as i32 & libc::WNOHANG != 0,
            ),
            _ => (-1, false),
        };
        if nohang {
            return None;
        }
        let tgid = self.tgid(req.pid);
        let children: Vec<u32> = if pid > 0 {
            vec![pid as u32]
        } else {
            children_of(tgid)
        };
        let mut dups = Vec::new();
        for c in children {
            let Ok(fd) = remote::pidfd_open(c) else {
                continue;
            };
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no timeout.
            if unsafe { libc::poll(&mut p, 1, 0) } != 0 {
                return None; // it has ended: nothing to wait for
            }
            dups.push(fd);
        }
        (!dups.is_empty()).then_some(Kind::Blocked {
            dups,
            events: libc::POLLIN,
        })
    }

    /// A socket about to connect gets a large, fixed receive buffer (64 MiB
    /// with `SO_RCVBUFFORCE` where allowed, else the system's maximum): an
    /// instant's watch events then fit in it whole, so what a read returns
    /// does not depend on TCP's receive window (autotuning, which depends
    /// on timing, is off for a buffer set so).
    fn det_large_receive_buffer(&mut self, tid: u32, fd: i32) {
        let Ok(sock) = self.remote_fd(tid, fd) else {
            return;
        };
        let size: libc::c_int = 64 << 20;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: setsockopt with an int on our duplicate of the
            // program's socket (the same socket).
            let r = unsafe {
                libc::setsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&sock),
                    libc::SOL_SOCKET,
                    opt,
                    &size as *const libc::c_int as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                return;
            }
        }
    }

    /// A thread is let through a call that may send (see [`sends`]).
    fn det_sent(&mut self) {
        // What it sends may make held waits ready: they are looked at
        // again at the next decision, not when (or whether) their
        // descriptors wake us.
        self.det().stale = true;
        // Counted before the call runs: a settle that answers from an
        // earlier look sees it.
        self.shared.sends.fetch_add(1, Ordering::SeqCst);
        crate::seccomp::DETERMINISTIC_SENDS.fetch_add(1, Ordering::SeqCst);
    }

    /// Trace aid: how many bytes a read will find (and, with
    /// `TIMESHIM_DET_PEEK`, which), to find the first read that differs
    /// between two runs.
    fn det_trace_read(&mut self, req: &libc::seccomp_notif) {
        let mut n: libc::c_int = -1;
        if let Ok(fd) = self.remote_fd(req.pid, req.data.args[0] as i32) {
            let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
            // SAFETY: FIONREAD into an int on our duplicate.
            unsafe { libc::ioctl(raw, libc::FIONREAD, &mut n) };
            if n > 0 && *PEEK {
                let mut buf = vec![0u8; n as usize];
                // SAFETY: a peek into our buffer, on our duplicate.
                let k = unsafe {
                    libc::recv(
                        raw,
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_PEEK | libc::MSG_DONTWAIT,
                    )
                };
                if k > 0 {
                    eprintln!(
                        "det {}: peek {:?}",
                        self.shared.pid,
                        String::from_utf8_lossy(&buf[..k as usize])
                    );
                }
            }
        }
        eprintln!(
            "det {}: read of fd {} finds {n} bytes",
            self.shared.pid, req.data.args[0]
        );
    }

    /// The gate is open and the controller says nothing is on its way.
    fn det_outside_settled(&mut self) -> bool {
        self.shared.page().gate.load(Ordering::Acquire) == 0 && self.det_settled()
    }

    /// A child announced by `clone` has not made its first call: if it is
    /// not among the process's tasks any more (the clone failed, or it
    /// exited at once), stop waiting for it.
    fn det_children_gone(&mut self) -> bool {
        let tgids: Vec<u32> = {
            let mut t: Vec<u32> = self.tgids.values().copied().collect();
            t.push(self.shared.pid);
            t.sort_unstable();
            t.dedup();
            t
        };
        let d = self.det.as_ref().expect("deterministic mode");
        for tgid in tgids {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{tgid}/task")) else {
                continue;
            };
            for e in dir.flatten() {
                if let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                    if !d.index.contains_key(&tid) {
                        return false; // on its way
                    }
                    // A forked process: a child of one of the threads.
                    let Ok(children) = std::fs::read_to_string(e.path().join("children")) else {
                        continue;
                    };
                    for c in children
                        .split_whitespace()
                        .filter_map(|w| w.parse::<u32>().ok())
                    {
                        if !d.index.contains_key(&c) && !d.exited.contains(&c) && !is_zombie(c) {
                            return false; // on its way
                        }
                    }
                }
            }
        }
        self.det().in_transit = 0;
        true
    }

    /// The due timed waits and the held waits whose descriptors are ready,
    /// taken in thread order once the world is settled. False: not settled
    /// yet (try again soon).
    fn det_evaluate(&mut self) -> bool {
        let shared = self.shared.clone();
        let _eval = shared.eval.lock().unwrap_or_else(|e| e.into_inner());
        if !self.det_outside_settled() {
            return false;
        }
        super::super::testing::ready_delay();
        // The world moved since the last look (the gate closed, the clock
        // moved): a new epoch, taken here, where every run takes it.
        let world = (
            self.shared.gate_closings.load(Ordering::Acquire),
            self.now(),
        );
        let d = self.det();
        if world != d.seen_world {
            if world.1 != d.seen_world.1 {
                // Held at the busy bound: they go on at the new instant.
                d.busy_ends();
                let spun = std::mem::take(&mut d.spinning);
                d.ready.extend(spun);
            }
            d.seen_world = world;
            d.epoch += 1;
        }
        self.release_due();
        // Held waits on descriptors, in thread order.
        let mut waits: Vec<(u32, u64)> = self
            .held
            .iter()
            .filter(|h| {
                matches!(
                    h.kind,
                    Kind::Epoll { .. }
                        | Kind::Poll { .. }
                        | Kind::Blocked { .. }
                        | Kind::PipeWrite { .. }
                )
            })
            .map(|h| (self.det.as_ref().expect("det").index_of(h.tid), h.seq))
            .collect();
        waits.sort_unstable();
        let mut wrote = false;
        for (_, seq) in waits {
            let Some(i) = self.held.iter().position(|h| h.seq == seq) else {
                continue;
            };
            let h = &self.held[i];
            if let Some(answer) = self.collect(h.tid, &h.kind) {
                let h = self.held.remove(i);
                if matches!(h.kind, Kind::PipeWrite { .. }) {
                    // Written now: its reader, looked at before in this
                    // pass, is looked at again at the next decision.
                    self.det_sent();
                    wrote = true;
                }
                self.dirty = true;
                self.finish(h, answer);
            }
        }
        self.det().stale = wrote;
        true
    }
}
