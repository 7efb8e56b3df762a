//! A trivial first-come-first-served decision process, native to the
//! stand-in: the in-process equivalent of pybatsim's filler, used by tests
//! and as the "trivial native scheduler" baseline.
//!
//! Each reply may charge a constant decision time, as a real decision
//! process does when it answers with `now` = message time + time spent.

use std::collections::VecDeque;

use crate::protocol::{build, EventData, Message};
use crate::IntervalSet;

/// FCFS over whole machines: the head of the queue starts as soon as enough
/// machines are free (lowest ids first); jobs larger than the platform are
/// rejected.
#[derive(Debug, Default)]
pub struct Fcfs {
    decision_time: f64,
    free: Vec<bool>,
    queue: VecDeque<(String, u32)>,
    /// EXECUTE_JOB decisions made so far.
    pub executed: u64,
}

impl Fcfs {
    /// `decision_time`: simulated seconds charged per reply.
    pub fn new(decision_time: f64) -> Self {
        Self {
            decision_time,
            ..Default::default()
        }
    }

    /// Answers one Batsim message.
    pub fn decide(&mut self, msg: &Message) -> Message {
        for ev in &msg.events {
            match &ev.data {
                EventData::SimulationBegins(b) => {
                    self.free = vec![true; b.nb_compute_resources as usize];
                }
                EventData::JobSubmitted(s) => self.queue.push_back((s.job_id.clone(), s.job.res)),
                EventData::JobCompleted(c) => {
                    for id in c.alloc.iter() {
                        if let Some(f) = self.free.get_mut(id as usize) {
                            *f = true;
                        }
                    }
                }
                _ => {}
            }
        }
        let is_end = msg
            .events
            .iter()
            .any(|e| matches!(e.data, EventData::SimulationEnds));
        let now = msg.now + if is_end { 0.0 } else { self.decision_time };
        let mut reply = Message::new(now);
        let total = self.free.len() as u32;
        while let Some((id, res)) = self.queue.front().cloned() {
            if res > total {
                reply.push_now(build::reject_job(&id));
                self.queue.pop_front();
                continue;
            }
            let free: Vec<u32> = self
                .free
                .iter()
                .enumerate()
                .filter(|(_, f)| **f)
                .map(|(i, _)| i as u32)
                .take(res as usize)
                .collect();
            if (free.len() as u32) < res {
                break;
            }
            for &m in &free {
                self.free[m as usize] = false;
            }
            reply.push_now(build::execute_job(&id, IntervalSet::from_ids(free)));
            self.executed += 1;
            self.queue.pop_front();
        }
        reply
    }
}

impl crate::standin::DecisionProcess for Fcfs {
    fn exchange(&mut self, msg: &Message) -> anyhow::Result<Message> {
        Ok(self.decide(msg))
    }
}
