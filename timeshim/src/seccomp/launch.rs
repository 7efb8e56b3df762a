//! Starting a program under the supervisor.
//!
//! In the child, between fork and exec: `PR_SET_NO_NEW_PRIVS`,
//! `PTRACE_TRACEME`, the seccomp filter with a new listener, and the
//! listener sent to the parent over a socket pair (`SCM_RIGHTS`). The filter
//! is inherited by every thread and child of the program.
//!
//! The listener is handed to the caller at once, to be served while the
//! tracer follows the exec chain. In the parent, at the program's exec
//! stop: its vDSO clock functions are pointed at the clock page
//! ([`super::vdso`]); failing that, and for shell wrappers, the auxiliary
//! vector on the new program's stack is rewritten so that `AT_SYSINFO_EHDR`
//! becomes `AT_IGNORE`, and Go's runtime and glibc then find no vDSO and
//! read every clock with a real `clock_gettime` system call, which the
//! filter hands to the supervisor. With a seed, the 16 `AT_RANDOM` bytes (Go seeds its map
//! hashing and `math/rand` from them, glibc its stack protector) are
//! replaced too. Shell wrappers (`sh -c 'exec …'`, `env`, `nice`…) are
//! followed to the program they exec; at the first other program the
//! tracer detaches, and from then on the program runs untraced.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command};

use super::filter;

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_RANDOM: u64 = 25;
const AT_SYSINFO_EHDR: u64 = 33;

const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;
const SECCOMP_FILTER_FLAG_NEW_LISTENER: libc::c_ulong = 1 << 3;
/// Linux 5.19+: once the supervisor has received a notification, a
/// non-fatal signal no longer interrupts the waiting caller; it is taken
/// when the call returns. A deterministic run needs it: a thread parked by
/// the supervisor must not run a signal handler while another thread runs.
const SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: libc::c_ulong = 1 << 5;
const ADDR_NO_RANDOMIZE: libc::c_ulong = 0x0040000;

/// Programs that only exec another: the tracer follows them.
const WRAPPERS: &[&str] = &[
    "sh", "dash", "bash", "zsh", "busybox", "env", "nice", "ionice", "taskset", "chrt", "setsid",
    "stdbuf", "numactl", "nohup",
    // schedulers/kueue/run.sh: a private /etc for Kueue's certificates.
    "unshare",
];

/// A program being started: the listener of its seccomp filter, to be
/// served at once (the wrappers it runs first, and what they fork, read
/// the clock too), and the process, handed over once the program it runs
/// (past shell wrappers) has been exec'd and set up, and the tracer
/// detached.
pub(crate) struct Launching {
    pub pid: u32,
    pub listener: OwnedFd,
    pub child: std::sync::mpsc::Receiver<io::Result<Child>>,
}

fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid out array of two ints.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sends `fd` over `sock`. Async-signal-safe (used in the child).
fn send_fd(sock: RawFd, fd: RawFd, flags: i32) -> io::Result<()> {
    // SAFETY: a msghdr over stack buffers that live through the call; the
    // control buffer is sized and aligned for one SCM_RIGHTS descriptor.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr() as *mut libc::c_void,
            iov_len: 1,
        };
        let mut cbuf = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, fd);
        if libc::sendmsg(sock, &msg, flags) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn recv_fd(sock: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: as in send_fd; the received descriptor is owned from here on.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr() as *mut libc::c_void,
            iov_len: 1,
        };
        let mut cbuf = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other(
                "the child did not send its seccomp listener",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const RawFd);
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Spawns `cmd` under the filter; returns once the program it runs (past
/// shell wrappers) has been exec'd, its vDSO hidden, and the tracer detached.
pub(crate) fn spawn(
    mut cmd: Command,
    seed: Option<u64>,
    deterministic: bool,
    page: &Path,
) -> io::Result<Launching> {
    if !cfg!(target_arch = "x86_64") {
        return Err(io::Error::other(
            "--shim seccomp supports x86_64 only for now",
        ));
    }
    let (parent_sock, child_sock) = socketpair()?;
    let prog = if deterministic {
        filter::assemble_deterministic(child_sock.as_raw_fd() as u32)
    } else {
        filter::assemble(seed.is_some())
    };
    let send_flags = if deterministic {
        filter::HANDOVER_FLAGS as i32
    } else {
        0
    };
    let flags = if deterministic {
        SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
    } else {
        SECCOMP_FILTER_FLAG_NEW_LISTENER
    };
    let child_fd = child_sock.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and makes
    // only async-signal-safe raw system calls; `prog` is a copy owned by
    // the closure (the child's copy of the parent's memory).
    unsafe {
        cmd.pre_exec(move || {
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            // The same addresses on every run: a program that orders
            // anything by address then does it the same way.
            if deterministic && libc::personality(ADDR_NO_RANDOMIZE) < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog,
            );
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            send_fd(child_fd, fd as RawFd, send_flags)?;
            // Under the deterministic filter `close` is a notification with
            // no supervisor yet to answer it; the listener is close-on-exec.
            if !deterministic {
                libc::close(fd as RawFd);
            }
            Ok(())
        });
    }
    // The thread that forks is the tracer (ptrace is per thread): a thread
    // of its own, which stays to follow a wrapper to the program it execs.
    let (tx, rx) = std::sync::mpsc::channel();
    let (ltx, lrx) = std::sync::mpsc::channel();
    // The vDSO is pointed at the clock page unless asked not to (a debug
    // aid: the syscall route, to compare).
    let page = (std::env::var_os("TIMESHIM_SECCOMP_VDSO").as_deref() != Some("hide".as_ref()))
        .then(|| page.to_path_buf());
    std::thread::Builder::new()
        .name("timeshim-launch".into())
        .spawn(move || {
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => return drop(ltx.send(Err(e))),
            };
            drop(child_sock);
            let pid = child.id();
            match recv_fd(parent_sock.as_raw_fd()) {
                Ok(l) => drop(ltx.send(Ok((pid, l)))),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return drop(ltx.send(Err(e)));
                }
            };
            match next_exec(pid, true, seed, deterministic, page.as_deref(), None) {
                Ok(Stop::Detached) => {
                    let _ = tx.send(Ok(child));
                    linger(pid);
                }
                Ok(Stop::Wrapper) => {
                    // The wrappers' exec chain is followed before the child
                    // is handed over: the caller's own waitpid (any thread
                    // of this process may wait for a tracee) would race this
                    // thread for the exec stops and take one for an exit.
                    // A wrapper that forks instead of exec'ing is handed
                    // over after a while and followed in the background.
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                    tracing::debug!(pid, "seccomp launcher: following the wrappers");
                    let done =
                        follow_wrapper(pid, seed, deterministic, page.as_deref(), Some(deadline));
                    let _ = tx.send(Ok(child));
                    if !done {
                        tracing::warn!(pid, "seccomp launcher: the scheduler command did not exec its program within 2 s (a shell that forks?); following it in the background");
                        // The caller may wait for the child now: no
                        // injected system calls (their stops could be
                        // taken), the vDSO is hidden instead.
                        follow_wrapper(pid, seed, deterministic, None, None);
                    }
                    linger(pid);
                }
                Ok(Stop::Exited) | Ok(Stop::Pending) => {
                    drop(tx.send(Ok(child)))
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let _ = tx.send(Err(e));
                }
            }
        })?;
    let (pid, listener) = lrx
        .recv()
        .unwrap_or_else(|_| Err(io::Error::other("the launcher thread died")))?;
    Ok(Launching {
        pid,
        listener,
        child: rx,
    })
}

/// Stays until the program exits, without reaping it: this thread forked
/// it, so a `PR_SET_PDEATHSIG` the caller set fires when this thread ends.
fn linger(pid: u32) {
    loop {
        // SAFETY: a zeroed siginfo for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: peeking at our own child's exit without reaping it.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT | libc::__WALL,
            )
        };
        if r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

enum Stop {
    /// At a wrapper's exec, rewritten and resumed, still traced.
    Wrapper,
    /// At the program's exec, rewritten and detached.
    Detached,
    /// The process ended (left for its parent to reap).
    Exited,
    /// No exec before the deadline (a wrapper that forks rather than execs).
    Pending,
}

/// Follows a wrapper until it execs a program, or ends, or (with a
/// deadline) the deadline passes: `true` if the chain ended.
fn follow_wrapper(
    pid: u32,
    seed: Option<u64>,
    deterministic: bool,
    page: Option<&Path>,
    deadline: Option<std::time::Instant>,
) -> bool {
    loop {
        match next_exec(pid, false, seed, deterministic, page, deadline) {
            Ok(Stop::Wrapper) => continue,
            Ok(Stop::Pending) => return false,
            Ok(Stop::Detached) | Ok(Stop::Exited) => return true,
            Err(e) => {
                tracing::warn!(error = %e, pid, "seccomp launcher: lost track of the scheduler command");
                return true;
            }
        }
    }
}

fn is_wrapper(pid: u32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .is_some_and(|n| WRAPPERS.contains(&n.as_str()))
}

