//! Scheduler side: the libc time functions, answered from the shared page.
//!
//! Reads (`clock_gettime`, `gettimeofday`, `time`) are a seqlock read of the
//! page: a few memory loads, no syscall. Waits (`nanosleep`,
//! `clock_nanosleep`, `epoll_wait`/`epoll_pwait`/`epoll_pwait2`, and futex
//! waits made through `syscall(SYS_futex, ..)`, which is how std's parking,
//! `Condvar::wait_timeout` and parking_lot wait) turn their timeout into a
//! simulated deadline and block until the controller moves the clock past it,
//! or until the thing waited on happens:
//!
//! - futex waits use `futex_waitv` (Linux 5.16+) on two words at once: the
//!   caller's futex and the page's `advance_futex`, which the controller bumps
//!   and wakes on every clock change;
//! - epoll waits register the controller's eventfd (inherited, edge-triggered,
//!   tagged with a marker that is stripped from the results) in the caller's
//!   epoll set, so one `epoll_pwait` returns on real I/O or on a clock change.
//!
//! Everything here avoids allocation and locks; real functions are reached
//! with raw syscalls (inline asm) or, for the vDSO clock, `dlsym(RTLD_NEXT)`.
//! Nothing in this module may call `libc::syscall` or `libc::clock_gettime`:
//! in linked mode those names resolve to the functions below.

use crate::page::{
    Page, ENV_EVENTFD, ENV_PAGE, MAGIC, MODE_REALTIME, NO_DEADLINE, PAGE_BYTES, SLOTS, VERSION,
};
use libc::{c_int, c_long, c_void, clockid_t, epoll_event, sigset_t, time_t, timespec, timeval};
use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, AtomicUsize, Ordering};

const NS: u64 = 1_000_000_000;
const TAI_OFFSET_NS: u64 = 37 * NS;
/// `epoll_event.u64` of the controller's eventfd inside a caller's epoll set.
const EPOLL_MARKER: u64 = 0x7473_6869_6d5f_6566; // "tshim_ef"

mod raw {
    use libc::c_long;

    /// A raw Linux syscall; returns the kernel's value (negative errno on error).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn syscall6(
        n: c_long,
        a1: usize,
        a2: usize,
        a3: usize,
        a4: usize,
        a5: usize,
        a6: usize,
    ) -> isize {
        let ret: isize;
        #[cfg(target_arch = "x86_64")]
        core::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a1, in("rsi") a2, in("rdx") a3, in("r10") a4, in("r8") a5, in("r9") a6,
            lateout("rcx") _, lateout("r11") _,
            options(nostack)
        );
        #[cfg(target_arch = "aarch64")]
        core::arch::asm!(
            "svc 0",
            in("x8") n as usize,
            inlateout("x0") a1 => ret,
            in("x1") a2, in("x2") a3, in("x3") a4, in("x4") a5, in("x5") a6,
            options(nostack)
        );
        ret
    }
}

#[inline(always)]
unsafe fn sys(n: c_long, args: [usize; 6]) -> isize {
    raw::syscall6(n, args[0], args[1], args[2], args[3], args[4], args[5])
}

/// glibc `syscall()` convention: -1 and errno on error.
#[inline]
unsafe fn ret_errno(r: isize) -> c_long {
    if (-4095..0).contains(&r) {
        *libc::__errno_location() = -r as c_int;
        -1
    } else {
        r as c_long
    }
}

#[inline]
unsafe fn set_errno(e: c_int) {
    *libc::__errno_location() = e;
}

// ---------------------------------------------------------------- state --

const UNINIT: u8 = 0;
const INITIALIZING: u8 = 1;
const READY: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static PAGE: AtomicPtr<Page> = AtomicPtr::new(std::ptr::null_mut());
static EVENTFD: AtomicI32 = AtomicI32::new(-1);
static REAL_CLOCK_GETTIME: AtomicUsize = AtomicUsize::new(0);
static REAL_CONNECT: AtomicUsize = AtomicUsize::new(0);
/// 0 unknown, 1 available, 2 ENOSYS.
static FUTEX_WAITV: AtomicU8 = AtomicU8::new(0);

