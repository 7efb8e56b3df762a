//! Test child for std's timed waits under the shim (linked with
//! `#[timeshim::main]`): condition
//! variables notified before or after their timeout, `park_timeout`, and
//! sleeps with the clock in realtime mode. One line per step.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn say(line: String) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn frozen() {
    // A condvar wait with a one-hour timeout, notified after 10 s.
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let waiter = {
        let pair = pair.clone();
        std::thread::spawn(move || {
            let (lock, cv) = &*pair;
            let t = Instant::now();
            let guard = lock.lock().unwrap();
            let (guard, res) = cv
                .wait_timeout_while(guard, Duration::from_secs(3600), |ready| !*ready)
                .unwrap();
            say(format!(
                "notified ready={} timed_out={} after_ns={}",
                *guard,
                res.timed_out(),
                t.elapsed().as_nanos()
            ));
        })
    };
    std::thread::sleep(Duration::from_secs(10));
    *pair.0.lock().unwrap() = true;
    pair.1.notify_one();
    waiter.join().unwrap();

    // A condvar wait nobody notifies.
    let (lock, cv) = (Mutex::new(()), Condvar::new());
    let t = Instant::now();
    let (_g, res) = cv
        .wait_timeout(lock.lock().unwrap(), Duration::from_secs(60))
        .unwrap();
    say(format!(
        "cv_timeout timed_out={} after_ns={}",
        res.timed_out(),
        t.elapsed().as_nanos()
    ));

    // park_timeout with no unpark: returns at the deadline (or spuriously, then we loop).
    let t = Instant::now();
    let deadline = t + Duration::from_secs(5);
    while Instant::now() < deadline {
        std::thread::park_timeout(deadline - Instant::now());
    }
    say(format!("parked after_ns={}", t.elapsed().as_nanos()));
}

fn realtime() {
    let sys = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    };
    let t = Instant::now();
    let s0 = sys();
    std::thread::sleep(Duration::from_millis(20));
    say(format!(
        "rt_slept after_ns={} start_ns={s0} end_ns={}",
        t.elapsed().as_nanos(),
        sys()
    ));
}

// The attribute form of `timeshim::install()`.
#[timeshim::main]
fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("realtime") => realtime(),
        _ => frozen(),
    }
}
