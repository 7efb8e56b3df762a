//! The seccomp filter: which system calls the supervisor answers.
//!
//! A classic BPF program (seccomp cannot run eBPF) that returns
//! `SECCOMP_RET_USER_NOTIF` for the calls whose meaning depends on time and
//! `SECCOMP_RET_ALLOW` for everything else, so the cost is paid only where
//! time is involved:
//!
//! | call | notified when |
//! |---|---|
//! | `clock_gettime` | the clock is not a CPU-time clock |
//! | `gettimeofday`, `time` | always |
//! | `nanosleep` | always |
//! | `clock_nanosleep` | the clock is not a CPU-time clock |
//! | `futex` | a wait with a timeout (`FUTEX_WAIT`, `FUTEX_WAIT_BITSET`), or a wake (`FUTEX_WAKE`, `_BITSET`, `_OP`, `REQUEUE`, `CMP_REQUEUE`): a held timed waiter must see the wakes meant for it |
//! | `epoll_wait`, `epoll_pwait` | the timeout is positive (0 polls, -1 waits for I/O only) |
//! | `epoll_pwait2`, `ppoll` | a timeout is given |
//! | `poll` | the timeout is positive |
//! | `select`, `pselect6` | a timeout is given |
//! | `getrandom` | only with a seed |
//! | `connect` | always (rare): counted, then made by the kernel (the run's connections started, [`crate::Ports::connects_to`]) |
//!
//! Waits without a timeout stay in the kernel: they can only end through I/O
//! or another thread, and the quiescence check sees them as sleeping threads.

/// System call numbers (x86_64).
pub(crate) mod nr {
    pub const POLL: u32 = 7;
    pub const SELECT: u32 = 23;
    pub const NANOSLEEP: u32 = 35;
    pub const GETTIMEOFDAY: u32 = 96;
    pub const TIME: u32 = 201;
    pub const FUTEX: u32 = 202;
    pub const CLOCK_GETTIME: u32 = 228;
    pub const CLOCK_NANOSLEEP: u32 = 230;
    pub const EPOLL_WAIT: u32 = 232;
    pub const PSELECT6: u32 = 270;
    pub const PPOLL: u32 = 271;
    pub const EPOLL_PWAIT: u32 = 281;
    pub const GETRANDOM: u32 = 318;
    pub const CONNECT: u32 = 42;
    pub const EPOLL_PWAIT2: u32 = 441;
}

/// `AUDIT_ARCH_X86_64`.
const ARCH: u32 = 0xc000_003e;

// Classic BPF opcodes.
const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JSET_K: u16 = 0x45;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

const ALLOW: u32 = 0x7fff_0000;
const NOTIFY: u32 = 0x7fc0_0000;

/// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
fn arg_lo(i: u32) -> u32 {
    16 + 8 * i
}
fn arg_hi(i: u32) -> u32 {
    16 + 8 * i + 4
}

#[derive(Clone, Copy)]
enum Target {
    Allow,
    Notify,
    Go(usize),
    Next,
}

enum Op {
    Load(u32),
    And(u32),
    /// Jump to `t` if A == k, else to `f`.
    Eq(u32, Target, Target),
    /// Jump to `t` if A & k != 0, else to `f`.
    Set(u32, Target, Target),
    Ret(u32),
    At(usize),
}

/// Labels of the blocks below.
const CPU_CLOCK_ARG0: usize = 1;
const FUTEX: usize = 2;
const INT_TIMEOUT_ARG3: usize = 3;
const PTR_ARG3: usize = 4;
const INT_TIMEOUT_ARG2: usize = 5;
const PTR_ARG2: usize = 6;
const PTR_ARG3_HI: usize = 7;
const PTR_ARG2_HI: usize = 8;
const PTR_ARG4: usize = 9;
const PTR_ARG4_HI: usize = 10;

