//! Gangs: the one place that knows a parallel job is several pods.

use k8s_openapi::api::core::v1::PodStatus;

use super::batsim_events::running_status;
use super::{Broker, Phase};
use crate::translate;
use batsim::protocol::{build, EventData};
use batsim::IntervalSet;

/// A parallel job's pods: entries `first..first + size` of the broker's
/// jobs. The one place that knows a job is several pods: EXECUTE_JOB when
/// all are bound, one KILL_JOB or REJECT_JOB for all, completions for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Gang {
    pub(super) first: usize,
    pub(super) size: u32,
}

impl Gang {
    pub(super) fn members(self) -> std::ops::Range<usize> {
        self.first..self.first + self.size as usize
    }
}

impl Broker {
    /// Node-seconds held until `until` by the bound pods of gangs not
    /// started yet.
    pub(super) fn partial_holds(&self, until: f64) -> f64 {
        self.jobs
            .iter()
            .filter(|(_, j)| j.gang.is_some() && matches!(j.phase, Phase::Bound { .. }))
            .filter_map(|(_, j)| j.record.bound.map(|b| until - b))
            .sum()
    }

    /// The live pods of `i`'s gang other than `i` (none for a plain job).
    pub(super) fn gang_mates(&self, i: usize) -> Vec<usize> {
        match self.jobs[i].gang {
            Some(g) => g
                .members()
                .filter(|&k| k != i && self.jobs.contains(k))
                .collect(),
            None => Vec::new(),
        }
    }

    /// A gang whose pod `i` ended early (deleted, evicted) ends whole, as
    /// a job controller with `restartPolicy: Never` ends a parallel job:
    /// the other pods leave their nodes; if the job ran (Batsim kills it,
    /// the caller sent KILL_JOB) they fail, killed; if it never started
    /// (the caller sent REJECT_JOB) they leave the API.
    pub(super) fn end_gang_with(&mut self, i: usize, why: &str) {
        let now = self.clock.now();
        let pod = self.jobs[i].record.pod.clone();
        for k in self.gang_mates(i) {
            let was = self.jobs[k].phase.clone();
            match was {
                Phase::Done => continue,
                Phase::Pending => {}
                Phase::Bound { node } => {
                    self.cancel_start(k);
                    if let Some(b) = self.jobs[k].record.bound {
                        self.partial_gang_node_seconds += now - b;
                    }
                    self.release(k, node);
                }
                Phase::Running { node } | Phase::Completing { node } => self.release(k, node),
            }
            self.set_phase(k, Phase::Done);
            self.jobs[k].batsim_open = false;
            let r = &mut self.jobs[k].record;
            if matches!(was, Phase::Running { .. } | Phase::Completing { .. }) {
                r.finished = Some(now);
                r.outcome = format!("KILLED: pod {pod} of its gang {why}");
                let mut status = PodStatus {
                    phase: Some("Failed".into()),
                    reason: Some("Killed".into()),
                    message: Some(format!("pod {pod} of the gang {why}")),
                    ..Default::default()
                };
                if self.cfg.submit_as != translate::SubmitAs::Pod {
                    // Its controller's view: a disruption (the Job's
                    // podFailurePolicy ignores it), not the pod's failure;
                    // a Job that Kueue suspends must not fail because the
                    // broker ended its gang's other pods first.
                    status.conditions = Some(vec![super::batsim_events::condition(
                        "DisruptionTarget",
                        "True",
                        Some("TerminationByKubelet"),
                        now,
                    )]);
                }
                self.write_status(k, status, "killed");
            } else {
                if matches!(was, Phase::Bound { .. }) {
                    r.finished = Some(now);
                }
                r.outcome =
                    format!("REJECTED: pod {pod} of its gang {why} before the gang started");
                let name = r.pod.clone();
                if self
                    .store
                    .delete("pods", Some(translate::NAMESPACE), &name)
                    .is_ok()
                {
                    self.timeline.push(
                        now,
                        "broker",
                        "delete",
                        "Pod",
                        translate::NAMESPACE,
                        name,
                        format!("gang ended: pod {pod} {why}"),
                    );
                }
            }
        }
    }

    /// EXECUTE_JOB on the machines of every pod of the gang, once all are
    /// bound and available; every pod shows Running from this instant.
    pub(super) fn start_gang(&mut self, g: Gang, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        let mut nodes = Vec::with_capacity(g.size as usize);
        for k in g.members() {
            if !self.jobs.contains(k) {
                return Ok(());
            }
            match self.jobs[k].phase {
                Phase::Bound { node } if !self.node_unavailable(node) => nodes.push(node),
                _ => return Ok(()),
            }
        }
        let now = self.clock.now();
        self.partial_gang_node_seconds += self.partial_holds_of(g, now);
        self.gangs_started += 1;
        let alloc = IntervalSet::from_ids(nodes.iter().map(|&n| self.nodes[n].resource_id));
        out.push(build::execute_job(&self.jobs[g.first].record.job_id, alloc));
        self.executor_started(g.first, now);
        for (k, node) in g.members().zip(nodes) {
            self.set_phase(k, Phase::Running { node });
            self.jobs[k].record.started = Some(now);
            self.jobs[k].batsim_open = true;
            let status = running_status(now, &self.jobs[k].image);
            self.write_status(k, status, "running");
        }
        Ok(())
    }

    /// Node-seconds the bound pods of gang `g` held until `until`.
    pub(super) fn partial_holds_of(&self, g: Gang, until: f64) -> f64 {
        g.members()
            .filter(|&k| self.jobs.contains(k))
            .filter(|&k| matches!(self.jobs[k].phase, Phase::Bound { .. }))
            .filter_map(|k| self.jobs[k].record.bound.map(|b| until - b))
            .sum()
    }
}
