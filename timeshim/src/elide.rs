//! Which programs' timers the simulation may pass over without stopping
//! the clock for them: pure decision logic, no processes, no clocks.
//!
//! Under the exact policy every program's earliest timer is a wake-up: the
//! broker asks the simulator to stop there, and the program runs its
//! firing. A program that polls (a scheduler's 20 ms loop, a controller's
//! work-queue metrics every 500 ms) then costs one window per tick, for as
//! long as the simulation lasts, whatever happens in it.
//!
//! Nothing outside a program can prove that one of its firings is
//! unobservable: the shim sees only the earliest deadline of all its timers
//! (Go multiplexes them), not which timer it is, nor whether what it does
//! depends on the time it reads (the upstream kube-scheduler moves a pod
//! out of its backoff queue on a 1 s tick, by the time alone). So no rule
//! here is on by default: each is a model assumption, named by a flag,
//! counted when it acts ([`Elision::skipped`]), and checked by running the
//! same case with and without it (`batkube run --compare-exact`).
//!
//! | rule | assumption | a timer left unhonoured |
//! |---|---|---|
//! | [`Rule::Idle`] | a program whose last firing did nothing observable (no request to the API) and that nothing reached since (no watch event, no webhook call) does nothing at its next firings either | fires late, at the next instant anything happens, together with it |
//! | [`Rule::Controllers`] | `--fast-forward` extended to the programs beside the scheduler: with nothing pending, their timers wait for the next event | likewise |
//! | [`Rule::GoPoller`] | a Go program (under `--shim seccomp`) whose poller wakes before its timer (Go waits in whole milliseconds, rounded down) does nothing then but wait one more millisecond, so the supervisor holds the first wait until the second would end | runs when the poller's second wait would end, as without the rule, unless another of the runtime's threads would have run it at its own instant (up to 1 ms earlier) |
//!
//! A guard keeps a run from stalling on a rule: while work is pending and
//! nothing runs (the next instant might otherwise never come), a dormant
//! program is still woken, at most once per [`STALL_STEP`] of simulated
//! time: its timers fire up to that much late (Volcano's 1 s session,
//! behind its 20 ms bind loop, runs within a second, not after 50
//! windows).

/// While work is pending and nothing runs, how often a dormant program is
/// woken under [`Rule::Idle`].
pub const STALL_STEP: std::time::Duration = std::time::Duration::from_secs(1);

use crate::policy::Situation;
use crate::SimTime;

/// The rules in force (none by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElideConfig {
    /// [`Rule::Idle`].
    pub idle: bool,
    /// [`Rule::Idle`] makes a program dormant only once it has done
    /// nothing for at least this much simulated time (`idle:2s`): every
    /// periodic timer of a shorter period fired meanwhile and did nothing.
    /// Zero (`idle`): after one firing that did nothing.
    pub idle_after: std::time::Duration,
    /// [`Rule::Controllers`].
    pub controllers: bool,
    /// [`Rule::GoPoller`] (applied in the seccomp supervisor, not by
    /// [`Elision`]).
    pub go_poller: bool,
}

impl ElideConfig {
    pub fn any(&self) -> bool {
        self.idle || self.controllers || self.go_poller
    }
}

impl std::str::FromStr for ElideConfig {
    type Err = String;

    /// `idle`, `controllers`, `go-poller`, several separated by commas,
    /// `none`.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut c = ElideConfig::default();
        for part in s.split(',').map(str::trim) {
            if let Some(span) = part.strip_prefix("idle:") {
                c.idle = true;
                c.idle_after = parse_span(span).ok_or_else(|| {
                    format!("{part:?}: the span after `idle:` is simulated time, like 2s or 500ms")
                })?;
                continue;
            }
            match part {
                "idle" => c.idle = true,
                "controllers" => c.controllers = true,
                "go-poller" => c.go_poller = true,
                "none" => {}
                other => {
                    return Err(format!(
                        "unknown elision rule {other:?} (rules: idle, idle:SPAN such as \
                         idle:2s, controllers, go-poller, none; several separated by commas)"
                    ))
                }
            }
        }
        Ok(c)
    }
}

