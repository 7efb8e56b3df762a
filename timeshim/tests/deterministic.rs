//! `--deterministic` (the seccomp supervisor running one thread at a time,
//! see `timeshim/src/seccomp/supervisor/det.rs`): programs whose output is
//! decided by how their threads interleave give the same output on every
//! run with the same seed, with CPU hogs beside them, and seeds choose
//! among outcomes.
//!
//! - a static C program: four pthreads racing for a mutex, with yields and
//!   sleeps;
//! - a static Go program: eight goroutines on four threads, channels,
//!   sleeps, map iteration order and the global math/rand;
//! - a dynamically linked Rust program: std threads, a tokio
//!   multi-thread runtime, a `HashMap`'s order;
//! - Go's map order and math/rand, which plain `--seed` does not fix
//!   (they draw from per-thread generators seeded in the order threads are
//!   created): fixed here.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn simrun(args: &[&str], program: &str) -> String {
    simrun_cmd(args, &[program])
}

/// Busy threads, one more than the machine's CPUs, until dropped: the
/// OS's scheduling of the program's threads then varies the most.
struct Hogs(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Hogs {
    fn start() -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(2, |n| n.get()) + 1;
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        std::hint::black_box(x);
                    }
                })
            })
            .collect();
        Hogs(stop, threads)
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

fn same_on_every_run(program: &str) {
    let first = simrun(&["--deterministic", "--seed", "1"], program);
    assert!(!first.trim().is_empty(), "{program}: no output");
    let hogs = Hogs::start();
    for run in 0..4 {
        let again = simrun(&["--deterministic", "--seed", "1"], program);
        assert_eq!(first, again, "{program}: run {run} with CPU hogs differs");
    }
    drop(hogs);
    let other = simrun(&["--deterministic", "--seed", "2"], program);
    assert_ne!(
        first, other,
        "{program}: seeds 1 and 2 gave the same outcome"
    );
    assert_eq!(
        other,
        simrun(&["--deterministic", "--seed", "2"], program),
        "{program}: seed 2 twice differs"
    );
}

#[test]
fn racing_pthreads_interleave_the_same_way_on_every_run() {
    same_on_every_run(support::cc_static("interleave.c").to_str().unwrap());
}

#[test]
fn racing_goroutines_interleave_the_same_way_on_every_run() {
    same_on_every_run(support::go_build("interleave").to_str().unwrap());
}

/// A dynamically linked Rust program: std threads racing for a mutex, a
/// tokio multi-thread runtime whose workers steal tasks, a `HashMap`'s
/// order (`examples/interleave_rust.rs`).
#[test]
fn racing_rust_threads_and_tokio_tasks_interleave_the_same_way_on_every_run() {
    same_on_every_run(support::example("interleave_rust").to_str().unwrap());
}

#[test]
fn go_map_order_and_math_rand_follow_the_seed() {
    let p = support::go_build("randprobe");
    let p = p.to_str().unwrap();
    let a = simrun(&["--deterministic", "--seed", "42"], p);
    assert!(a.contains("map ") && a.contains("math/rand "), "{a}");
    for _ in 0..3 {
        assert_eq!(a, simrun(&["--deterministic", "--seed", "42"], p));
    }
    assert_ne!(a, simrun(&["--deterministic", "--seed", "7"], p));
}

/// A thread spinning at one instant (a system call each turn, never quiet,
/// nothing sent on a socket) until another, asleep for 5 simulated
/// seconds, sets a flag. On a frozen clock the loop never ends; at the busy
/// bound the supervisor holds the program, the clock moves to the sleeper's
/// deadline, and the loop ends there, after the same number of turns on
/// every run (the bound counts calls, which the seed orders), CPU hogs
/// beside it or not.
#[test]
fn a_program_spinning_at_one_instant_is_held_at_the_busy_bound_until_the_clock_moves() {
    let p = support::cc_static("spin.c");
    let p = p.to_str().unwrap();
    let args = ["--deterministic", "--seed", "1", "--spin-bound", "3000"];
    let first = simrun(&args, p);
    let turns: u64 = first
        .strip_prefix("spun ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{first}"));
    assert!(first.ends_with("done after 5.000 s\n"), "{first}");
    // Held at the bound (the loop's calls and the start's), then let go
    // on at 5 s, where the sleeper and the loop share what is left.
    assert!((2_000..=3_100).contains(&turns), "{first}");
    let hogs = Hogs::start();
    for _ in 0..2 {
        assert_eq!(first, simrun(&args, p), "with CPU hogs");
    }
    drop(hogs);
    // A larger bound, more turns before the hold.
    let more = simrun(
        &["--deterministic", "--seed", "1", "--spin-bound", "6000"],
        p,
    );
    assert!(more.ends_with("done after 5.000 s\n"), "{more}");
    assert_ne!(first, more);
}

