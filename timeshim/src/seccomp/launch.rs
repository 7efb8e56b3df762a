//! Starting a program under the supervisor.
//!
//! Two processes: the one the caller holds as its `Child` (P, the reaper,
//! which runs no program: it waits for Q and ends as Q ends) and its child
//! Q, which runs the command. In Q, between fork and exec: its pid sent to
//! this process, a wait until a tracer thread here has `PTRACE_SEIZE`d it,
//! `PR_SET_NO_NEW_PRIVS`, the seccomp filter with a new listener, and the
//! listener sent over the socket pair (`SCM_RIGHTS`). The filter is
//! inherited by every thread and child of the program.
//!
//! The listener is handed to the caller at once, to be served while the
//! tracer follows the exec chain. At the program's exec stop: its vDSO
//! clock functions are pointed at the clock page ([`super::vdso`]);
//! failing that, and for shell wrappers, the auxiliary vector on the new
//! program's stack is rewritten so that `AT_SYSINFO_EHDR` becomes
//! `AT_IGNORE`, and Go's runtime and glibc then find no vDSO and read every
//! clock with a real `clock_gettime` system call, which the filter hands to
//! the supervisor. With a seed, the 16 `AT_RANDOM` bytes (Go seeds its map
//! hashing and `math/rand` from them, glibc its stack protector) are
//! replaced too. Shell wrappers (`sh -c 'exec …'`, `env`, `nice`…) are
//! followed to the program they exec, however long they take (the caller
//! waits for P, never for Q: no stop of Q's can be taken by it); at the
//! first other program the tracer detaches, and from then on the program
//! runs untraced.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc::{self, Receiver, Sender};

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

