//! timeshim: simulated clocks and timers for scheduler processes, and the
//! policies that decide when simulated time may move on.
//!
//! Two sides share one memory page (a file mapped `MAP_SHARED`, named by the
//! `TIMESHIM_PAGE` environment variable):
//!
//! - **Scheduler side** ([`install`], and the `libtimeshim.so` cdylib for
//!   `LD_PRELOAD`): the process's `clock_gettime`, `gettimeofday`, `time`,
//!   `nanosleep`, `clock_nanosleep`, `epoll_wait`/`epoll_pwait`/`epoll_pwait2`
//!   and futex waits made through `syscall()` are replaced. A clock read is a
//!   seqlock read of the page (a few loads, no syscall, no message). A timed
//!   wait becomes a simulated deadline: the thread blocks until the controller
//!   moves the clock past it, or until what it waits for happens (futex wake,
//!   real I/O). Waiters are woken by the controller through two channels,
//!   chosen so no helper thread is needed:
//!   a futex word in the page (`futex_waitv` waits on it and on the caller's
//!   futex at once) and an eventfd the child inherits, which the shim adds,
//!   edge-triggered and tagged, to every epoll set it waits on (the tag is
//!   stripped from the results). Each thread also publishes on the page
//!   whether it is in such a wait and its deadline, so the controller knows
//!   the earliest pending deadline and whether every thread is parked.
//!   CPU-time clocks and every other syscall pass through untouched. Without
//!   `TIMESHIM_PAGE` the process runs on real time, unchanged.
//! - **Control side** ([`Controller`]): used by the broker to start a scheduler
//!   under the shim, move the clock (never backwards), read the earliest
//!   deadline and wait for quiescence with a wall-clock bound.
//! - **Policies** ([`policy`]): pure logic deciding how long a window lasts
//!   and when to ask for the next wake-up; usable with or without the shim.
//!
//! `timeshim` knows nothing of Kubernetes or Batsim.

pub mod control;
pub mod elide;
mod page;
pub mod policy;
mod ports;
pub mod seccomp;
mod shim;
mod tasks;
mod time;

pub use control::{ControlError, Controller, Looks, Probe, Quiescence, ShimMode, Stamp};
pub use page::{ENV_EVENTFD, ENV_PAGE};
pub use ports::Ports;
pub use seccomp::Ensemble;
pub use time::SimTime;

/// The controller's word, asked by the seccomp supervisor in deterministic
/// mode before a thread observes the world outside (a read, a poll): true
/// when nothing the program sent is still being answered and nothing else
/// is on its way to it. Called often; must not block.
pub type Settle = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// How many calls that may put bytes on a socket (a write, a send, a
/// connect, a shutdown, a close) the seccomp supervisors of this process
/// have let deterministic-mode programs make so far. The count moves
/// before the call runs. A [`Settle`] that found the world settled may
/// answer "still settled" from that look for as long as this count and
/// everything on its own side stayed the same.
pub fn deterministic_sends() -> u64 {
    seccomp::DETERMINISTIC_SENDS.load(std::sync::atomic::Ordering::SeqCst)
}

/// The busy bound of deterministic programs: how many system calls a
/// program may make at one simulated instant without sending anything on a
/// socket it connected and without once being quiet (every thread parked,
/// nothing due) before its supervisor holds it until the clock moves. A
/// program past it is spinning: work that would end only once time passes
/// (a retry loop with no back-off, a scheduler trying the same gang again
/// and again until a node frees), which on a frozen clock never ends. Held,
/// it is quiet for the controller, so the clock goes on to the next event
/// (its own timers, the simulator's), as it would while the program spun on
/// real time; its threads go on from where they were held at the next
/// instant. Released, a program that goes on spinning is held again after
/// a [`SPIN_REHOLD_DIVISOR`]th of the bound, until it is quiet of its own
/// accord (every thread parked with none held). The count is of calls,
/// which the seed orders, so where a program is held is the same on every run; how much it did before (a
/// spinning loop's side effects, such as a client's rate-limiter debt) is
/// the bound's, not the machine's. `0`: never held (a spinning program then
/// keeps the window open until its wall-clock bound, and what it did by
/// then depends on the machine). Default [`DEFAULT_SPIN_BOUND`].
pub fn set_spin_bound(calls: u64) {
    seccomp::SPIN_BOUND.store(calls, std::sync::atomic::Ordering::Relaxed);
}

