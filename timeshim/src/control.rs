//! Control side: owns the shared page, moves simulated time, and tells when
//! the scheduler is done reacting (quiescence).
//!
//! Quiescence is "every thread of the process is asleep in a shim-controlled
//! wait": the shim counts threads inside its waits, the kernel says how many
//! threads exist (`/proc/<pid>/task`) and whether each is asleep (`stat`
//! state `S`). The state check closes the race where a thread was just woken
//! (futex wake, I/O) but has not yet left its wait: it is runnable (`R`).

use crate::page::{
    Page, ENV_EVENTFD, ENV_PAGE, MAGIC, MODE_FROZEN, MODE_REALTIME, PAGE_BYTES, VERSION,
};
use crate::{ClockMode, SimTime};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Simulated `CLOCK_MONOTONIC` at the start of a simulation (a machine booted
/// 1000 s ago); the realtime clock is whatever [`Controller::new`] is given.
const MONO_AT_START_NS: u64 = 1_000 * 1_000_000_000;

/// What can go wrong controlling the clock. (Display and Error by hand:
/// this crate is linked into every patched scheduler, and a derive would
/// bring a proc-macro tree along.)
#[derive(Debug)]
pub enum ControlError {
    CreatePage { dir: PathBuf, source: io::Error },
    Eventfd(io::Error),
    Backwards { now: SimTime, asked: SimTime },
    NotAttached,
    Proc { pid: u32, source: io::Error },
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::CreatePage { dir, source } => write!(
                f,
                "cannot create the shared clock page in {}: {source}",
                dir.display()
            ),
            ControlError::Eventfd(e) => write!(f, "cannot create the clock eventfd: {e}"),
            ControlError::Backwards { now, asked } => write!(
                f,
                "simulated time cannot go backwards: now {now}, asked {asked}"
            ),
            ControlError::NotAttached => f.write_str(
                "no process is attached to the clock page yet (was it started with \
                 Controller::command/configure, and is it dynamically linked or patched?)",
            ),
            ControlError::Proc { pid, source } => {
                write!(f, "cannot inspect process {pid}: {source}")
            }
        }
    }
}

impl std::error::Error for ControlError {}

/// How the scheduler process gets the shim.
#[derive(Clone, Debug)]
pub enum ShimMode {
    /// The binary links this crate and calls [`crate::install`].
    Linked,
    /// An unmodified dynamically linked binary; the given `libtimeshim.so` is
    /// put in `LD_PRELOAD`.
    Preloaded(PathBuf),
    /// Any unmodified binary (static, Go, C, Rust): clock reads and timed
    /// waits are system calls answered by a supervisor thread of this
    /// process (see [`crate::seccomp`]). Only [`Controller::spawn`] can start
    /// a program so. `seed` makes `AT_RANDOM` and `getrandom` deterministic;
    /// `deterministic` runs the program's threads one at a time in an order
    /// the seed decides (see `seccomp::supervisor`'s `det` module).
    Seccomp {
        seed: Option<u64>,
        deterministic: bool,
    },
}

/// One look at the scheduler process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Threads alive (`/proc/<pid>/task`).
    pub threads: u32,
    /// Threads inside a shim-controlled wait.
    pub waiting: u32,
    /// Every thread is asleep according to the kernel.
    pub all_sleeping: bool,
    /// The process has exited (or is a zombie).
    pub exited: bool,
    /// Earliest deadline among the waiting threads.
    pub earliest_deadline: Option<SimTime>,
    /// A waiting thread's deadline has passed: it is about to wake up.
    pub overdue: bool,
    /// What this probe saw of the process's progress; two quiescent probes
    /// with equal stamps prove that no thread of the process ran, and no
    /// wait was entered, left or answered, from the start of the first to
    /// the end of the second.
    pub stamp: Stamp,
}

/// The process's CPU time (every thread's, in ns) and the count of
/// wait-related events (waits entered under the linked shim; notifications
/// received and replies sent under the supervisor).
///
/// CPU time is what makes quiescence exact without a grace period: a thread
/// that ran at all between two readings was scheduled out with its runtime
/// added, or is still running and shows as such in `/proc`. Whatever wakes a
/// sleeping thread is either another thread of the process (which ran), or
/// comes from outside: the clock (the controller), a supervisor reply (the
/// count), or I/O (the caller's own byte accounting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    pub cpu_ns: u64,
    pub events: u64,
    /// Under the deterministic supervisor, the program's count of calls
    /// that may put bytes on a socket ([`Controller::deterministic_sends`]);
    /// 0 otherwise. Two quiescent probes with equal counts mean no such
    /// call was made in between, even if a thread ran.
    pub sends: u64,
}