/// A program being started.
///
/// `pid` is the traced process: the command's wrappers, then the program
/// they exec (one process, one pid, from the first wrapper to the
/// program). `listener` is its seccomp filter's, to be served at once (the
/// wrappers and what they fork read the clock too). `child` brings the
/// process the caller holds, the reaper (see [`spawn`]), once the command's
/// first exec has happened. `started` ends (a message or a hang-up) once
/// the program past its wrappers has been exec'd and set up, or the
/// command ended, or it could not be followed.
pub(crate) struct Launching {
    pub pid: u32,
    pub listener: OwnedFd,
    pub child: Receiver<io::Result<Child>>,
    pub started: Receiver<()>,
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

/// Receives the seccomp listener `send_fd` sent (waits for it).
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
        let n = loop {
            let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break n;
            }
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if n == 0 || c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS {
            return Err(io::Error::other(
                "the command's process ended before it sent its seccomp listener",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const RawFd);
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Sends `bytes` as one message. Async-signal-safe (used in the child).
fn send_bytes(sock: RawFd, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: sending from a live buffer.
    if unsafe { libc::send(sock, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one message of exactly `N` bytes (waits for it); `None` at
/// end of file or on a message of another size. Async-signal-safe.
fn recv_bytes<const N: usize>(sock: RawFd) -> io::Result<Option<[u8; N]>> {
    let mut buf = [0u8; N];
    loop {
        // SAFETY: receiving into our own buffer.
        let n = unsafe { libc::recv(sock, buf.as_mut_ptr().cast(), N, 0) };
        if n >= 0 {
            return Ok((n as usize == N).then_some(buf));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Spawns `cmd` under the filter. Returns once the command's process is
/// traced and its listener received; the rest comes through [`Launching`].
///
/// The process the caller holds as its `Child` (P) is not the traced one.
/// Between fork and exec, P forks again: P stays, running no program, as
/// the reaper of its child Q ([`reap`]: it exits with Q's status, or by
/// Q's signal, and passes the signals it is sent on to Q; Q dies with it,
/// `PR_SET_PDEATHSIG`). Q sends its pid over a socket pair and waits
/// until a thread of this process, the tracer, has `PTRACE_SEIZE`d it
/// (Q is our descendant: Yama's `ptrace_scope` 1 allows it, 2 and 3 do
/// not), then installs the filter, sends the listener and execs. The
/// caller's `waitpid` on P can never take one of Q's ptrace stops, so the
/// tracer follows a wrapper's exec chain for as long as it takes, and
/// every program at the end of it has its vDSO pointed at the clock page.
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
    let sets_gogc = cmd.get_envs().any(|(k, _)| k == "GOGC");
    if let Some(gogc) = super::gort::gogc_wanted(sets_gogc, deterministic) {
        tracing::debug!(%gogc, "seccomp launcher: GOGC for the Go programs of the command");
        cmd.env("GOGC", gogc);
    }
    let child_fd = child_sock.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and makes
    // only async-signal-safe calls (raw system calls and their thin libc
    // wrappers; errors are made from errno values, without allocating);
    // `prog` is a copy owned by the closure (the child's copy of the
    // parent's memory).
    unsafe {
        cmd.pre_exec(move || {
            let errno = || io::Error::last_os_error();
            // Every signal blocked before the fork: none is lost to the
            // reaper before it waits for them, and none stops Q (a
            // ptrace stop) before the tracer waits for its stops.
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            if libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old) != 0 {
                return Err(errno());
            }
            // SIGCHLD ignored would reap Q behind the reaper's back.
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            let mut old_chld: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGCHLD, &dfl, &mut old_chld) != 0 {
                return Err(errno());
            }
            let reaper = libc::getpid();
            // The raw system call: glibc's fork runs atfork handlers.
            let q = libc::syscall(libc::SYS_fork);
            if q < 0 {
                return Err(errno());
            }
            if q > 0 {
                reap(q as libc::pid_t);
            }
            // Q: dies with the reaper (which may have died already).
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(errno());
            }
            if libc::getppid() != reaper {
                libc::_exit(127);
            }
            if libc::sigaction(libc::SIGCHLD, &old_chld, std::ptr::null_mut()) != 0 {
                return Err(errno());
            }
            let me = libc::getpid() as u32;
            send_bytes(child_fd, &me.to_ne_bytes())?;
            match recv_bytes::<1>(child_fd)? {
                Some([1]) => {}
                // The tracer could not trace us (it says why).
                _ => return Err(io::Error::from_raw_os_error(libc::EPERM)),
            }
            // The same addresses on every run: a program that orders
            // anything by address then does it the same way.
            if deterministic && libc::personality(ADDR_NO_RANDOMIZE) < 0 {
                return Err(errno());
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(errno());
            }
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            let fd = libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog,
            );
            if fd < 0 {
                return Err(errno());
            }
            send_fd(child_fd, fd as RawFd, send_flags)?;
            // Under the deterministic filter `close` is a notification with
            // no supervisor yet to answer it; the listener is close-on-exec.
            if !deterministic {
                libc::close(fd as RawFd);
            }
            // The tracer waits for stops again: signals may come.
            if libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) != 0 {
                return Err(errno());
            }
            Ok(())
        });
    }
    let (child_tx, child_rx) = mpsc::channel();
    let (ltx, lrx) = mpsc::channel();
    let (started_tx, started_rx) = mpsc::channel();
    // The vDSO is pointed at the clock page unless asked not to (a debug
    // aid: the syscall route, to compare).
    let page = (std::env::var_os("TIMESHIM_SECCOMP_VDSO").as_deref() != Some("hide".as_ref()))
        .then(|| page.to_path_buf());
    // The tracer: a thread of its own (ptrace is per thread), which stays
    // while the command runs wrappers, however long they take.
    std::thread::Builder::new()
        .name("timeshim-trace".into())
        .spawn(move || {
            trace(parent_sock, seed, deterministic, page, ltx);
            let _ = started_tx.send(());
        })?;
    // The thread that forks: it stays until the reaper ends, so that a
    // `PR_SET_PDEATHSIG` the caller set fires when the caller dies, not
    // when this thread ends. `spawn` returns at Q's first exec (the
    // reaper closed its copy of the pipe that says so).
    std::thread::Builder::new()
        .name("timeshim-launch".into())
        .spawn(move || {
            let spawned = cmd.spawn();
            drop(child_sock);
            match spawned {
                Ok(child) => {
                    let pid = child.id();
                    let _ = child_tx.send(Ok(child));
                    linger(pid);
                }
                Err(e) => drop(child_tx.send(Err(e))),
            }
        })?;
    let (pid, listener) = match lrx.recv() {
        Ok(Ok(got)) => got,
        Ok(Err(e)) => return Err(e),
        // The tracer never heard of Q: the spawn failed before (it says why).
        Err(_) => {
            return Err(match child_rx.recv() {
                Ok(Err(e)) => e,
                _ => io::Error::other("the seccomp launcher's tracer thread died"),
            })
        }
    };
    Ok(Launching {
        pid,
        listener,
        child: child_rx,
        started: started_rx,
    })
}

/// The reaper (P), in the forked child: waits for Q and ends as it ended;
/// the signals it is sent are passed on to Q, except those the kernel
/// sends (a terminal's to its foreground group: Q has its own). Holds no
/// descriptor of the caller's (among them the pipe whose closing tells
/// the caller's `spawn` that the exec happened: Q's exec closes it).
/// Async-signal-safe: raw system calls only.
unsafe fn reap(q: libc::pid_t) -> ! {
    // SAFETY: the caller's contract (this process is the forked child).
    unsafe {
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            let mut lim: libc::rlimit = std::mem::zeroed();
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                lim.rlim_cur.min(1 << 20) as i32
            } else {
                1 << 16
            };
            for fd in 0..max {
                libc::close(fd);
            }
        }
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::syscall(
                libc::SYS_rt_sigtimedwait,
                &all as *const libc::sigset_t,
                &mut info as *mut libc::siginfo_t,
                std::ptr::null::<libc::timespec>(),
                8usize,
            ) as i32;
            if sig <= 0 {
                continue;
            }
            if sig != libc::SIGCHLD {
                if info.si_code != libc::SI_KERNEL {
                    libc::kill(q, sig);
                }
                continue;
            }
            let mut status = 0;
            let r = libc::waitpid(q, &mut status, libc::WNOHANG);
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                libc::_exit(127);
            }
            if r != q {
                continue;
            }
            if libc::WIFEXITED(status) {
                libc::_exit(libc::WEXITSTATUS(status));
            }
            if libc::WIFSIGNALED(status) {
                let s = libc::WTERMSIG(status);
                // Ends by the same signal (without a core of its own).
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &none);
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(s, &dfl, std::ptr::null_mut());
                libc::kill(libc::getpid(), s);
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, s);
                libc::sigprocmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::_exit(128 + s);
            }
        }
    }
}

