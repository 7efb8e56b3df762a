//! Reading and writing another process's memory, and taking its file
//! descriptors: the few system calls the supervisor needs that have no
//! wrapper in std.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Reads `buf.len()` bytes at `addr` in the address space of thread `tid`.
pub(crate) fn read(tid: u32, addr: u64, buf: &mut [u8]) -> io::Result<()> {
    if buf.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: one local iovec over our own buffer; the remote address is
    // only dereferenced by the kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize != buf.len() => Err(io::Error::from_raw_os_error(libc::EFAULT)),
        _ => Ok(()),
    }
}

/// Writes `buf` at `addr` in the address space of thread `tid`.
pub(crate) fn write(tid: u32, addr: u64, buf: &[u8]) -> io::Result<()> {
    if buf.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: as in `read`; the kernel only reads our buffer.
    let n = unsafe { libc::process_vm_writev(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize != buf.len() => Err(io::Error::from_raw_os_error(libc::EFAULT)),
        _ => Ok(()),
    }
}

pub(crate) fn read_u32(tid: u32, addr: u64) -> io::Result<u32> {
    let mut b = [0u8; 4];
    read(tid, addr, &mut b)?;
    Ok(u32::from_ne_bytes(b))
}

pub(crate) fn read_u64(tid: u32, addr: u64) -> io::Result<u64> {
    let mut b = [0u8; 8];
    read(tid, addr, &mut b)?;
    Ok(u64::from_ne_bytes(b))
}

/// A `struct timespec` at `addr`, as nanoseconds; EINVAL if malformed.
pub(crate) fn read_timespec_ns(tid: u32, addr: u64) -> io::Result<u64> {
    let mut b = [0u8; 16];
    read(tid, addr, &mut b)?;
    let sec = i64::from_ne_bytes(b[..8].try_into().expect("8 bytes"));
    let nsec = i64::from_ne_bytes(b[8..].try_into().expect("8 bytes"));
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok((sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(nsec as u64))
}

/// A `struct timeval` at `addr`, as nanoseconds; EINVAL if malformed.
pub(crate) fn read_timeval_ns(tid: u32, addr: u64) -> io::Result<u64> {
    let mut b = [0u8; 16];
    read(tid, addr, &mut b)?;
    let sec = i64::from_ne_bytes(b[..8].try_into().expect("8 bytes"));
    let usec = i64::from_ne_bytes(b[8..].try_into().expect("8 bytes"));
    if sec < 0 || !(0..1_000_000).contains(&usec) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok((sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(usec as u64 * 1000))
}

pub(crate) fn write_timespec(tid: u32, addr: u64, ns: u64) -> io::Result<()> {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&((ns / 1_000_000_000) as i64).to_ne_bytes());
    b[8..].copy_from_slice(&((ns % 1_000_000_000) as i64).to_ne_bytes());
    write(tid, addr, &b)
}

/// A pidfd for process `pid` (its thread group leader).
pub(crate) fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; a non-negative result is a new fd we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A duplicate, in this process, of descriptor `fd` of the process behind `pidfd`.
pub(crate) fn pidfd_getfd(pidfd: RawFd, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; a non-negative result is a new fd we own
    // (pidfd_getfd sets O_CLOEXEC on it).
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// The thread group (process) a thread belongs to, from `/proc/<tid>/status`.
pub(crate) fn tgid_of(tid: u32) -> io::Result<u32> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Tgid in /proc status"))
}

/// CPU time consumed so far by every thread of process `pid`, in ns
/// (`CLOCK_PROCESS_CPUTIME_ID` of another process). Unchanged between two
/// reads means no thread of the process ran in between.
pub fn process_cpu_time_ns(pid: u32) -> io::Result<u64> {
    // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), as clock_getcpuclockid does.
    let clk = ((!(pid as libc::clockid_t)) << 3) | 2;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer; the kernel validates the clock id.
    if unsafe { libc::clock_gettime(clk, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}
