//! One scheduling cycle, without any API server: pop a pod, filter nodes,
//! score them, pick one, assume the pod there (or find preemption victims).
//! The runner performs the resulting API calls.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

use crate::affinity::InterPodState;
use crate::cache::Cache;
use crate::config::{FilterPlugin, Profile, SchedulerConfig};
use crate::explain::{Attempt, ExplainConfig, Verdict};
use crate::framework::{run_filters, score_nodes_recorded, FilterFailure};
use crate::gang::PodGroups;
use crate::model::{NodeInfo, PodInfo, PodKey};
use crate::preemption::{nodes_available_message, nominated_extra, preempt, Candidate};
use crate::queue::{QueuedPod, SchedulingQueue};

/// Upstream `minFeasibleNodesToFind`.
const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// Upstream `minFeasibleNodesPercentageToFind`.
const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;

/// How to choose among nodes with the same best score. Upstream picks at
/// random; simulations need reproducible runs, so the default is the first
/// node name, and a seed gives upstream-like but reproducible sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieBreak {
    NodeName,
    Seeded(u64),
}

#[derive(Debug, Clone)]
pub enum Decision {
    /// Assumed on `node`; the binding must be sent.
    Bind { node: String },
    /// Fits nowhere. `preemption` is set when victims must be deleted for
    /// the pod to fit on a node later.
    Unschedulable {
        message: String,
        plugins: BTreeSet<String>,
        preemption: Option<Candidate>,
    },
}

/// What a cycle decided for which pod.
#[derive(Debug, Clone)]
pub struct CycleOutcome {
    pub pod: QueuedPod,
    pub decision: Decision,
    /// The other pending members of the popped pod's group, decided in the
    /// same cycle (empty for a pod outside a group).
    pub members: Vec<CycleOutcome>,
    /// What the attempt saw, when decisions are explained.
    pub explain: Option<Box<Attempt>>,
}

impl CycleOutcome {
    pub(crate) fn single(pod: QueuedPod, decision: Decision) -> CycleOutcome {
        CycleOutcome {
            pod,
            decision,
            members: Vec::new(),
            explain: None,
        }
    }

    pub(crate) fn with_explain(mut self, explain: Option<Attempt>) -> CycleOutcome {
        self.explain = explain.map(Box::new);
        self
    }

    /// [`Self::all`] with what each attempt saw (when explained).
    pub fn all_explained(self) -> Vec<(QueuedPod, Decision, Option<Box<Attempt>>)> {
        let mut out = vec![(self.pod, self.decision, self.explain)];
        out.extend(
            self.members
                .into_iter()
                .flat_map(CycleOutcome::all_explained),
        );
        out
    }

    /// Every pod decided in the cycle with its decision: the popped one, then the members.
    pub fn all(self) -> Vec<(QueuedPod, Decision)> {
        let mut out = vec![(self.pod, self.decision)];
        out.extend(self.members.into_iter().flat_map(CycleOutcome::all));
        out
    }
}

pub struct Scheduler {
    pub config: SchedulerConfig,
    pub cache: Cache,
    pub queue: SchedulingQueue,
    pub(crate) next_start_node_index: usize,
    pub(crate) tie_break: TieBreak,
    pub(crate) rng: u64,
    /// Preemption victims whose deletion we sent and have not seen yet.
    deleting: HashSet<PodKey>,
    /// Pod groups, when the API serves them (`None`: no gangs, a pod's
    /// group label is ignored).
    pub(crate) groups: Option<PodGroups>,
    /// Record what each attempt saw (`--explain`).
    explain: Option<ExplainConfig>,
    /// The last attempt's record, taken by the cycle.
    pub(crate) last_attempt: Option<Attempt>,
}

impl Scheduler {
    pub fn new(config: SchedulerConfig, tie_break: TieBreak) -> Scheduler {
        let queue = SchedulingQueue::new(config.pod_initial_backoff, config.pod_max_backoff);
        let rng = match tie_break {
            TieBreak::Seeded(s) => s ^ 0x9E37_79B9_7F4A_7C15,
            TieBreak::NodeName => 0,
        };
        Scheduler {
            config,
            cache: Cache::new(),
            queue,
            next_start_node_index: 0,
            tie_break,
            rng,
            deleting: HashSet::new(),
            groups: None,
            explain: None,
            last_attempt: None,
        }
    }

    /// Record what each attempt sees (filters per node, scores, the
    /// choice), for [`CycleOutcome::explain`]; `None` turns it off.
    pub fn set_explain(&mut self, explain: Option<ExplainConfig>) {
        self.explain = explain;
    }

    pub fn explain(&self) -> Option<ExplainConfig> {
        self.explain
    }

    /// Whether a pod is ours to schedule: one of our profiles, not bound, not finished.
    pub fn responsible_for(&self, pod: &PodInfo) -> bool {
        pod.node_name().is_none()
            && !pod.is_finished()
            && self.config.profile(pod.scheduler_name()).is_some()
    }