fn program(seeded: bool) -> Vec<Op> {
    use Op::*;
    use Target::*;
    let mut p = vec![
        Load(OFF_ARCH),
        Eq(ARCH, Next, Allow),
        Load(OFF_NR),
        Eq(nr::CLOCK_GETTIME, Go(CPU_CLOCK_ARG0), Next),
        Eq(nr::GETTIMEOFDAY, Notify, Next),
        Eq(nr::TIME, Notify, Next),
        Eq(nr::NANOSLEEP, Notify, Next),
        Eq(nr::CLOCK_NANOSLEEP, Go(CPU_CLOCK_ARG0), Next),
        Eq(nr::FUTEX, Go(FUTEX), Next),
        Eq(nr::EPOLL_WAIT, Go(INT_TIMEOUT_ARG3), Next),
        Eq(nr::EPOLL_PWAIT, Go(INT_TIMEOUT_ARG3), Next),
        Eq(nr::EPOLL_PWAIT2, Go(PTR_ARG3), Next),
        Eq(nr::POLL, Go(INT_TIMEOUT_ARG2), Next),
        Eq(nr::PPOLL, Go(PTR_ARG2), Next),
        Eq(nr::SELECT, Go(PTR_ARG4), Next),
        Eq(nr::PSELECT6, Go(PTR_ARG4), Next),
        // Counted by the supervisor (the run's connections started, see
        // `crate::Ports::connects_to`), then made by the kernel.
        Eq(nr::CONNECT, Notify, Next),
    ];
    if seeded {
        p.push(Eq(nr::GETRANDOM, Notify, Next));
    }
    p.extend([
        Ret(ALLOW),
        // futex: the command without the PRIVATE and CLOCK_REALTIME flags.
        At(FUTEX),
        Load(arg_lo(1)),
        And(0x7f),
        Eq(0, Go(PTR_ARG3), Next), // FUTEX_WAIT
        Eq(9, Go(PTR_ARG3), Next), // FUTEX_WAIT_BITSET
        Eq(1, Notify, Next),       // FUTEX_WAKE
        Eq(10, Notify, Next),      // FUTEX_WAKE_BITSET
        Eq(5, Notify, Next),       // FUTEX_WAKE_OP
        Eq(3, Notify, Next),       // FUTEX_REQUEUE
        Eq(4, Notify, Allow),      // FUTEX_CMP_REQUEUE
        // An int timeout: 0 polls, negative waits for I/O only.
        At(INT_TIMEOUT_ARG3),
        Load(arg_lo(3)),
        Eq(0, Allow, Next),
        Set(0x8000_0000, Allow, Notify),
        At(INT_TIMEOUT_ARG2),
        Load(arg_lo(2)),
        Eq(0, Allow, Next),
        Set(0x8000_0000, Allow, Notify),
        // A timeout pointer: NULL waits without a timeout.
        At(PTR_ARG3),
        Load(arg_lo(3)),
        Eq(0, Go(PTR_ARG3_HI), Notify),
        At(PTR_ARG3_HI),
        Load(arg_hi(3)),
        Eq(0, Allow, Notify),
        At(PTR_ARG2),
        Load(arg_lo(2)),
        Eq(0, Go(PTR_ARG2_HI), Notify),
        At(PTR_ARG2_HI),
        Load(arg_hi(2)),
        Eq(0, Allow, Notify),
        At(PTR_ARG4),
        Load(arg_lo(4)),
        Eq(0, Go(PTR_ARG4_HI), Notify),
        At(PTR_ARG4_HI),
        Load(arg_hi(4)),
        Eq(0, Allow, Notify),
    ]);
    p.extend(cpu_clock_block());
    p
}

/// The block at `CPU_CLOCK_ARG0`: the clock id in arg 0; negative ids
/// (per-thread/process CPU clocks of other tasks) and 2, 3 (this process's
/// and thread's CPU time) stay real, the others are notified.
fn cpu_clock_block() -> Vec<Op> {
    use Op::*;
    use Target::*;
    vec![
        At(CPU_CLOCK_ARG0),
        Load(arg_lo(0)),
        Set(0x8000_0000, Allow, Next),
        Eq(2, Allow, Next),
        Eq(3, Allow, Notify),
    ]
}

/// System calls a deterministic run lets through without a notification:
/// they neither block nor let one thread observe another's progress (memory
/// maps, signal dispositions, identity, file metadata), and they are the
/// frequent ones. Everything else is a point where the supervisor decides
/// which thread runs (see `supervisor`'s deterministic mode). `gettid`,
/// `rt_sigprocmask`, `set_robust_list` and `rseq` stay notified: they are a
/// new thread's first calls (Go's and glibc's), which is how the supervisor
/// learns that a thread it expects after a `clone` has arrived. Socket
/// calls that only create a socket or set its local state go through too
/// (not `getsockopt`, which reads a connection's outcome, nor
/// `getsockname` and `getpeername`, which show a port the supervisor may
/// have moved: `supervisor/ports.rs`), as does `pread64` (files only:
/// pipes and sockets refuse it).
const DETERMINISTIC_ALLOW: &[u32] = &[
    5,   // fstat
    8,   // lseek
    17,  // pread64
    41,  // socket
    54,  // setsockopt
    9,   // mmap
    10,  // mprotect
    11,  // munmap
    12,  // brk
    13,  // rt_sigaction
    21,  // access
    25,  // mremap
    28,  // madvise
    39,  // getpid
    63,  // uname
    79,  // getcwd
    89,  // readlink
    97,  // getrlimit
    98,  // getrusage
    99,  // sysinfo
    102, // getuid
    104, // getgid
    107, // geteuid
    108, // getegid
    110, // getppid
    131, // sigaltstack
    158, // arch_prctl
    204, // sched_getaffinity
    218, // set_tid_address
    229, // clock_getres
    262, // newfstatat
    267, // readlinkat
    269, // faccessat
    302, // prlimit64
    332, // statx
    439, // faccessat2
];

