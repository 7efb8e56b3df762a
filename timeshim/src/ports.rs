//! The TCP ports a run's programs listen on, as the programs see them.
//!
//! Under the deterministic mode, whether a program's `bind` to a fixed port
//! succeeds must not depend on the machine: two runs side by side (a sweep,
//! `queue_compare.py`'s schedulers) would otherwise race for Volcano's
//! health port or Kueue's webhook port, and the one that loses goes on
//! without that server, another program than the one that won. So the
//! supervisor binds such a socket itself: to the port asked for when it is
//! free, else to one the kernel picks, and the program sees the port it
//! asked for in every answer (`getsockname`, `getpeername`). A connection
//! to that port from a program of the run (its `connect`) or from the API
//! (an admission webhook call, [`Ports::real`]) goes to the socket behind
//! it. What the program sees then depends only on the run: a port is taken
//! (`EADDRINUSE`) when another socket of the run holds it, never because
//! of a process outside.
//!
//! One table per run, shared by the supervisors of its programs
//! ([`crate::Controller::set_ports`]) and the API that calls their
//! webhooks. In every mode it also counts the connections the run's
//! programs start ([`Ports::connects_to`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The run's table of listening ports (see the module's documentation).
#[derive(Clone, Default)]
pub struct Ports(Arc<Mutex<Table>>);

#[derive(Default)]
struct Table {
    /// By the port the program asked for.
    bound: BTreeMap<u16, Bound>,
    /// IPv4 connections the run's programs started, by destination port
    /// (see [`Ports::connects_to`]).
    connects: BTreeMap<u16, u64>,
}

#[derive(Clone, Copy, Debug)]
struct Bound {
    /// Where the socket really is.
    real: u16,
    /// The socket's inode: whether it still exists.
    inode: u64,
}

impl std::fmt::Debug for Ports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_map()
            .entries(t.bound.iter().map(|(p, b)| (p, b.real)))
            .finish()
    }
}

impl Ports {
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where a connection to `port` of the loopback (as the run's programs
    /// see it) goes: the port itself unless a program of the run listens on
    /// it from elsewhere.
    pub fn real(&self, port: u16) -> u16 {
        match self.table().bound.get(&port) {
            Some(b) if b.real != port && socket_exists(b.inode) => b.real,
            _ => port,
        }
    }

    /// Whether some program's port is not where it asked (then answers
    /// that show a port are translated).
    pub(crate) fn any_moved(&self) -> bool {
        self.table().bound.iter().any(|(p, b)| b.real != *p)
    }

    /// The port a program of the run asked for, of a socket really on
    /// `real`, if it is one of them and not where it asked.
    pub(crate) fn virtual_of(&self, real: u16) -> Option<u16> {
        let t = self.table();
        let (p, b) = t
            .bound
            .iter()
            .find(|(p, b)| b.real == real && **p != real)?;
        socket_exists(b.inode).then_some(*p)
    }

    /// Whether a socket of the run holds `port` (as programs see it).
    pub(crate) fn held(&self, port: u16) -> bool {
        let b = self.table().bound.get(&port).copied();
        b.is_some_and(|b| socket_exists(b.inode))
    }

    /// A socket of the run (inode `inode`) listens on `real` for `port`.
    pub(crate) fn record(&self, port: u16, real: u16, inode: u64) {
        self.table().bound.insert(port, Bound { real, inode });
    }

    /// A program of the run is about to `connect` an IPv4 socket to
    /// `port`: counted before the kernel starts the handshake.
    pub(crate) fn connect_started(&self, port: u16) {
        *self.table().connects.entry(port).or_default() += 1;
    }

    /// How many IPv4 connections to any of `ports` the programs of the run
    /// have started so far, every program under the seccomp supervisor
    /// that shares this table (in any mode): each `connect` is counted
    /// before the kernel makes it, whatever its outcome. Set against the
    /// connections a server on those ports established, it tells whether a
    /// handshake of the run may still be in progress, without counting the
    /// connections other processes of the machine open (the kernel's own
    /// count, `Tcp: ActiveOpens`, is the network namespace's). Connections
    /// started another way are not counted: by a process outside the
    /// supervisor, or by `sendto` with `MSG_FASTOPEN`.
    pub fn connects_to(&self, ports: &[u16]) -> u64 {
        let t = self.table();
        ports.iter().filter_map(|p| t.connects.get(p)).sum()
    }
}

/// Whether a TCP socket with this inode exists in this network namespace.
fn socket_exists(inode: u64) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|path| {
        std::fs::read_to_string(path).is_ok_and(|text| {
            text.lines().skip(1).any(|l| {
                // sl local rem st tx:rx tr:when retr uid timeout inode ...
                l.split_whitespace()
                    .nth(9)
                    .and_then(|w| w.parse::<u64>().ok())
                    == Some(inode)
            })
        })
    })
}