type ClockGettimeFn = unsafe extern "C" fn(clockid_t, *mut timespec) -> c_int;

/// The page if this process runs under a controller, initialising on first use.
#[inline(always)]
fn page() -> Option<&'static Page> {
    if STATE.load(Ordering::Acquire) != READY {
        init_slow();
    }
    let p = PAGE.load(Ordering::Acquire);
    // SAFETY: set once to a MAP_SHARED mapping that is never unmapped.
    unsafe { p.as_ref() }
}

#[cold]
fn init_slow() {
    match STATE.compare_exchange(UNINIT, INITIALIZING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // SAFETY: runs once; only libc calls that do not read clocks.
            unsafe { init() };
            STATE.store(READY, Ordering::Release);
        }
        Err(_) => {
            while STATE.load(Ordering::Acquire) != READY {
                // SAFETY: sched_yield has no arguments.
                unsafe { sys(libc::SYS_sched_yield, [0; 6]) };
            }
        }
    }
}

unsafe fn init() {
    let sym = libc::dlsym(libc::RTLD_NEXT, c"clock_gettime".as_ptr());
    if !sym.is_null() && !std::ptr::eq(sym as *const (), clock_gettime as *const ()) {
        REAL_CLOCK_GETTIME.store(sym as usize, Ordering::Release);
    }
    let sym = libc::dlsym(libc::RTLD_NEXT, c"connect".as_ptr());
    if !sym.is_null() && !std::ptr::eq(sym as *const (), connect as *const ()) {
        REAL_CONNECT.store(sym as usize, Ordering::Release);
    }
    let path = libc::getenv(c"TIMESHIM_PAGE".as_ptr());
    debug_assert_eq!(ENV_PAGE, "TIMESHIM_PAGE");
    if path.is_null() {
        return;
    }
    let fd = libc::open(path, libc::O_RDWR | libc::O_CLOEXEC);
    if fd < 0 {
        return;
    }
    let addr = libc::mmap(
        std::ptr::null_mut(),
        PAGE_BYTES,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED,
        fd,
        0,
    );
    libc::close(fd);
    if addr == libc::MAP_FAILED {
        return;
    }
    let page = &*(addr as *const Page);
    if page.magic.load(Ordering::Acquire) != MAGIC
        || page.version.load(Ordering::Acquire) != VERSION
    {
        libc::munmap(addr, PAGE_BYTES);
        return;
    }
    // The first process to attach owns the page; processes it spawns inherit
    // the environment but must run on real time.
    let pid = libc::getpid() as u32;
    match page
        .owner_pid
        .compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => {}
        Err(owner) if owner == pid => {}
        Err(_) => {
            libc::munmap(addr, PAGE_BYTES);
            return;
        }
    }
    page.counts_connects.store(1, Ordering::Release);
    let efd = libc::getenv(c"TIMESHIM_EVENTFD".as_ptr());
    debug_assert_eq!(ENV_EVENTFD, "TIMESHIM_EVENTFD");
    if !efd.is_null() {
        let mut n: i32 = 0;
        let mut p = efd;
        let mut ok = *p != 0;
        while *p != 0 {
            let c = *p as u8;
            if !c.is_ascii_digit() || n > 1_000_000 {
                ok = false;
                break;
            }
            n = n * 10 + (c - b'0') as i32;
            p = p.add(1);
        }
        if ok && libc::fcntl(n, libc::F_GETFD) >= 0 {
            EVENTFD.store(n, Ordering::Release);
        }
    }
    PAGE.store(addr as *mut Page, Ordering::Release);
}

// No load-time constructor on purpose: the page is claimed at the first clock
// read or timed wait, so a wrapper (e.g. `sh -c`) that only forks and waits
// does not claim it before the scheduler it starts.

// ------------------------------------------------------------ real clock --

