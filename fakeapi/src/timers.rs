//! What the API server does by time, on the clock its owner chooses.
//!
//! A real API server ends a watch after its `timeoutSeconds` and sends an
//! idle watch a bookmark now and then. With [`WatchTimers::Wall`] these run
//! on tokio's clock (a plain API server, `batkube serve`). With
//! [`WatchTimers::Simulated`] they are deadlines on the store's clock (the
//! simulated time of [`StoreConfig::clock`](crate::StoreConfig)) that fire
//! only when the owner of that clock says time has come:
//! [`SimTimers::earliest_deadline`] is the next instant something is due (a
//! simulator must not move its clock past it without stopping there), and
//! [`SimTimers::fire_until`] fires everything due by an instant.
//!
//! A fired timer counts as a pending watch event in
//! [`Activity`](crate::Activity) from the moment it fires until its effect
//! (the watch's end, a bookmark) has been flushed to the client's socket,
//! or the watch is gone: a broker waiting for the API to be idle never
//! misses it in flight.
//!
//! ```
//! use chrono::{DateTime, Duration, Utc};
//! use fakeapi::SimTimers;
//!
//! let timers = SimTimers::default();
//! assert_eq!(timers.earliest_deadline(), None);
//! // No watch: nothing to fire.
//! assert_eq!(timers.fire_until(DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(290)), 0);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use chrono::{DateTime, Utc};
use parking_lot::Mutex;

use crate::activity::{PendingEvents, WatchTally};

/// The clock of a store's watch timers (`timeoutSeconds`, periodic
/// bookmarks).
#[derive(Clone, Default)]
pub enum WatchTimers {
    /// Tokio's (wall) clock.
    #[default]
    Wall,
    /// The store's clock, moved by its owner through [`SimTimers`].
    Simulated(SimTimers),
    /// None: watches end only when their client or the server ends them,
    /// and get no periodic bookmark.
    Off,
}

impl std::fmt::Debug for WatchTimers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WatchTimers::Wall => "Wall",
            WatchTimers::Simulated(_) => "Simulated",
            WatchTimers::Off => "Off",
        })
    }
}

/// Deadlines on simulated time, fired by the clock's owner.
#[derive(Clone, Default)]
pub struct SimTimers(Arc<Mutex<State>>);

#[derive(Default)]
struct State {
    next_id: u64,
    /// (deadline in ns since the Unix epoch, id) -> the timer.
    armed: BTreeMap<(i64, u64), Armed>,
}

struct Armed {
    tally: Arc<WatchTally>,
    slot: Arc<Mutex<Slot>>,
}

/// One timer's state, shared with the watch that waits on it.
#[derive(Default)]
struct Slot {
    /// Set when the timer fired: the pending count of its effect.
    fired: Option<PendingEvents>,
    waker: Option<Waker>,
    /// Its key while armed (to disarm it on drop).
    key: Option<(i64, u64)>,
}

fn nanos(t: DateTime<Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or(i64::MAX)
}

impl SimTimers {
    /// The earliest instant a timer is due, if any is armed.
    pub fn earliest_deadline(&self) -> Option<DateTime<Utc>> {
        let s = self.0.lock();
        s.armed
            .keys()
            .next()
            .map(|&(ns, _)| DateTime::from_timestamp_nanos(ns))
    }

    /// Fires every timer due at or before `now`; returns how many fired.
    /// Each counts as a pending watch event until its effect is flushed to
    /// the client (or its watch is gone).
    pub fn fire_until(&self, now: DateTime<Utc>) -> usize {
        let now = nanos(now);
        let mut s = self.0.lock();
        let mut fired = 0;
        while let Some(entry) = s.armed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let armed = entry.remove();
            let mut slot = armed.slot.lock();
            slot.key = None;
            slot.fired = Some(PendingEvents::one(&armed.tally));
            if let Some(w) = slot.waker.take() {
                w.wake();
            }
            fired += 1;
        }
        fired
    }

    /// Arms a timer at `deadline` for the watch counted by `tally`.
    pub(crate) fn arm(&self, deadline: DateTime<Utc>, tally: &Arc<WatchTally>) -> SimTimer {
        let slot = Arc::new(Mutex::new(Slot::default()));
        let mut s = self.0.lock();
        s.next_id += 1;
        let key = (nanos(deadline), s.next_id);
        slot.lock().key = Some(key);
        s.armed.insert(
            key,
            Armed {
                tally: tally.clone(),
                slot: slot.clone(),
            },
        );
        SimTimer {
            timers: self.clone(),
            slot,
            deadline,
        }
    }
}

/// A watch's timer on simulated time; disarmed when dropped.
pub(crate) struct SimTimer {
    timers: SimTimers,
    slot: Arc<Mutex<Slot>>,
    deadline: DateTime<Utc>,
}

impl SimTimer {
    /// The pending count of the timer's effect once it fired (the caller
    /// hands it over with the effect, or drops it if there is none);
    /// otherwise registers the waker.
    pub(crate) fn poll_fired(&mut self, waker: &Waker) -> Option<PendingEvents> {
        let mut slot = self.slot.lock();
        match slot.fired.take() {
            Some(p) => Some(p),
            None => {
                slot.waker = Some(waker.clone());
                None
            }
        }
    }

    pub(crate) fn deadline(&self) -> DateTime<Utc> {
        self.deadline
    }

    /// Re-arms the timer (after it fired) at a new deadline.
    pub(crate) fn rearm(&mut self, deadline: DateTime<Utc>, tally: &Arc<WatchTally>) {
        *self = self.timers.arm(deadline, tally);
    }
}

impl Drop for SimTimer {
    fn drop(&mut self) {
        // Lock order: the registry, then the slot (as in fire_until).
        let mut s = self.timers.0.lock();
        let key = self.slot.lock().key.take();
        if let Some(key) = key {
            s.armed.remove(&key);
        }
        drop(s);
        // A fired count not taken is released (as not written) here.
        self.slot.lock().fired.take();
    }
}

/// The next multiple of `interval` after `now` (periodic bookmarks on
/// simulated time fall on the same instants for every watch, so that they
/// cost a simulator one stop per interval, not one per watch).
pub(crate) fn next_tick(now: DateTime<Utc>, interval: Duration) -> DateTime<Utc> {
    let step = interval.as_nanos().max(1) as i64;
    let ns = nanos(now);
    DateTime::from_timestamp_nanos((ns.div_euclid(step) + 1).saturating_mul(step))
}