/// A socket address in a program's memory: its family and port, and where
/// the port is (bytes 2 and 3, network order, for both `sockaddr_in` and
/// `sockaddr_in6`).
pub(crate) fn inet_port(addr: &[u8]) -> Option<u16> {
    if addr.len() < 4 {
        return None;
    }
    let family = u16::from_ne_bytes([addr[0], addr[1]]) as i32;
    let long_enough = match family {
        libc::AF_INET => addr.len() >= std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => addr.len() >= std::mem::size_of::<libc::sockaddr_in6>(),
        _ => false,
    };
    long_enough.then(|| u16::from_be_bytes([addr[2], addr[3]]))
}

/// `addr` with its port set to `port`.
pub(crate) fn with_port(addr: &[u8], port: u16) -> Vec<u8> {
    let mut a = addr.to_vec();
    a[2..4].copy_from_slice(&port.to_be_bytes());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_read_from_either_family() {
        let mut v4 = [0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&11251u16.to_be_bytes());
        assert_eq!(inet_port(&v4), Some(11251));
        assert_eq!(inet_port(&with_port(&v4, 40000)), Some(40000));
        let mut v6 = [0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&9443u16.to_be_bytes());
        assert_eq!(inet_port(&v6), Some(9443));
        assert_eq!(inet_port(&v6[..16]), None, "too short for sockaddr_in6");
        let mut unix = [0u8; 16];
        unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(inet_port(&unix), None);
    }

    #[test]
    fn connects_are_counted_by_port() {
        let ports = Ports::new();
        assert_eq!(ports.connects_to(&[6443]), 0);
        ports.connect_started(6443);
        ports.connect_started(6443);
        ports.connect_started(6444);
        ports.connect_started(80);
        assert_eq!(ports.connects_to(&[6443]), 2);
        assert_eq!(ports.connects_to(&[6443, 6444]), 3);
        assert_eq!(ports.clone().connects_to(&[80]), 1, "one table per run");
    }

    #[test]
    fn a_port_moves_only_while_its_socket_exists() {
        let ports = Ports::new();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let real = l.local_addr().unwrap().port();
        let inode = {
            use std::os::fd::AsRawFd;
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            assert_eq!(unsafe { libc::fstat(l.as_raw_fd(), &mut st) }, 0);
            st.st_ino
        };
        ports.record(8080, real, inode);
        assert!(ports.any_moved());
        assert!(ports.held(8080));
        assert_eq!(ports.real(8080), real);
        assert_eq!(ports.virtual_of(real), Some(8080));
        assert_eq!(ports.real(8081), 8081);
        drop(l);
        // A process another test of this binary forks (tasks.rs starts
        // python3 and sleep) holds a copy of the listener from its fork to
        // its exec (close-on-exec): the socket exists until then.
        let gone = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while ports.held(8080) && std::time::Instant::now() < gone {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!ports.held(8080));
        assert_eq!(ports.real(8080), 8080);
        assert_eq!(ports.virtual_of(real), None);
    }
}
