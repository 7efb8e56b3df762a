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
//! Rates come from one linear system shared by every action
//! (`HostL07Model::HostL07Model`: the host, CPU and network models of L07
//! share one `lmm::System`, solved by `FairBottleneck`,
//! `surf_host_model_init_ptask_L07`):
//!
//! - Constraints ([`Kernel::resource`]): each host's CPU, capacity
//!   `core count * speed` (`CpuImpl::seal`), SHARED; each link, capacity
//!   its bandwidth (`LinkL07::LinkL07`), SHARED or FATPIPE (the loopback
//!   is a FATPIPE, `NetworkL07Model::NetworkL07Model`; a split-duplex link
//!   is two links, see [`crate::platform`]).
//! - A parallel task on hosts `h_1..h_n` with flops `f_i` and bytes
//!   `b_ij` is one variable (`L07Action::L07Action`): weight `f_i` on the
//!   CPU of `h_i`, one element per host even when a host comes twice
//!   (`expand(..., force_creation = true)`), and `b_ij` on each link of
//!   the route from `h_i` to `h_j` (`b_ij > 0` only), a link met again
//!   adding its weight (SHARED) or keeping the larger (FATPIPE,
//!   `System::expand_add_to_elem`). A message is a task on its two hosts
//!   with no flops and one byte (`NetworkL07Model::communicate`).
//!   Elements of weight 0 (the CPUs of a message) are left out: they count
//!   for no constraint's users nor increments, and subtract nothing (only
//!   CPUs, which are SHARED, get them; on a FATPIPE one would matter).
//! - Its latency is the largest route latency of a pair with bytes; while
//!   it is paid the variable's sharing penalty is 0 (out of the solve);
//!   then it gets its bound (`L07Action::update_bound`): the smaller of
//!   `network/TCP-gamma / (2 * max(route latency * bytes))` and
//!   `min(speed / flops)` over its hosts with flops (one core's speed),
//!   none when both are infinite. A task with no flops and no link has no
//!   work (`remains` 0) and ends in the next step.
//! - The fair-bottleneck solver (`FairBottleneck::do_solve`,
//!   `src/kernel/lmm/fair_bottleneck.cpp`), see `Kernel::solve`. The
//!   order in which a constraint subtracts its users' increments is its
//!   `enabled_element_set_`: an element is pushed at its front when its
//!   variable is enabled (created without latency, or its latency paid,
//!   `System::expand_create_elem`, `System::enable_var`), so the last
//!   enabled come first.

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

/// A parallel task's bound (`L07Action::update_bound`): the smaller of
/// its network bound and its CPU bound, or none (-1) when both are
/// infinite (`std::numeric_limits<double>::max()` in SimGrid).
pub fn task_bound(network: f64, cpu: f64) -> f64 {
    let b = network.min(cpu);
    if b < f64::MAX {
        b
    } else {
        -1.0
    }
}

/// `L07Action::calculate_network_bound` from the largest
/// `route latency * bytes` of the task's pairs (`f64::MAX` if none).
pub fn network_bound(lat_current: f64) -> f64 {
    if lat_current > 0.0 {
        TCP_GAMMA / (2.0 * lat_current)
    } else {
        f64::MAX
    }
}

#[derive(Debug, Clone)]
struct Action {
    id: ActionId,
    /// Latency still to pay (messages, parallel tasks).
    latency: f64,
    /// Work still to do (unit cost).
    remains: f64,
    /// Its own bound on its rate (`Variable::bound_`; none if not positive).
    bound: f64,
    /// In the solve (`sharing_penalty_ > 0`): its elements are in their
    /// constraints' enabled sets.
    enabled: bool,
    /// The rate of the current step (the solver's answer).
    rate: f64,
    max_duration: f64,
    /// Its weights on constraints, in the order SimGrid expands them:
    /// `(constraint, weight > 0)`.
    elements: Vec<(usize, f64)>,
    /// The solver's last increment (`Variable::mu_`: kept between rounds
    /// and solves).
    mu: f64,
}

