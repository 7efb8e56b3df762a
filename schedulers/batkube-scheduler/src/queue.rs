//! The scheduling queue, with upstream's `PriorityQueue` semantics: an active
//! queue ordered by priority then enqueue time, a backoff queue (initial 1 s,
//! doubling per attempt, max 10 s), and unschedulable pods moved back by
//! relevant cluster events or after 5 minutes.
//!
//! Time is an input: every method that needs the clock takes `now`, and
//! [`SchedulingQueue::next_deadline`] tells the caller when to wake up next,
//! so the scheduler arms one timer instead of polling every second.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::model::{PodInfo, PodKey};

/// Upstream `podMaxInUnschedulablePodsDuration`.
pub const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(5 * 60);

/// Cluster events that can make an unschedulable pod schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterEvent {
    NodeAdd,
    /// A node update that changed a scheduling property.
    NodeUpdate,
    /// A bound pod was deleted or finished: its resources are free.
    AssignedPodDelete,
    /// A pod was seen bound: it may be what a pod's required affinity waits for.
    AssignedPodAdd,
    /// A pod group was added, changed or deleted.
    PodGroupChange,
    /// The 5-minute flush.
    UnschedulableTimeout,
}

/// Whether a plugin that rejected a pod cares about an event (upstream
/// `EventsToRegister`).
fn plugin_interested(plugin: &str, event: ClusterEvent) -> bool {
    match event {
        ClusterEvent::UnschedulableTimeout | ClusterEvent::NodeAdd => true,
        ClusterEvent::NodeUpdate => !matches!(plugin, "NodeName" | "Coscheduling"),
        ClusterEvent::AssignedPodDelete => {
            matches!(
                plugin,
                "NodeResourcesFit" | "DefaultPreemption" | "InterPodAffinity"
            )
        }
        // Only for pods with required affinity terms (see `move_all`): a
        // new pod never lifts an anti-affinity refusal.
        ClusterEvent::AssignedPodAdd => plugin == "InterPodAffinity",
        ClusterEvent::PodGroupChange => plugin == "Coscheduling",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Active,
    Backoff,
    Unschedulable,
    InFlight,
}

/// A pod in the queue and its scheduling history.
#[derive(Debug, Clone)]
pub struct QueuedPod {
    pub info: PodInfo,
    /// When it was last added to a queue (upstream `Timestamp`).
    pub timestamp: Instant,
    /// When it was first popped (for the e2e latency metric).
    pub initial_attempt: Option<Instant>,
    /// When it was first added.
    pub first_seen: Instant,
    /// Number of times it has been popped.
    pub attempts: u32,
    /// Plugins that rejected it in its last attempt.
    pub unschedulable_plugins: BTreeSet<String>,
    seq: u64,
    location: Location,
    /// Scheduling cycle in which it was popped.
    cycle: u64,
}

type ActiveKey = (Reverse<i32>, Instant, u64);
type TimedKey = (Instant, u64);

pub struct SchedulingQueue {
    pods: HashMap<PodKey, QueuedPod>,
    active: BTreeSet<(ActiveKey, PodKey)>,
    backoff: BTreeSet<(TimedKey, PodKey)>,
    unschedulable: BTreeSet<(TimedKey, PodKey)>,
    /// Pods of each pod group (`namespace/name`), wherever they are in the queue.
    groups: HashMap<String, BTreeSet<PodKey>>,
    next_seq: u64,
    scheduling_cycle: u64,
    move_request_cycle: u64,
    initial_backoff: Duration,
    max_backoff: Duration,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLengths {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
}

impl SchedulingQueue {
    pub fn new(initial_backoff: Duration, max_backoff: Duration) -> SchedulingQueue {
        SchedulingQueue {
            pods: HashMap::new(),
            active: BTreeSet::new(),
            backoff: BTreeSet::new(),
            unschedulable: BTreeSet::new(),
            groups: HashMap::new(),
            next_seq: 0,
            scheduling_cycle: 0,
            move_request_cycle: 0,
            initial_backoff,
            max_backoff,
        }
    }

    pub fn lengths(&self) -> QueueLengths {
        QueueLengths {
            active: self.active.len(),
            backoff: self.backoff.len(),
            unschedulable: self.unschedulable.len(),
        }
    }

    pub fn contains(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    pub fn location(&self, key: &str) -> Option<Location> {
        self.pods.get(key).map(|p| p.location)
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// Upstream `calculateBackoffDuration`: initial doubled per attempt after the first, capped.
    pub fn backoff_duration(&self, attempts: u32) -> Duration {
        let mut d = self.initial_backoff;
        for _ in 1..attempts {
            d = d.saturating_mul(2);
            if d > self.max_backoff {
                return self.max_backoff;
            }
        }
        d.min(self.max_backoff)
    }

    fn backoff_expiry(&self, p: &QueuedPod) -> Instant {
        p.timestamp + self.backoff_duration(p.attempts)
    }

    fn unlink(&mut self, key: &str) {
        let Some(p) = self.pods.get(key) else { return };
        let k = key.to_string();
        match p.location {
            Location::Active => {
                self.active
                    .remove(&((Reverse(p.info.priority), p.timestamp, p.seq), k));
            }
            Location::Backoff => {
                let e = self.backoff_expiry(p);
                self.backoff.remove(&((e, p.seq), k));
            }
            Location::Unschedulable => {
                self.unschedulable.remove(&((p.timestamp, p.seq), k));
            }
            Location::InFlight => {}
        }
    }

    fn link(&mut self, key: &str, loc: Location) {
        let Some(p) = self.pods.get_mut(key) else {
            return;
        };
        p.location = loc;
        let p = &self.pods[key];
        let k = key.to_string();
        match loc {
            Location::Active => {
                self.active
                    .insert(((Reverse(p.info.priority), p.timestamp, p.seq), k));
            }
            Location::Backoff => {
                let e = self.backoff_expiry(p);
                self.backoff.insert(((e, p.seq), k));
            }
            Location::Unschedulable => {
                self.unschedulable.insert(((p.timestamp, p.seq), k));
            }
            Location::InFlight => {}
        }
    }

    fn index_group(&mut self, info: &PodInfo, add: bool) {
        let Some(g) = &info.group else { return };
        if add {
            self.groups
                .entry(g.clone())
                .or_default()
                .insert(info.key.clone());
        } else if let Some(members) = self.groups.get_mut(g) {
            members.remove(&info.key);
            if members.is_empty() {
                self.groups.remove(g);
            }
        }
    }

    /// Pending pods of the pod group `namespace/name`, in no particular order.
    pub fn group_members(&self, group: &str) -> impl Iterator<Item = &PodKey> {
        self.groups.get(group).into_iter().flatten()
    }

    /// A new pending pod, or an update of one already queued (upstream `Add`/`Update`).
    pub fn add_or_update(&mut self, info: PodInfo, now: Instant) {
        let key = info.key.clone();
        if let Some(existing) = self.pods.get(&key) {
            // Our own explanation of the last attempt (`--explain`) is no
            // change: it must not requeue the pod it explains.
            let spec_changed = existing.info.pod.spec != info.pod.spec
                || existing.info.pod.metadata.labels != info.pod.metadata.labels
                || !crate::explain::same_but_explanations(
                    existing.info.pod.metadata.annotations.as_ref(),
                    info.pod.metadata.annotations.as_ref(),
                );
            let loc = existing.location;
            let old_group = existing.info.group.clone();
            if old_group != info.group {
                let old = existing.info.clone();
                self.index_group(&old, false);
                self.index_group(&info, true);
            }
            self.unlink(&key);
            let p = self.pods.get_mut(&key).expect("present");
            p.info = info;
            match loc {
                // A status-only update (our own condition patch) must not requeue.
                Location::Unschedulable if spec_changed => {
                    let dest = if self.backoff_expiry(&self.pods[&key]) > now {
                        Location::Backoff
                    } else {
                        Location::Active
                    };
                    self.link(&key, dest);
                }
                other => self.link(&key, other),
            }
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.index_group(&info, true);
        self.pods.insert(
            key.clone(),
            QueuedPod {
                info,
                timestamp: now,
                initial_attempt: None,
                first_seen: now,
                attempts: 0,
                unschedulable_plugins: BTreeSet::new(),
                seq,
                location: Location::Active,
                cycle: 0,
            },
        );
        self.link(&key, Location::Active);
    }

    /// Removes a pod (deleted, bound by someone else, finished).
    pub fn delete(&mut self, key: &str) -> Option<QueuedPod> {
        self.unlink(key);
        let p = self.pods.remove(key)?;
        self.index_group(&p.info, false);
        Some(p)
    }

    /// Pops the highest-priority, longest-waiting active pod. The pod stays
    /// known ("in flight") until [`Self::done`] or a requeue.
    pub fn pop(&mut self, now: Instant) -> Option<QueuedPod> {
        let (_, key) = self.active.pop_first()?;
        self.scheduling_cycle += 1;
        let cycle = self.scheduling_cycle;
        let p = self.pods.get_mut(&key).expect("active pods are known");
        p.location = Location::InFlight;
        p.attempts += 1;
        p.cycle = cycle;
        p.initial_attempt.get_or_insert(now);
        Some(p.clone())
    }

    /// Takes one given pod out of wherever it waits, as [`Self::pop`] does,
    /// in the current scheduling cycle: the other members of a pod group
    /// scheduled together with the popped one. `None` if it is not queued
    /// or already in flight.
    pub fn take(&mut self, key: &str, now: Instant) -> Option<QueuedPod> {
        if self.location(key)? == Location::InFlight {
            return None;
        }
        self.unlink(key);
        let cycle = self.scheduling_cycle;
        let p = self.pods.get_mut(key)?;
        p.location = Location::InFlight;
        p.attempts += 1;
        p.cycle = cycle;
        p.initial_attempt.get_or_insert(now);
        Some(p.clone())
    }

    /// The popped pod was bound (or assumed): forget it.
    pub fn done(&mut self, key: &str) {
        if self.location(key) == Some(Location::InFlight) {
            if let Some(p) = self.pods.remove(key) {
                self.index_group(&p.info, false);
            }
        }
    }

    /// Upstream `AddUnschedulableIfNotPresent`: a pod that failed goes to the
    /// unschedulable pods, or to the backoff queue if a move request arrived
    /// while it was being scheduled (the event may have made it schedulable).
    pub fn requeue_unschedulable(&mut self, key: &str, plugins: BTreeSet<String>, now: Instant) {
        let Some(p) = self.pods.get_mut(key) else {
            return;
        };
        if p.location != Location::InFlight {
            return;
        }
        p.timestamp = now;
        p.unschedulable_plugins = plugins;
        let dest = if self.move_request_cycle >= p.cycle {
            Location::Backoff
        } else {
            Location::Unschedulable
        };
        self.link(key, dest);
    }

    /// An error (not a verdict on the pod: API failure, binding conflict): retry after backoff.
    pub fn requeue_backoff(&mut self, key: &str, now: Instant) {
        let Some(p) = self.pods.get_mut(key) else {
            return;
        };
        if p.location != Location::InFlight {
            return;
        }
        p.timestamp = now;
        self.link(key, Location::Backoff);
    }

    /// Puts back a pod whose binding failed after it left the queue.
    pub fn readd_after_binding_failure(&mut self, mut pod: QueuedPod, now: Instant) {
        let key = pod.info.key.clone();
        if self.pods.contains_key(&key) {
            return;
        }
        pod.timestamp = now;
        pod.location = Location::InFlight;
        self.index_group(&pod.info, true);
        self.pods.insert(key.clone(), pod);
        self.link(&key, Location::Backoff);
    }

    /// Upstream `MoveAllToActiveOrBackoffQueue`: unschedulable pods whose
    /// rejecting plugins care about `event` go back to active (or backoff
    /// while still backing off).
    pub fn move_all(&mut self, event: ClusterEvent, now: Instant) -> usize {
        let keys: Vec<PodKey> = self
            .unschedulable
            .iter()
            .map(|(_, k)| k)
            .filter(|k| {
                let p = &self.pods[*k];
                if event == ClusterEvent::AssignedPodAdd && p.info.terms.affinity.is_empty() {
                    return false;
                }
                p.unschedulable_plugins.is_empty()
                    || p.unschedulable_plugins
                        .iter()
                        .any(|pl| plugin_interested(pl, event))
            })
            .cloned()
            .collect();
        let moved = keys.len();
        for k in keys {
            self.move_to_active_or_backoff(&k, now);
        }
        self.move_request_cycle = self.scheduling_cycle;
        moved
    }

    fn move_to_active_or_backoff(&mut self, key: &str, now: Instant) {
        self.unlink(key);
        let dest = if self.backoff_expiry(&self.pods[key]) > now {
            Location::Backoff
        } else {
            Location::Active
        };
        self.link(key, dest);
    }

    /// Moves backoff pods whose backoff expired to active, and flushes pods
    /// unschedulable for 5 minutes. Call when [`Self::next_deadline`] passes.
    pub fn flush(&mut self, now: Instant) {
        while let Some(((expiry, _), key)) = self.backoff.first().cloned() {
            if expiry > now {
                break;
            }
            self.unlink(&key);
            self.link(&key, Location::Active);
        }
        let mut flushed = false;
        while let Some(((ts, _), key)) = self.unschedulable.first().cloned() {
            if ts + UNSCHEDULABLE_FLUSH > now {
                break;
            }
            self.move_to_active_or_backoff(&key, now);
            flushed = true;
        }
        if flushed {
            self.move_request_cycle = self.scheduling_cycle;
        }
    }

    /// The next instant at which [`Self::flush`] will change something.
    pub fn next_deadline(&self) -> Option<Instant> {
        let b = self.backoff.first().map(|((e, _), _)| *e);
        let u = self
            .unschedulable
            .first()
            .map(|((t, _), _)| *t + UNSCHEDULABLE_FLUSH);
        match (b, u) {
            (Some(b), Some(u)) => Some(b.min(u)),
            (b, u) => b.or(u),
        }
    }

    /// Pending pods (all but in-flight), for preemption's nominated-pod checks and metrics.
    pub fn pending(&self) -> impl Iterator<Item = &QueuedPod> {
        self.pods.values()
    }

    pub fn get(&self, key: &str) -> Option<&QueuedPod> {
        self.pods.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, priority: i32) -> PodInfo {
        PodInfo::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"priority": priority, "containers": [{"name": "c"}]}
            }))
            .unwrap(),
        )
        .unwrap()
    }

    fn q() -> SchedulingQueue {
        SchedulingQueue::new(Duration::from_secs(1), Duration::from_secs(10))
    }

    #[test]
    fn pops_by_priority_then_arrival() {
        let t0 = Instant::now();
        let mut q = q();
        q.add_or_update(info("low-a", 0), t0);
        q.add_or_update(info("high", 100), t0 + Duration::from_secs(2));
        q.add_or_update(info("mid", 50), t0 + Duration::from_secs(1));
        q.add_or_update(info("low-b", 0), t0);
        let order: Vec<String> = std::iter::from_fn(|| q.pop(t0).map(|p| p.info.key)).collect();
        assert_eq!(
            order,
            vec![
                "default/high",
                "default/mid",
                "default/low-a",
                "default/low-b"
            ]
        );
    }

    #[test]
    fn backoff_doubles_up_to_max() {
        let q = q();
        let secs: Vec<u64> = (1..=6).map(|a| q.backoff_duration(a).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 10, 10]);
    }

    /// An unschedulable pod is retried on each relevant event, and each retry
    /// waits out a backoff of 1, 2, 4, 8, 10 s (on an injected clock).
    #[test]
    fn unschedulable_pod_retried_on_event_after_growing_backoff() {
        let t0 = Instant::now();
        let mut q = q();
        q.add_or_update(info("p", 0), t0);
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..5 {
            let p = q.pop(now).expect("active");
            q.requeue_unschedulable(&p.info.key, ["NodeResourcesFit".to_string()].into(), now);
            assert_eq!(q.location("default/p"), Some(Location::Unschedulable));
            // A pod finished: back to the backoff queue (still backing off).
            q.move_all(ClusterEvent::AssignedPodDelete, now);
            assert_eq!(q.location("default/p"), Some(Location::Backoff));
            let deadline = q.next_deadline().expect("backoff deadline");
            waits.push((deadline - now).as_secs());
            q.flush(deadline - Duration::from_millis(1));
            assert!(!q.has_active());
            now = deadline;
            q.flush(now);
            assert!(q.has_active());
        }
        assert_eq!(waits, vec![1, 2, 4, 8, 10]);
    }

    #[test]
    fn irrelevant_events_do_not_move_pods() {
        let t0 = Instant::now();
        let mut q = q();
        q.add_or_update(info("p", 0), t0);
        let p = q.pop(t0).unwrap();
        q.requeue_unschedulable(&p.info.key, ["TaintToleration".to_string()].into(), t0);
        // A pod finishing frees resources, not taints.
        q.move_all(ClusterEvent::AssignedPodDelete, t0);
        assert_eq!(q.location("default/p"), Some(Location::Unschedulable));
        q.move_all(ClusterEvent::NodeUpdate, t0);
        assert_eq!(q.location("default/p"), Some(Location::Backoff));
    }

    #[test]
    fn move_request_during_cycle_sends_failure_to_backoff() {
        let t0 = Instant::now();
        let mut q = q();
        q.add_or_update(info("p", 0), t0);
        let p = q.pop(t0).unwrap();
        q.move_all(ClusterEvent::AssignedPodDelete, t0);
        q.requeue_unschedulable(&p.info.key, ["NodeResourcesFit".to_string()].into(), t0);
        assert_eq!(q.location("default/p"), Some(Location::Backoff));
    }

    #[test]
    fn unschedulable_pods_flush_after_five_minutes() {
        let t0 = Instant::now();
        let mut q = q();
        q.add_or_update(info("p", 0), t0);
        let p = q.pop(t0).unwrap();
        q.requeue_unschedulable(&p.info.key, ["TaintToleration".to_string()].into(), t0);
        assert_eq!(q.next_deadline(), Some(t0 + UNSCHEDULABLE_FLUSH));
        q.flush(t0 + UNSCHEDULABLE_FLUSH - Duration::from_secs(1));
        assert_eq!(q.location("default/p"), Some(Location::Unschedulable));
        q.flush(t0 + UNSCHEDULABLE_FLUSH);
        assert_eq!(q.location("default/p"), Some(Location::Active));
        assert_eq!(q.next_deadline(), None);
    }

    #[test]
    fn status_only_update_does_not_requeue() {
        let t0 = Instant::now();
        let mut q = q();
        q.add_or_update(info("p", 0), t0);
        let p = q.pop(t0).unwrap();
        q.requeue_unschedulable(&p.info.key, ["NodeResourcesFit".to_string()].into(), t0);
        let mut updated = info("p", 0);
        let mut pod = (*updated.pod).clone();
        pod.status = Some(Default::default());
        updated.pod = std::sync::Arc::new(pod);
        q.add_or_update(updated, t0);
        assert_eq!(q.location("default/p"), Some(Location::Unschedulable));
        // Nor does our explanation of the attempt (--explain).
        let mut explained = info("p", 0);
        let mut pod = (*explained.pod).clone();
        pod.metadata.annotations = Some(
            [
                (crate::explain::FILTER_RESULT.to_string(), "{}".to_string()),
                (crate::explain::ATTEMPT.to_string(), "1".to_string()),
            ]
            .into(),
        );
        explained.pod = std::sync::Arc::new(pod);
        q.add_or_update(explained, t0);
        assert_eq!(q.location("default/p"), Some(Location::Unschedulable));
        // A spec change does.
        q.add_or_update(info("p", 5), t0 + Duration::from_secs(5));
        assert_eq!(q.location("default/p"), Some(Location::Active));
    }
}
