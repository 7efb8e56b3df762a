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