/// A spinner released at every tick of a timer (the other thread sleeps
/// 1 s five times) is held again after a sixteenth of the bound
/// (`timeshim::SPIN_REHOLD_DIVISOR`) until it is quiet of its own accord:
/// the whole bound before the first hold, then a sixteenth at each tick,
/// the same on every run.
#[test]
fn a_spinner_released_at_a_timer_is_held_again_after_a_fraction_of_the_bound() {
    let p = support::cc_static("spin.c");
    let p = p.to_str().unwrap();
    let args = ["--deterministic", "--seed", "1", "--spin-bound", "3200"];
    let run = || simrun_cmd(&args, &[p, "5"]);
    let out = run();
    assert!(out.contains("done after 5.000 s\n"), "{out}");
    let per_tick: Vec<u64> = out
        .lines()
        .find_map(|l| l.strip_prefix("per tick:"))
        .unwrap_or_else(|| panic!("{out}"))
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(per_tick.len(), 6, "{out}");
    assert!((2_000..=3_300).contains(&per_tick[0]), "{out}");
    // A tick's turns are those after the timer's thread counted it, at
    // its instant and at the next one, before it counted again: two
    // sixteenths at most.
    for &n in &per_tick[1..5] {
        assert!(
            (1..=2 * 3_200 / timeshim::SPIN_REHOLD_DIVISOR).contains(&n),
            "{out}"
        );
    }
    assert_eq!(out, run(), "a second run");
}