/// The tracer thread: seizes Q, receives its listener (handed to
/// [`spawn`] on `ltx`), then follows Q's exec chain to the program.
fn trace(
    sock: OwnedFd,
    seed: Option<u64>,
    deterministic: bool,
    page: Option<PathBuf>,
    ltx: Sender<io::Result<(u32, OwnedFd)>>,
) {
    let q = match recv_bytes::<4>(sock.as_raw_fd()) {
        Ok(Some(b)) => u32::from_ne_bytes(b),
        // The spawn failed before Q was there: its error says why.
        Ok(None) | Err(_) => return,
    };
    // SAFETY: seizing a process that waits for it; no memory passed.
    let seized = unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            q as libc::pid_t,
            0,
            (libc::PTRACE_O_TRACEEXEC | libc::PTRACE_O_EXITKILL) as libc::c_long,
        )
    };
    let error = (seized != 0).then(io::Error::last_os_error);
    let _ = send_bytes(sock.as_raw_fd(), &[u8::from(error.is_none())]);
    if let Some(e) = error {
        let _ = ltx.send(Err(io::Error::new(
            e.kind(),
            format!(
                "cannot trace the command's process {q} to set up its clock \
                 (ptrace: {e}); is ptrace allowed here (kernel.yama.ptrace_scope \
                 at most 1, no seccomp profile denying it in a container)?"
            ),
        )));
        return;
    }
    match recv_fd(sock.as_raw_fd()) {
        Ok(listener) => {
            let _ = ltx.send(Ok((q, listener)));
        }
        Err(e) => {
            // Q failed before its exec (the spawn's error says why): its
            // exit, taken here, goes on to the reaper.
            drop(ltx);
            let _ = follow(q, seed, deterministic, None);
            tracing::debug!(pid = q, error = %e, "seccomp launcher: no listener");
            return;
        }
    }
    if let Err(e) = follow(q, seed, deterministic, page.as_deref()) {
        // Left running with a clock that is not the simulation's, the
        // program would give results that look right and are not.
        tracing::error!(pid = q, error = %e, "seccomp launcher: could not set up the program's clock; killing it");
        // SAFETY: plain system call.
        unsafe { libc::kill(q as libc::pid_t, libc::SIGKILL) };
        let _ = follow(q, seed, deterministic, None);
    }
}

