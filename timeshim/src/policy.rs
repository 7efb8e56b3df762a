//! When simulated time may move on: pure decision logic, no processes, no clocks.
//!
//! The broker opens a [`Window`] when a message from the simulator arrives at
//! simulated time `t`, tells it what happens (a decision, quiescence, wall
//! time passing), asks it what to do next ([`Window::step`]), and when told to
//! close, gets an [`Outcome`]: the simulated time to stamp the reply with, and
//! when to ask the simulator to wake it up again.
//!
//! | policy | here |
//! |---|---|
//! | timeout | [`WindowEnd::Timeout`]: close at the first decision or after `timeout` of wall time |
//! | exact | [`WindowEnd::Exact`]: close at quiescence; wake up at the scheduler's earliest deadline |
//! | min-delay | [`PolicyConfig::min_delay`]: never close before this much wall time |
//! | backoff | [`PolicyConfig::backoff`]: wake-up after a step growing while nothing is decided |
//! | fast-forward | [`PolicyConfig::fast_forward`]: no wake-up requests while nothing is pending |
//! | crash detection | [`PolicyConfig::crash_after`]: pending work, nothing running, no decision for that long |
//!
//! The timeout policy with [`ClockMode::Realtime`] works for a scheduler that
//! does not run under the shim (no quiescence events ever arrive).
//!
//! ```
//! use std::time::Duration;
//! use timeshim::policy::{Policy, PolicyConfig, Situation, Step};
//! use timeshim::SimTime;
//!
//! let mut policy = Policy::new(PolicyConfig::exact(Duration::from_secs(30)));
//! let t = SimTime::from_secs_f64(100.0);
//! let mut w = policy.open(t, Situation { pending: 1, running: 0 });
//! assert!(matches!(w.step(), Step::Wait { .. }));
//! w.decision();
//! w.quiescent(Some(t + Duration::from_secs(5)));
//! assert_eq!(w.step(), Step::Close);
//! let out = policy.close(w);
//! assert_eq!(out.wake_up_at, Some(t + Duration::from_secs(5)));
//! ```

use crate::{ClockMode, SimTime};
use std::time::Duration;

/// What ends a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WindowEnd {
    /// Wait at most `timeout` of wall time; close at the first decision.
    Timeout { timeout: Duration },
    /// Close as soon as the scheduler is quiescent; `bound` of wall time is a
    /// safety net (a window that hits it is reported in [`Outcome::bound_hit`]).
    Exact { bound: Duration },
}

/// Backoff wake-ups: a timestep starting at `base`, multiplied by
/// `multiplier` after each window without a decision, capped at `max`, reset
/// to `base` by a decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
    pub multiplier: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PolicyConfig {
    pub end: WindowEnd,
    /// Never close a window before this much wall time (zero: no minimum).
    pub min_delay: Duration,
    pub backoff: Option<Backoff>,
    /// With nothing pending, ask for no wake-up: the simulator jumps to its next event.
    pub fast_forward: bool,
    /// Fail when work is pending, nothing runs, and nothing was decided for
    /// this much simulated time.
    pub crash_after: Option<Duration>,
    pub clock: ClockMode,
}

impl PolicyConfig {
    /// The default under the shim: exact windows, frozen clock, fast-forward.
    pub fn exact(bound: Duration) -> Self {
        PolicyConfig {
            end: WindowEnd::Exact { bound },
            min_delay: Duration::ZERO,
            backoff: None,
            fast_forward: true,
            crash_after: None,
            clock: ClockMode::Frozen,
        }
    }

    /// Batkube's model, for a scheduler not under the shim: wait up to
    /// `timeout` of wall time, simulated time runs with wall time.
    pub fn timeout(timeout: Duration) -> Self {
        PolicyConfig {
            end: WindowEnd::Timeout { timeout },
            min_delay: Duration::ZERO,
            backoff: None,
            fast_forward: true,
            crash_after: None,
            clock: ClockMode::Realtime,
        }
    }
}

/// What the broker knows of the workload when a window opens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Situation {
    /// Work waiting for a decision (e.g. pending pods).
    pub pending: usize,
    /// Work running (e.g. jobs executing).
    pub running: usize,
}

/// What the broker should do next in a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Wait for news (a decision, quiescence) at most this much wall time,
    /// then report the wall time elapsed with [`Window::wall_elapsed`].
    Wait { at_most: Duration },
    /// The window is over: call [`Policy::close`].
    Close,
}