impl Probe {
    /// Every thread is asleep in a shim wait: nothing will happen until the
    /// clock moves or I/O arrives.
    pub fn quiescent(&self) -> bool {
        !self.exited
            && !self.overdue
            && self.threads > 0
            && self.waiting >= self.threads
            && self.all_sleeping
    }
}

/// Outcome of [`Controller::wait_quiescent`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Quiescence {
    /// The scheduler is idle; it next wants to run at `earliest_deadline`.
    Quiescent {
        earliest_deadline: Option<SimTime>,
        waited: Duration,
        /// The stamp of the probes that agreed (see [`Stamp`]).
        stamp: Stamp,
    },
    /// Still busy when the wall-clock bound ran out.
    TimedOut { last: Probe },
    /// The process is gone.
    Exited,
}

/// Owner of a simulated clock and of the page a scheduler process reads it from.
///
/// ```no_run
/// use std::time::Duration;
/// use timeshim::{Controller, ShimMode, SimTime};
/// let clock = Controller::new(SimTime::from_secs_f64(1.7e9))?;
/// let mut cmd = std::process::Command::new("my-scheduler");
/// clock.configure(&mut cmd, &ShimMode::Linked);
/// let _child = cmd.spawn()?;
/// if let timeshim::Quiescence::Quiescent { earliest_deadline: Some(t), .. } =
///     clock.wait_quiescent(Duration::from_secs(10))?
/// {
///     clock.advance_to(t)?;
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Controller {
    page: *const Page,
    path: PathBuf,
    eventfd: OwnedFd,
    supervisor: std::sync::Mutex<Option<Supervised>>,
    /// The attached process's threads, kept open between probes.
    tasks: std::sync::Mutex<Option<crate::tasks::Tasks>>,
    /// Deterministic mode's settle hook, handed to the supervisor.
    settle: std::sync::Mutex<Option<crate::Settle>>,
    /// Deterministic mode: the run's listening ports (see [`crate::Ports`]).
    ports: std::sync::Mutex<Option<crate::Ports>>,
    /// Deterministic mode beside other programs (see [`crate::Ensemble`]).
    ensemble: std::sync::Mutex<Option<(crate::Ensemble, usize)>>,
    /// What the looks at the program cost (see [`Controller::look_counts`]).
    looks: LookCounts,
}

/// Counts of the looks at a program, for the run's summary.
#[derive(Default)]
struct LookCounts {
    probes: AtomicU64,
    /// Threads' states read by the probes, and by the tasks lists that
    /// were replaced (a process that exec'd, one that was re-attached).
    thread_reads: AtomicU64,
    /// Returns of the quiescence wait's sleep because the program moved.
    activity_wake_ups: AtomicU64,
}

/// What the quiescence decisions on one program cost so far
/// ([`Controller::look_counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Looks {
    /// Probes of the program's threads and waits.
    pub probes: u64,
    /// `stat` files of its threads read by them.
    pub thread_reads: u64,
    /// Times the wait for quiescence was woken by the program's activity.
    pub activity_wake_ups: u64,
}

