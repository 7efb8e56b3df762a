//! Simulated time for any binary: a seccomp supervisor (`--shim seccomp`).
//!
//! Static and Go binaries read the clock through the vDSO, which no
//! preloaded library reaches. [`launch`] starts the program under a seccomp
//! filter with a user-notification listener ([`filter`]), and at its exec
//! stop, by a brief ptrace, points the vDSO's clock functions at a stub
//! that reads the clock page ([`vdso`]): a clock read costs a few
//! nanoseconds and no system call. Where that cannot be done the vDSO is
//! hidden (`AT_SYSINFO_EHDR` retagged): Go's runtime and glibc then make
//! real `clock_gettime` system calls. The filter hands those, and every
//! timed wait, to a supervisor thread of the controlling process
//! ([`supervisor`]), which answers from the clock page the controller
//! writes.
//!
//! The supervisor knows, thread by thread, who waits on what until when;
//! with the kernel's view of the threads (all asleep) and the process's CPU
//! time (unchanged across the check), quiescence is exact, with no grace
//! period. See `timeshim/README.md` for what is covered and the limits.

mod ensemble;
pub(crate) mod filter;
pub(crate) mod gort;
pub(crate) mod launch;
pub mod remote;
pub(crate) mod supervisor;
pub(crate) mod tsc;
pub(crate) mod vdso;

pub use ensemble::Ensemble;

/// See [`crate::deterministic_sends`].
pub(crate) static DETERMINISTIC_SENDS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// See [`crate::set_spin_bound`].
pub(crate) static SPIN_BOUND: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(crate::DEFAULT_SPIN_BOUND);
/// See [`crate::spin_stats`].
pub(crate) static SPINS_HELD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
pub(crate) static BUSIEST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// See [`crate::set_go_poller_elision`].
pub(crate) static GO_POLLER_ELISION: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);
/// Go poller wake-ups passed over (see
/// `Supervisor::go_poll_wait`), in this process so far.
pub(crate) static EARLY_WAKES_PASSED: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// The world outside a deterministic program may have settled (see
/// [`crate::settle_progress`]): a futex word bumped on every such event,
/// and how many supervisors sleep on it.
pub(crate) mod progress {
    use std::sync::atomic::{AtomicU32, Ordering};

    pub(crate) static WORD: AtomicU32 = AtomicU32::new(0);
    static SLEEPERS: AtomicU32 = AtomicU32::new(0);

    pub(crate) fn bump() {
        WORD.fetch_add(1, Ordering::SeqCst);
        if SLEEPERS.load(Ordering::SeqCst) != 0 {
            // SAFETY: FUTEX_WAKE on a static word.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    WORD.as_ptr(),
                    libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                    i32::MAX,
                    0,
                    0,
                    0,
                )
            };
        }
    }

    /// Sleeps until the word moves past `seen`, or `timeout`.
    pub(crate) fn wait(seen: u32, timeout: std::time::Duration) {
        SLEEPERS.fetch_add(1, Ordering::SeqCst);
        if WORD.load(Ordering::SeqCst) == seen {
            let ts = libc::timespec {
                tv_sec: timeout.as_secs() as _,
                tv_nsec: timeout.subsec_nanos() as _,
            };
            // SAFETY: FUTEX_WAIT on a static word with a relative timeout.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    WORD.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    seen,
                    &ts,
                    0,
                    0,
                )
            };
        }
        SLEEPERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// For tests of the quiescence protocol: make the supervisor slow on
/// purpose, as a preempted thread on a loaded machine is.
#[doc(hidden)]
pub mod testing {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    pub(crate) static READY_DELAY_US: AtomicU64 = AtomicU64::new(0);

    /// The supervisor sleeps this long (wall time) before it takes in the
    /// events of a held wait whose descriptors became ready.
    pub fn delay_ready_handling(d: Duration) {
        READY_DELAY_US.store(d.as_micros() as u64, Ordering::Relaxed);
    }

    pub(crate) fn ready_delay() {
        let us = READY_DELAY_US.load(Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
    }
}

/// A deterministic byte stream (splitmix64) for `--seed`: `AT_RANDOM` and
/// `getrandom`. Not cryptographic, by design: the point is reproducibility.
#[derive(Debug, Clone, Default)]
pub(crate) struct SeededBytes {
    state: u64,
}

impl SeededBytes {
    pub fn new(seed: u64) -> Self {
        SeededBytes { state: seed }
    }

    /// A number in `0..n` (n > 0): the seeded picks of the deterministic
    /// mode.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}