#[inline]
unsafe fn real_clock_gettime(clk: clockid_t, tp: *mut timespec) -> c_int {
    let f = REAL_CLOCK_GETTIME.load(Ordering::Relaxed);
    if f != 0 {
        let f: ClockGettimeFn = std::mem::transmute::<usize, ClockGettimeFn>(f);
        f(clk, tp)
    } else {
        ret_errno(sys(
            libc::SYS_clock_gettime,
            [clk as usize, tp as usize, 0, 0, 0, 0],
        )) as c_int
    }
}

#[inline]
fn real_mono_ns() -> u64 {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { real_clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * NS + ts.tv_nsec as u64
}

#[inline(always)]
fn sim_now(page: &Page) -> u64 {
    page.snapshot().sim_realtime_ns(real_mono_ns)
}

/// Simulated value of `clk` in ns, or None for clocks that stay real (CPU time).
#[inline(always)]
fn sim_clock_ns(page: &Page, clk: clockid_t) -> Option<u64> {
    let snap = page.snapshot();
    let rt = || snap.sim_realtime_ns(real_mono_ns);
    match clk {
        libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_REALTIME_ALARM => {
            Some(rt())
        }
        libc::CLOCK_TAI => Some(rt() + TAI_OFFSET_NS),
        libc::CLOCK_MONOTONIC
        | libc::CLOCK_MONOTONIC_RAW
        | libc::CLOCK_MONOTONIC_COARSE
        | libc::CLOCK_BOOTTIME
        | libc::CLOCK_BOOTTIME_ALARM => Some(rt().saturating_sub(snap.mono_offset_ns)),
        _ => None,
    }
}

/// Converts an absolute time on `clk` into a simulated realtime deadline.
fn abs_to_deadline(page: &Page, clk: clockid_t, abs_ns: u64) -> Option<u64> {
    let snap = page.snapshot();
    match clk {
        libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_REALTIME_ALARM => {
            Some(abs_ns)
        }
        libc::CLOCK_TAI => Some(abs_ns.saturating_sub(TAI_OFFSET_NS)),
        libc::CLOCK_MONOTONIC
        | libc::CLOCK_MONOTONIC_RAW
        | libc::CLOCK_MONOTONIC_COARSE
        | libc::CLOCK_BOOTTIME
        | libc::CLOCK_BOOTTIME_ALARM => Some(abs_ns.saturating_add(snap.mono_offset_ns)),
        _ => None,
    }
}

fn ts_to_ns(ts: &timespec) -> Option<u64> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return None;
    }
    Some(
        (ts.tv_sec as u64)
            .saturating_mul(NS)
            .saturating_add(ts.tv_nsec as u64),
    )
}

fn ns_to_ts(ns: u64) -> timespec {
    timespec {
        tv_sec: (ns / NS) as time_t,
        tv_nsec: (ns % NS) as _,
    }
}

// ------------------------------------------------------- clock interposers --

/// # Safety
/// Same contract as libc's `clock_gettime`.
#[no_mangle]
pub unsafe extern "C" fn clock_gettime(clk: clockid_t, tp: *mut timespec) -> c_int {
    if let Some(page) = page() {
        if let Some(ns) = sim_clock_ns(page, clk) {
            if tp.is_null() {
                set_errno(libc::EFAULT);
                return -1;
            }
            *tp = ns_to_ts(ns);
            return 0;
        }
    }
    real_clock_gettime(clk, tp)
}

/// # Safety
/// Same contract as libc's `gettimeofday`.
#[no_mangle]
pub unsafe extern "C" fn gettimeofday(tv: *mut timeval, tz: *mut c_void) -> c_int {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if clock_gettime(libc::CLOCK_REALTIME, &mut ts) != 0 {
        return -1;
    }
    if !tv.is_null() {
        *tv = timeval {
            tv_sec: ts.tv_sec,
            tv_usec: (ts.tv_nsec / 1000) as _,
        };
    }
    if !tz.is_null() {
        // struct timezone { int tz_minuteswest; int tz_dsttime; }: UTC.
        *(tz as *mut [c_int; 2]) = [0, 0];
    }
    0
}

