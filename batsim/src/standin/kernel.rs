//! SimGrid 3.32's simulation clock under Batsim's host model
//! (`host/model:ptask_L07`), as the stand-in needs it: the actions that
//! make time pass and how one step of the engine ends some of them.
//!
//! Every action of that model is an `L07Action` of one model
//! (`src/surf/ptask_L07.cpp`): a sleep (`CpuL07::sleep`: unit work,
//! no rate, a `max_duration`), a message (`NetworkL07Model::communicate`:
//! a latency, then unit work at the rate the solver gives it) and a
//! parallel task (the same with flops and bytes). One step of the engine
//! (`EngineImpl::solve`) is:
//!
//! - `delta` = the smallest of every action's `max_duration`, latency
//!   still to pay (`HostL07Model::next_occurring_event`) and
//!   `remains / rate` (`Model::next_occurring_event_full`);
//! - the clock moves by addition, `now += delta`: SimGrid's clock is a
//!   sum of steps, not a date computed once (a sleep of `s - d` begun at
//!   `d` may end 1e-15 before `s`);
//! - every action, in the order they were created
//!   (`HostL07Model::update_actions_state`), pays `delta` of its latency
//!   (zeroed below `sg_surf_precision` = 1e-9), of its `max_duration`
//!   (zeroed below 1e-9) and `rate * delta` of its work (zeroed below
//!   `sg_maxmin_precision * sg_surf_precision` = 1e-14), all through
//!   `double_update` (`src/surf/surf_interface.hpp`); those done end in
//!   that order, in this step. So a sleep that would end within 1e-9 s
//!   after the step's end ends in it.
//!
//! Rates: an action whose latency is paid gets its bound (the narrowest
//! of its links' bandwidth over its bytes, `network/TCP-gamma / (2 *
//! latency)`, its hosts' speed over its flops), and the fair-bottleneck
//! solver (`Kernel::solve`) shares each link among the actions that
//! cross it; hosts are not resources of the solver (a task's CPUs are in
//! its bound only), so tasks that share a host are not solved together
//! (see the module doc of [`super`]).

/// `sg_surf_precision` (`src/kernel/lmm/System.cpp`).
pub const SURF_PRECISION: f64 = 1e-9;
/// `sg_maxmin_precision` (`src/kernel/lmm/System.cpp`).
pub const MAXMIN_PRECISION: f64 = 1e-5;
/// `network/TCP-gamma`'s default (`src/kernel/resource/NetworkModel.cpp`).
pub const TCP_GAMMA: f64 = 4_194_304.0;
/// `network/loopback-bw`'s default (`src/simgrid/sg_config.cpp`): the
/// bandwidth of a host's route to itself where the platform gives none.
pub const LOOPBACK_BW: f64 = 10e9;
const NO_MAX_DURATION: f64 = -1.0;

/// `double_update` of `src/surf/surf_interface.hpp`.
fn double_update(variable: &mut f64, value: f64, precision: f64) {
    *variable -= value;
    if *variable < precision {
        *variable = 0.0;
    }
}

/// An action's identity: its rank of creation.
pub type ActionId = u64;

#[derive(Debug, Clone)]
struct Action {
    id: ActionId,
    /// Latency still to pay (messages, parallel tasks).
    latency: f64,
    /// Work still to do (unit cost).
    remains: f64,
    /// Its own bound on its rate (`Variable::bound_`; none if not positive).
    bound: f64,
    /// A sleep: no rate ever (sharing penalty 0).
    sleeping: bool,
    /// The rate of the current step (the solver's answer).
    rate: f64,
    max_duration: f64,
    /// Its weight on each shared resource (links): `(resource, weight)`.
    elements: Vec<(usize, f64)>,
    /// The solver's last increment (`Variable::mu_`: kept between solves).
    mu: f64,
}

impl Action {
    /// A variable with a positive sharing penalty: not a sleep, latency paid.
    fn active(&self) -> bool {
        !self.sleeping && self.latency <= 0.0
    }
}

/// The actions in progress and the clock.
#[derive(Debug, Default)]
pub struct Kernel {
    /// SimGrid's `now_`.
    pub now: f64,
    actions: Vec<Action>,
    next_id: ActionId,
    /// Shared resources: capacity, and whether it is a FATPIPE.
    resources: Vec<(f64, bool)>,
    /// Something changed since the last solve (`System::modified_`).
    modified: bool,
}

impl Kernel {
    /// A shared resource (a link) of `capacity`; its index.
    pub fn resource(&mut self, capacity: f64, fatpipe: bool) -> usize {
        self.resources.push((capacity, fatpipe));
        self.resources.len() - 1
    }

    /// Gives the last action created its weights on shared resources.
    pub fn set_elements(&mut self, id: ActionId, elements: Vec<(usize, f64)>) {
        if let Some(a) = self.actions.iter_mut().find(|a| a.id == id) {
            a.elements = elements;
        }
    }