/// The flags of the one `sendmsg` a deterministic filter lets through
/// unseen: the launcher's, which hands the listener over to the supervisor
/// between the filter's installation and the exec (the supervisor does not
/// exist before). An odd set, that a program would hardly use on the same
/// descriptor number: `MSG_CONFIRM | MSG_DONTWAIT | MSG_EOR | MSG_NOSIGNAL |
/// MSG_MORE`.
pub(crate) const HANDOVER_FLAGS: u32 = 0x800 | 0x40 | 0x80 | 0x4000 | 0x8000;

const SENDMSG: u32 = 46;
const EXECVE: u32 = 59;
const EXECVEAT: u32 = 322;
const HANDOVER: usize = 11;
const HANDOVER_FLAGS_ARG: usize = 12;

fn deterministic_program(handover_fd: u32) -> Vec<Op> {
    use Op::*;
    use Target::*;
    let mut p = vec![Load(OFF_ARCH), Eq(ARCH, Next, Allow), Load(OFF_NR)];
    for nr in DETERMINISTIC_ALLOW {
        p.push(Eq(*nr, Allow, Next));
    }
    p.extend([
        // exec replaces the program (and ends its other threads): nothing
        // to decide; the launcher waits for it before the supervisor runs.
        Eq(EXECVE, Allow, Next),
        Eq(EXECVEAT, Allow, Next),
        Eq(SENDMSG, Go(HANDOVER), Next),
        Eq(nr::CLOCK_GETTIME, Go(CPU_CLOCK_ARG0), Notify),
        At(HANDOVER),
        Load(arg_lo(0)),
        Eq(handover_fd, Go(HANDOVER_FLAGS_ARG), Notify),
        At(HANDOVER_FLAGS_ARG),
        Load(arg_lo(2)),
        Eq(HANDOVER_FLAGS, Allow, Notify),
    ]);
    p.extend(cpu_clock_block());
    p
}

/// Assembles the filter. Returns instructions ready for `SECCOMP_SET_MODE_FILTER`.
pub(crate) fn assemble(seeded: bool) -> Vec<libc::sock_filter> {
    assemble_ops(program(seeded))
}

/// The filter of a deterministic run: every system call is notified but
/// [`DETERMINISTIC_ALLOW`] and CPU-time clock reads.
pub(crate) fn assemble_deterministic(handover_fd: u32) -> Vec<libc::sock_filter> {
    assemble_ops(deterministic_program(handover_fd))
}

