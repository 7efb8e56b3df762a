//! A seeded random decision process: the second scripted scheduler of the
//! differential harness (the first is [`crate::standin::fcfs::Fcfs`]).
//!
//! It makes the decisions a real scheduler may make and a fixed policy
//! would never try: jobs started out of order on random machines (shared
//! ones when the simulation allows compute sharing), jobs killed while
//! they run, CALL_ME_LATER at arbitrary dates, replies that take
//! simulated time. Its only input is the messages it is sent, so the same
//! seed and the same messages give the same replies: a conversation
//! recorded with real Batsim can be replayed against the stand-in.

use crate::protocol::{build, EventData, Message};
use crate::IntervalSet;

/// The harness's generator: the project's splitmix64, whose sequence
/// never changes, so a case named by its seed stays that case.
pub use crate::rng::SplitMix64 as Rng;

/// The random scheduler. See the module doc.
#[derive(Debug)]
pub struct RandomScheduler {
    rng: Rng,
    /// Jobs running per machine.
    load: Vec<u32>,
    sharing: bool,
    /// Waiting jobs: id and size, in submission order.
    queue: Vec<(String, u32)>,
    /// Jobs started and not known to be complete or killed.
    running: Vec<String>,
    /// CALL_ME_LATER sent and not yet answered.
    calls: u32,
}

impl RandomScheduler {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Rng::new(seed ^ 0x5EED_0FBA_751A),
            load: Vec::new(),
            sharing: false,
            queue: Vec::new(),
            running: Vec::new(),
            calls: 0,
        }
    }

    /// Answers one Batsim message.
    pub fn decide(&mut self, msg: &Message) -> Message {
        let mut ends = false;
        for ev in &msg.events {
            match &ev.data {
                EventData::SimulationBegins(b) => {
                    self.load = vec![0; b.nb_compute_resources as usize];
                    self.sharing = b.allow_compute_sharing;
                }
                EventData::JobSubmitted(s) => self.queue.push((s.job_id.clone(), s.job.res)),
                EventData::JobCompleted(c) => {
                    self.running.retain(|id| *id != c.job_id);
                    for m in c.alloc.iter() {
                        if let Some(l) = self.load.get_mut(m as usize) {
                            *l = l.saturating_sub(1);
                        }
                    }
                }
                EventData::RequestedCall => self.calls = self.calls.saturating_sub(1),
                EventData::SimulationEnds => ends = true,
                _ => {}
            }
        }
        if ends {
            return Message::new(msg.now);
        }
        // Some replies take simulated time, as a real scheduler's do.
        let dt = *self.rng.pick(&[0.0, 0.0, 0.0, 0.0, 1e-6, 0.25, 1.0, 3.5]);
        let now = crate::round6(msg.now + dt);
        let mut reply = Message::new(now);
        let total = self.load.len() as u32;
        let mut started = false;
        let mut i = 0;
        while i < self.queue.len() {
            let (id, res) = self.queue[i].clone();
            if res > total {
                reply.push_now(build::reject_job(&id));
                self.queue.remove(i);
                continue;
            }
            // Leave some jobs waiting; start the others where they fit.
            if self.rng.chance(0.75) {
                if let Some(alloc) = self.place(res) {
                    reply.push_now(build::execute_job(&id, alloc));
                    self.running.push(id);
                    self.queue.remove(i);
                    started = true;
                    continue;
                }
            }
            i += 1;
        }
        // Nothing runs, nothing will call back: start what fits, or the
        // simulation would never end.
        if !started && self.running.is_empty() && self.calls == 0 {
            let mut i = 0;
            while i < self.queue.len() {
                let (id, res) = self.queue[i].clone();
                if let Some(alloc) = self.place(res) {
                    reply.push_now(build::execute_job(&id, alloc));
                    self.running.push(id);
                    self.queue.remove(i);
                    continue;
                }
                i += 1;
            }
        }
        if !self.running.is_empty() && self.rng.chance(0.12) {
            let k = self.rng.below(self.running.len() as u64) as usize;
            let victim = self.running.remove(k);
            reply.push_now(build::kill_jobs([victim]));
        }
        if self.rng.chance(0.15) {
            let delay = *self.rng.pick(&[0.5, 1.0, 2.0, 5.0, 10.0, 1e-5]);
            let extra = (self.rng.below(1000) as f64) / 100.0;
            let at = crate::round6(now + delay + if self.rng.chance(0.5) { extra } else { 0.0 });
            reply.push_now(build::call_me_later(at));
            self.calls += 1;
        }
        reply
    }

    /// `res` machines for a job: free ones, or any when sharing is allowed.
    fn place(&mut self, res: u32) -> Option<IntervalSet> {
        let pool: Vec<u32> = (0..self.load.len() as u32)
            .filter(|&m| self.sharing || self.load[m as usize] == 0)
            .collect();
        if (pool.len() as u32) < res {
            return None;
        }
        let chosen = self.rng.sample(&pool, res as usize);
        for &m in &chosen {
            self.load[m as usize] += 1;
        }
        Some(IntervalSet::from_ids(chosen))
    }
}

impl crate::standin::DecisionProcess for RandomScheduler {
    fn exchange(&mut self, msg: &Message) -> anyhow::Result<Message> {
        Ok(self.decide(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_fixed() {
        // splitmix64's published first outputs for seed 0.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn samples_are_distinct() {
        let mut r = Rng::new(3);
        for _ in 0..100 {
            let mut s = r.sample(&[0, 1, 2, 3, 4], 3);
            s.sort();
            s.dedup();
            assert_eq!(s.len(), 3);
        }
    }
}