impl std::fmt::Display for ElideConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if self.idle {
            parts.push(if self.idle_after.is_zero() {
                "idle".to_string()
            } else {
                format!("idle:{}s", self.idle_after.as_secs_f64())
            });
        }
        if self.controllers {
            parts.push("controllers".into());
        }
        if self.go_poller {
            parts.push("go-poller".into());
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

/// `2s`, `500ms`, `1.5` (seconds).
fn parse_span(s: &str) -> Option<std::time::Duration> {
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| std::time::Duration::from_secs_f64(v * scale))
}

/// Why a program's timer was left unhonoured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Idle,
    Controllers,
    GoPoller,
}

/// One program, seen quiescent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Look {
    /// Its earliest timer.
    pub deadline: Option<SimTime>,
    /// It sent the API a request since it was last seen quiescent.
    pub acted: bool,
    /// Something reached it since it was last seen quiescent: a watch
    /// event (a bookmark included) or an admission webhook call.
    pub reached: bool,
    /// The scheduler (its timers fall under `--fast-forward`), not a
    /// controller beside it.
    pub is_scheduler: bool,
}

/// The timers to honour: the earliest of the scheduler, and of the
/// controllers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Honoured {
    pub scheduler: Option<SimTime>,
    pub controllers: Option<SimTime>,
}

/// Wake-ups passed over, per rule: each is a program's earliest timer that
/// the clock went past without stopping (it stands for one firing at
/// least: a program polling every 20 ms passed over for a simulated minute
/// counts once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    pub idle: u64,
    pub controllers: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Program {
    /// The earliest timer at its last look.
    deadline: Option<SimTime>,
    /// Its last firing did nothing and nothing reached it since.
    dormant: bool,
    /// When it last acted or was reached.
    active_at: SimTime,
    /// A timer left unhonoured, not passed yet.
    unhonoured: Option<(SimTime, Rule)>,
}

/// The rules' state across windows.
#[derive(Clone, Debug, Default)]
pub struct Elision {
    config: ElideConfig,
    programs: Vec<Program>,
    skipped: Skipped,
}

impl Elision {
    pub fn new(config: ElideConfig) -> Self {
        Elision {
            config,
            ..Default::default()
        }
    }

    pub fn config(&self) -> ElideConfig {
        self.config
    }

    /// Every program is quiescent at `now` (the window's instant), after
    /// the looks in `looks` (one per program, in a fixed order); returns
    /// the timers to honour.
    pub fn quiescent(&mut self, now: SimTime, looks: &[Look], situation: Situation) -> Honoured {
        if self.programs.len() != looks.len() {
            self.programs.resize(looks.len(), Program::default());
        }
        let stalling = situation.pending > 0 && situation.running == 0;
        let mut honoured = Honoured::default();
        for (p, l) in self.programs.iter_mut().zip(looks) {
            if !self.config.idle || l.acted || l.reached {
                p.dormant = false;
                p.active_at = now;
            } else if p.deadline.is_some_and(|d| d <= now)
                && now.saturating_duration_since(p.active_at) >= self.config.idle_after
            {
                // Its timer fell due by now, it ran, and did nothing (nor
                // did it for `idle_after`).
                p.dormant = true;
            }
            p.deadline = l.deadline;
            let rule = if self.config.idle && p.dormant {
                Some(Rule::Idle)
            } else if self.config.controllers && !l.is_scheduler && situation.pending == 0 {
                Some(Rule::Controllers)
            } else {
                None
            };
            p.unhonoured = rule.and_then(|r| l.deadline.map(|d| (d, r)));
            let mut wake = None;
            if rule.is_none() {
                wake = l.deadline;
            } else if rule == Some(Rule::Idle) && stalling {
                // Stalling: a dormant program woken a step later at the latest.
                if let Some(d) = l.deadline {
                    let later = d.max(now + STALL_STEP);
                    wake = Some(later);
                    if later == d {
                        p.unhonoured = None;
                    }
                }
            }
            if let Some(d) = wake {
                let slot = if l.is_scheduler {
                    &mut honoured.scheduler
                } else {
                    &mut honoured.controllers
                };
                *slot = Some(slot.map_or(d, |x| x.min(d)));
            }
        }
        honoured
    }

