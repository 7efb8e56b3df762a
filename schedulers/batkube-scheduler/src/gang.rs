//! Pod groups scheduled all or nothing, in the convention of
//! scheduler-plugins' Coscheduling: a `scheduling.x-k8s.io/v1alpha1`
//! PodGroup with `spec.minMember`, its pods labelled
//! `scheduling.x-k8s.io/pod-group: <name>`.
//!
//! Coscheduling places members one by one and holds them at Permit until
//! enough are placed, which can hold nodes while it waits. Here a group is
//! decided in one cycle instead: when the queue pops a member, every
//! pending member is taken out of the queue and placed against the cache,
//! each tentative placement assumed so the next member sees it (resources,
//! anti-affinity). If at least `minMember` (counting members already
//! placed) fit, they are bound; if not, every tentative placement is
//! forgotten, and all the members wait as unschedulable, with one message
//! naming the group, until a cluster event moves them back. Nothing is held
//! in the meantime. Members are placed in rank order (`<group>-0`,
//! `<group>-1`, ..., by the number after the last `-`), so the same inputs
//! give the same placements. Members never preempt.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use crate::explain::Attempt;
use crate::queue::QueuedPod;
use crate::scheduler::{CycleOutcome, Decision, Scheduler};

/// The label naming a pod's group.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// The API group, version, kind and resource of PodGroups.
pub const GROUP: &str = "scheduling.x-k8s.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "PodGroup";
pub const PLURAL: &str = "podgroups";
/// The plugin name a group's refusal is recorded under (requeue on a
/// PodGroup change).
pub const PLUGIN: &str = "Coscheduling";

/// Pod groups by `namespace/name`: their `minMember`.
pub type PodGroups = HashMap<String, u32>;

/// `spec.minMember` of a PodGroup object, or what is wrong with it. An
/// absent `minMember` is 0 (the CRD's default: no gating).
pub fn min_member(obj: &serde_json::Value) -> Result<u32, String> {
    match obj.pointer("/spec/minMember") {
        None | Some(serde_json::Value::Null) => Ok(0),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("spec.minMember: {v} is not a count of pods")),
    }
}

/// Rank order of members: by name with the number after the last `-`
/// compared as a number (`g-2` before `g-10`), then by the whole name.
pub fn member_order(a: &str, b: &str) -> Ordering {
    fn split(name: &str) -> (&str, Option<u64>) {
        match name.rsplit_once('-') {
            Some((base, n)) if !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => {
                (base, n.parse().ok())
            }
            _ => (name, None),
        }
    }
    let (ba, na) = split(a);
    let (bb, nb) = split(b);
    ba.cmp(bb).then(na.cmp(&nb)).then(a.cmp(b))
}

impl Scheduler {
    /// The API serves PodGroups: from now on a labelled pod is scheduled with its group.
    pub fn enable_pod_groups(&mut self) {
        self.groups.get_or_insert_with(PodGroups::new);
    }

    pub fn pod_groups_enabled(&self) -> bool {
        self.groups.is_some()
    }

    /// A PodGroup seen (added or changed). Ignored unless groups are enabled.
    pub fn set_pod_group(&mut self, group: &str, min_member: u32) {
        if let Some(g) = self.groups.as_mut() {
            g.insert(group.to_string(), min_member);
        }
    }

    pub fn remove_pod_group(&mut self, group: &str) {
        if let Some(g) = self.groups.as_mut() {
            g.remove(group);
        }
    }