    fn push(&mut self, latency: f64, bound: f64, max_duration: f64, sleeping: bool) -> ActionId {
        self.modified = true;
        let id = self.next_id;
        self.next_id += 1;
        self.actions.push(Action {
            id,
            latency,
            remains: 1.0,
            bound,
            rate: 0.0,
            max_duration,
            elements: Vec::new(),
            mu: 0.0,
            sleeping,
        });
        id
    }

    /// A sleep of `duration` seconds (`CpuL07::sleep`).
    pub fn sleep(&mut self, duration: f64) -> ActionId {
        let d = if duration < 0.0 {
            NO_MAX_DURATION
        } else {
            duration
        };
        self.push(0.0, -1.0, d, true)
    }

    /// A message or a parallel task: `latency`, then unit work at the rate
    /// the solver gives it, at most `bound` (none if not positive; an
    /// infinite bound: a task with nothing to compute nor send has no work
    /// at all, `L07Action::L07Action`'s `remains` 0, and ends in the next
    /// step).
    pub fn execute(&mut self, latency: f64, bound: f64) -> ActionId {
        if bound.is_finite() {
            return self.push(latency.max(0.0), bound, NO_MAX_DURATION, false);
        }
        let id = self.push(latency.max(0.0), 1.0, NO_MAX_DURATION, false);
        if let Some(a) = self.actions.last_mut() {
            a.remains = 0.0;
        }
        id
    }

    /// Removes an action (cancelled, or its actor killed).
    pub fn cancel(&mut self, id: ActionId) {
        self.modified = true;
        self.actions.retain(|a| a.id != id);
    }

    /// SimGrid's fair-bottleneck solver (`FairBottleneck::do_solve`,
    /// `src/kernel/lmm/fair_bottleneck.cpp`) over the actions whose
    /// latency is paid: each round gives every unsaturated variable the
    /// smallest share of its resources' remaining capacity (a FATPIPE
    /// counts one user), bounded by its own bound; a resource whose
    /// remaining capacity runs out saturates its variables. A variable's
    /// increment stays from round to round and from solve to solve
    /// (`mu_`), so a FATPIPE shared with a saturated task goes on giving
    /// the others its remaining capacity at every round.
    fn solve(&mut self) {
        let mut values: Vec<f64> = vec![0.0; self.actions.len()];
        let mut in_list: Vec<bool> = vec![false; self.actions.len()];
        for (i, a) in self.actions.iter().enumerate() {
            if !a.active() {
                continue;
            }
            if a.elements.iter().any(|&(_, w)| w != 0.0) {
                in_list[i] = true;
            } else {
                // No shared resource: its own bound (SimGrid gives such a
                // variable 1; the stand-in puts a parallel task's CPUs in
                // its bound, not on resources).
                values[i] = if a.bound > 0.0 { a.bound } else { 1.0 };
            }
        }
        let nres = self.resources.len();
        let mut remaining: Vec<f64> = self.resources.iter().map(|r| r.0).collect();
        let mut usage: Vec<f64> = vec![0.0; nres];
        let mut cnst_in: Vec<bool> = vec![false; nres];
        for (i, a) in self.actions.iter().enumerate() {
            if a.active() {
                for &(r, _) in &a.elements {
                    cnst_in[r] = true;
                }
            }
            let _ = i;
        }
        let mut rounds = 0;
        while in_list.iter().any(|&b| b) && rounds < 10_000_000 {
            rounds += 1;
            for r in 0..nres {
                if !cnst_in[r] {
                    continue;
                }
                let mut nb = 0usize;
                for (i, a) in self.actions.iter().enumerate() {
                    if in_list[i] && a.elements.iter().any(|&(e, w)| e == r && w > 0.0) {
                        nb += 1;
                    }
                }
                if nb > 0 && self.resources[r].1 {
                    nb = 1;
                }
                if nb == 0 {
                    remaining[r] = 0.0;
                    usage[r] = 0.0;
                    cnst_in[r] = false;
                } else {
                    usage[r] = remaining[r] / nb as f64;
                }
            }
            for i in 0..self.actions.len() {
                if !in_list[i] {
                    continue;
                }
                let a = &mut self.actions[i];
                let mut min_inc = f64::MAX;
                for &(r, w) in &a.elements {
                    if w > 0.0 {
                        min_inc = min_inc.min(usage[r] / w);
                    }
                }
                if a.bound > 0.0 {
                    min_inc = min_inc.min(a.bound - values[i]);
                }
                a.mu = min_inc;
                values[i] += min_inc;
                if values[i] == a.bound {
                    in_list[i] = false;
                }
            }
            for r in 0..nres {
                if !cnst_in[r] {
                    continue;
                }
                let on_r = |a: &Action| a.elements.iter().find(|&&(e, _)| e == r).map(|&(_, w)| w);
                if !self.resources[r].1 {
                    for a in &self.actions {
                        if a.active() {
                            if let Some(w) = on_r(a) {
                                double_update(&mut remaining[r], w * a.mu, MAXMIN_PRECISION);
                            }
                        }
                    }
                } else {
                    for a in &self.actions {
                        if a.active() {
                            if let Some(w) = on_r(a) {
                                usage[r] = usage[r].min(w * a.mu);
                            }
                        }
                    }
                    double_update(&mut remaining[r], usage[r], MAXMIN_PRECISION);
                }
                if remaining[r] <= 0.0 {
                    cnst_in[r] = false;
                    for (i, a) in self.actions.iter().enumerate() {
                        if a.active() && on_r(a).is_some_and(|w| w > 0.0) {
                            in_list[i] = false;
                        }
                    }
                }
            }
        }
        for (a, v) in self.actions.iter_mut().zip(values) {
            a.rate = if a.active() { v } else { 0.0 };
        }
    }

