//! Deterministic mode: a program's listening ports are the run's, not the
//! machine's (see [`crate::Ports`]). `bind` to a fixed TCP port is made
//! here, on the supervisor's duplicate of the program's socket, to that
//! port when it is free and to one the kernel picks when a process outside
//! the run holds it; the answers that show a port (`getsockname`,
//! `getpeername`) show the port asked for, and a `connect` to it reaches
//! the socket behind it.

use std::io;
use std::os::fd::AsRawFd;

use super::{remote, Answer, Supervisor};
use crate::ports::{inet_port, with_port};

/// The largest socket address read (`sockaddr_storage`).
const ADDR_MAX: usize = 128;

fn last_errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl Supervisor {
    fn ports(&self) -> crate::Ports {
        self.shared
            .ports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The socket address a call passes (`args[1]`, of length `args[2]`).
    fn read_sockaddr(req: &libc::seccomp_notif) -> Option<Vec<u8>> {
        let len = req.data.args[2] as usize;
        if req.data.args[1] == 0 || len > ADDR_MAX {
            return None;
        }
        let mut buf = vec![0u8; len];
        remote::read(req.pid, req.data.args[1], &mut buf).ok()?;
        Some(buf)
    }

    /// `bind(fd, addr, len)` of a TCP socket to a port that is not 0: made
    /// here, so that its outcome depends on the run alone. Other binds are
    /// the kernel's.
    pub(super) fn det_bind(&mut self, req: &libc::seccomp_notif) -> Answer {
        let Some(addr) = Self::read_sockaddr(req) else {
            return Answer::Continue;
        };
        let Some(port) = inet_port(&addr).filter(|p| *p != 0) else {
            return Answer::Continue;
        };
        let Ok(sock) = self.remote_fd(req.pid, req.data.args[0] as i32) else {
            return Answer::Continue;
        };
        let fd = sock.as_raw_fd();
        let mut ty: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt of an int into our variable, on our duplicate.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                &mut ty as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        if r != 0 || ty != libc::SOCK_STREAM {
            return Answer::Continue;
        }
        let ports = self.ports();
        if ports.held(port) {
            return Answer::Errno(libc::EADDRINUSE);
        }
        let bind = |a: &[u8]| {
            // SAFETY: bind with a socket address of its own length, on our
            // duplicate of the program's socket (the same socket).
            let r = unsafe {
                libc::bind(
                    fd,
                    a.as_ptr() as *const libc::sockaddr,
                    a.len() as libc::socklen_t,
                )
            };
            if r == 0 {
                Ok(())
            } else {
                Err(last_errno())
            }
        };
        match bind(&addr) {
            Ok(()) => {}
            Err(libc::EADDRINUSE) => {
                // Held by a process outside the run: another port, which
                // the program never sees.
                if let Err(e) = bind(&with_port(&addr, 0)) {
                    return Answer::Errno(e);
                }
            }
            Err(e) => return Answer::Errno(e),
        }
        let real = match local_port(fd) {
            Some(p) => p,
            None => return Answer::Errno(last_errno()),
        };
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat into our struct, on our duplicate.
        unsafe { libc::fstat(fd, &mut st) };
        ports.record(port, real, st.st_ino);
        if real != port {
            tracing::info!(
                pid = self.shared.pid,
                port,
                real,
                "a process outside the run holds the port this program binds: its socket is on \
                 another port, which it sees as the one it asked for (connections from the run \
                 reach it; from outside, use the other port)"
            );
        }
        Answer::Value(0)
    }

    /// `getsockname` / `getpeername`: the kernel's answer, with a port of the
    /// run that is not where its program asked shown as the one asked for.
    pub(super) fn det_sockname(&mut self, req: &libc::seccomp_notif, peer: bool) -> Answer {
        let ports = self.ports();
        if !ports.any_moved() {
            return Answer::Continue;
        }
        let (buf_addr, len_addr) = (req.data.args[1], req.data.args[2]);
        let Ok(room) = remote::read_u32(req.pid, len_addr) else {
            return Answer::Continue; // the kernel answers EFAULT
        };
        let Ok(sock) = self.remote_fd(req.pid, req.data.args[0] as i32) else {
            return Answer::Continue;
        };
        let mut storage = [0u8; ADDR_MAX];
        let mut len = ADDR_MAX as libc::socklen_t;
        // SAFETY: into our buffer of `len` bytes, on our duplicate.
        let r = unsafe {
            let p = storage.as_mut_ptr() as *mut libc::sockaddr;
            if peer {
                libc::getpeername(sock.as_raw_fd(), p, &mut len)
            } else {
                libc::getsockname(sock.as_raw_fd(), p, &mut len)
            }
        };
        if r != 0 {
            return Answer::Errno(last_errno());
        }
        let mut addr = storage[..len as usize].to_vec();
        match inet_port(&addr).and_then(|p| ports.virtual_of(p)) {
            Some(port) => addr = with_port(&addr, port),
            None => return Answer::Continue,
        }
        // As the kernel does: as much as fits, and the full length.
        let n = addr.len().min(room as usize);
        if let Err(e) = remote::write(req.pid, buf_addr, &addr[..n])
            .and_then(|()| remote::write(req.pid, len_addr, &(addr.len() as u32).to_ne_bytes()))
        {
            return Answer::Errno(e.raw_os_error().unwrap_or(libc::EFAULT));
        }
        Answer::Value(0)
    }

    /// Counts a `connect` of an IPv4 socket in the run's table, before the
    /// kernel (or [`det_connect`](Self::det_connect)) makes it, once per
    /// call: see
    /// [`crate::Ports::connects_to`].
    pub(super) fn count_connect(&mut self, req: &libc::seccomp_notif) {
        let Some(addr) = Self::read_sockaddr(req) else {
            return;
        };
        let v4 = addr.len() >= 2 && u16::from_ne_bytes([addr[0], addr[1]]) as i32 == libc::AF_INET;
        if let Some(port) = inet_port(&addr).filter(|_| v4) {
            self.ports().connect_started(port);
        }
    }

    /// `connect` to a port of the run that is not where its program asked:
    /// made here, to where it is. Else the kernel's.
    pub(super) fn det_connect(&mut self, req: &libc::seccomp_notif) -> Answer {
        let ports = self.ports();
        if !ports.any_moved() {
            return Answer::Continue;
        }
        let Some(addr) = Self::read_sockaddr(req) else {
            return Answer::Continue;
        };
        let Some(port) = inet_port(&addr) else {
            return Answer::Continue;
        };
        let real = ports.real(port);
        if real == port {
            return Answer::Continue;
        }
        let Ok(sock) = self.remote_fd(req.pid, req.data.args[0] as i32) else {
            return Answer::Continue;
        };
        let a = with_port(&addr, real);
        // Counted here since this one does not reach `handle`.
        self.count_connect(req);
        // SAFETY: connect with a socket address of its own length, on our
        // duplicate (the same socket: a non-blocking one answers
        // EINPROGRESS, as to the program).
        let r = unsafe {
            libc::connect(
                sock.as_raw_fd(),
                a.as_ptr() as *const libc::sockaddr,
                a.len() as libc::socklen_t,
            )
        };
        if r == 0 {
            Answer::Value(0)
        } else {
            Answer::Errno(last_errno())
        }
    }
}

/// The local port of a socket.
fn local_port(fd: i32) -> Option<u16> {
    let mut storage = [0u8; ADDR_MAX];
    let mut len = ADDR_MAX as libc::socklen_t;
    // SAFETY: into our buffer of `len` bytes.
    let r = unsafe { libc::getsockname(fd, storage.as_mut_ptr() as *mut libc::sockaddr, &mut len) };
    (r == 0)
        .then(|| inet_port(&storage[..len as usize]))
        .flatten()
}