/// The program started under the seccomp supervisor.
struct Supervised {
    shared: std::sync::Arc<crate::seccomp::supervisor::Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

// SAFETY: the page is only accessed through atomics.
unsafe impl Send for Controller {}
unsafe impl Sync for Controller {}

static PAGE_COUNTER: AtomicU64 = AtomicU64::new(0);

fn real_mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer. In this process (no page) the shim, if
    // linked in, passes the call through to the real clock.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Controller {
    /// Creates a clock page whose simulated wall clock (`SystemTime::now` in
    /// the scheduler) reads `start`, frozen.
    pub fn new(start: SimTime) -> Result<Self, ControlError> {
        let dir = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let name = format!(
            "timeshim-{}-{}-{}",
            std::process::id(),
            PAGE_COUNTER.fetch_add(1, Ordering::Relaxed),
            real_mono_ns()
        );
        let path = dir.join(name);
        let err = |source| ControlError::CreatePage {
            dir: dir.clone(),
            source,
        };
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(err)?;
        file.set_len(PAGE_BYTES as u64).map_err(err)?;
        // SAFETY: fresh shared mapping of a file we own, never unmapped before Drop.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_file(&path);
            return Err(err(e));
        }
        // SAFETY: plain syscall.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: unmapping what we mapped above.
            unsafe { libc::munmap(addr, PAGE_BYTES) };
            let _ = std::fs::remove_file(&path);
            return Err(ControlError::Eventfd(e));
        }
        let page = addr as *const Page;
        // SAFETY: the zeroed mapping is a valid Page (all atomics).
        let p = unsafe { &*page };
        p.mono_offset_ns.store(
            start.as_nanos().wrapping_sub(MONO_AT_START_NS),
            Ordering::Relaxed,
        );
        p.write_clock(start.as_nanos(), real_mono_ns(), MODE_FROZEN);
        for slot in p.slots.iter() {
            slot.deadline_ns.store(u64::MAX, Ordering::Relaxed);
        }
        p.version.store(VERSION, Ordering::Release);
        p.magic.store(MAGIC, Ordering::Release);
        // SAFETY: efd is a fresh descriptor we own.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        tracing::debug!(page = %path.display(), %start, "clock page created");
        Ok(Controller {
            page,
            path,
            eventfd,
            supervisor: std::sync::Mutex::new(None),
            tasks: std::sync::Mutex::new(None),
            settle: std::sync::Mutex::new(None),
            ports: std::sync::Mutex::new(None),
            ensemble: std::sync::Mutex::new(None),
            looks: LookCounts::default(),
        })
    }

    /// What the looks at the program have cost so far.
    pub fn look_counts(&self) -> Looks {
        let reads = self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |t| t.reads);
        Looks {
            probes: self.looks.probes.load(Ordering::Relaxed),
            thread_reads: self.looks.thread_reads.load(Ordering::Relaxed) + reads,
            activity_wake_ups: self.looks.activity_wake_ups.load(Ordering::Relaxed),
        }
    }

    fn sup(&self) -> std::sync::MutexGuard<'_, Option<Supervised>> {
        self.supervisor.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn page(&self) -> &Page {
        // SAFETY: mapped for the lifetime of self.
        unsafe { &*self.page }
    }

    /// Path of the page file (the value of `TIMESHIM_PAGE`).
    pub fn page_path(&self) -> &Path {
        &self.path
    }

    /// Sets up `cmd` to run under this clock: `TIMESHIM_PAGE`, the inherited
    /// eventfd (`TIMESHIM_EVENTFD`), and `LD_PRELOAD` in preloaded mode.
    pub fn configure(&self, cmd: &mut Command, mode: &ShimMode) {
        if let ShimMode::Seccomp { .. } = mode {
            return; // set up by `spawn`
        }
        let efd = self.eventfd.as_raw_fd();
        cmd.env(ENV_PAGE, &self.path)
            .env(ENV_EVENTFD, efd.to_string());
        if let ShimMode::Preloaded(lib) = mode {
            let mut preload = lib.as_os_str().to_owned();
            if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
                preload.push(" ");
                preload.push(old);
            }
            cmd.env("LD_PRELOAD", preload);
        }
        // SAFETY: fcntl is async-signal-safe; it only clears FD_CLOEXEC on
        // the eventfd in the child so it survives exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(efd, libc::F_SETFD, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Starts `cmd` under this clock: [`configure`](Self::configure) then
    /// spawn for the linked and preloaded modes; for [`ShimMode::Seccomp`],
    /// under the seccomp filter with its supervisor (one program per
    /// controller).
    ///
    /// Under seccomp the `Child` is a reaper that runs no program: it ends
    /// as the program ends (its exit code, or by its signal) and passes on
    /// the signals it is sent; [`attached_pid`](Self::attached_pid) is the
    /// program's pid. `spawn` returns once the program past the command's
    /// wrappers (`sh -c 'exec …'`, `env`, `unshare`…) has been exec'd, or
    /// once the command, not having exec'd one, is plainly waiting for
    /// what only the clock or the world outside can give (every thread of
    /// it and of its children asleep, nothing for the supervisor to do:
    /// a script that sleeps, or waits for a child that does), or has ended.
    pub fn spawn(&self, mut cmd: Command, mode: &ShimMode) -> io::Result<Child> {
        if let ShimMode::Seccomp {
            seed,
            deterministic,
        } = mode
        {
            let mut slot = self.sup();
            if slot.is_some() {
                return Err(io::Error::other(
                    "this controller already supervises a program",
                ));
            }
            let launching = crate::seccomp::launch::spawn(cmd, *seed, *deterministic, &self.path)?;
            let (shared, thread) = crate::seccomp::supervisor::start(
                launching.pid,
                launching.listener,
                self.page,
                *seed,
                *deterministic,
                self.ensemble
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
            )?;
            if let Some(f) = self
                .settle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
            {
                *shared.settle.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
            }
            if let Some(p) = self.ports.lock().unwrap_or_else(|e| e.into_inner()).clone() {
                *shared.ports.lock().unwrap_or_else(|e| e.into_inner()) = p;
            }
            *slot = Some(Supervised {
                shared: shared.clone(),
                thread: Some(thread),
            });
            drop(slot);
            let child = match launching.child.recv() {
                Ok(Ok(child)) => child,
                Ok(Err(e)) => {
                    *self.sup() = None;
                    return Err(e);
                }
                Err(_) => {
                    *self.sup() = None;
                    return Err(io::Error::other("the seccomp launcher thread died"));
                }
            };
            wait_started(launching.pid, &launching.started, &shared);
            return Ok(child);
        }
        self.configure(&mut cmd, mode);
        cmd.spawn()
    }

    /// The `connect`s to an IPv4 or IPv6 address the attached program
    /// started, each counted by its shim before the call reached the kernel
    /// (linked or preloaded shim). `None` until a shim that counts them has
    /// attached (under [`ShimMode::Seccomp`] the supervisor counts them, in
    /// the run's [`crate::Ports`]). Only the process that owns the page
    /// counts: one it spawns runs on real time, uncounted.
    pub fn connects_started(&self) -> Option<u64> {
        let p = self.page();
        (p.counts_connects.load(Ordering::Acquire) == 1).then(|| p.connects.load(Ordering::Acquire))
    }

    /// Counters of the seccomp supervisor (clock reads answered, timed waits
    /// held or answered, futex wakes seen), if it runs.
    pub fn supervisor_counts(&self) -> Option<(u64, u64, u64)> {
        self.sup().as_ref().map(|s| {
            (
                s.shared.clock_reads.load(Ordering::Relaxed),
                s.shared.waits.load(Ordering::Relaxed),
                s.shared.wakes.load(Ordering::Relaxed),
            )
        })
    }

    /// CPU time used so far by every thread of the scheduler process (ns).
    /// Equal readings before and after a check prove no thread ran during it.
    pub fn cpu_time_ns(&self) -> Option<u64> {
        crate::seccomp::remote::process_cpu_time_ns(self.attached_pid()?).ok()
    }

    /// Under the deterministic supervisor: how many calls that may put
    /// bytes on a socket (a write, a send, a connect, a shutdown, a close)
    /// the program was let through so far, each counted before it runs (its
    /// share of [`crate::deterministic_sends`]). While it stays the same, the
    /// program has changed nothing on any of its sockets but what reading
    /// takes out. `None` in any other mode.
    pub fn deterministic_sends(&self) -> Option<u64> {
        self.sup()
            .as_ref()
            .filter(|s| s.shared.deterministic)
            .map(|s| s.shared.sends.load(Ordering::SeqCst))
    }

    /// Pid of the process that attached to the page, once it has (under the
    /// seccomp supervisor: the supervised program, from its start).
    pub fn attached_pid(&self) -> Option<u32> {
        if let Some(s) = self.sup().as_ref() {
            return Some(s.shared.pid);
        }
        match self.page().owner_pid.load(Ordering::Acquire) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// Current simulated time (wall clock of the scheduler).
    pub fn now(&self) -> SimTime {
        SimTime::from_nanos(self.page().snapshot().sim_realtime_ns(real_mono_ns))
    }

    /// Current clock mode.
    pub fn clock_mode(&self) -> ClockMode {
        if self.page().snapshot().mode == MODE_REALTIME {
            ClockMode::Realtime
        } else {
            ClockMode::Frozen
        }
    }

    /// Freezes the clock at its current value, or lets it run with wall time from now on.
    pub fn set_clock_mode(&self, mode: ClockMode) {
        let now = self.now();
        let m = if mode == ClockMode::Realtime {
            MODE_REALTIME
        } else {
            MODE_FROZEN
        };
        self.page().write_clock(now.as_nanos(), real_mono_ns(), m);
        self.wake();
    }

    /// Moves simulated time to `t` and wakes the scheduler's waiters (those
    /// whose deadline has not passed go back to sleep). Moving to the current
    /// time is allowed; moving backwards is an error.
    pub fn advance_to(&self, t: SimTime) -> Result<SimTime, ControlError> {
        let now = self.now();
        if t < now {
            return Err(ControlError::Backwards { now, asked: t });
        }
        let p = self.page();
        p.write_clock(t.as_nanos(), real_mono_ns(), p.snapshot().mode);
        self.wake();
        tracing::trace!(%t, "clock advanced");
        Ok(t)
    }

    /// Moves simulated time forward by `d`.
    pub fn advance_by(&self, d: Duration) -> SimTime {
        let p = self.page();
        let t = self.now() + d;
        p.write_clock(t.as_nanos(), real_mono_ns(), p.snapshot().mode);
        self.wake();
        t
    }

    /// Closes the gate: from now on no wait of the program returns (a
    /// thread whose wait ends stays blocked at the gate, counted as
    /// parked) until [`Controller::open_gate`]. Between the two, the
    /// controller moves the clock and delivers an instant's changes; the
    /// program then observes them as one step, whatever the machine's load
    /// and however the kernel splits their delivery. Covers the waits the
    /// shim makes (linked or preloaded) and the ones the seccomp
    /// supervisor holds (timed waits); an untimed wait left to the kernel
    /// under seccomp (`epoll_wait(-1)`) is not held.
    pub fn close_gate(&self) {
        // A deterministic supervisor taking in the world outside finishes
        // first: it must see the instant whole or not at all.
        let sup = self.sup().as_ref().map(|s| s.shared.clone());
        match sup {
            Some(s) if s.deterministic => {
                let _eval = s.eval.lock().unwrap_or_else(|e| e.into_inner());
                self.page().gate.store(1, Ordering::Release);
                s.gate_closings.fetch_add(1, Ordering::AcqRel);
                // What every program of an ensemble reported is void: the
                // world moves.
                if let Some((e, _)) = self
                    .ensemble
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                {
                    e.bump();
                }
            }
            _ => self.page().gate.store(1, Ordering::Release),
        }
    }

    /// Deterministic mode: how the supervisor learns that the world outside
    /// has settled (see [`crate::Settle`]). Set before
    /// [`spawn`](Self::spawn), or at any time after.
    pub fn set_settle(&self, settle: crate::Settle) {
        *self.settle.lock().unwrap_or_else(|e| e.into_inner()) = Some(settle.clone());
        if let Some(s) = self.sup().as_ref() {
            *s.shared.settle.lock().unwrap_or_else(|e| e.into_inner()) = Some(settle);
        }
    }

    /// The table of ports this program shares with the others of its run
    /// and with the API that calls their webhooks (see [`crate::Ports`]):
    /// in every mode the connections it starts are counted there; in the
    /// deterministic mode its listening ports are the run's too. Before
    /// [`spawn`](Self::spawn). Without it, the program has a table of its
    /// own.
    pub fn set_ports(&self, ports: &crate::Ports) {
        *self.ports.lock().unwrap_or_else(|e| e.into_inner()) = Some(ports.clone());
        if let Some(s) = self.sup().as_ref() {
            *s.shared.ports.lock().unwrap_or_else(|e| e.into_inner()) = ports.clone();
        }
    }

    /// Deterministic mode beside other programs: this controller's program
    /// is member `index` of `ensemble`, whose programs then run one thread
    /// at a time among all of them (see [`crate::Ensemble`]). Before
    /// [`spawn`](Self::spawn); every member of the ensemble must join it
    /// and spawn its program, or none of them moves.
    pub fn join_ensemble(&self, ensemble: &crate::Ensemble, index: usize) {
        assert!(
            index < ensemble.members(),
            "no member {index} in {ensemble:?}"
        );
        *self.ensemble.lock().unwrap_or_else(|e| e.into_inner()) = Some((ensemble.clone(), index));
    }

    /// Opens the gate (see [`Controller::close_gate`]) and wakes whoever
    /// waits at it.
    pub fn open_gate(&self) {
        let p = self.page();
        if p.gate.swap(0, Ordering::AcqRel) == 0 {
            return;
        }
        // SAFETY: FUTEX_WAKE on a word of our shared mapping (the waiters
        // are the program's threads and the supervisor thread).
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                p.gate.as_ptr(),
                libc::FUTEX_WAKE,
                i32::MAX,
                0,
                0,
                0,
            );
        }
    }

    fn wake(&self) {
        let p = self.page();
        p.advance_futex.fetch_add(1, Ordering::AcqRel);
        // SAFETY: FUTEX_WAKE on a word of our shared mapping (not private:
        // the waiters are in another process); eventfd write of 8 bytes.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                p.advance_futex.as_ptr(),
                libc::FUTEX_WAKE,
                i32::MAX,
                0,
                0,
                0,
            );
            let one: u64 = 1;
            libc::write(
                self.eventfd.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            );
        }
        if let Some(s) = self.sup().as_ref() {
            s.shared.kick();
        }
    }

    /// Earliest deadline among the scheduler's threads currently waiting
    /// (the instant its next timer fires if nothing else happens).
    pub fn earliest_deadline(&self) -> Option<SimTime> {
        if let Some(s) = self.sup().as_ref() {
            return match s.shared.earliest.load(Ordering::Acquire) {
                u64::MAX => None,
                d => Some(SimTime::from_nanos(d)),
            };
        }
        self.page().earliest_deadline().map(SimTime::from_nanos)
    }

    /// The count of wait-related events (see [`Stamp`]).
    fn events(&self, supervised: Option<&crate::seccomp::supervisor::Shared>) -> u64 {
        match supervised {
            Some(s) => s.generation.load(Ordering::Acquire),
            None => u64::from(self.page().activity_futex.load(Ordering::Acquire)),
        }
    }

    /// Looks at the attached process once.
    pub fn probe(&self) -> Result<Probe, ControlError> {
        let pid = self.attached_pid().ok_or(ControlError::NotAttached)?;
        self.looks.probes.fetch_add(1, Ordering::Relaxed);
        let (supervised, supervising) = {
            let sup = self.sup();
            let s = sup.as_ref();
            (
                s.map(|s| s.shared.clone()),
                s.and_then(|s| s.thread.as_ref())
                    .is_some_and(|t| !t.is_finished()),
            )
        };
        let p = self.page();
        if let Some(s) = supervised.as_ref() {
            // Deterministic mode: the supervisor knows exactly whether a
            // thread runs or may run (`det_quiet`); while one may, the
            // kernel's view of the threads has nothing to add. (Once the
            // supervisor has stopped, the program has exited: the scan
            // below says so.)
            if s.deterministic && supervising && !s.det_quiet.load(Ordering::Acquire) {
                return Ok(Probe {
                    threads: 0,
                    waiting: 0,
                    all_sleeping: false,
                    exited: false,
                    earliest_deadline: self.earliest_deadline(),
                    overdue: false,
                    stamp: Stamp {
                        cpu_ns: 0,
                        events: self.events(Some(s)),
                        sends: s.sends.load(Ordering::SeqCst),
                    },
                });
            }
        }
        let sup_before = supervised
            .as_ref()
            .map(|s| (s.generation.load(Ordering::Acquire), s.pending()));
        let det_sends = |s: Option<&crate::seccomp::supervisor::Shared>| {
            s.filter(|s| s.deterministic)
                .map_or(0, |s| s.sends.load(Ordering::SeqCst))
        };
        let sends_before = det_sends(supervised.as_deref());
        let waiting_before = p.waiting_threads.load(Ordering::Acquire);
        let events_before = self.events(supervised.as_deref());
        let cpu_before = crate::seccomp::remote::process_cpu_time_ns(pid).ok();
        let exited_probe = Probe {
            threads: 0,
            waiting: 0,
            all_sleeping: false,
            exited: true,
            earliest_deadline: None,
            overdue: false,
            stamp: Stamp::default(),
        };
        let scan = {
            let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
            if tasks.as_ref().is_none_or(|t| t.pid() != pid) {
                if let Some(old) = tasks.as_ref() {
                    self.looks
                        .thread_reads
                        .fetch_add(old.reads, Ordering::Relaxed);
                }
                *tasks = match crate::tasks::Tasks::open(pid) {
                    Ok(t) => Some(t),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(exited_probe),
                    Err(source) => return Err(ControlError::Proc { pid, source }),
                };
            }
            match tasks.as_mut().expect("opened above").scan() {
                Ok(scan) => scan,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(exited_probe),
                Err(source) => return Err(ControlError::Proc { pid, source }),
            }
        };
        let threads = scan.threads;
        let mut all_sleeping = scan.all_sleeping;
        let exited = scan.exited;
        let mut waiting = p.waiting_threads.load(Ordering::Acquire);
        if waiting != waiting_before {
            all_sleeping = false; // something moved while we looked
        }
        if let (Some(s), Some((generation, pending))) = (supervised.as_ref(), sup_before) {
            // Under the supervisor a thread asleep in the kernel waits for
            // I/O, another thread, or a reply we hold: parked, unless a
            // notification is waiting or was handled while we looked.
            let moved =
                pending || s.pending() || s.generation.load(Ordering::Acquire) != generation;
            // Deterministic mode: asleep is not enough, the supervisor
            // must have found nothing to run.
            if moved || (s.deterministic && !s.det_quiet.load(Ordering::Acquire)) {
                all_sleeping = false;
            }
            waiting = if all_sleeping { threads } else { 0 };
        }
        let cpu_after = crate::seccomp::remote::process_cpu_time_ns(pid).ok();
        let events = self.events(supervised.as_deref());
        let sends = det_sends(supervised.as_deref());
        if cpu_before.is_none()
            || cpu_after != cpu_before
            || events != events_before
            || sends != sends_before
        {
            all_sleeping = false; // a thread ran, or a wait moved, while we looked
        }
        let earliest_deadline = self.earliest_deadline();
        Ok(Probe {
            threads,
            waiting,
            all_sleeping,
            exited,
            earliest_deadline,
            overdue: earliest_deadline.is_some_and(|d| d <= self.now()),
            stamp: Stamp {
                cpu_ns: cpu_after.unwrap_or(0),
                events,
                sends,
            },
        })
    }

    /// Waits, at most `bound` of wall time, until the scheduler is quiescent.
    ///
    /// Sleeps on the page's activity futex, which the shim wakes whenever a
    /// thread enters a wait, with a short poll as a safety net for changes
    /// that do not go through a wait (a thread exiting, a thread becoming
    /// asleep just after its count was published). A probe counts only if
    /// no futex wake happened in the process while it ran, no waiting thread
    /// is past its deadline, and a second probe agrees.
    pub fn wait_quiescent(&self, bound: Duration) -> Result<Quiescence, ControlError> {
        self.wait_quiescent_inner(bound, true, &|| false)
    }

    /// As [`wait_quiescent`](Self::wait_quiescent), but returns at the first
    /// quiescent probe: for a caller that checks its own sources (sockets,
    /// an API) and then confirms with one more [`probe`](Self::probe) whose
    /// [`Stamp`] must equal the one returned. One probe less per wait.
    /// `interrupt` is asked after every look that did not find the program
    /// quiescent: true ends the wait as timed out (the caller has something
    /// to do first; [`nudge`](Self::nudge) wakes the wait to ask it).
    pub fn wait_quiescent_unconfirmed(
        &self,
        bound: Duration,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<Quiescence, ControlError> {
        self.wait_quiescent_inner(bound, false, interrupt)
    }

    /// Wakes a controller waiting in
    /// [`wait_quiescent_unconfirmed`](Self::wait_quiescent_unconfirmed) so
    /// that it asks its `interrupt` again. Under `--deterministic` the
    /// supervisor's settle hook calls it when the program waits for the
    /// controller's own side to react (the controller would otherwise sleep
    /// on a program that cannot move until it does).
    pub fn nudge(&self) {
        self.page().wake_waiting_controller();
    }

    fn wait_quiescent_inner(
        &self,
        bound: Duration,
        confirm: bool,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<Quiescence, ControlError> {
        let start = Instant::now();
        let p = self.page();
        p.controller_waiting.fetch_add(1, Ordering::AcqRel);
        let _done = ControllerWaiting(p);
        let mut poll = Duration::from_micros(20);
        loop {
            let activity = p.activity_futex.load(Ordering::Acquire);
            let probe = match self.probe() {
                Ok(probe) => probe,
                Err(ControlError::NotAttached) if start.elapsed() < bound => Probe {
                    threads: 0,
                    waiting: 0,
                    all_sleeping: false,
                    exited: false,
                    earliest_deadline: None,
                    overdue: false,
                    stamp: Stamp::default(),
                },
                Err(e) => return Err(e),
            };
            if probe.exited {
                return Ok(Quiescence::Exited);
            }
            // Quiescent twice in a row with no wake-up in between: a thread
            // woken just before the first look is runnable by the second.
            let settled = |probe: &Probe| {
                probe.quiescent() && p.activity_futex.load(Ordering::Acquire) == activity
            };
            if settled(&probe)
                && (!confirm
                    || self
                        .probe()
                        .is_ok_and(|again| settled(&again) && again.stamp == probe.stamp))
            {
                return Ok(Quiescence::Quiescent {
                    earliest_deadline: probe.earliest_deadline,
                    waited: start.elapsed(),
                    stamp: probe.stamp,
                });
            }
            let elapsed = start.elapsed();
            if elapsed >= bound || interrupt() {
                return Ok(Quiescence::TimedOut { last: probe });
            }
            let wait = poll.min(bound - elapsed);
            let ts = libc::timespec {
                tv_sec: wait.as_secs() as _,
                tv_nsec: wait.subsec_nanos() as _,
            };
            // SAFETY: FUTEX_WAIT on a word of our shared mapping with a relative timeout.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    p.activity_futex.as_ptr(),
                    libc::FUTEX_WAIT,
                    activity,
                    &ts,
                    0,
                    0,
                )
            };
            if r == 0 || p.activity_futex.load(Ordering::Acquire) != activity {
                self.looks.activity_wake_ups.fetch_add(1, Ordering::Relaxed);
                poll = Duration::from_micros(20);
            } else {
                poll = (poll * 2).min(Duration::from_millis(1));
            }
        }
    }
}

