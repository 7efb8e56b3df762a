//! Knowing when the scheduler is done reacting.
//!
//! Under the shim, the scheduler is *quiescent* when all three hold at once:
//! every thread of its process is parked in a shim-controlled wait (timeshim's
//! probe), the API has no request in flight and no watch event waiting to be
//! written (fakeapi's activity), and no byte is waiting in a socket between
//! the two (the kernel's TCP queues for the API port, from `/proc/net/tcp`).
//! The last check closes the gap between "fakeapi wrote an event" and "the
//! scheduler's thread woke up to read it".

use std::sync::Arc;
use std::time::{Duration, Instant};

use timeshim::{Controller, Quiescence, SimTime};

/// What waiting for quiescence found.
#[derive(Debug, Clone, PartialEq)]
pub enum Quiet {
    /// Idle; its next timer is at this simulated time (if any).
    Yes { earliest_deadline: Option<SimTime> },
    /// Still busy after the wait.
    Busy,
    /// The scheduler process is gone.
    Exited,
}

/// The scheduler under the shim, reached through its clock page.
pub struct ShimSide {
    pub controller: Arc<Controller>,
    pub activity: Arc<fakeapi::Activity>,
    pub api_port: u16,
}

impl ShimSide {
    /// Waits at most `bound` of wall time for quiescence.
    pub fn wait(&self, bound: Duration) -> Result<Quiet, timeshim::ControlError> {
        let start = Instant::now();
        loop {
            let left = bound.saturating_sub(start.elapsed());
            let q = match self.controller.wait_quiescent(left) {
                Err(timeshim::ControlError::NotAttached) => {
                    if start.elapsed() >= bound {
                        return Ok(Quiet::Busy);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                other => other?,
            };
            let deadline = match q {
                Quiescence::Exited => return Ok(Quiet::Exited),
                Quiescence::TimedOut { .. } => return Ok(Quiet::Busy),
                Quiescence::Quiescent {
                    earliest_deadline, ..
                } => earliest_deadline,
            };
            let before = self.activity.snapshot();
            if before.is_idle() && tcp_backlog(self.api_port) == 0 {
                // Nothing moved while we looked: a consistent idle state.
                let probe = self.controller.probe()?;
                let after = self.activity.snapshot();
                if probe.quiescent() && after == before && probe.earliest_deadline == deadline {
                    return Ok(Quiet::Yes {
                        earliest_deadline: deadline,
                    });
                }
            }
            if start.elapsed() >= bound {
                return Ok(Quiet::Busy);
            }
            std::thread::sleep(Duration::from_micros(30));
        }
    }
}

/// Bytes received and not yet read on connections to or from `port` on this
/// machine (both ends are local: the API server and the scheduler).
pub fn tcp_backlog(port: u16) -> u64 {
    let mut total = 0;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 5 {
                continue;
            }
            let port_of = |addr: &str| {
                addr.rsplit(':')
                    .next()
                    .and_then(|p| u16::from_str_radix(p, 16).ok())
            };
            if port_of(f[1]) != Some(port) && port_of(f[2]) != Some(port) {
                continue;
            }
            // Only established connections carry data.
            if f[3] != "01" {
                continue;
            }
            // Received but not yet read by the application. (The send
            // queue is not looked at: on loopback it holds bytes already
            // delivered until a possibly delayed ACK.)
            if let Some((_tx, rx)) = f[4].split_once(':') {
                total += u64::from_str_radix(rx, 16).unwrap_or(0);
            }
        }
    }
    total
}

/// Freezes a process while the broker applies the events of one instant, so
/// that the scheduler sees them together (as one instant should be), not
/// one by one with scheduling cycles in between that would fail for want
/// of resources freed a microsecond of wall time later.
pub struct InstantGate {
    pid: i32,
}

impl InstantGate {
    pub fn new(pid: u32) -> Self {
        Self { pid: pid as i32 }
    }

    /// Stops the process and waits (briefly) until every thread is stopped.
    pub fn close(&self) {
        // SAFETY: sending a signal to our own child.
        if unsafe { libc::kill(self.pid, libc::SIGSTOP) } != 0 {
            return;
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            if all_threads_in_state(self.pid, 'T') != Some(false) {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Resumes the process once the API has written every pending watch
    /// event (bounded: a full socket buffer must not block the broker).
    pub fn open(&self, activity: &fakeapi::Activity) {
        let start = Instant::now();
        while activity.snapshot().watch_events_pending > 0
            && start.elapsed() < Duration::from_millis(100)
        {
            std::thread::sleep(Duration::from_micros(20));
        }
        // SAFETY: as above.
        unsafe { libc::kill(self.pid, libc::SIGCONT) };
    }
}

/// Whether every thread of `pid` is in `state`; `None` if the process is gone.
fn all_threads_in_state(pid: i32, state: char) -> Option<bool> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for entry in dir.flatten() {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let st = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].trim_start().chars().next());
        match st {
            Some(c) if c == state || c == 't' => {}
            Some('Z') | Some('X') | None => {}
            _ => return Some(false),
        }
    }
    Some(true)
}