/// Stays until the reaper exits, without reaping it: this thread forked
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
    /// The process ended (its status taken here and passed on to the
    /// reaper, its parent).
    Exited,
}

/// Follows Q through wrappers until it execs a program (set up, then
/// detached) or ends.
fn follow(pid: u32, seed: Option<u64>, deterministic: bool, page: Option<&Path>) -> io::Result<()> {
    loop {
        match next_exec(pid, seed, deterministic, page)? {
            Stop::Wrapper => {
                tracing::debug!(pid, "seccomp launcher: following a wrapper")
            }
            Stop::Detached | Stop::Exited => return Ok(()),
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
/// wrapper) or detaches. An exit is taken (Q is not this process's child:
/// the kernel hands its status to the reaper once the tracer has it).
fn next_exec(
    pid: u32,
    seed: Option<u64>,
    deterministic: bool,
    page: Option<&Path>,
) -> io::Result<Stop> {
    loop {
        let mut status = 0;
        // SAFETY: waiting for our tracee.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::__WALL) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if !libc::WIFSTOPPED(status) {
            return Ok(Stop::Exited);
        }
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        if event == libc::PTRACE_EVENT_STOP {
            // A group stop (SIGSTOP and its kin) stays one; any other
            // event stop (the end of one) resumes.
            let group = matches!(
                sig,
                libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
            );
            let req = if group {
                libc::PTRACE_LISTEN
            } else {
                libc::PTRACE_CONT
            };
            // SAFETY: restarting our stopped tracee.
            unsafe { libc::ptrace(req, pid, 0, 0) };
            continue;
        }
        if sig != libc::SIGTRAP || event != libc::PTRACE_EVENT_EXEC {
            // A signal for the wrapper: deliver it.
            // SAFETY: restarting our stopped tracee.
            unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, sig as libc::c_long) };
            continue;
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

/// One look at the process tree of `root` (it and its descendants): the
/// CPU time of its processes (ns) and the count of its threads, if every
/// thread is asleep (`S`; with `killable`, `D` too: a deterministic
/// filter's held calls wait killably), else `None`. Two equal looks in a
/// row prove that nothing in the tree ran in between.
pub(crate) fn tree_asleep(root: u32, killable: bool) -> Option<(u64, usize)> {
    let mut procs = vec![root];
    let mut i = 0;
    let (mut cpu, mut threads) = (0u64, 0usize);
    while let Some(&p) = procs.get(i) {
        i += 1;
        for t in std::fs::read_dir(format!("/proc/{p}/task")).ok()? {
            let tid = t.ok()?.file_name();
            let tid = tid.to_str()?;
            let stat = std::fs::read_to_string(format!("/proc/{p}/task/{tid}/stat")).ok()?;
            let state = stat.rsplit_once(')')?.1.trim_start().bytes().next()?;
            match state {
                // A zombie runs no more (its parent, woken, shows awake).
                b'S' | b'Z' => {}
                b'D' if killable => {}
                _ => return None,
            }
            threads += 1;
            let children =
                std::fs::read_to_string(format!("/proc/{p}/task/{tid}/children")).ok()?;
            procs.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
        cpu = cpu.wrapping_add(super::remote::process_cpu_time_ns(p).unwrap_or(0));
    }
    Some((cpu, threads))
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
