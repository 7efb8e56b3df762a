//! `SimTime`: an instant of simulated time.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// An instant of simulated time: nanoseconds since the Unix epoch, which is
/// what the scheduler's `SystemTime::now()` returns. (Its `Instant::now()` is
/// the same clock shifted by a constant.)
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SimTime(u64);

impl SimTime {
    /// The Unix epoch.
    pub const EPOCH: SimTime = SimTime(0);

    pub const fn from_nanos(ns: u64) -> Self {
        SimTime(ns)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `secs` seconds after the Unix epoch (negative values clamp to the epoch).
    pub fn from_secs_f64(secs: f64) -> Self {
        SimTime((secs.max(0.0) * 1e9).round() as u64)
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: SimTime) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for SimTime {
    type Output = SimTime;
    fn add(self, d: Duration) -> SimTime {
        SimTime(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub<SimTime> for SimTime {
    type Output = Duration;
    /// Saturating: zero if `rhs` is later.
    fn sub(self, rhs: SimTime) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SimTime({}.{:09})",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09}s",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}