fn assemble_ops(ops: Vec<Op>) -> Vec<libc::sock_filter> {
    // Every label's index among emitted instructions; RET ALLOW / NOTIFY
    // targets are shared instructions appended at the end.
    let mut labels = std::collections::HashMap::new();
    let mut n = 0usize;
    for op in &ops {
        match op {
            Op::At(l) => {
                labels.insert(*l, n);
            }
            _ => n += 1,
        }
    }
    let allow_at = n;
    let notify_at = n + 1;
    let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut out = Vec::with_capacity(n + 2);
    for op in &ops {
        let here = out.len();
        let rel = |t: Target| -> u8 {
            let to = match t {
                Target::Allow => allow_at,
                Target::Notify => notify_at,
                Target::Go(l) => labels[&l],
                Target::Next => here + 1,
            };
            u8::try_from(to - here - 1).expect("seccomp filter jump out of range")
        };
        match *op {
            Op::At(_) => {}
            Op::Load(off) => out.push(ins(LD_W_ABS, 0, 0, off)),
            Op::And(k) => out.push(ins(AND_K, 0, 0, k)),
            Op::Eq(k, t, f) => out.push(ins(JEQ_K, rel(t), rel(f), k)),
            Op::Set(k, t, f) => out.push(ins(JSET_K, rel(t), rel(f), k)),
            Op::Ret(k) => out.push(ins(RET_K, 0, 0, k)),
        }
    }
    out.push(ins(RET_K, 0, 0, ALLOW));
    out.push(ins(RET_K, 0, 0, NOTIFY));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny classic-BPF interpreter for the subset we emit.
    fn run(prog: &[libc::sock_filter], nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&ARCH.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => {
                    let o = i.k as usize;
                    a = u32::from_ne_bytes(data[o..o + 4].try_into().unwrap());
                }
                AND_K => a &= i.k,
                JEQ_K => pc += if a == i.k { i.jt } else { i.jf } as usize,
                JSET_K => pc += if a & i.k != 0 { i.jt } else { i.jf } as usize,
                RET_K => return i.k,
                c => panic!("opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn notifies_only_time_related_calls() {
        let p = assemble(false);
        let ptr = 0x7fff_0000_1000u64;
        assert_eq!(run(&p, nr::CLOCK_GETTIME, [1, ptr, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::CLOCK_GETTIME, [0, ptr, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::CLOCK_GETTIME, [2, ptr, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, nr::CLOCK_GETTIME, [3, ptr, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            run(&p, nr::CLOCK_GETTIME, [(-6i64) as u64, ptr, 0, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(run(&p, nr::GETTIMEOFDAY, [ptr, 0, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::NANOSLEEP, [ptr, 0, 0, 0, 0, 0]), NOTIFY);
        // futex: timed waits and wakes; untimed waits stay in the kernel.
        assert_eq!(run(&p, nr::FUTEX, [ptr, 128, 0, ptr, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::FUTEX, [ptr, 128, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            run(&p, nr::FUTEX, [ptr, 9 | 128 | 256, 0, ptr, 0, 0]),
            NOTIFY
        );
        assert_eq!(run(&p, nr::FUTEX, [ptr, 1 | 128, 1, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::FUTEX, [ptr, 6 | 128, 0, ptr, 0, 0]), ALLOW); // LOCK_PI
                                                                             // epoll: only positive timeouts.
        assert_eq!(run(&p, nr::EPOLL_PWAIT, [3, ptr, 128, 10, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::EPOLL_PWAIT, [3, ptr, 128, 0, 0, 0]), ALLOW);
        assert_eq!(
            run(&p, nr::EPOLL_PWAIT, [3, ptr, 128, 0xffff_ffff, 0, 0]),
            ALLOW
        );
        assert_eq!(
            run(&p, nr::EPOLL_WAIT, [3, ptr, 128, u64::MAX, 0, 0]),
            ALLOW
        );
        assert_eq!(run(&p, nr::EPOLL_PWAIT2, [3, ptr, 128, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, nr::EPOLL_PWAIT2, [3, ptr, 128, ptr, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::POLL, [ptr, 1, 5, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::POLL, [ptr, 1, u64::MAX, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, nr::PPOLL, [ptr, 1, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, nr::PPOLL, [ptr, 1, ptr, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::SELECT, [4, ptr, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, nr::SELECT, [4, ptr, 0, 0, ptr, 0]), NOTIFY);
        assert_eq!(run(&p, nr::PSELECT6, [4, ptr, 0, 0, ptr, 0]), NOTIFY);
        assert_eq!(run(&p, 0 /* read */, [0; 6]), ALLOW);
        assert_eq!(run(&p, nr::CONNECT, [3, ptr, 16, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::GETRANDOM, [ptr, 16, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            run(&assemble(true), nr::GETRANDOM, [ptr, 16, 0, 0, 0, 0]),
            NOTIFY
        );
    }

    #[test]
    fn a_deterministic_run_notifies_all_but_local_calls() {
        let p = assemble_deterministic(7);
        let ptr = 0x7fff_0000_1000u64;
        for nr in [0, 1, 7, 56, 186, 202, 232, 281, 435, nr::GETRANDOM] {
            assert_eq!(run(&p, nr, [3, ptr, 0, 0, 0, 0]), NOTIFY, "syscall {nr}");
        }
        for nr in [9, 11, 28, 39, 131, 262] {
            assert_eq!(run(&p, nr, [3, ptr, 0, 0, 0, 0]), ALLOW, "syscall {nr}");
        }
        assert_eq!(run(&p, nr::CLOCK_GETTIME, [1, ptr, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, nr::CLOCK_GETTIME, [2, ptr, 0, 0, 0, 0]), ALLOW);
        let flags = HANDOVER_FLAGS as u64;
        assert_eq!(run(&p, SENDMSG, [7, ptr, flags, 0, 0, 0]), ALLOW);
        assert_eq!(run(&p, SENDMSG, [7, ptr, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, SENDMSG, [8, ptr, flags, 0, 0, 0]), NOTIFY);
        assert_eq!(run(&p, EXECVE, [0; 6]), ALLOW);
    }
}
