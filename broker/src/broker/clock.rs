//! Simulated time: the clock the broker, the API's timestamps and the
//! shim page share, and its conversions (Batsim seconds, API timestamps,
//! the shim's nanoseconds).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use timeshim::SimTime;

/// Simulated second 0 is this Unix time (2026-01-01T00:00:00Z), so that the
/// scheduler's wall clock reads plausible dates, identically in every run.
pub const SIM_EPOCH_SECS: f64 = 1_767_225_600.0;

/// The simulated clock shared by the broker, the API's timestamps and the
/// shim page: Batsim seconds as f64 bits.
#[derive(Clone, Default)]
pub struct SimClock(Arc<AtomicU64>);

impl SimClock {
    /// A clock that starts at Batsim time `t` (negative for a warm-up
    /// before the simulation's time 0).
    pub fn starting_at(t: f64) -> Self {
        let c = SimClock::default();
        c.set(t);
        c
    }

    pub fn now(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Acquire))
    }
    pub(super) fn set(&self, t: f64) {
        self.0.store(t.to_bits(), Ordering::Release);
    }
    /// A timestamp source for the API store.
    pub fn store_clock(&self) -> fakeapi::Clock {
        let c = self.clone();
        Arc::new(move || to_datetime(c.now()))
    }
}

pub fn to_datetime(t: f64) -> DateTime<Utc> {
    let total = SIM_EPOCH_SECS + t;
    let secs = total.floor();
    let nanos = ((total - secs) * 1e9).round().min(999_999_999.0) as u32;
    DateTime::from_timestamp(secs as i64, nanos).unwrap_or_default()
}

pub(super) fn to_time(t: f64) -> Time {
    let dt = to_datetime(t);
    Time(
        k8s_openapi::jiff::Timestamp::new(dt.timestamp(), dt.timestamp_subsec_nanos() as i32)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

pub(super) const SIM_EPOCH_NANOS: u64 = 1_767_225_600_000_000_000;

/// Batsim seconds to the shim's clock, in integer nanoseconds (an f64 of
/// seconds since 1970 would only resolve about 0.2 us).
/// Negative Batsim times (the scheduler's warm-up) come before the epoch.
pub fn sim_time(t: f64) -> SimTime {
    let ns = SIM_EPOCH_NANOS as i128 + (t * 1e9).round() as i128;
    SimTime::from_nanos(ns.clamp(0, u64::MAX as i128) as u64)
}

pub fn batsim_time(t: SimTime) -> f64 {
    (t.as_nanos() as i128 - SIM_EPOCH_NANOS as i128) as f64 / 1e9
}

/// Rounds up to Batsim's microsecond so that a wake-up is never before the
/// timer it serves.
pub(super) fn ceil_us(t: f64) -> f64 {
    (t * 1e6 - 1e-3).ceil() / 1e6
}