/// One constraint of the system (a CPU or a link).
#[derive(Debug, Clone)]
struct Constraint {
    bound: f64,
    fatpipe: bool,
    /// `enabled_element_set_` back to front: the last pushed is the first.
    enabled: Vec<(ActionId, f64)>,
}

/// The actions in progress and the clock.
#[derive(Debug, Default)]
pub struct Kernel {
    /// SimGrid's `now_`.
    pub now: f64,
    /// In creation order (SimGrid's started action set), ids increasing.
    actions: Vec<Action>,
    next_id: ActionId,
    constraints: Vec<Constraint>,
    /// Something changed since the last solve (`System::modified_`).
    modified: bool,
    /// The solver's scratch space, kept to spare allocations.
    scratch: Scratch,
}

#[derive(Debug, Default)]
struct Scratch {
    value: Vec<f64>,
    in_list: Vec<bool>,
    remaining: Vec<f64>,
    usage: Vec<f64>,
    cnst_list: Vec<usize>,
    /// Each listed constraint's elements as `(action index, weight)`, in
    /// `enabled_element_set_` order, at `range[c]`.
    flat: Vec<(usize, f64)>,
    range: Vec<(usize, usize)>,
}

impl Kernel {
    /// A constraint of `capacity` (a CPU: `cores * speed`; a link: its
    /// bandwidth), FATPIPE or SHARED; its index.
    pub fn resource(&mut self, capacity: f64, fatpipe: bool) -> usize {
        self.constraints.push(Constraint {
            bound: capacity,
            fatpipe,
            enabled: Vec::new(),
        });
        self.constraints.len() - 1
    }

    fn index(&self, id: ActionId) -> Option<usize> {
        self.actions.binary_search_by_key(&id, |a| a.id).ok()
    }

    /// Puts an action's elements in its constraints' enabled sets
    /// (`System::enable_var`: each pushed at the front, in its order).
    fn enable(constraints: &mut [Constraint], a: &mut Action) {
        a.enabled = true;
        for &(c, w) in &a.elements {
            constraints[c].enabled.push((a.id, w));
        }
    }

    fn disable(constraints: &mut [Constraint], a: &Action) {
        if !a.enabled {
            return;
        }
        for &(c, _) in &a.elements {
            constraints[c].enabled.retain(|e| e.0 != a.id);
        }
    }

    /// A sleep of `duration` seconds (`CpuL07::sleep`: never in the solve).
    pub fn sleep(&mut self, duration: f64) -> ActionId {
        let d = if duration < 0.0 {
            NO_MAX_DURATION
        } else {
            duration
        };
        self.modified = true;
        let id = self.next_id;
        self.next_id += 1;
        self.actions.push(Action {
            id,
            latency: 0.0,
            remains: 1.0,
            bound: -1.0,
            enabled: false,
            rate: 0.0,
            max_duration: d,
            elements: Vec::new(),
            mu: 0.0,
        });
        id
    }

    /// A message or a parallel task (`L07Action::L07Action`): `latency`,
    /// then unit work at the rate the solver gives it, at most `bound`
    /// (none if not positive, see [`task_bound`]), with its weights on
    /// constraints (`elements`, weights of 0 left out, see the module
    /// doc); `no_work`: neither flops nor links, `remains` 0.
    pub fn execute(
        &mut self,
        latency: f64,
        bound: f64,
        elements: Vec<(usize, f64)>,
        no_work: bool,
    ) -> ActionId {
        self.modified = true;
        let id = self.next_id;
        self.next_id += 1;
        let mut a = Action {
            id,
            latency: latency.max(0.0),
            remains: if no_work { 0.0 } else { 1.0 },
            bound,
            enabled: false,
            rate: 0.0,
            max_duration: NO_MAX_DURATION,
            elements: elements.into_iter().filter(|e| e.1 > 0.0).collect(),
            mu: 0.0,
        };
        if a.latency <= 0.0 {
            Self::enable(&mut self.constraints, &mut a);
        }
        self.actions.push(a);
        id
    }