    /// The clock moves on to `t`: the timers left unhonoured before it are
    /// passed over.
    pub fn advanced(&mut self, t: SimTime) {
        for p in &mut self.programs {
            if let Some((d, rule)) = p.unhonoured {
                if d < t {
                    match rule {
                        Rule::Idle => self.skipped.idle += 1,
                        Rule::Controllers => self.skipped.controllers += 1,
                        // Counted by the supervisors, which apply it.
                        Rule::GoPoller => {}
                    }
                    p.unhonoured = None;
                }
            }
        }
    }

    pub fn skipped(&self) -> Skipped {
        self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> SimTime {
        SimTime::from_nanos(ms * 1_000_000)
    }

    fn look(deadline: u64, acted: bool, reached: bool, is_scheduler: bool) -> Look {
        Look {
            deadline: Some(t(deadline)),
            acted,
            reached,
            is_scheduler,
        }
    }

    const IDLE: Situation = Situation {
        pending: 0,
        running: 1,
    };

    #[test]
    fn parses_rules_and_refuses_unknown_ones() {
        assert_eq!("none".parse::<ElideConfig>(), Ok(ElideConfig::default()));
        let both: ElideConfig = "idle, controllers".parse().unwrap();
        assert!(both.idle && both.controllers);
        assert_eq!(both.to_string(), "idle,controllers");
        let e = "idel".parse::<ElideConfig>().unwrap_err();
        assert!(e.contains("idel") && e.contains("controllers"), "{e}");
        let span: ElideConfig = "idle:2s".parse().unwrap();
        assert_eq!(span.idle_after, std::time::Duration::from_secs(2));
        assert_eq!(span.to_string(), "idle:2s");
        assert_eq!(
            "idle:500ms"
                .parse::<ElideConfig>()
                .unwrap()
                .idle_after
                .as_millis(),
            500
        );
        assert!("idle:soon".parse::<ElideConfig>().is_err());
        let go: ElideConfig = "go-poller".parse().unwrap();
        assert!(go.go_poller && go.any() && !go.idle);
        assert_eq!(go.to_string(), "go-poller");
    }

    #[test]
    fn without_rules_every_timer_is_honoured() {
        let mut e = Elision::new(ElideConfig::default());
        let h = e.quiescent(
            t(0),
            &[look(20, false, false, true), look(500, false, false, false)],
            IDLE,
        );
        assert_eq!(h.scheduler, Some(t(20)));
        assert_eq!(h.controllers, Some(t(500)));
        let h = e.quiescent(
            t(20),
            &[look(40, false, false, true), look(500, false, false, false)],
            IDLE,
        );
        assert_eq!(h.scheduler, Some(t(40)));
        e.advanced(t(10_000));
        assert_eq!(e.skipped(), Skipped::default());
    }

    #[test]
    fn a_firing_that_did_nothing_makes_the_program_dormant_until_it_acts_or_is_reached() {
        let mut e = Elision::new("idle".parse().unwrap());
        // First look: no firing seen yet, the timer is honoured.
        let h = e.quiescent(t(0), &[look(20, false, false, true)], IDLE);
        assert_eq!(h.scheduler, Some(t(20)));
        // At 20 ms it fired and did nothing: dormant, its next timer is not honoured.
        let h = e.quiescent(t(20), &[look(40, false, false, true)], IDLE);
        assert_eq!(h.scheduler, None);
        // The clock jumps to a job's end at 5 s: one wake-up passed over.
        e.advanced(t(5_000));
        assert_eq!(e.skipped().idle, 1);
        // A watch event reached it: awake again, its timer honoured.
        let h = e.quiescent(t(5_000), &[look(5_020, false, true, true)], IDLE);
        assert_eq!(h.scheduler, Some(t(5_020)));
        // A firing that made a request keeps it awake.
        let h = e.quiescent(t(5_020), &[look(5_040, true, false, true)], IDLE);
        assert_eq!(h.scheduler, Some(t(5_040)));
        // A window that is not its firing (someone else's instant) and in
        // which it did nothing does not make it dormant.
        let h = e.quiescent(t(5_030), &[look(5_040, false, false, true)], IDLE);
        assert_eq!(h.scheduler, Some(t(5_040)));
        e.advanced(t(6_000));
        assert_eq!(e.skipped().idle, 1);
    }

    #[test]
    fn a_span_keeps_a_program_awake_through_its_slower_timers() {
        let mut e = Elision::new("idle:1s".parse().unwrap());
        // It acts at 0 (a session), polls every 20 ms doing nothing.
        e.quiescent(t(0), &[look(20, true, false, true)], IDLE);
        let h = e.quiescent(t(20), &[look(40, false, false, true)], IDLE);
        assert_eq!(h.scheduler, Some(t(40)), "20 ms of nothing is not a second");
        let h = e.quiescent(t(1_000), &[look(1_020, true, false, true)], IDLE);
        assert_eq!(h.scheduler, Some(t(1_020)), "its 1 s session acted");
        // Then nothing for a whole second: dormant.
        e.quiescent(t(1_500), &[look(1_520, false, false, true)], IDLE);
        let h = e.quiescent(t(2_000), &[look(2_020, false, false, true)], IDLE);
        assert_eq!(h.scheduler, None);
    }

    #[test]
    fn stalling_work_wakes_a_dormant_program_every_step() {
        let mut e = Elision::new("idle,controllers".parse().unwrap());
        let stalled = Situation {
            pending: 2,
            running: 0,
        };
        e.quiescent(t(0), &[look(1_000, false, false, true)], stalled);
        let h = e.quiescent(t(1_000), &[look(2_000, false, false, true)], stalled);
        assert_eq!(
            h.scheduler,
            Some(t(2_000)),
            "a pod may leave its backoff on this tick"
        );
        // A 20 ms loop that does nothing: woken a second later, not 50 times.
        let h = e.quiescent(t(2_000), &[look(2_020, false, false, true)], stalled);
        assert_eq!(h.scheduler, Some(t(3_000)));
        e.advanced(t(3_000));
        assert_eq!(e.skipped().idle, 1, "the 20 ms deadline passed over");
        let h = e.quiescent(t(3_000), &[look(3_020, false, false, true)], stalled);
        assert_eq!(h.scheduler, Some(t(4_000)));
        // It acted (bound a pod): awake again, every timer honoured.
        let h = e.quiescent(t(4_000), &[look(4_020, true, false, true)], stalled);
        assert_eq!(h.scheduler, Some(t(4_020)));
    }

    #[test]
    fn controllers_wait_for_the_next_event_while_nothing_is_pending() {
        let mut e = Elision::new("controllers".parse().unwrap());
        let looks = [look(20, true, true, true), look(500, true, true, false)];
        let h = e.quiescent(t(0), &looks, IDLE);
        assert_eq!(
            h,
            Honoured {
                scheduler: Some(t(20)),
                controllers: None
            }
        );
        let busy = Situation {
            pending: 1,
            running: 0,
        };
        let h = e.quiescent(t(0), &looks, busy);
        assert_eq!(h.controllers, Some(t(500)));
        e.quiescent(t(0), &looks, IDLE);
        e.advanced(t(400));
        assert_eq!(e.skipped().controllers, 0, "not passed yet");
        e.advanced(t(900));
        assert_eq!(e.skipped().controllers, 1);
    }
}
