//! Runs a program on simulated time under the seccomp supervisor (or, with
//! `--linked`, through the page of a program that links the shim), moving
//! the clock to the program's next deadline whenever it is quiescent (the
//! exact policy with no simulator):
//! `simrun [--linked] [--start SECS] [--seed N] [--deterministic] [--spin-bound CALLS] [--max SECS] -- CMD ARGS…`.
//!
//! Prints, on stderr, the simulated time at the end and the supervisor's
//! counters; exits with the program's status. Used by the tests.

use std::process::Command;
use std::time::{Duration, Instant};
use timeshim::{Controller, Quiescence, ShimMode, SimTime};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut start = 1_700_000_000.0;
    let mut seed = None;
    let mut max = f64::INFINITY;
    let mut linked = false;
    let mut deterministic = false;
    let mut cmd: Vec<String> = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--start" => {
                start = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--start SECS")
            }
            "--seed" => seed = args.next().and_then(|v| v.parse().ok()),
            "--linked" => linked = true,
            "--deterministic" => deterministic = true,
            "--spin-bound" => timeshim::set_spin_bound(
                args.next()
                    .and_then(|v| v.parse().ok())
                    .expect("--spin-bound CALLS"),
            ),
            "--max" => {
                max = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--max SECS")
            }
            "--" => {
                cmd = args.by_ref().collect();
                break;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(
        !cmd.is_empty(),
        "usage: simrun [--start SECS] [--seed N] -- CMD ARGS…"
    );
    let t0 = SimTime::from_secs_f64(start);
    let clock = Controller::new(t0).expect("clock page");
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..]);
    let mut child = clock
        .spawn(
            c,
            &if linked {
                ShimMode::Linked
            } else {
                ShimMode::Seccomp {
                    seed,
                    deterministic,
                }
            },
        )
        .unwrap_or_else(|e| panic!("starting {}: {e}", cmd[0]));
    let wall = Instant::now();
    let mut moves = 0u64;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        match clock
            .wait_quiescent(Duration::from_millis(200))
            .expect("probe")
        {
            Quiescence::Quiescent {
                earliest_deadline: Some(d),
                ..
            } => {
                // Exact policy: the clock never moves while the program works.
                let cpu = clock.cpu_time_ns();
                if clock.probe().is_ok_and(|p| p.quiescent()) && clock.cpu_time_ns() == cpu {
                    if (d - t0).as_secs_f64() > max {
                        eprintln!("simrun: next deadline past --max; stopping");
                        let _ = child.kill();
                        break child.wait().expect("wait");
                    }
                    if std::env::var_os("SIMRUN_TRACE").is_some() {
                        eprintln!("move +{:.6}", (d - clock.now()).as_secs_f64());
                    }
                    clock.advance_to(d.max(clock.now())).expect("advance");
                    moves += 1;
                }
            }
            Quiescence::Quiescent { .. } | Quiescence::TimedOut { .. } => {}
            Quiescence::Exited => break child.wait().expect("wait"),
        }
    };
    let (reads, waits, wakes) = clock.supervisor_counts().unwrap_or_default();
    eprintln!(
        "simrun: simulated {:.6} s in {:.3} s of wall time; {moves} clock moves, {reads} clock reads, {waits} timed waits, {wakes} futex wakes, {} early wake-ups passed over",
        (clock.now() - t0).as_secs_f64(),
        wall.elapsed().as_secs_f64(),
        timeshim::go_early_wakes_passed()
    );
    // A program ended by a signal says which (the exit code cannot).
    if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&status) {
        eprintln!("simrun: {} ended by signal {sig}", cmd[0]);
    }
    // process::exit skips destructors: the controller removes its page.
    drop(clock);
    std::process::exit(
        status
            .code()
            .or(std::os::unix::process::ExitStatusExt::signal(&status).map(|s| 128 + s))
            .unwrap_or(128 + 9),
    );
}