/// Waits for the next exec stop of `pid` (passing other signals on),
/// rewrites the new program's auxiliary vector, then resumes it traced (a
/// wrapper) or detaches. Exit is only peeked at (`WNOWAIT`), never reaped:
/// the status belongs to whoever holds the `Child`.
fn next_exec(
    pid: u32,
    first: bool,
    seed: Option<u64>,
    deterministic: bool,
    page: Option<&Path>,
    deadline: Option<std::time::Instant>,
) -> io::Result<Stop> {
    loop {
        // SAFETY: a zeroed siginfo for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let nohang = if deadline.is_some() { libc::WNOHANG } else { 0 };
        // SAFETY: peeking at our own child's state.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WSTOPPED | libc::WNOWAIT | libc::__WALL | nohang,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        // SAFETY: reading the pid waitid filled in (0: no state change yet).
        if deadline.is_some() && unsafe { info.si_pid() } == 0 {
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return Ok(Stop::Pending);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        let code = info.si_code;
        if code == libc::CLD_EXITED || code == libc::CLD_KILLED || code == libc::CLD_DUMPED {
            return Ok(Stop::Exited);
        }
        // A stop: consume it.
        let mut status = 0;
        // SAFETY: reaping the stop we just saw (not an exit: WNOHANG-free
        // waitpid returns this stop at once).
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::__WALL) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if !libc::WIFSTOPPED(status) {
            return Ok(Stop::Exited);
        }
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        let exec_stop = sig == libc::SIGTRAP && (first || event == libc::PTRACE_EVENT_EXEC);
        if !exec_stop {
            // A signal for the wrapper: deliver it.
            // SAFETY: restarting our stopped tracee.
            unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, sig as libc::c_long) };
            continue;
        }
        if first {
            // SAFETY: options on our stopped tracee.
            let r = unsafe {
                libc::ptrace(
                    libc::PTRACE_SETOPTIONS,
                    pid,
                    0,
                    (libc::PTRACE_O_TRACEEXEC | libc::PTRACE_O_EXITKILL) as libc::c_long,
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let wrapper = is_wrapper(pid);
        // The program's vDSO reads the clock page; a wrapper's is hidden
        // (it runs a moment: not worth two mappings).
        let patched = match page.filter(|_| !wrapper) {
            Some(page) => match super::vdso::patch(pid, page, seed.is_some()) {
                Ok(()) => true,
                Err(e) => {
                    tracing::info!(pid, error = %e, "seccomp launcher: vDSO left unpatched, hidden instead (clock reads become system calls)");
                    false
                }
            },
            None => false,
        };
        rewrite_auxv(pid, seed, !patched)?;
        if !wrapper && super::gort::unforce_gc_wanted(deterministic) {
            match super::gort::unforce_gc(pid) {
                Ok(done) => tracing::debug!(pid, ?done, "seccomp launcher: Go's forced collection"),
                Err(e) => {
                    tracing::warn!(pid, error = %e, "seccomp launcher: could not look for Go's forced collection period")
                }
            }
        }
        if deterministic && !wrapper {
            match super::tsc::patch_go_cputicks(pid) {
                Ok(n) => tracing::debug!(
                    pid,
                    copies = n,
                    "seccomp launcher: Go's cputicks made deterministic"
                ),
                Err(e) => {
                    tracing::warn!(pid, error = %e, "seccomp launcher: could not look for Go's cputicks")
                }
            }
        }
        if wrapper {
            // SAFETY: restarting our stopped tracee.
            unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, 0) };
            return Ok(Stop::Wrapper);
        }
        // SAFETY: detaching from our stopped tracee; it resumes.
        if unsafe { libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        return Ok(Stop::Detached);
    }
}

/// At an exec stop, the stack pointer is at `argc`; then come `argv`,
/// `NULL`, `envp`, `NULL`, and the auxiliary vector (type, value pairs).
fn rewrite_auxv(pid: u32, seed: Option<u64>, hide_vdso: bool) -> io::Result<()> {
    use super::remote;
    // SAFETY: reading the registers of our stopped tracee into a zeroed struct.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGS,
            pid,
            0,
            &mut regs as *mut libc::user_regs_struct,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let sp = regs.rsp;
    let argc = remote::read_u64(pid, sp)?;
    let mut at = sp + 8 + 8 * (argc + 1);
    while remote::read_u64(pid, at)? != 0 {
        at += 8;
    }
    at += 8;
    for _ in 0..512 {
        let kind = remote::read_u64(pid, at)?;
        match kind {
            AT_NULL => return Ok(()),
            AT_SYSINFO_EHDR if hide_vdso => remote::write(pid, at, &AT_IGNORE.to_ne_bytes())?,
            AT_RANDOM => {
                if let Some(seed) = seed {
                    let addr = remote::read_u64(pid, at + 8)?;
                    let mut rng = super::SeededBytes::new(seed ^ 0x6175_7876_5f72_6e64);
                    let mut bytes = [0u8; 16];
                    rng.fill(&mut bytes);
                    remote::write(pid, addr, &bytes)?;
                }
            }
            _ => {}
        }
        at += 16;
    }
    Err(io::Error::other("no end to the auxiliary vector"))
}
