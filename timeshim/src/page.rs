//! The shared page: the only channel between the controller (broker side) and
//! the shim (scheduler side). The controller writes the clock; the shim
//! publishes how many threads wait and until when. Both sides map the same
//! file `MAP_SHARED`, so every field is an atomic and the layout is `repr(C)`.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Environment variable naming the page file. Absent: the process runs on real time.
pub const ENV_PAGE: &str = "TIMESHIM_PAGE";
/// Environment variable naming an inherited eventfd the controller writes on
/// every clock change; the shim registers it (edge-triggered) in every epoll
/// set it waits on, so `epoll_wait` returns on clock advances as well as on I/O.
pub const ENV_EVENTFD: &str = "TIMESHIM_EVENTFD";

pub(crate) const MAGIC: u64 = 0x7469_6d65_7368_696d; // "timeshim"
pub(crate) const VERSION: u32 = 1;
/// Deadline slots: one per thread that ever waited in the shim.
pub(crate) const SLOTS: usize = 1024;
/// "No deadline" in a slot.
pub(crate) const NO_DEADLINE: u64 = u64::MAX;

/// Clock mode values stored in [`Page::mode`].
pub(crate) const MODE_FROZEN: u32 = 0;
pub(crate) const MODE_REALTIME: u32 = 1;

#[repr(C)]
pub(crate) struct Slot {
    /// Kernel thread id owning the slot, 0 when free.
    pub tid: AtomicU32,
    /// 1 while the owner is inside a shim wait.
    pub waiting: AtomicU32,
    /// Simulated `CLOCK_REALTIME` deadline (ns) of the owner's current wait.
    pub deadline_ns: AtomicU64,
}

#[repr(C)]
pub(crate) struct Page {
    pub magic: AtomicU64,
    pub version: AtomicU32,
    /// First process to map the page claims it; later ones (children the
    /// scheduler spawns, which inherit the environment) run on real time.
    pub owner_pid: AtomicU32,

    // --- clock, a seqlock written by the controller only ---
    /// Even when stable, odd while the controller writes.
    pub clock_seq: AtomicU64,
    /// Simulated `CLOCK_REALTIME`, ns since the Unix epoch, at `anchor_real_ns`.
    pub sim_ns: AtomicU64,
    /// Simulated `CLOCK_MONOTONIC` = simulated realtime - `mono_offset_ns`.
    pub mono_offset_ns: AtomicU64,
    /// Real `CLOCK_MONOTONIC` when `sim_ns` was written (used in realtime mode).
    pub anchor_real_ns: AtomicU64,
    pub mode: AtomicU32,

    /// Futex word bumped after every clock change; shim waits sleep on it.
    pub advance_futex: AtomicU32,
    /// Futex word bumped by the shim when a thread enters a wait while the
    /// controller is waiting for quiescence.
    pub activity_futex: AtomicU32,
    /// Nonzero while the controller sleeps on `activity_futex`.
    pub controller_waiting: AtomicU32,
    /// Threads currently inside a shim-controlled wait.
    pub waiting_threads: AtomicU32,
    /// Nonzero while the controller delivers an instant (see
    /// `Controller::close_gate`): no shim wait returns until it is zero
    /// again, so the program observes the clock's move and the instant's
    /// I/O as one step. A futex word: the controller wakes it on opening.
    pub gate: AtomicU32,
    pub slots: [Slot; SLOTS],
    // --- after the slots: a shim or a controller of an earlier layout
    // leaves them zero (the page's size is the same) ---
    /// `connect`s of IPv4 and IPv6 sockets the owner started, each counted
    /// by the shim before the call reaches the kernel.
    pub connects: AtomicU64,
    /// 1 once a shim that counts [`Page::connects`] has attached.
    pub counts_connects: AtomicU32,
}

pub(crate) const PAGE_BYTES: usize = (std::mem::size_of::<Page>() + 4095) & !4095;

/// A consistent read of the clock fields.
#[derive(Clone, Copy)]
pub(crate) struct ClockSnapshot {
    pub sim_ns: u64,
    pub mono_offset_ns: u64,
    pub anchor_real_ns: u64,
    pub mode: u32,
}

impl Page {
    /// Wakes a controller sleeping on `activity_futex`, if one is (from the
    /// controlling process's side: the shim in the scheduler has its own
    /// raw-syscall version, free of libc).
    pub fn wake_waiting_controller(&self) {
        if self.controller_waiting.load(Ordering::Acquire) != 0 {
            self.activity_futex.fetch_add(1, Ordering::AcqRel);
            // SAFETY: FUTEX_WAKE on a word of the shared mapping.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.activity_futex.as_ptr(),
                    libc::FUTEX_WAKE,
                    i32::MAX,
                    0,
                    0,
                    0,
                )
            };
        }
    }

    #[inline(always)]
    pub fn snapshot(&self) -> ClockSnapshot {
        loop {
            let s1 = self.clock_seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let snap = ClockSnapshot {
                sim_ns: self.sim_ns.load(Ordering::Relaxed),
                mono_offset_ns: self.mono_offset_ns.load(Ordering::Relaxed),
                anchor_real_ns: self.anchor_real_ns.load(Ordering::Relaxed),
                mode: self.mode.load(Ordering::Relaxed),
            };
            fence(Ordering::Acquire);
            if self.clock_seq.load(Ordering::Relaxed) == s1 {
                return snap;
            }
        }
    }

    /// Controller only: write the clock (seqlock write side).
    pub fn write_clock(&self, sim_ns: u64, anchor_real_ns: u64, mode: u32) {
        let s = self.clock_seq.load(Ordering::Relaxed);
        self.clock_seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.sim_ns.store(sim_ns, Ordering::Relaxed);
        self.anchor_real_ns.store(anchor_real_ns, Ordering::Relaxed);
        self.mode.store(mode, Ordering::Relaxed);
        self.clock_seq.store(s + 2, Ordering::Release);
    }

    /// Earliest deadline among threads currently waiting in the shim.
    pub fn earliest_deadline(&self) -> Option<u64> {
        let mut min = NO_DEADLINE;
        for slot in self.slots.iter() {
            if slot.tid.load(Ordering::Acquire) != 0 && slot.waiting.load(Ordering::Acquire) != 0 {
                min = min.min(slot.deadline_ns.load(Ordering::Acquire));
            }
        }
        (min != NO_DEADLINE).then_some(min)
    }
}

impl ClockSnapshot {
    /// Simulated realtime (ns since epoch), given the real monotonic time
    /// (only consulted in realtime mode).
    #[inline(always)]
    pub fn sim_realtime_ns(&self, real_mono_ns: impl FnOnce() -> u64) -> u64 {
        if self.mode == MODE_FROZEN {
            self.sim_ns
        } else {
            self.sim_ns + real_mono_ns().saturating_sub(self.anchor_real_ns)
        }
    }
}
