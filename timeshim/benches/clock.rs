//! Costs of the shim: a clock read under the shim, a clock read passed
//! through (no controller), a clock jump, and a full sleep/wake cycle
//! (advance, the sleeper wakes and sleeps again, quiescence detected).
//!
//! `cargo bench -p timeshim --bench clock`. The bench re-executes itself as
//! a child under a controller for the parts that must run inside the shim.

use criterion::{criterion_group, Criterion};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};
use timeshim::{ClockMode, Controller, Quiescence, ShimMode, SimTime};

const ROLE: &str = "TIMESHIM_BENCH_ROLE";
const START: SimTime = SimTime::from_nanos(1_893_456_000_000_000_000);

/// Criterion times itself with `Instant`, so the criterion reader runs with
/// the simulated clock in realtime mode (each read also reads the real clock).
fn reads_under_shim(c: &mut Criterion) {
    assert!(
        timeshim::install(),
        "the reader must run under a controller"
    );
    c.bench_function("shim-realtime/Instant::now", |b| b.iter(Instant::now));
    c.bench_function("shim-realtime/SystemTime::now", |b| b.iter(SystemTime::now));
}

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer; CPU-time clocks pass through the shim.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// With a frozen clock criterion cannot time anything (time stands still),
/// so this reader times a loop of reads with the thread's CPU-time clock.
fn frozen_reads() {
    assert!(
        timeshim::install(),
        "the reader must run under a controller"
    );
    const N: u64 = 20_000_000;
    for (name, read) in [
        (
            "Instant::now",
            &(|| {
                std::hint::black_box(Instant::now());
            }) as &dyn Fn(),
        ),
        ("SystemTime::now", &|| {
            std::hint::black_box(SystemTime::now());
        }),
    ] {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = cpu_ns();
            for _ in 0..N {
                read();
            }
            best = best.min((cpu_ns() - t0) as f64 / N as f64);
        }
        println!(
            "shim-frozen/{name}: {best:.1} ns per read (best of 5 x {N} reads, thread CPU time)"
        );
    }
}

fn reads_passed_through(c: &mut Criterion) {
    c.bench_function("passthrough/Instant::now", |b| b.iter(Instant::now));
}

fn control(c: &mut Criterion) {
    let clock = Controller::new(START).expect("controller");
    c.bench_function("control/advance_by 1h (no waiter)", |b| {
        b.iter(|| clock.advance_by(Duration::from_secs(3600)))
    });

    let clock = Controller::new(START).expect("controller");
    let mut cmd = Command::new(std::env::current_exe().expect("bench exe"));
    cmd.env(ROLE, "sleeper");
    let mut sleeper = clock.spawn(cmd, &ShimMode::Linked).expect("spawn sleeper");
    let quiescent = |clock: &Controller| match clock
        .wait_quiescent(Duration::from_secs(30))
        .expect("probe")
    {
        Quiescence::Quiescent {
            earliest_deadline, ..
        } => earliest_deadline,
        other => panic!("sleeper not quiescent: {other:?}"),
    };
    quiescent(&clock);
    c.bench_function("control/sleep-wake cycle (advance 1s + quiescence)", |b| {
        b.iter(|| {
            clock.advance_by(Duration::from_secs(1));
            quiescent(&clock)
        })
    });
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

criterion_group!(passthrough, reads_passed_through, control);
criterion_group!(under_shim, reads_under_shim);

fn main() {
    match std::env::var(ROLE).as_deref() {
        Ok("sleeper") => {
            timeshim::install();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        Ok("reader") => {
            under_shim();
        }
        Ok("reader-frozen") => {
            frozen_reads();
            return;
        }
        _ => {
            passthrough();
            for (role, mode) in [
                ("reader-frozen", ClockMode::Frozen),
                ("reader", ClockMode::Realtime),
            ] {
                let clock = Controller::new(START).expect("controller");
                clock.set_clock_mode(mode);
                let mut cmd = Command::new(std::env::current_exe().expect("bench exe"));
                cmd.args(std::env::args_os().skip(1)).env(ROLE, role);
                let status = clock
                    .spawn(cmd, &ShimMode::Linked)
                    .expect("spawn reader")
                    .wait()
                    .expect("reader");
                assert!(status.success(), "{role} failed");
            }
        }
    }
    Criterion::default().configure_from_args().final_summary();
}
