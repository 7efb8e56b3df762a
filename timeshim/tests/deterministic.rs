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
//! - Go's map order and math/rand, which plain `--seed` does not fix
//!   (they draw from per-thread generators seeded in the order threads are
//!   created): fixed here.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn simrun(args: &[&str], program: &str) -> String {
    let o = Command::new(support::example("simrun"))
        .args(args)
        .arg("--")
        .arg(program)
        .output()
        .expect("simrun");
    assert!(
        o.status.success(),
        "simrun {program} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
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