/// # Safety
/// Same contract as libc's `time`.
#[no_mangle]
pub unsafe extern "C" fn time(t: *mut time_t) -> time_t {
    let mut ts = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if clock_gettime(libc::CLOCK_REALTIME, &mut ts) != 0 {
        return -1;
    }
    if !t.is_null() {
        *t = ts.tv_sec;
    }
    ts.tv_sec
}

// -------------------------------------------------------- wait bookkeeping --

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}
const NO_SLOT: usize = usize::MAX - 1;

fn my_slot(page: &Page) -> usize {
    let s = SLOT.with(|s| s.get());
    if s != usize::MAX {
        return s;
    }
    // SAFETY: raw syscalls without pointer arguments.
    let (pid, tid) = unsafe {
        (
            sys(libc::SYS_getpid, [0; 6]) as u32,
            sys(libc::SYS_gettid, [0; 6]) as u32,
        )
    };
    let mut found = NO_SLOT;
    for (i, slot) in page.slots.iter().enumerate() {
        let owner = slot.tid.load(Ordering::Acquire);
        let free = owner == 0
            || owner == tid
            || (slot.waiting.load(Ordering::Acquire) == 0
                // SAFETY: signal 0 only checks that the thread exists.
                && unsafe { sys(libc::SYS_tgkill, [pid as usize, owner as usize, 0, 0, 0, 0]) } == -(libc::ESRCH as isize));
        if free
            && slot
                .tid
                .compare_exchange(owner, tid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            found = i;
            break;
        }
    }
    debug_assert!(found == NO_SLOT || found < SLOTS);
    SLOT.with(|s| s.set(found));
    found
}

/// Marks the calling thread as parked in a shim wait until `deadline`.
struct WaitGuard<'a> {
    page: &'a Page,
    slot: usize,
}

impl<'a> WaitGuard<'a> {
    fn enter(page: &'a Page, deadline: u64) -> Self {
        let slot = my_slot(page);
        if slot < SLOTS {
            page.slots[slot]
                .deadline_ns
                .store(deadline, Ordering::Release);
            page.slots[slot].waiting.store(1, Ordering::Release);
        }
        page.waiting_threads.fetch_add(1, Ordering::AcqRel);
        if page.controller_waiting.load(Ordering::Acquire) != 0 {
            page.activity_futex.fetch_add(1, Ordering::AcqRel);
            // SAFETY: wakes waiters of a word inside the shared mapping.
            unsafe {
                sys(
                    libc::SYS_futex,
                    [
                        page.activity_futex.as_ptr() as usize,
                        libc::FUTEX_WAKE as usize,
                        i32::MAX as usize,
                        0,
                        0,
                        0,
                    ],
                )
            };
        }
        WaitGuard { page, slot }
    }
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if self.slot < SLOTS {
            self.page.slots[self.slot]
                .waiting
                .store(0, Ordering::Release);
            self.page.slots[self.slot]
                .deadline_ns
                .store(NO_DEADLINE, Ordering::Release);
        }
        self.page.waiting_threads.fetch_sub(1, Ordering::AcqRel);
    }
}

#[repr(C)]
struct FutexWaitv {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}
const FUTEX2_SIZE_U32: u32 = 0x02;
const FUTEX2_PRIVATE: u32 = 128;
const SYS_FUTEX_WAITV: c_long = 449;

enum Wake {
    Deadline,
    UserWoken,
    UserMismatch,
    Interrupted,
    Failed(c_int),
}

/// A futex word the caller waits on: address, expected value, private flag.
type UserFutex = (*const u32, u32, bool);

/// Blocks until simulated time reaches `deadline`, or the user futex is woken.
unsafe fn wait_until(page: &Page, deadline: u64, user: Option<UserFutex>) -> Wake {
    let w = wait_until_ungated(page, deadline, user);
    if matches!(w, Wake::Deadline | Wake::UserWoken) {
        pass_gate(page);
    }
    w
}

