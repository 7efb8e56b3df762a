//! Compaction of the store's past, as kube-apiserver has etcd compacted.
//!
//! kube-apiserver's compactor (`k8s.io/apiserver/pkg/storage/etcd3/compact.go`)
//! runs every `--etcd-compaction-interval` (default 5 minutes): each round
//! writes its own key (`compact_rev_key`), which takes a revision of its
//! own, and compacts etcd to the revision the previous round wrote. A
//! revision so stays readable for one to two intervals after the next one
//! was written. Here a round is the same: it takes a resourceVersion (no
//! object changes, no watcher hears of it) and compacts to the version the
//! round before took. What a compacted version can no longer serve, as
//! etcd3's store answers (`etcd3/errors.go`):
//!
//! - a list continued at it (a continue token): 410 `Expired`, with a
//!   continue token in the Status's metadata that continues from the same
//!   key at the latest version (an inconsistent list);
//! - a list at exactly it (`resourceVersionMatch=Exact`, or a version with
//!   a `limit` and no match): 410 `Expired`, "The resourceVersion for the
//!   provided list is too old.".
//!
//! Not a watch: kube-apiserver serves a watch from a version out of its
//! watch cache, whose history etcd's compaction does not touch (a watch
//! older than the cache's history is "too old resource version: X (Y)");
//! the store's history is [`StoreConfig::watch_history`](crate::StoreConfig)
//! events per resource, as before.
//!
//! Rounds fall every interval after the store was made, on the clock of its
//! watch timers: tokio's under [`WatchTimers::Wall`] (`batkube serve`,
//! whose store clock is Batsim's simulated time and stands still without
//! Batsim), the store's own clock otherwise (simulated time under `batkube
//! run`). They are not timers: the rounds due are done when the store is
//! next read or written, before anything else. A round changes nothing a
//! client could be waiting for, so doing it then is the same as doing it on
//! time, and an idle store (or a simulation) pays nothing between uses.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::timers::WatchTimers;

/// The clock rounds are counted on, and where it stood when the store was
/// made.
#[derive(Debug, Clone, Copy)]
pub(super) enum Origin {
    Wall(tokio::time::Instant),
    Store(DateTime<Utc>),
}

impl Origin {
    pub(super) fn new(timers: &WatchTimers, store_now: DateTime<Utc>) -> Self {
        match timers {
            WatchTimers::Wall => Origin::Wall(tokio::time::Instant::now()),
            WatchTimers::Simulated(_) | WatchTimers::Off => Origin::Store(store_now),
        }
    }

    /// Time since the store was made (zero if the clock went back).
    pub(super) fn elapsed(&self, store_now: impl FnOnce() -> DateTime<Utc>) -> Duration {
        match self {
            Origin::Wall(t) => t.elapsed(),
            Origin::Store(t) => (store_now() - *t).to_std().unwrap_or_default(),
        }
    }
}

/// The rounds done so far and what they compacted.
#[derive(Debug, Default)]
pub(super) struct Compaction {
    rounds: u64,
    /// The version the last round took (0: no round yet).
    written: u64,
    /// Versions below this one are compacted away (0: none).
    compacted: u64,
}

impl Compaction {
    /// How many rounds are due after `elapsed`, with rounds every `interval`.
    pub(super) fn due(interval: Duration, elapsed: Duration) -> u64 {
        let step = interval.as_nanos();
        if step == 0 {
            return 0;
        }
        u64::try_from(elapsed.as_nanos() / step).unwrap_or(u64::MAX)
    }

    /// Whether rounds up to `due` are still to do.
    pub(super) fn behind(&self, due: u64) -> bool {
        self.rounds < due
    }

    /// Does the rounds up to `due`, each taking the next version of `rv`.
    /// However many are due, this costs the same: of a run of rounds, only
    /// the last two matter.
    pub(super) fn catch_up(&mut self, rv: &mut u64, due: u64) {
        let Some(n) = due.checked_sub(self.rounds).filter(|&n| n > 0) else {
            return;
        };
        *rv += n;
        // The round before the last took `rv - 1`; with one round only,
        // the one before it is the last round done until now.
        let previous = if n >= 2 { *rv - 1 } else { self.written };
        if previous > 0 {
            self.compacted = previous;
        }
        self.written = *rv;
        self.rounds = due;
    }

    /// Whether version `rv` is compacted away.
    pub(super) fn is_compacted(&self, rv: u64) -> bool {
        rv < self.compacted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_lives_one_to_two_rounds() {
        let mut c = Compaction::default();
        let mut rv = 10;
        // First round: takes 11, compacts nothing (no round before it).
        c.catch_up(&mut rv, 1);
        assert_eq!(rv, 11);
        assert!(!c.is_compacted(1));
        // Writes take 12..=16.
        rv += 5;
        // Second round: takes 17, compacts to 11.
        c.catch_up(&mut rv, 2);
        assert_eq!(rv, 17);
        assert!(c.is_compacted(10));
        assert!(!c.is_compacted(11));
        assert!(!c.is_compacted(16));
        // Doing the same rounds again is nothing.
        c.catch_up(&mut rv, 2);
        assert_eq!(rv, 17);
    }

    #[test]
    fn many_rounds_at_once_are_as_one_by_one() {
        let (mut a, mut b) = (Compaction::default(), Compaction::default());
        let (mut ra, mut rb) = (3, 3);
        a.catch_up(&mut ra, 5);
        for due in 1..=5 {
            b.catch_up(&mut rb, due);
        }
        assert_eq!((ra, a.compacted, a.written), (rb, b.compacted, b.written));
        assert_eq!((ra, a.compacted), (8, 7));
        let (mut a, mut b) = (Compaction::default(), Compaction::default());
        let (mut ra, mut rb) = (3, 3);
        a.catch_up(&mut ra, 2);
        b.catch_up(&mut rb, 1);
        b.catch_up(&mut rb, 2);
        assert_eq!((ra, a.compacted, a.written), (rb, b.compacted, b.written));
    }

    #[test]
    fn rounds_due_by_the_interval() {
        let m = Duration::from_secs(60);
        assert_eq!(Compaction::due(5 * m, 4 * m), 0);
        assert_eq!(Compaction::due(5 * m, 5 * m), 1);
        assert_eq!(Compaction::due(5 * m, 11 * m), 2);
        assert_eq!(Compaction::due(Duration::ZERO, 11 * m), 0);
    }
}
