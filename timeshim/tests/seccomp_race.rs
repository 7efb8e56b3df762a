//! The seccomp supervisor's quiescence protocol under a slow supervisor,
//! in a test binary of its own: the delay it sets is process-wide.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use timeshim::{Controller, Quiescence, ShimMode, SimTime};

/// A held wait made ready by a write that passes through no supervised
/// system call (another thread writes the eventfd it waits on, then sleeps
/// on an untimed read): every thread is asleep in the kernel until the
/// supervisor releases the waiter, and the program is not quiescent
/// meanwhile, however late the supervisor thread runs (here 300 ms late on
/// purpose, as when it is preempted on a loaded machine). Before the
/// supervisor's epoll set counted as pending, the clock jumped to the
/// waiter's deadline in that gap (the upstream kube-scheduler sometimes
/// took its first pod a second late, at its next 1 s tick).
#[test]
fn a_wait_made_ready_behind_the_supervisors_back_is_not_quiescence() {
    let prog = support::cc_static("handoff.c");
    timeshim::seccomp::testing::delay_ready_handling(Duration::from_millis(300));
    let t0 = SimTime::from_secs_f64(1_700_000_000.0);
    let clock = Controller::new(t0).unwrap();
    let mut cmd = Command::new(&prog);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = clock
        .spawn(
            cmd,
            &ShimMode::Seccomp {
                seed: None,
                deterministic: false,
            },
        )
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = support::Lines::new(child.stdout.take().unwrap());
    assert_eq!(lines.next_line(), "held");
    let quiescent = |clock: &Controller| match clock.wait_quiescent(support::PATIENCE).unwrap() {
        Quiescence::Quiescent {
            earliest_deadline, ..
        } => earliest_deadline,
        q => panic!("not quiescent: {q:?}"),
    };
    // The waiter is held until its hour is up.
    assert_eq!(quiescent(&clock), Some(t0 + Duration::from_secs(3600)));
    stdin.write_all(b"x").unwrap();
    stdin.flush().unwrap();
    // Quiescent again only once the waiter has been released and has
    // printed, with the clock where it was.
    assert_eq!(quiescent(&clock), None);
    assert_eq!(
        lines.try_line().as_deref(),
        Some("woke 1 1700000000.000000")
    );
    drop(stdin);
    assert_eq!(lines.next_line(), "end");
    assert!(child.wait().unwrap().success());
    timeshim::seccomp::testing::delay_ready_handling(Duration::ZERO);
}