    pub fn victim_gone(&mut self, key: &str) {
        self.deleting.remove(key);
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: tiny, stable across versions, good enough for sampling.
        let mut x = self.rng.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn num_feasible_nodes_to_find(&self, profile: &Profile, all: usize) -> usize {
        if all < MIN_FEASIBLE_NODES_TO_FIND {
            return all;
        }
        let mut pct = profile
            .percentage_of_nodes_to_score
            .unwrap_or(self.config.percentage_of_nodes_to_score) as i64;
        if pct == 0 {
            pct = (50 - all as i64 / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
        }
        let n = (all as i64 * pct / 100) as usize;
        n.max(MIN_FEASIBLE_NODES_TO_FIND)
    }

    fn filter_one(
        &self,
        profile: &Profile,
        pod: &PodInfo,
        node: &NodeInfo,
        inter_pod: &InterPodState,
    ) -> Result<(), FilterFailure> {
        if self.cache.has_nominations() {
            let (extra, n) = nominated_extra(&self.cache, pod, &node.name);
            run_filters(profile, pod, node, Some(&extra), n, inter_pod)
        } else {
            run_filters(profile, pod, node, None, 0, inter_pod)
        }
    }

    /// Decides for one pod and, on success, assumes it on the chosen node.
    pub fn schedule_one(&mut self, pod: &PodInfo) -> Decision {
        self.schedule_pod(pod, true)
    }

    /// [`Self::schedule_one`], with or without preemption when the pod fits
    /// nowhere (members of a pod group do not preempt).
    pub(crate) fn schedule_pod(&mut self, pod: &PodInfo, allow_preemption: bool) -> Decision {
        if self.explain.is_none() {
            return self.decide(pod, allow_preemption, &mut None);
        }
        let mut rec = Some(Attempt::default());
        let decision = self.decide(pod, allow_preemption, &mut rec);
        let mut a = rec.expect("recording");
        match &decision {
            Decision::Bind { node } => a.selected = Some(node.clone()),
            Decision::Unschedulable { message, .. } => a.message = Some(message.clone()),
        }
        self.last_attempt = Some(a);
        decision
    }

    /// [`Self::schedule_pod`], recording into `rec` when given.
    // `is_multiple_of` needs Rust 1.87; the workspace supports 1.80.
    #[allow(clippy::manual_is_multiple_of)]
    fn decide(
        &mut self,
        pod: &PodInfo,
        allow_preemption: bool,
        rec: &mut Option<Attempt>,
    ) -> Decision {
        let Some(profile) = self.config.profile(pod.scheduler_name()).cloned() else {
            return Decision::Unschedulable {
                message: format!("no profile for schedulerName {:?}", pod.scheduler_name()),
                plugins: BTreeSet::new(),
                preemption: None,
            };
        };
        let all = self.cache.node_count();
        if all == 0 {
            return Decision::Unschedulable {
                message: "no nodes available to schedule pods".to_string(),
                plugins: BTreeSet::new(),
                preemption: None,
            };
        }
        if let Some(a) = rec.as_mut() {
            a.filters = profile.filters.iter().map(|f| f.name()).collect();
        }
        // A refusal as the record names it: the plugin's place and message
        // (upstream's status message joins the reasons).
        let verdict = |r: &Result<(), FilterFailure>| match r {
            Ok(()) => Verdict::Passed,
            Err(f) => Verdict::Failed(
                profile
                    .filters
                    .iter()
                    .position(|p| p.name() == f.plugin)
                    .unwrap_or(0),
                f.reasons.join(", "),
            ),
        };
        let inter_pod_affinity = profile.filters.contains(&FilterPlugin::InterPodAffinity);
        if let (true, Some(e)) = (inter_pod_affinity, &pod.terms_error) {
            if let Some(a) = rec.as_mut() {
                a.prefilter
                    .push((FilterPlugin::InterPodAffinity.name(), e.clone()));
            }
            // Upstream's PreFilter refuses a pod whose terms it cannot parse.
            return Decision::Unschedulable {
                message: format!("pod {}: {e}", pod.key),
                plugins: BTreeSet::from([FilterPlugin::InterPodAffinity.name().to_string()]),
                preemption: None,
            };
        }
        let inter_pod = if inter_pod_affinity {
            InterPodState::compute(&self.cache, pod)
        } else {
            InterPodState::default()
        };

        // A pod that preempted goes to its nominated node if it now fits there.
        let nominated = self
            .cache
            .nomination_of(&pod.key)
            .map(str::to_string)
            .or_else(|| pod.nominated_node_name().map(str::to_string));
        if let Some(n) = nominated {
            if let Some(node) = self.cache.node(&n) {
                let r = self.filter_one(&profile, pod, node, &inter_pod);
                if let Some(a) = rec.as_mut() {
                    a.verdicts.push((n.clone(), verdict(&r)));
                }
                if r.is_ok() {
                    return self.assume(pod, n);
                }
            }
        }

        let to_find = self.num_feasible_nodes_to_find(&profile, all);
        let names = self.cache.node_names();
        let mut feasible: Vec<&NodeInfo> = Vec::new();
        let mut failures: BTreeMap<String, FilterFailure> = BTreeMap::new();
        let mut processed = 0;
        for i in 0..all {
            let name = &names[(self.next_start_node_index + i) % all];
            let node = self.cache.node(name).expect("ordered nodes exist");
            processed += 1;
            let r = self.filter_one(&profile, pod, node, &inter_pod);
            if let Some(a) = rec.as_mut() {
                a.verdicts.push((name.clone(), verdict(&r)));
            }
            match r {
                Ok(()) => {
                    feasible.push(node);
                    if feasible.len() >= to_find {
                        break;
                    }
                }
                Err(f) => {
                    failures.insert(name.clone(), f);
                }
            }
        }
        let next_start = (self.next_start_node_index + processed) % all;

        if feasible.is_empty() {
            self.next_start_node_index = next_start;
            let mut message = nodes_available_message(
                all,
                failures
                    .values()
                    .flat_map(|f| f.reasons.iter().map(String::as_str)),
            );
            let plugins: BTreeSet<String> =
                failures.values().map(|f| f.plugin.to_string()).collect();
            let mut preemption = None;
            if profile.preemption && allow_preemption {
                match preempt(
                    &profile,
                    &self.cache,
                    pod,
                    &failures,
                    &self.deleting,
                    &inter_pod,
                ) {
                    Ok(c) => preemption = Some(c),
                    Err(msg) => {
                        message.push_str(" preemption: ");
                        message.push_str(&msg);
                    }
                }
            }
            if let (Some(a), true) = (rec.as_mut(), profile.preemption && allow_preemption) {
                a.postfilter = Some((
                    failures.keys().cloned().collect(),
                    preemption.as_ref().map(|c| c.node.clone()),
                ));
            }
            if let Some(c) = &preemption {
                for v in &c.victims {
                    self.deleting.insert(v.key.clone());
                }
                self.cache.nominate(Arc::new(pod.clone()), &c.node);
            }
            return Decision::Unschedulable {
                message,
                plugins,
                preemption,
            };
        }

        let chosen = if feasible.len() == 1 {
            feasible[0].name.clone()
        } else {
            let scores = score_nodes_recorded(
                &profile,
                pod,
                &feasible,
                rec.as_mut().map(|a| &mut a.scores),
            );
            if let Some(a) = rec.as_mut() {
                a.scored = feasible.iter().map(|n| n.name.clone()).collect();
            }
            let max = scores.iter().copied().max().unwrap_or(0);
            let ties: Vec<&str> = feasible
                .iter()
                .zip(&scores)
                .filter(|(_, s)| **s == max)
                .map(|(n, _)| n.name.as_str())
                .collect();
            match self.tie_break {
                TieBreak::NodeName => ties.iter().min().expect("non-empty").to_string(),
                TieBreak::Seeded(_) => {
                    let ties: Vec<String> = ties.iter().map(|s| s.to_string()).collect();
                    // Reservoir sampling over the ties, as upstream's selectHost.
                    let mut pick = 0;
                    for i in 1..ties.len() {
                        if self.next_random() % (i as u64 + 1) == 0 {
                            pick = i;
                        }
                    }
                    ties[pick].clone()
                }
            }
        };
        self.next_start_node_index = next_start;
        self.assume(pod, chosen)
    }

    fn assume(&mut self, pod: &PodInfo, node: String) -> Decision {
        match self.cache.assume(Arc::new(pod.clone()), &node) {
            Ok(()) => Decision::Bind { node },
            Err(e) => Decision::Unschedulable {
                message: e.to_string(),
                plugins: BTreeSet::new(),
                preemption: None,
            },
        }
    }

    /// Pops the next active pod and decides for it, keeping the queue's
    /// bookkeeping. Returns `None` when no pod is active.
    pub fn cycle(&mut self, now: Instant) -> Option<CycleOutcome> {
        loop {
            let pod = self.queue.pop(now)?;
            let key = pod.info.key.clone();
            if self.cache.contains_pod(&key) || !self.responsible_for(&pod.info) {
                // Already assumed or bound (a stale queue entry): nothing to do.
                self.queue.done(&key);
                continue;
            }
            if let (Some(group), true) = (pod.info.group.clone(), self.groups.is_some()) {
                return Some(self.schedule_group(pod, &group, now));
            }
            let decision = self.schedule_one(&pod.info);
            match &decision {
                Decision::Bind { .. } => self.queue.done(&key),
                Decision::Unschedulable { plugins, .. } => {
                    self.queue.requeue_unschedulable(&key, plugins.clone(), now)
                }
            }
            let explain = self.last_attempt.take();
            return Some(CycleOutcome::single(pod, decision).with_explain(explain));
        }
    }
}
