//! Several deterministic programs as one: a baton across their supervisors.
//!
//! Under `--deterministic` each supervisor runs its program's threads one at
//! a time (see `supervisor::det`). Two programs beside each other (a
//! scheduler and a controller manager, both talking to the API) would still
//! race: each supervisor releases a thread of its own whenever its program
//! is ready, and which program's request reaches the API first is decided
//! by the OS. An [`Ensemble`] makes them one program: at most one thread of
//! all of them runs at a time, the holder of the *baton*.
//!
//! - When the holder's thread parks, the holder gives the baton back. If
//!   that thread sent anything (a write, a connect, a close: the count of
//!   [`crate::deterministic_sends`] moved), the world the others see may
//!   have changed: the *generation* moves, which voids every report.
//! - Every member then *reports* whether it has a thread ready to go, from
//!   an evaluation of the settled world made at the current generation (a
//!   member waiting on a socket looks at it only once the API has done all
//!   it can with what was sent: the settle).
//! - Once every member has reported at the current generation, the baton
//!   goes to one of those with a ready thread, picked by a generator seeded
//!   from the run's seed (none ready: every program is quiescent, and the
//!   controller moves the clock). The decision depends on the reports only,
//!   never on which supervisor thread got there first.
//! - Closing the gate (the controller moves the clock or delivers an
//!   instant) moves the generation too.
//!
//! A member that has not started yet holds every decision back: all the
//! programs of a run are members from the start, in the run's order.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use super::supervisor::Shared;

static TRACE: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| std::env::var_os("TIMESHIM_DET_TRACE").is_some());

/// One decision loop across the supervisors of several programs under the
/// deterministic mode. Created with the number of programs, each of whose
/// [`crate::Controller`] joins it
/// ([`Controller::join_ensemble`](crate::Controller::join_ensemble)) before
/// it spawns its program.
#[derive(Clone)]
pub struct Ensemble {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Ensemble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("Ensemble")
            .field("members", &s.members.len())
            .field("owner", &s.owner)
            .field("generation", &s.gen)
            .finish()
    }
}

struct State {
    /// The member whose thread runs, or that was picked and has not
    /// released it yet.
    owner: Option<usize>,
    /// Moved whenever what a member would report may have changed.
    gen: u64,
    members: Vec<Member>,
    /// The picks among members.
    rng: super::SeededBytes,
    /// `deterministic_sends` when the baton was last given.
    sends_at_grant: u64,
    /// Decisions taken, for tests and traces.
    decisions: u64,
}

#[derive(Default)]
struct Member {
    /// Its supervisor, to wake it (not kept alive by the ensemble).
    shared: Option<Weak<Shared>>,
    joined: bool,
    gone: bool,
    /// Its last report: at which generation, whether a thread is ready.
    report: Option<(u64, bool)>,
}

/// What a report leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The baton is the reporter's: it picks a thread and lets it go.
    Go,
    /// Another member has it, or not every member has reported yet: the
    /// reporter is woken when that changes.
    Wait,
}

impl Ensemble {
    /// An ensemble of `members` programs (indices `0..members`); `seed`
    /// decides among members ready at once.
    pub fn new(members: usize, seed: u64) -> Ensemble {
        Ensemble {
            state: Arc::new(Mutex::new(State {
                owner: None,
                gen: 1,
                members: (0..members).map(|_| Member::default()).collect(),
                rng: super::SeededBytes::new(seed ^ 0x656e_7365_6d62_6c65),
                sends_at_grant: 0,
                decisions: 0,
            })),
        }
    }

    /// How many members it has.
    pub fn members(&self) -> usize {
        self.lock().members.len()
    }

    /// How many times the baton was given so far.
    pub fn decisions(&self) -> u64 {
        self.lock().decisions
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Member `i`'s supervisor has started.
    pub(crate) fn join(&self, i: usize, shared: &Arc<Shared>) {
        let mut s = self.lock();
        let m = &mut s.members[i];
        m.joined = true;
        m.shared = Some(Arc::downgrade(shared));
    }

    /// The current generation.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().gen
    }

    /// The world moved (the gate closed): every report is void.
    pub(crate) fn bump(&self) {
        let mut s = self.lock();
        s.void_reports(None);
    }

    /// Member `i` (the owner) ends its turn: its thread parked.
    pub(crate) fn release(&self, i: usize) {
        let mut s = self.lock();
        if s.owner != Some(i) {
            return;
        }
        s.owner = None;
        s.members[i].report = None;
        if crate::deterministic_sends() != s.sends_at_grant {
            s.void_reports(Some(i));
        }
    }

    /// Member `i` has a thread ready to go (`ready`) or not, from an
    /// evaluation made at generation `gen`.
    pub(crate) fn report(&self, i: usize, gen: u64, ready: bool) -> Verdict {
        let mut s = self.lock();
        if s.gen != gen {
            return Verdict::Wait; // void: a wake-up is on its way
        }
        s.members[i].report = Some((gen, ready));
        if s.owner == Some(i) {
            return Verdict::Go;
        }
        match s.decide() {
            Some(k) if k == i => Verdict::Go,
            Some(k) => {
                s.wake(k);
                Verdict::Wait
            }
            None => Verdict::Wait,
        }
    }

    /// Member `i`'s programs are gone.
    pub(crate) fn leave(&self, i: usize) {
        let mut s = self.lock();
        s.members[i].gone = true;
        s.members[i].report = None;
        if s.owner == Some(i) {
            s.owner = None;
            s.void_reports(Some(i));
        } else if let Some(k) = s.decide() {
            s.wake(k);
        }
    }
}

impl State {
    /// Moves the generation; every member but `except` is woken to report
    /// again (and counts as not quiescent until it has).
    fn void_reports(&mut self, except: Option<usize>) {
        self.gen += 1;
        for (j, m) in self.members.iter_mut().enumerate() {
            m.report = None;
            if Some(j) == except || m.gone {
                continue;
            }
            if let Some(sh) = m.shared.as_ref().and_then(Weak::upgrade) {
                sh.det_quiet.store(false, Ordering::Release);
                sh.kick_baton();
            }
        }
    }

    fn wake(&self, k: usize) {
        if let Some(sh) = self.members[k].shared.as_ref().and_then(Weak::upgrade) {
            sh.kick_baton();
        }
    }

    /// Gives the baton if every member has reported at this generation and
    /// one has a thread ready.
    fn decide(&mut self) -> Option<usize> {
        if self.owner.is_some() {
            return None;
        }
        let mut ready = Vec::new();
        for (j, m) in self.members.iter().enumerate() {
            if m.gone {
                continue;
            }
            match m.report {
                Some((g, r)) if m.joined && g == self.gen => {
                    if r {
                        ready.push(j);
                    }
                }
                _ => return None,
            }
        }
        let k = match ready.len() {
            0 => return None,
            1 => ready[0],
            n => ready[self.rng.below(n)],
        };
        self.owner = Some(k);
        self.sends_at_grant = crate::deterministic_sends();
        self.decisions += 1;
        if *TRACE {
            eprintln!(
                "det ensemble: decision {} at generation {}: ready {ready:?}, member {k} goes",
                self.decisions, self.gen
            );
        }
        Some(k)
    }
}
