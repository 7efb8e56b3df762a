//! std's timed waits (futex-based condvars and parking, nanosleep) under the
//! shim, with a frozen and a realtime clock.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;
use support::{drive_to_line, field, Lines};
use timeshim::{ClockMode, Controller, ShimMode, SimTime};

const S: u64 = 1_000_000_000;
const START: SimTime = SimTime::from_nanos(1_893_456_000 * S);

fn spawn(clock: &Controller, arg: &str) -> (std::process::Child, Lines) {
    let mut cmd = Command::new(support::example("waits_child"));
    cmd.arg(arg).stdout(Stdio::piped());
    clock.configure(&mut cmd, &ShimMode::Linked);
    let mut child = cmd.spawn().expect("spawn waits_child");
    let lines = Lines::new(child.stdout.take().expect("stdout"));
    (child, lines)
}

#[test]
fn condvars_and_parking_follow_the_simulated_clock() {
    let clock = Controller::new(START).expect("controller");
    let (mut child, mut lines) = spawn(&clock, "frozen");

    // Notified after 10 s, well before its one-hour timeout: woken by the
    // notification, not by the clock.
    let (line, jumps) = drive_to_line(&clock, &mut lines, &mut child);
    assert_eq!(
        line,
        format!("notified ready=true timed_out=false after_ns={}", 10 * S)
    );
    assert_eq!(jumps, vec![START + Duration::from_secs(10)]);

    let (line, jumps) = drive_to_line(&clock, &mut lines, &mut child);
    assert_eq!(
        line,
        format!("cv_timeout timed_out=true after_ns={}", 60 * S)
    );
    assert_eq!(
        jumps,
        vec![START + Duration::from_secs(70)],
        "the deadline is exact"
    );

    let (line, _) = drive_to_line(&clock, &mut lines, &mut child);
    assert_eq!(line, format!("parked after_ns={}", 5 * S));
    assert!(child.wait().expect("wait").success());
}

#[test]
fn realtime_clock_runs_with_wall_time() {
    let clock = Controller::new(START).expect("controller");
    clock.set_clock_mode(ClockMode::Realtime);
    let (mut child, mut lines) = spawn(&clock, "realtime");
    // Nobody moves the clock: the 20 ms sleep ends on its own.
    let line = lines.next_line();
    assert!(field::<u64>(&line, "after_ns") >= 20_000_000, "{line}");
    let start: u64 = field(&line, "start_ns");
    let end: u64 = field(&line, "end_ns");
    assert!(
        start >= START.as_nanos() && end >= start + 20_000_000,
        "{line}"
    );
    assert!(clock.now() >= SimTime::from_nanos(end));
    assert!(child.wait().expect("wait").success());

    // Freezing stops it.
    clock.set_clock_mode(ClockMode::Frozen);
    let frozen = clock.now();
    assert_eq!(clock.now(), frozen);
}