/// Waits until the program the launcher follows has been exec'd (or the
/// command ended), or until the command's process tree is asleep with
/// nothing for the supervisor to do, seen twice with nothing run in
/// between (in deterministic mode, the supervisor found nothing to run
/// too): a state only the clock or the world outside can change, whatever
/// the machine's load. No wall-clock deadline decides anything here; the
/// polling interval only spaces the looks.
fn wait_started(
    pid: u32,
    started: &std::sync::mpsc::Receiver<()>,
    shared: &crate::seccomp::supervisor::Shared,
) {
    use std::sync::mpsc::RecvTimeoutError;
    let mut poll = Duration::from_millis(1);
    let mut last = None;
    loop {
        match started.recv_timeout(poll) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        poll = (poll * 2).min(Duration::from_millis(20));
        let det = shared.deterministic;
        let generation = shared.generation.load(Ordering::Acquire);
        let idle = |s: &crate::seccomp::supervisor::Shared| {
            !s.pending() && (!det || s.det_quiet.load(Ordering::Acquire))
        };
        let look = idle(shared)
            .then(|| crate::seccomp::launch::tree_asleep(pid, det))
            .flatten()
            .filter(|_| idle(shared) && shared.generation.load(Ordering::Acquire) == generation)
            .map(|tree| (tree, generation));
        if look.is_some() && look == last {
            tracing::info!(
                pid,
                "seccomp launcher: the command waits (on the clock or the world outside) \
                 without having exec'd a program past its wrappers; handing it over, \
                 still followed"
            );
            return;
        }
        last = look;
    }
}

struct ControllerWaiting<'a>(&'a Page);

impl Drop for ControllerWaiting<'_> {
    fn drop(&mut self) {
        self.0.controller_waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(mut s) = self.sup().take() {
            s.shared.stop();
            if let Some(t) = s.thread.take() {
                let _ = t.join();
            }
        }
        // SAFETY: unmapping our own mapping; nothing borrows it past self.
        unsafe { libc::munmap(self.page as *mut libc::c_void, PAGE_BYTES) };
        let _ = std::fs::remove_file(&self.path);
    }
}