    /// Removes an action (cancelled, or its actor killed).
    pub fn cancel(&mut self, id: ActionId) {
        self.modified = true;
        if let Some(i) = self.index(id) {
            let a = self.actions.remove(i);
            Self::disable(&mut self.constraints, &a);
        }
    }

    /// SimGrid's fair-bottleneck solver (`FairBottleneck::do_solve`) over
    /// the enabled actions. An enabled variable with no weight gets 1;
    /// the others are listed. Each round: every listed constraint's usage
    /// is its remaining capacity over its listed users of positive weight
    /// (one for a FATPIPE), a constraint without any leaves the list; every
    /// listed variable gets the increment `min(usage / weight)` over its
    /// constraints, at most `bound - value`, and leaves the list when its
    /// value equals its bound; every listed constraint then subtracts from
    /// its remaining capacity each enabled user's `weight * increment`
    /// through `double_update` at `sg_maxmin_precision` (a FATPIPE: the
    /// smallest of its usage and these, once), and when nothing remains
    /// leaves the list with its users. A variable's increment stays from
    /// round to round (`mu_`), so a variable already out of the list goes
    /// on being subtracted with its last increment.
    fn solve(&mut self) {
        let n = self.actions.len();
        let nc = self.constraints.len();
        let sc = &mut self.scratch;
        sc.value.clear();
        sc.value.resize(n, 0.0);
        sc.in_list.clear();
        sc.in_list.resize(n, false);
        let mut listed = 0usize;
        for (i, a) in self.actions.iter().enumerate() {
            if !a.enabled {
                continue;
            }
            if a.elements.is_empty() {
                sc.value[i] = 1.0;
            } else {
                sc.in_list[i] = true;
                listed += 1;
            }
        }
        sc.remaining.resize(nc, 0.0);
        sc.usage.resize(nc, 0.0);
        sc.range.resize(nc, (0, 0));
        sc.cnst_list.clear();
        sc.flat.clear();
        let actions = &self.actions;
        let index = |id: ActionId| {
            actions
                .binary_search_by_key(&id, |a| a.id)
                .expect("an enabled element's action")
        };
        for (c, cn) in self.constraints.iter().enumerate() {
            if cn.enabled.is_empty() {
                continue;
            }
            let start = sc.flat.len();
            sc.flat
                .extend(cn.enabled.iter().rev().map(|&(id, w)| (index(id), w)));
            sc.range[c] = (start, sc.flat.len());
            sc.remaining[c] = cn.bound;
            sc.usage[c] = 0.0;
            sc.cnst_list.push(c);
        }
        let constraints = &self.constraints;
        while listed > 0 {
            let Scratch {
                in_list,
                remaining,
                usage,
                cnst_list,
                flat,
                range,
                value,
                ..
            } = &mut *sc;
            cnst_list.retain(|&c| {
                let (s, e) = range[c];
                let mut nb = flat[s..e]
                    .iter()
                    .filter(|&&(i, w)| w > 0.0 && in_list[i])
                    .count();
                if nb > 0 && constraints[c].fatpipe {
                    nb = 1;
                }
                if nb == 0 {
                    remaining[c] = 0.0;
                    usage[c] = 0.0;
                    false
                } else {
                    usage[c] = remaining[c] / nb as f64;
                    true
                }
            });
            for (i, a) in self.actions.iter_mut().enumerate() {
                if !in_list[i] {
                    continue;
                }
                let mut min_inc = f64::MAX;
                for &(c, w) in &a.elements {
                    min_inc = min_inc.min(usage[c] / w);
                }
                if a.bound > 0.0 {
                    min_inc = min_inc.min(a.bound - value[i]);
                }
                a.mu = min_inc;
                value[i] += min_inc;
                if value[i] == a.bound {
                    in_list[i] = false;
                    listed -= 1;
                }
            }
            let actions = &self.actions;
            cnst_list.retain(|&c| {
                let (s, e) = range[c];
                let elems = &flat[s..e];
                if !constraints[c].fatpipe {
                    for &(i, w) in elems {
                        double_update(&mut remaining[c], w * actions[i].mu, MAXMIN_PRECISION);
                    }
                } else {
                    for &(i, w) in elems {
                        usage[c] = usage[c].min(w * actions[i].mu);
                    }
                    double_update(&mut remaining[c], usage[c], MAXMIN_PRECISION);
                }
                if remaining[c] <= 0.0 {
                    for &(i, w) in elems {
                        if w > 0.0 && in_list[i] {
                            in_list[i] = false;
                            listed -= 1;
                        }
                    }
                    false
                } else {
                    true
                }
            });
        }
        for (i, a) in self.actions.iter_mut().enumerate() {
            a.rate = if a.enabled { sc.value[i] } else { 0.0 };
        }
    }