    /// Decides for `popped` and every other pending member of `group`, all
    /// or nothing (see the module doc).
    pub(crate) fn schedule_group(
        &mut self,
        popped: QueuedPod,
        group: &str,
        now: Instant,
    ) -> CycleOutcome {
        let popped_key = popped.info.key.clone();
        let others: Vec<String> = self
            .queue
            .group_members(group)
            .filter(|k| **k != popped_key)
            .cloned()
            .collect();
        let mut members = vec![popped];
        for k in others {
            let Some(qp) = self.queue.take(&k, now) else {
                continue;
            };
            if self.cache.contains_pod(&k) || !self.responsible_for(&qp.info) {
                self.queue.done(&k);
                continue;
            }
            members.push(qp);
        }
        members.sort_by(|a, b| member_order(a.info.name(), b.info.name()));

        let min = self.groups.as_ref().and_then(|g| g.get(group)).copied();
        let Some(min) = min else {
            let message = format!("pod group {group} not found: its pods wait for their PodGroup");
            return self.park(
                members,
                &popped_key,
                message,
                [PLUGIN.to_string()].into(),
                now,
            );
        };
        let placed = self.cache.group_placed(group);
        let total = placed + members.len();
        if total < min as usize {
            let message = format!(
                "pod group {group}: {total} of its {min} pods (minMember) exist; waiting for the others"
            );
            return self.park(
                members,
                &popped_key,
                message,
                [PLUGIN.to_string()].into(),
                now,
            );
        }

        // Tentative placements, each assumed before the next member is tried.
        let start = (self.next_start_node_index, self.rng);
        let mut attempts: Vec<Option<Attempt>> = Vec::with_capacity(members.len());
        let decisions: Vec<Decision> = members
            .iter()
            .map(|m| {
                let d = self.schedule_pod(&m.info, false);
                attempts.push(self.last_attempt.take());
                d
            })
            .collect();
        let fit = decisions
            .iter()
            .filter(|d| matches!(d, Decision::Bind { .. }))
            .count();
        if placed + fit >= min as usize {
            // Enough: the group starts. A member beyond minMember that did
            // not fit waits on its own, as Coscheduling lets it.
            let mut out: Vec<CycleOutcome> = Vec::new();
            for ((m, d), a) in members.into_iter().zip(decisions).zip(attempts) {
                match &d {
                    Decision::Bind { .. } => self.queue.done(&m.info.key),
                    Decision::Unschedulable { plugins, .. } => {
                        self.queue
                            .requeue_unschedulable(&m.info.key, plugins.clone(), now)
                    }
                }
                out.push(CycleOutcome::single(m, d).with_explain(a));
            }
            return Self::popped_first(out, &popped_key);
        }

        // Not enough: nothing stays assumed, as if the cycle had not been.
        for (m, d) in members.iter().zip(&decisions) {
            if matches!(d, Decision::Bind { .. }) {
                self.cache.forget(&m.info.key);
            }
        }
        (self.next_start_node_index, self.rng) = start;
        let mut plugins = BTreeSet::new();
        let mut first_refusal = None;
        for (m, d) in members.iter().zip(&decisions) {
            if let Decision::Unschedulable {
                message,
                plugins: p,
                ..
            } = d
            {
                plugins.extend(p.iter().cloned());
                first_refusal.get_or_insert_with(|| format!("{}: {message}", m.info.name()));
            }
        }
        let counted = if placed > 0 {
            format!(
                "{fit} of {} pending pods fit, {placed} already placed",
                members.len()
            )
        } else {
            format!("{fit} of {} pods fit", members.len())
        };
        let message = format!(
            "pod group {group}: {counted} (minMember {min}); {}",
            first_refusal.unwrap_or_default()
        );
        // Each member's record keeps what its placement saw; none was
        // chosen, and the group's message says why.
        let attempts = attempts
            .into_iter()
            .map(|a| {
                a.map(|mut a| {
                    a.selected = None;
                    a.message = Some(message.clone());
                    a
                })
            })
            .collect();
        self.park_recorded(members, &popped_key, message, plugins, now, attempts)
    }

    /// Every member waits as unschedulable with the same message.
    fn park(
        &mut self,
        members: Vec<QueuedPod>,
        popped_key: &str,
        message: String,
        plugins: BTreeSet<String>,
        now: Instant,
    ) -> CycleOutcome {
        // Nothing was tried: when explained, the record is the message alone.
        let attempts = members
            .iter()
            .map(|_| {
                self.explain().map(|_| Attempt {
                    message: Some(message.clone()),
                    ..Attempt::default()
                })
            })
            .collect();
        self.park_recorded(members, popped_key, message, plugins, now, attempts)
    }

    fn park_recorded(
        &mut self,
        members: Vec<QueuedPod>,
        popped_key: &str,
        message: String,
        plugins: BTreeSet<String>,
        now: Instant,
        attempts: Vec<Option<Attempt>>,
    ) -> CycleOutcome {
        let mut out = Vec::with_capacity(members.len());
        for (m, a) in members.into_iter().zip(attempts) {
            self.queue
                .requeue_unschedulable(&m.info.key, plugins.clone(), now);
            out.push(
                CycleOutcome::single(
                    m,
                    Decision::Unschedulable {
                        message: message.clone(),
                        plugins: plugins.clone(),
                        preemption: None,
                    },
                )
                .with_explain(a),
            );
        }
        Self::popped_first(out, popped_key)
    }

    /// The popped pod as the outcome, the other members (in rank order) in it.
    fn popped_first(mut out: Vec<CycleOutcome>, popped_key: &str) -> CycleOutcome {
        let i = out
            .iter()
            .position(|o| o.pod.info.key == popped_key)
            .expect("the popped pod is a member");
        let mut first = out.remove(i);
        first.members = out;
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_in_rank_order() {
        let mut names = vec!["g-10", "g-2", "g-0", "g-1", "h", "g-x"];
        names.sort_by(|a, b| member_order(a, b));
        assert_eq!(names, vec!["g-0", "g-1", "g-2", "g-10", "g-x", "h"]);
    }

    #[test]
    fn min_member_is_read_or_refused() {
        assert_eq!(
            min_member(&serde_json::json!({"spec": {"minMember": 4}})),
            Ok(4)
        );
        assert_eq!(min_member(&serde_json::json!({"spec": {}})), Ok(0));
        let e = min_member(&serde_json::json!({"spec": {"minMember": -1}})).unwrap_err();
        assert!(e.contains("spec.minMember: -1"), "{e}");
    }
}