/// Why a run must stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Work pending, nothing running, no decision since `since`.
    Stalled { pending: usize, since: SimTime },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Stalled { pending, since } => write!(
                f,
                "the scheduler looks crashed or stuck: {pending} item(s) pending, nothing running, no decision since simulated time {since}"
            ),
        }
    }
}

/// How a window ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Simulated time to stamp the reply with (the window's opening time with
    /// a frozen clock; plus the wall time spent with a realtime clock).
    pub reply_at: SimTime,
    /// Ask the simulator to wake us up at this time (None: no request).
    pub wake_up_at: Option<SimTime>,
    /// Decisions made in the window.
    pub decisions: usize,
    /// An exact window ran into its wall-clock bound instead of reaching quiescence.
    pub bound_hit: bool,
    pub failure: Option<Failure>,
}

/// One scheduler turn, from a simulator message to the reply.
#[derive(Clone, Debug)]
pub struct Window {
    end: WindowEnd,
    min_delay: Duration,
    opened_at: SimTime,
    situation: Situation,
    wall: Duration,
    decisions: usize,
    /// Some(earliest deadline) once quiescence was reported (and not undone by a decision).
    quiescent: Option<Option<SimTime>>,
}

impl Window {
    /// The scheduler made a decision (a binding, a deletion...).
    pub fn decision(&mut self) {
        self.decisions += 1;
        // A decision is activity: a quiescence seen before it is stale.
        self.quiescent = None;
    }

    /// The scheduler is quiescent; its earliest pending deadline, if any.
    pub fn quiescent(&mut self, earliest_deadline: Option<SimTime>) {
        self.quiescent = Some(earliest_deadline);
    }

    /// Total wall time since the window opened.
    pub fn wall_elapsed(&mut self, total: Duration) {
        self.wall = self.wall.max(total);
    }

    pub fn opened_at(&self) -> SimTime {
        self.opened_at
    }

    fn limit(&self) -> Duration {
        match self.end {
            WindowEnd::Timeout { timeout } => timeout,
            WindowEnd::Exact { bound } => bound,
        }
    }

    fn reached_end(&self) -> bool {
        let natural = match self.end {
            WindowEnd::Timeout { .. } => self.decisions > 0,
            WindowEnd::Exact { .. } => self.quiescent.is_some(),
        };
        natural || self.wall >= self.limit()
    }

    /// What to do now.
    pub fn step(&self) -> Step {
        if self.reached_end() {
            if self.wall >= self.min_delay {
                Step::Close
            } else {
                Step::Wait {
                    at_most: self.min_delay - self.wall,
                }
            }
        } else {
            Step::Wait {
                at_most: self.limit().saturating_sub(self.wall),
            }
        }
    }
}

/// Policy state carried across windows (backoff step, last progress).
#[derive(Clone, Debug)]
pub struct Policy {
    config: PolicyConfig,
    backoff_step: Duration,
    last_progress: Option<SimTime>,
}

impl Policy {
    pub fn new(config: PolicyConfig) -> Self {
        let backoff_step = config.backoff.map_or(Duration::ZERO, |b| b.base);
        Policy {
            config,
            backoff_step,
            last_progress: None,
        }
    }

    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    /// A simulator message arrived at simulated time `now`.
    pub fn open(&mut self, now: SimTime, situation: Situation) -> Window {
        if self.last_progress.is_none() {
            self.last_progress = Some(now);
        }
        Window {
            end: self.config.end,
            min_delay: self.config.min_delay,
            opened_at: now,
            situation,
            wall: Duration::ZERO,
            decisions: 0,
            quiescent: None,
        }
    }