    /// The work an action still has to do (1 at its start).
    pub fn remains(&self, id: ActionId) -> Option<f64> {
        self.index(id).map(|i| self.actions[i].remains)
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
        let constraints = &mut self.constraints;
        self.actions.retain_mut(|a| {
            if a.latency > 0.0 {
                if a.latency > delta {
                    double_update(&mut a.latency, delta, SURF_PRECISION);
                } else {
                    a.latency = 0.0;
                }
                if a.latency <= 0.0 {
                    // Its latency paid: in the solve from now on, with
                    // its bound (`update_bound`, `update_variable_penalty`).
                    Self::enable(constraints, a);
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
            let finished = (a.remains <= 0.0 && a.enabled)
                || (a.max_duration != NO_MAX_DURATION && a.max_duration <= 0.0);
            if finished {
                done.push(a.id);
                Self::disable(constraints, a);
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
        let l = k.resource(1.25e8, false);
        let m = k.execute(1e-4, network_bound(1e-4), vec![(l, 1.0)], false);
        assert_eq!(k.step(), Some(vec![]));
        assert_eq!(k.step(), Some(vec![m]));
        assert_eq!(k.now, 1e-4 + 1.0 / 1.25e8);
    }

    #[test]
    fn tasks_on_one_core_share_it_and_on_two_cores_do_not() {
        // Two tasks of 1e9 flops on a 1 Gf host: each gets half the CPU.
        let mut k = Kernel::default();
        let cpu = k.resource(1e9, false);
        let bound = task_bound(f64::MAX, 1e9 / 1e9);
        let a = k.execute(0.0, bound, vec![(cpu, 1e9)], false);
        let b = k.execute(0.0, bound, vec![(cpu, 1e9)], false);
        assert_eq!(k.step(), Some(vec![a, b]));
        assert_eq!(k.now, 2.0);
        // Two cores: each task is bounded by one core's speed.
        let mut k = Kernel::default();
        let cpu = k.resource(2.0 * 1e9, false);
        let a = k.execute(0.0, bound, vec![(cpu, 1e9)], false);
        let b = k.execute(0.0, bound, vec![(cpu, 1e9)], false);
        assert_eq!(k.step(), Some(vec![a, b]));
        assert_eq!(k.now, 1.0);
    }

    #[test]
    fn a_fatpipe_gives_each_user_its_whole_bandwidth() {
        for (fatpipe, end) in [(false, 2.0), (true, 1.0)] {
            let mut k = Kernel::default();
            let link = k.resource(1e6, fatpipe);
            let a = k.execute(0.0, -1.0, vec![(link, 1e6)], false);
            let b = k.execute(0.0, -1.0, vec![(link, 1e6)], false);
            assert_eq!(k.step(), Some(vec![a, b]));
            assert_eq!(k.now, end);
        }
    }

    #[test]
    fn a_task_without_work_ends_in_the_next_step() {
        let mut k = Kernel::default();
        let s = k.sleep(1.0);
        let t = k.execute(0.0, -1.0, Vec::new(), true);
        assert_eq!(k.step(), Some(vec![t]));
        assert_eq!(k.now, 0.0);
        assert_eq!(k.step(), Some(vec![s]));
    }

    #[test]
    fn extended_subtraction() {
        assert_eq!(sub_extended(5.0, 3.0), 2.0);
        assert_eq!(sub_extended(1.0, 0.000110008), 1.0 - 0.000110008);
    }
}