/// `simrun ARGS -- CMD`, its output; a run that hangs (a call the mode
/// does not model) fails after 300 s of wall time instead of hanging the
/// suite.
fn simrun_cmd(args: &[&str], cmd: &[&str]) -> String {
    let o = Command::new("timeout")
        .arg("300")
        .arg(support::example("simrun"))
        .args(args)
        .arg("--")
        .args(cmd)
        .output()
        .expect("simrun");
    assert!(
        o.status.success(),
        "simrun {cmd:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A shell script (what wraps many programs: Kueue's run.sh makes its
/// certificates so) forks, reads its children's output through pipes and
/// waits for them: each of those calls blocks in the kernel until another
/// process of the program has run, which under the mode runs only when the
/// caller parks. They are held as waits instead; without that the run
/// stalls at the first `$(…)`. dash forks with `vfork` too. A writer that
/// fills a pipe (64 KiB) before its reader ran blocked likewise: its
/// writes are made without blocking, as much as fits, and held when none
/// does.
#[test]
fn a_shell_script_that_forks_pipes_and_waits_runs_to_its_end() {
    let script = "for i in 1 2 3; do x=$(echo v$i); echo $x; done; \
                  (sleep 2; echo late) & echo now | cat; wait; \
                  y=$(sh -c 'exit 3'; echo $?); echo status $y; \
                  z=$(head -c 3 /dev/zero | wc -c); echo bytes $z; \
                  head -c 1000000 /dev/zero | wc -c; seq 1 200000 | cksum";
    let want = "v1\nv2\nv3\nnow\nlate\nstatus 3\nbytes 3\n1000000\n3581800518 1288895\n";
    let first = simrun_cmd(
        &["--deterministic", "--seed", "1", "--max", "60"],
        &["/bin/sh", "-c", script],
    );
    assert_eq!(first, want);
    let hogs = Hogs::start();
    for _ in 0..2 {
        assert_eq!(
            simrun_cmd(
                &["--deterministic", "--seed", "1", "--max", "60"],
                &["/bin/sh", "-c", script]
            ),
            want
        );
    }
    drop(hogs);
}

/// Two programs in one ensemble (`timeshim::Ensemble`): one thread of both
/// at a time, in an order the seed decides, never the OS. Each appends
/// lines to one file; which program's line comes first at each step is
/// the seed's choice, the same on every run, with CPU hogs beside them.
#[test]
fn two_programs_in_an_ensemble_interleave_the_same_way_on_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: u64| -> String {
        let f = dir.path().join("out");
        let _ = std::fs::remove_file(&f);
        let ensemble = timeshim::Ensemble::new(2, seed);
        let clocks: Vec<timeshim::Controller> = (0..2)
            .map(|_| timeshim::Controller::new(timeshim::SimTime::EPOCH).unwrap())
            .collect();
        for (i, c) in clocks.iter().enumerate() {
            c.join_ensemble(&ensemble, i);
        }
        // Both start at once: none moves before the other is there.
        let children: Vec<std::process::Child> = std::thread::scope(|s| {
            let handles: Vec<_> = clocks
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let f = f.clone();
                    s.spawn(move || {
                        let mut cmd = Command::new("/bin/sh");
                        cmd.arg("-c").arg(format!(
                            "for i in 1 2 3 4 5 6 7 8; do echo {}$i >> {}; done",
                            ["a", "b"][i],
                            f.display()
                        ));
                        c.spawn(
                            cmd,
                            &timeshim::ShimMode::Seccomp {
                                seed: Some(seed + i as u64),
                                deterministic: true,
                            },
                        )
                        .expect("spawn")
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        assert!(ensemble.decisions() > 0, "the baton was never given");
        std::fs::read_to_string(&f).unwrap().replace('\n', " ")
    };
    let first = run(1);
    assert_eq!(first.split_whitespace().count(), 16, "{first}");
    let hogs = Hogs::start();
    for _ in 0..3 {
        assert_eq!(first, run(1), "seed 1 again, with CPU hogs");
    }
    drop(hogs);
    let seeds: std::collections::BTreeSet<String> = (2..6).map(run).collect();
    assert!(
        seeds.len() > 1 || !seeds.contains(&first),
        "seeds 1 to 5 gave one interleaving: {first}"
    );
}

/// `pthread_join` waits on the futex word the kernel clears and wakes when
/// the thread exits (`CLONE_CHILD_CLEARTID`): under the mode every futex
/// wait is held by the supervisor, which gives that wake itself once the
/// thread is gone. Without it the join waited forever.
#[test]
fn threads_joined_with_pthread_join_run_to_the_end() {
    let p = support::cc_static("join.c");
    let out = simrun(
        &["--deterministic", "--seed", "1", "--max", "60"],
        p.to_str().unwrap(),
    );
    assert_eq!(out, "joined dcba\n");
}

/// A timer the kernel runs on real time fires at a moment no one orders:
/// the mode refuses the program, saying why on its stderr, and the same
/// program runs without the mode (on real time).
#[test]
fn a_timer_the_kernel_runs_on_real_time_is_refused_with_its_reason() {
    let p = support::cc_static("kerneltimer.c");
    for arg in [None, Some("alarm")] {
        let run = |det: bool| {
            let mut c = Command::new(support::example("simrun"));
            if det {
                c.args(["--deterministic", "--seed", "1"]);
            }
            c.arg("--").arg(&p).args(arg);
            c.output().expect("simrun")
        };
        let o = run(true);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{arg:?}: refused, yet it ran:\n{err}");
        let call = if arg.is_some() {
            "(alarm)"
        } else {
            "(timerfd_settime)"
        };
        assert!(
            err.contains("--deterministic refused")
                && err.contains(call)
                && err.contains("--no-deterministic"),
            "{arg:?}: the reason on the program's stderr:\n{err}"
        );
        assert!(!String::from_utf8_lossy(&o.stdout).contains("fired"));
        let o = run(false);
        assert!(o.status.success(), "{arg:?} without the mode: {o:?}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "fired\n");
    }
}

/// Whether a bind to a fixed port succeeds is the run's, not the machine's:
/// a program listening on a port that a process outside holds (another run
/// beside it) sees what it sees when the port is free, and reaches itself
/// there (`timeshim/src/ports.rs`).
#[test]
fn a_fixed_port_held_outside_the_run_is_the_programs_all_the_same() {
    let p = support::cc_static("fixedport.c");
    let expected = "bind ok\nlistening on the port asked for\nsecond bind Address already in use\n\
                    connect ok\naccepted yes\npeer is the port asked for\n\
                    accepted on the port asked for\nread 1 x\n";
    let run = |port: u16| {
        simrun_cmd(
            &["--deterministic", "--seed", "1", "--max", "60"],
            &[p.to_str().unwrap(), &port.to_string()],
        )
    };
    let outside = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = outside.local_addr().unwrap().port();
    assert_eq!(run(port), expected, "with port {port} held outside the run");
    drop(outside);
    assert_eq!(run(port), expected, "with port {port} free");
}