    /// The work an action still has to do (1 at its start).
    pub fn remains(&self, id: ActionId) -> Option<f64> {
        self.actions.iter().find(|a| a.id == id).map(|a| a.remains)
    }

    /// One step: moves the clock to the next end and returns the actions
    /// that end in it, in their order of creation (`None`: nothing can
    /// end, the clock cannot move).
    pub fn step(&mut self) -> Option<Vec<ActionId>> {
        let mut min = -1.0_f64;
        if std::mem::take(&mut self.modified) {
            self.solve();
        }
        for a in &mut self.actions {
            if a.rate > 0.0 {
                let value = if a.remains > 0.0 {
                    a.remains / a.rate
                } else {
                    0.0
                };
                if min < 0.0 || value < min {
                    min = value;
                }
            }
            if a.max_duration >= 0.0 && (min < 0.0 || a.max_duration < min) {
                min = a.max_duration;
            }
        }
        for a in &self.actions {
            if a.latency > 0.0 && (min < 0.0 || a.latency < min) {
                min = a.latency;
            }
        }
        if min < 0.0 {
            return None;
        }
        let delta = min;
        self.now += delta;
        let mut done = Vec::new();
        let mut modified = false;
        self.actions.retain_mut(|a| {
            if a.latency > 0.0 {
                if a.latency > delta {
                    double_update(&mut a.latency, delta, SURF_PRECISION);
                } else {
                    a.latency = 0.0;
                }
                if a.latency <= 0.0 {
                    modified = true;
                }
            }
            double_update(
                &mut a.remains,
                a.rate * delta,
                MAXMIN_PRECISION * SURF_PRECISION,
            );
            if a.max_duration != NO_MAX_DURATION {
                double_update(&mut a.max_duration, delta, SURF_PRECISION);
            }
            let finished = (a.remains <= 0.0 && a.active())
                || (a.max_duration != NO_MAX_DURATION && a.max_duration <= 0.0);
            if finished {
                done.push(a.id);
            }
            !finished
        });
        if modified || !done.is_empty() {
            self.modified = true;
        }
        Some(done)
    }
}

/// `a - b` computed as Batsim computes it on `long double`s (x87's 64-bit
/// significand, `static_job_submitter_process`: `job->submission_time -
/// current_submission_date`), then rounded to a double: the exact
/// difference rounded twice.
pub fn sub_extended(a: f64, b: f64) -> f64 {
    let s = a - b;
    if !s.is_finite() || s == 0.0 {
        return s;
    }
    // Two-sum: a - b = s + e exactly.
    let c = -b;
    let a1 = s - c;
    let c1 = s - a1;
    let e = (a - a1) + (c - c1);
    if e == 0.0 {
        return s;
    }
    // The 53-bit and 64-bit grids around s.
    let exp = s.abs().log2().floor() as i32;
    let ulp53 = 2f64.powi(exp - 52);
    let ulp64 = 2f64.powi(exp - 63);
    // x rounded to 64 bits lies at s + r (ties to even on the finer grid).
    let r = (e / ulp64).round_ties_even() * ulp64;
    if r.abs() * 2.0 == ulp53 {
        // A midpoint of the 53-bit grid: ties to even.
        let bits = s.to_bits();
        if bits & 1 == 0 {
            s
        } else {
            s + r.signum() * ulp53
        }
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_ends_by_accumulated_steps() {
        let mut k = Kernel::default();
        let a = k.sleep(0.3);
        let b = k.sleep(0.1);
        assert_eq!(k.step(), Some(vec![b]));
        assert_eq!(k.step(), Some(vec![a]));
        // 0.1 + (0.3 - 0.1): not 0.3 computed once.
        assert_eq!(k.now, 0.1 + (0.3 - 0.1));
        assert_eq!(k.step(), None);
    }

    #[test]
    fn a_sleep_within_the_precision_ends_in_the_step() {
        let mut k = Kernel::default();
        let a = k.sleep(1.0);
        let b = k.sleep(1.0 + 5e-10);
        assert_eq!(k.step(), Some(vec![a, b]));
    }

    #[test]
    fn a_message_pays_its_latency_then_its_byte() {
        let mut k = Kernel::default();
        let m = k.execute(1e-4, 1.25e8);
        assert_eq!(k.step(), Some(vec![]));
        assert_eq!(k.step(), Some(vec![m]));
        assert_eq!(k.now, 1e-4 + 1.0 / 1.25e8);
    }

    #[test]
    fn extended_subtraction() {
        assert_eq!(sub_extended(5.0, 3.0), 2.0);
        assert_eq!(sub_extended(1.0, 0.000110008), 1.0 - 0.000110008);
    }
}