/// Blocks while the controller delivers an instant (the page's `gate`):
/// a wait that ends meanwhile (the clock moved, the first bytes of the
/// instant arrived) returns only once the whole instant is there to see.
unsafe fn pass_gate(page: &Page) {
    loop {
        let g = page.gate.load(Ordering::Acquire);
        if g == 0 {
            return;
        }
        // SAFETY: waits on a word of the shared mapping (not private: the
        // controller is another process) while it holds the value read.
        sys(
            libc::SYS_futex,
            [
                page.gate.as_ptr() as usize,
                libc::FUTEX_WAIT as usize,
                g as usize,
                0,
                0,
                0,
            ],
        );
    }
}

unsafe fn wait_until_ungated(page: &Page, deadline: u64, user: Option<UserFutex>) -> Wake {
    loop {
        let seq = page.advance_futex.load(Ordering::Acquire);
        let snap = page.snapshot();
        let now = snap.sim_realtime_ns(real_mono_ns);
        if now >= deadline {
            return Wake::Deadline;
        }
        let real_abs =
            (snap.mode == MODE_REALTIME).then(|| real_mono_ns().saturating_add(deadline - now));
        let r = match user {
            None => {
                let rel = real_abs.map(|a| ns_to_ts(a.saturating_sub(real_mono_ns())));
                let tsp = rel
                    .as_ref()
                    .map_or(std::ptr::null(), |t| t as *const timespec);
                sys(
                    libc::SYS_futex,
                    [
                        page.advance_futex.as_ptr() as usize,
                        libc::FUTEX_WAIT as usize,
                        seq as usize,
                        tsp as usize,
                        0,
                        0,
                    ],
                )
            }
            Some((addr, val, private)) => {
                if FUTEX_WAITV.load(Ordering::Relaxed) == 2 {
                    // No futex_waitv: wait on the caller's word in 1 ms slices.
                    let ts = ns_to_ts(1_000_000);
                    let op = libc::FUTEX_WAIT | if private { libc::FUTEX_PRIVATE_FLAG } else { 0 };
                    let r = sys(
                        libc::SYS_futex,
                        [
                            addr as usize,
                            op as usize,
                            val as usize,
                            &ts as *const _ as usize,
                            0,
                            0,
                        ],
                    );
                    match r {
                        0 => return Wake::UserWoken,
                        r if r == -(libc::EAGAIN as isize) => return Wake::UserMismatch,
                        r if r == -(libc::EINTR as isize) => return Wake::Interrupted,
                        _ => continue,
                    }
                }
                let waiters = [
                    FutexWaitv {
                        val: val as u64,
                        uaddr: addr as u64,
                        flags: FUTEX2_SIZE_U32 | if private { FUTEX2_PRIVATE } else { 0 },
                        reserved: 0,
                    },
                    FutexWaitv {
                        val: seq as u64,
                        uaddr: page.advance_futex.as_ptr() as u64,
                        flags: FUTEX2_SIZE_U32,
                        reserved: 0,
                    },
                ];
                let abs = real_abs.map(ns_to_ts);
                let tsp = abs
                    .as_ref()
                    .map_or(std::ptr::null(), |t| t as *const timespec);
                let r = sys(
                    SYS_FUTEX_WAITV,
                    [
                        waiters.as_ptr() as usize,
                        2,
                        0,
                        tsp as usize,
                        libc::CLOCK_MONOTONIC as usize,
                        0,
                    ],
                );
                if r == -(libc::ENOSYS as isize) {
                    FUTEX_WAITV.store(2, Ordering::Relaxed);
                    continue;
                }
                if r == 0 {
                    return Wake::UserWoken;
                }
                if r == -(libc::EAGAIN as isize) && std::ptr::read_volatile(addr) != val {
                    return Wake::UserMismatch;
                }
                r
            }
        };
        match r {
            r if r >= 0 => {}
            r if r == -(libc::EAGAIN as isize) || r == -(libc::ETIMEDOUT as isize) => {}
            r if r == -(libc::EINTR as isize) => return Wake::Interrupted,
            r => return Wake::Failed(-r as c_int),
        }
    }
}