/// The default of [`set_spin_bound`]: about 6 times the most calls a
/// program made without a send between two quiet points at one instant in
/// the runs measured (3,279: batkube-scheduler starting, then 3,000 pods at
/// one instant on 1,000 nodes; 783: kube-scheduler with Coscheduling; 1,151:
/// Kueue's manager with kube-scheduler; 518: Volcano on 1,000 nodes), and
/// about 12 s of a held program's wall time on this project's 2-core machine.
pub const DEFAULT_SPIN_BOUND: u64 = 20_000;

/// After a program was held at the busy bound, and until it is quiet of
/// its own accord, it is held again after this fraction of the bound. A
/// spinner released at every tick of its own timers (the coscheduling
/// plugin retrying a gang that cannot fit, with the scheduling queue's
/// 1 s flushes) otherwise paid the whole bound, about 4 s of wall time,
/// for every millisecond of simulated time until a node freed: one run
/// took more than 20 minutes for 20 simulated seconds.
pub const SPIN_REHOLD_DIVISOR: u64 = 16;

/// How many times deterministic programs were held at the busy bound
/// ([`set_spin_bound`]) in this process so far, and the most calls a
/// program made at one instant between two quiet points without reaching it.
pub fn spin_stats() -> (u64, u64) {
    (
        seccomp::SPINS_HELD.load(std::sync::atomic::Ordering::Relaxed),
        seccomp::BUSIEST.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Whether the seccomp supervisors pass over Go pollers' early wake-ups
/// (`--elide go-poller`, [`elide::Rule::GoPoller`]; off unless set here or
/// by `TIMESHIM_GO_EARLY_WAKE=pass`). Read when a supervisor starts.
pub fn set_go_poller_elision(on: bool) {
    seccomp::GO_POLLER_ELISION.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// How many wake-ups of Go programs' network pollers the seccomp
/// supervisors passed over in this process so far under
/// [`set_go_poller_elision`]: waits that Go's millisecond rounding ends
/// before the timer they wait for, held until the poller's next wait
/// would end instead (see the supervisor's `go_poll_wait`).
pub fn go_early_wakes_passed() -> u64 {
    seccomp::EARLY_WAKES_PASSED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Tells the supervisors of deterministic programs that a [`Settle`] which
/// said "not yet" may now hold (the API went idle, the controller reacted
/// to a change). A supervisor whose settle failed sleeps until this is
/// called, or a millisecond at most: calling it is about latency only,
/// never about what is decided.
pub fn settle_progress() {
    seccomp::progress::bump();
}

/// `#[timeshim::main]` on `fn main` (above or below `#[tokio::main]`) is the
/// same as writing [`install`] as its first statement.
///
/// ```
/// #[timeshim::main]
/// fn main() {
///     // ... the scheduler, unchanged
/// }
/// ```
pub use timeshim_macros::main;

/// Puts this process on simulated time when it runs under a controller.
///
/// Call it first thing in `main` of a scheduler that links this crate (the
/// call also makes sure the linker keeps the shim's symbols). The shim also
/// initialises itself on the first clock read or timed wait, so calling it
/// after a runtime was built (e.g. inside `#[tokio::main]`) is fine.
/// Returns whether a controller page was found; without one the process
/// keeps running on real time.
///
/// ```
/// // The first statement of the scheduler's `fn main`:
/// timeshim::install();
/// ```
pub fn install() -> bool {
    std::hint::black_box(shim::symbols());
    shim::attached()
}

/// Clock behaviour during a window (see [`policy`] and [`Controller::set_clock_mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ClockMode {
    /// Simulated time stands still while the scheduler works: decisions take
    /// no simulated time and runs are reproducible.
    #[default]
    Frozen,
    /// Simulated time advances with wall time while the scheduler works,
    /// charging its decision latency.
    Realtime,
}