    /// Ends a window: when to reply, and when to be woken up.
    pub fn close(&mut self, w: Window) -> Outcome {
        let reply_at = match self.config.clock {
            ClockMode::Frozen => w.opened_at,
            ClockMode::Realtime => w.opened_at + w.wall,
        };
        let decided = w.decisions > 0;
        let Situation { pending, running } = w.situation;
        let bound_hit = matches!(w.end, WindowEnd::Exact { .. }) && w.quiescent.is_none();

        if decided || running > 0 {
            self.last_progress = Some(reply_at);
        }
        let since = self.last_progress.unwrap_or(reply_at);

        let mut wake: Option<SimTime> = None;
        let mut want = |t: SimTime| wake = Some(wake.map_or(t, |w: SimTime| w.min(t)));

        // The scheduler's own next timer (exact windows).
        if let Some(Some(deadline)) = w.quiescent {
            want(deadline.max(reply_at));
        }
        // Backoff: the step used now, then grown (or reset by a decision).
        if let Some(b) = self.config.backoff {
            if decided {
                self.backoff_step = b.base;
            }
            want(reply_at + self.backoff_step);
            if !decided {
                let grown = self.backoff_step.mul_f64(b.multiplier.max(1.0));
                self.backoff_step = grown.min(b.max).max(b.base);
            }
        }
        let mut failure = None;
        if let Some(c) = self.config.crash_after {
            if pending > 0 && running == 0 && !decided {
                if reply_at.saturating_duration_since(since) >= c {
                    failure = Some(Failure::Stalled { pending, since });
                } else {
                    // Make sure we get to look again.
                    want(since + c);
                }
            }
        }
        if self.config.fast_forward && pending == 0 {
            wake = None;
        }
        Outcome {
            reply_at,
            wake_up_at: wake,
            decisions: w.decisions,
            bound_hit,
            failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn t(secs: u64) -> SimTime {
        SimTime::from_nanos(secs * 1_000_000_000)
    }

    fn busy() -> Situation {
        Situation {
            pending: 3,
            running: 0,
        }
    }

    #[test]
    fn timeout_closes_at_first_decision() {
        let mut p = Policy::new(PolicyConfig::timeout(2 * S));
        let mut w = p.open(t(10), busy());
        assert_eq!(w.step(), Step::Wait { at_most: 2 * S });
        w.wall_elapsed(Duration::from_millis(300));
        assert_eq!(
            w.step(),
            Step::Wait {
                at_most: Duration::from_millis(1700)
            }
        );
        w.decision();
        assert_eq!(w.step(), Step::Close);
        let out = p.close(w);
        // Realtime clock: the 300 ms of decision latency are charged.
        assert_eq!(out.reply_at, t(10) + Duration::from_millis(300));
        assert_eq!(out.decisions, 1);
        assert!(!out.bound_hit);
    }

    #[test]
    fn timeout_closes_when_wall_time_runs_out() {
        let mut p = Policy::new(PolicyConfig::timeout(2 * S));
        let mut w = p.open(t(10), busy());
        w.wall_elapsed(2 * S);
        assert_eq!(w.step(), Step::Close);
        let out = p.close(w);
        assert_eq!(out.decisions, 0);
        assert_eq!(out.reply_at, t(12));
    }

    #[test]
    fn min_delay_holds_the_window_open() {
        let mut cfg = PolicyConfig::timeout(2 * S);
        cfg.min_delay = Duration::from_millis(500);
        let mut p = Policy::new(cfg);
        let mut w = p.open(t(0), busy());
        w.decision();
        assert_eq!(
            w.step(),
            Step::Wait {
                at_most: Duration::from_millis(500)
            }
        );
        w.wall_elapsed(Duration::from_millis(200));
        assert_eq!(
            w.step(),
            Step::Wait {
                at_most: Duration::from_millis(300)
            }
        );
        w.wall_elapsed(Duration::from_millis(500));
        assert_eq!(w.step(), Step::Close);
        let _ = p.close(w);
    }

    #[test]
    fn exact_closes_at_quiescence_and_wakes_at_earliest_deadline() {
        let mut p = Policy::new(PolicyConfig::exact(30 * S));
        let mut w = p.open(t(100), busy());
        assert_eq!(w.step(), Step::Wait { at_most: 30 * S });
        w.quiescent(Some(t(160)));
        assert_eq!(w.step(), Step::Close);
        let out = p.close(w);
        assert_eq!(
            out.reply_at,
            t(100),
            "frozen clock: decisions take no simulated time"
        );
        assert_eq!(out.wake_up_at, Some(t(160)));
        assert!(!out.bound_hit);
    }

    #[test]
    fn exact_ignores_quiescence_undone_by_a_decision() {
        let mut p = Policy::new(PolicyConfig::exact(30 * S));
        let mut w = p.open(t(0), busy());
        w.quiescent(None);
        w.decision();
        assert!(matches!(w.step(), Step::Wait { .. }));
        w.quiescent(None);
        assert_eq!(w.step(), Step::Close);
    }

    #[test]
    fn exact_reports_a_hit_bound() {
        let mut p = Policy::new(PolicyConfig::exact(30 * S));
        let mut w = p.open(t(0), busy());
        w.wall_elapsed(31 * S);
        assert_eq!(w.step(), Step::Close);
        let out = p.close(w);
        assert!(out.bound_hit);
        assert_eq!(out.wake_up_at, None);
    }

    #[test]
    fn exact_deadline_in_the_past_means_now() {
        let mut p = Policy::new(PolicyConfig::exact(30 * S));
        let mut w = p.open(t(50), busy());
        w.quiescent(Some(t(40)));
        assert_eq!(p.close(w).wake_up_at, Some(t(50)));
    }

    #[test]
    fn backoff_grows_without_decisions_caps_and_resets() {
        let mut cfg = PolicyConfig::exact(30 * S);
        cfg.backoff = Some(Backoff {
            base: S,
            max: 5 * S,
            multiplier: 2.0,
        });
        let mut p = Policy::new(cfg);
        let mut now = t(0);
        let mut steps = Vec::new();
        for _ in 0..5 {
            let mut w = p.open(now, busy());
            w.quiescent(None);
            let out = p.close(w);
            let wake = out.wake_up_at.expect("backoff asks for a wake-up");
            steps.push((wake - now).as_secs());
            now = wake;
        }
        assert_eq!(steps, vec![1, 2, 4, 5, 5]);
        let mut w = p.open(now, busy());
        w.decision();
        w.quiescent(None);
        assert_eq!(
            p.close(w).wake_up_at,
            Some(now + S),
            "a decision resets the step"
        );
        let mut w = p.open(now, busy());
        w.quiescent(None);
        assert_eq!(p.close(w).wake_up_at, Some(now + S));
    }

    #[test]
    fn backoff_and_deadline_take_the_earlier() {
        let mut cfg = PolicyConfig::exact(30 * S);
        cfg.backoff = Some(Backoff {
            base: 10 * S,
            max: 60 * S,
            multiplier: 2.0,
        });
        let mut p = Policy::new(cfg);
        let mut w = p.open(t(0), busy());
        w.quiescent(Some(t(3)));
        assert_eq!(p.close(w).wake_up_at, Some(t(3)));
    }

    #[test]
    fn fast_forward_drops_wake_ups_when_nothing_is_pending() {
        let mut cfg = PolicyConfig::exact(30 * S);
        cfg.backoff = Some(Backoff {
            base: S,
            max: 5 * S,
            multiplier: 2.0,
        });
        let mut p = Policy::new(cfg);
        let mut w = p.open(
            t(0),
            Situation {
                pending: 0,
                running: 2,
            },
        );
        w.quiescent(Some(t(7)));
        assert_eq!(p.close(w).wake_up_at, None);

        cfg.fast_forward = false;
        let mut p = Policy::new(cfg);
        let mut w = p.open(
            t(0),
            Situation {
                pending: 0,
                running: 2,
            },
        );
        w.quiescent(Some(t(7)));
        assert_eq!(p.close(w).wake_up_at, Some(t(1)));
    }

    #[test]
    fn crash_detection_fails_a_stalled_scheduler() {
        let mut cfg = PolicyConfig::exact(30 * S);
        cfg.crash_after = Some(60 * S);
        let mut p = Policy::new(cfg);
        // Pending work, nothing running, quiescent with no timer: the policy
        // still asks to look again when the crash delay runs out.
        let mut w = p.open(t(0), busy());
        w.quiescent(None);
        let out = p.close(w);
        assert_eq!(out.failure, None);
        assert_eq!(out.wake_up_at, Some(t(60)));
        let mut w = p.open(t(60), busy());
        w.quiescent(None);
        let out = p.close(w);
        assert_eq!(
            out.failure,
            Some(Failure::Stalled {
                pending: 3,
                since: t(0)
            })
        );
        assert!(out
            .failure
            .unwrap()
            .to_string()
            .contains("3 item(s) pending"));
    }

    #[test]
    fn crash_detection_is_reset_by_progress() {
        let mut cfg = PolicyConfig::exact(30 * S);
        cfg.crash_after = Some(60 * S);
        let mut p = Policy::new(cfg);
        let mut w = p.open(t(0), busy());
        w.quiescent(None);
        let _ = p.close(w);
        let mut w = p.open(t(50), busy());
        w.decision();
        w.quiescent(None);
        assert_eq!(p.close(w).failure, None);
        let mut w = p.open(t(100), busy());
        w.quiescent(None);
        let out = p.close(w);
        assert_eq!(out.failure, None, "50 s since the last decision");
        assert_eq!(out.wake_up_at, Some(t(110)));
        // Running work is progress too.
        let mut w = p.open(
            t(200),
            Situation {
                pending: 1,
                running: 1,
            },
        );
        w.quiescent(None);
        assert_eq!(p.close(w).failure, None);
    }
}