// --------------------------------------------------------- wait interposers --

/// # Safety
/// Same contract as libc's `nanosleep`.
#[no_mangle]
pub unsafe extern "C" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    match clock_nanosleep(libc::CLOCK_MONOTONIC, 0, req, rem) {
        0 => 0,
        e => {
            set_errno(e);
            -1
        }
    }
}

/// # Safety
/// Same contract as libc's `clock_nanosleep` (returns an error number).
#[no_mangle]
pub unsafe extern "C" fn clock_nanosleep(
    clk: clockid_t,
    flags: c_int,
    req: *const timespec,
    rem: *mut timespec,
) -> c_int {
    let real = || {
        -(sys(
            libc::SYS_clock_nanosleep,
            [
                clk as usize,
                flags as usize,
                req as usize,
                rem as usize,
                0,
                0,
            ],
        ) as c_int)
    };
    let Some(page) = page() else { return real() };
    if req.is_null() {
        return libc::EFAULT;
    }
    let Some(req_ns) = ts_to_ns(&*req) else {
        return libc::EINVAL;
    };
    let deadline = if flags & libc::TIMER_ABSTIME != 0 {
        match abs_to_deadline(page, clk, req_ns) {
            Some(d) => d,
            None => return real(),
        }
    } else {
        if sim_clock_ns(page, clk).is_none() {
            return real();
        }
        sim_now(page).saturating_add(req_ns)
    };
    let _guard = WaitGuard::enter(page, deadline);
    match wait_until(page, deadline, None) {
        Wake::Interrupted => {
            if flags & libc::TIMER_ABSTIME == 0 && !rem.is_null() {
                *rem = ns_to_ts(deadline.saturating_sub(sim_now(page)));
            }
            libc::EINTR
        }
        Wake::Failed(e) => e,
        _ => 0,
    }
}

unsafe fn real_epoll_pwait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout_ms: c_int,
    sigmask: *const sigset_t,
) -> isize {
    sys(
        libc::SYS_epoll_pwait,
        [
            epfd as usize,
            events as usize,
            max as usize,
            timeout_ms as isize as usize,
            sigmask as usize,
            8,
        ],
    )
}

/// Removes the controller's eventfd events from a result array.
unsafe fn strip_marker(events: *mut epoll_event, n: usize) -> usize {
    let mut kept = 0;
    for i in 0..n {
        let ev = std::ptr::read_unaligned(events.add(i));
        if ev.u64 == EPOLL_MARKER {
            continue;
        }
        std::ptr::write_unaligned(events.add(kept), ev);
        kept += 1;
    }
    kept
}

/// Shared body of the epoll interposers; `timeout_ns` None waits forever.
unsafe fn epoll_sim(
    page: &Page,
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout_ns: Option<u64>,
    sigmask: *const sigset_t,
) -> c_int {
    let efd = EVENTFD.load(Ordering::Relaxed);
    if efd >= 0 {
        let mut ev = epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: EPOLL_MARKER,
        };
        // EEXIST after the first call on this epoll set is expected.
        sys(
            libc::SYS_epoll_ctl,
            [
                epfd as usize,
                libc::EPOLL_CTL_ADD as usize,
                efd as usize,
                &mut ev as *mut _ as usize,
                0,
                0,
            ],
        );
    }
    if timeout_ns == Some(0) {
        let r = real_epoll_pwait(epfd, events, max, 0, sigmask);
        if r < 0 {
            return ret_errno(r) as c_int;
        }
        return strip_marker(events, r as usize) as c_int;
    }
    let deadline = timeout_ns.map_or(NO_DEADLINE, |t| sim_now(page).saturating_add(t));
    let _guard = WaitGuard::enter(page, deadline);
    let n = loop {
        let snap = page.snapshot();
        let now = snap.sim_realtime_ns(real_mono_ns);
        if deadline != NO_DEADLINE && now >= deadline {
            break 0;
        }
        let mut ms: c_int = -1;
        if snap.mode == MODE_REALTIME && deadline != NO_DEADLINE {
            ms = (deadline - now).div_ceil(1_000_000).min(i32::MAX as u64) as c_int;
        }
        if efd < 0 && !(0..=1).contains(&ms) {
            ms = 1; // no eventfd: notice clock changes within 1 ms
        }
        let r = real_epoll_pwait(epfd, events, max, ms, sigmask);
        if r < 0 {
            return ret_errno(r) as c_int;
        }
        let n = strip_marker(events, r as usize);
        if n > 0 {
            break n;
        }
    };
    // Woken during an instant's delivery: wait for the rest of it, then
    // take whatever else became ready meanwhile with this wake (the events
    // already taken are edge-triggered for most callers: they stay).
    if page.gate.load(Ordering::Acquire) == 0 {
        return n as c_int;
    }
    pass_gate(page);
    let room = (max as usize).saturating_sub(n);
    if room == 0 {
        return n as c_int;
    }
    let r = real_epoll_pwait(epfd, events.add(n), room as c_int, 0, sigmask);
    if r < 0 {
        return n as c_int;
    }
    (n + strip_marker(events.add(n), r as usize)) as c_int
}

/// # Safety
/// Same contract as libc's `epoll_wait`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    epoll_pwait(epfd, events, max, timeout, std::ptr::null())
}

/// # Safety
/// Same contract as libc's `epoll_pwait`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    sigmask: *const sigset_t,
) -> c_int {
    match page() {
        None => ret_errno(real_epoll_pwait(epfd, events, max, timeout, sigmask)) as c_int,
        Some(page) => {
            let t = (timeout >= 0).then(|| timeout as u64 * 1_000_000);
            epoll_sim(page, epfd, events, max, t, sigmask)
        }
    }
}

/// # Safety
/// Same contract as libc's `epoll_pwait2`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: *const timespec,
    sigmask: *const sigset_t,
) -> c_int {
    match page() {
        None => ret_errno(sys(
            441, // SYS_epoll_pwait2, same number on x86_64 and the generic table
            [
                epfd as usize,
                events as usize,
                max as usize,
                timeout as usize,
                sigmask as usize,
                8,
            ],
        )) as c_int,
        Some(page) => {
            let t = if timeout.is_null() {
                None
            } else {
                match ts_to_ns(&*timeout) {
                    Some(t) => Some(t),
                    None => {
                        set_errno(libc::EINVAL);
                        return -1;
                    }
                }
            };
            epoll_sim(page, epfd, events, max, t, sigmask)
        }
    }
}

/// Futex waits: returns Some(result) when the shim handled the call.
unsafe fn futex_hook(uaddr: usize, op: c_int, val: u32, timeout: usize) -> Option<c_long> {
    let cmd = op & !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME);
    if cmd != libc::FUTEX_WAIT && cmd != libc::FUTEX_WAIT_BITSET {
        return None;
    }
    let page = page()?;
    if timeout == 0 {
        let _guard = WaitGuard::enter(page, NO_DEADLINE);
        return Some(ret_errno(sys(
            libc::SYS_futex,
            [uaddr, op as usize, val as usize, 0, 0, !0u32 as usize],
        )));
    }
    let t = ts_to_ns(&*(timeout as *const timespec));
    let Some(t) = t else {
        set_errno(libc::EINVAL);
        return Some(-1);
    };
    let deadline = if cmd == libc::FUTEX_WAIT {
        sim_now(page).saturating_add(t)
    } else if op & libc::FUTEX_CLOCK_REALTIME != 0 {
        t
    } else {
        abs_to_deadline(page, libc::CLOCK_MONOTONIC, t)?
    };
    let private = op & libc::FUTEX_PRIVATE_FLAG != 0;
    let _guard = WaitGuard::enter(page, deadline);
    let (r, e) = match wait_until(page, deadline, Some((uaddr as *const u32, val, private))) {
        Wake::UserWoken => (0, 0),
        Wake::Deadline => (-1, libc::ETIMEDOUT),
        Wake::UserMismatch => (-1, libc::EAGAIN),
        Wake::Interrupted => (-1, libc::EINTR),
        Wake::Failed(e) => (-1, e),
    };
    if r < 0 {
        set_errno(e);
    }
    Some(r)
}

/// A futex wake that woke a thread while the controller waits for
/// quiescence bumps the activity word, so a probe that raced with the wake-up
/// (the woken thread not yet marked runnable) is discarded.
fn note_wake(op: c_int) {
    let cmd = op & !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME);
    if !matches!(
        cmd,
        libc::FUTEX_WAKE
            | libc::FUTEX_WAKE_BITSET
            | libc::FUTEX_WAKE_OP
            | libc::FUTEX_REQUEUE
            | libc::FUTEX_CMP_REQUEUE
    ) {
        return;
    }
    if let Some(page) = page() {
        if page.controller_waiting.load(Ordering::Relaxed) != 0 {
            page.activity_futex.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// `syscall(2)`: futex waits are simulated, everything else passes through.
///
/// Declared with six fixed arguments: on x86_64 and aarch64 Linux, variadic
/// integer arguments travel in the same registers as fixed ones.
///
/// # Safety
/// Same contract as libc's `syscall`.
#[no_mangle]
pub unsafe extern "C" fn syscall(
    n: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    if n == libc::SYS_futex {
        if let Some(r) = futex_hook(a1 as usize, a2 as c_int, a3 as u32, a4 as usize) {
            return r;
        }
    }
    if n == libc::SYS_connect {
        note_connect(a2 as *const libc::sockaddr, a3 as libc::socklen_t);
    }
    let r = sys(
        n,
        [
            a1 as usize,
            a2 as usize,
            a3 as usize,
            a4 as usize,
            a5 as usize,
            a6 as usize,
        ],
    );
    if n == libc::SYS_futex && r > 0 {
        note_wake(a2 as c_int);
    }
    ret_errno(r)
}

// ------------------------------------------------------------- connections --

type ConnectFn = unsafe extern "C" fn(c_int, *const libc::sockaddr, libc::socklen_t) -> c_int;

/// Counts a connection about to be started (an IPv4 or IPv6 address), for
/// the controller's look at handshakes in progress (`Page::connects`).
unsafe fn note_connect(addr: *const libc::sockaddr, len: libc::socklen_t) {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return;
    }
    let family = c_int::from((*addr).sa_family);
    if family != libc::AF_INET && family != libc::AF_INET6 {
        return;
    }
    if let Some(p) = page() {
        p.connects.fetch_add(1, Ordering::AcqRel);
    }
}

/// # Safety
/// Same contract as libc's `connect`.
#[no_mangle]
pub unsafe extern "C" fn connect(
    fd: c_int,
    addr: *const libc::sockaddr,
    len: libc::socklen_t,
) -> c_int {
    // Counted first: the controller must never see a handshake the count
    // does not cover (`page()` also resolves the real `connect`).
    note_connect(addr, len);
    match REAL_CONNECT.load(Ordering::Acquire) {
        0 => ret_errno(sys(
            libc::SYS_connect,
            [fd as usize, addr as usize, len as usize, 0, 0, 0],
        )) as c_int,
        // SAFETY: resolved by dlsym for this very symbol.
        real => std::mem::transmute::<usize, ConnectFn>(real)(fd, addr, len),
    }
}

/// Every interposed symbol, referenced from [`crate::install`] so the linker
/// keeps them in a binary that links the shim.
pub(crate) fn symbols() -> [usize; 10] {
    [
        clock_gettime as *const () as usize,
        gettimeofday as *const () as usize,
        time as *const () as usize,
        nanosleep as *const () as usize,
        clock_nanosleep as *const () as usize,
        epoll_wait as *const () as usize,
        epoll_pwait as *const () as usize,
        epoll_pwait2 as *const () as usize,
        syscall as *const () as usize,
        connect as *const () as usize,
    ]
}

/// Whether this process runs under a controller.
pub(crate) fn attached() -> bool {
    page().is_some()
}
