//! `--shim seccomp`: unmodified static binaries on simulated time, driven by
//! `examples/simrun` (the exact policy without a simulator: the clock moves
//! to the program's next deadline whenever it is quiescent).
//!
//! - a static Go program (built here with the machine's Go): `time.Now`,
//!   `Sleep`, tickers, timers, context deadlines, `AfterFunc`, and an HTTP
//!   request to a server that answers after 50 ms of wall time, whose 5 s
//!   timeout must not fire (the clock stands still while the program waits
//!   for I/O);
//! - a static C program: `nanosleep`, `clock_nanosleep` (absolute),
//!   `usleep`, `pthread_cond_timedwait` (timed out and signalled), `poll`,
//!   `select`;
//! - `--seed`: the randomness a program is given (`AT_RANDOM`, `getrandom`)
//!   is the same on every run with a seed: a static C program's, and a Go
//!   program's crypto/rand. (Go's map order and global math/rand draw from
//!   per-thread generators seeded in the order the runtime creates its
//!   threads, which varies from run to run: not covered.)

mod support;

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use timeshim::{Controller, Quiescence, ShimMode, SimTime};

fn simrun(args: &[&str], program: &[&str]) -> Output {
    simrun_env(args, program, &[])
}

fn simrun_env(args: &[&str], program: &[&str], env: &[(&str, &str)]) -> Output {
    // Batkube's own GOGC, when the tests' environment has one, is not the
    // launcher's to test.
    let o = Command::new(support::example("simrun"))
        .env_remove("GOGC")
        .envs(env.iter().copied())
        .args(args)
        .arg("--")
        .args(program)
        .output()
        .expect("simrun");
    assert!(
        o.status.success(),
        "simrun {program:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn stdout(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A one-shot HTTP server that answers after 50 ms of wall time. It is
/// busy (the simulation must not move on) from the start until the client
/// has read the whole response and closed the connection: the program makes
/// its request first.
fn slow_server() -> (String, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/probe", l.local_addr().unwrap());
    let busy = Arc::new(AtomicBool::new(true));
    let b = busy.clone();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 4096];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                return;
            }
            got.extend_from_slice(&buf[..n]);
        }
        std::thread::sleep(Duration::from_millis(50));
        let _ =
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
        while s.read(&mut buf).is_ok_and(|n| n > 0) {}
        b.store(false, Ordering::Release);
    });
    (url, busy, h)
}

/// The exact policy in a few lines, with an outside party: the clock moves
/// to the program's next deadline when it is quiescent and `busy` is false.
fn run_with_server(program: &[&str], busy: &AtomicBool) -> Vec<String> {
    let clock = Controller::new(SimTime::from_secs_f64(1_700_000_000.0)).unwrap();
    let mut cmd = Command::new(program[0]);
    cmd.args(&program[1..]).stdout(Stdio::piped());
    let mut child = clock
        .spawn(
            cmd,
            &ShimMode::Seccomp {
                seed: None,
                deterministic: false,
            },
        )
        .unwrap();
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < support::PATIENCE,
            "the program never ended"
        );
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if busy.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        match clock.wait_quiescent(Duration::from_millis(100)).unwrap() {
            Quiescence::Quiescent {
                earliest_deadline: Some(d),
                stamp,
                ..
            } => {
                // Still quiescent, nothing ran since, the server still idle.
                let p = clock.probe().unwrap();
                if p.quiescent() && p.stamp == stamp && !busy.load(Ordering::Acquire) {
                    clock.advance_to(d.max(clock.now())).unwrap();
                }
            }
            Quiescence::Exited => break,
            _ => {}
        }
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{:?}", o.status);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn static_go_program_runs_on_simulated_time() {
    let probe = support::go_build("timeprobe");
    let (url, busy, server) = slow_server();
    let wall = Instant::now();
    let out = run_with_server(&[probe.to_str().unwrap(), &url], &busy);
    server.join().unwrap();
    assert_eq!(
        out,
        [
            "start 1700000000",
            "http 200 \"hello\" 0.000000",
            "sleep 3600.000000",
            "ticks 5 5.000000",
            "timer 10.000000 ticks 10",
            "deadline 2.000000 context deadline exceeded",
            "afterfunc [1 2 3]",
            "end 3615.000000",
        ]
    );
    // An hour of sleeps and timers is not waited out on the wall clock.
    assert!(
        wall.elapsed() < Duration::from_secs(50),
        "{:?}",
        wall.elapsed()
    );
}

/// The clock reads the supervisor answered, from simrun's last line.
fn supervisor_clock_reads(o: &Output) -> u64 {
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .rfind(|l| l.starts_with("simrun: simulated"))
        .expect("simrun's summary");
    line.split(", ")
        .find_map(|f| f.strip_suffix(" clock reads"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no clock reads in {line:?}"))
}

#[test]
fn static_c_program_runs_on_simulated_time() {
    let probe = support::cc_static("timeprobe.c");
    // The vDSO pointed at the clock page (the default): clock reads never
    // reach the supervisor; hidden (the fallback): every one does, with
    // the same answers.
    let patched = simrun(&[], &[probe.to_str().unwrap()]);
    let hidden = simrun_env(
        &[],
        &[probe.to_str().unwrap()],
        &[("TIMESHIM_SECCOMP_VDSO", "hide")],
    );
    assert_eq!(supervisor_clock_reads(&patched), 0);
    assert!(supervisor_clock_reads(&hidden) > 0);
    assert_eq!(stdout(&patched), stdout(&hidden));
    let o = patched;
    assert_eq!(
        stdout(&o),
        [
            "start 1700000000 1700000000",
            "nanosleep 3600.000000",
            "clock_nanosleep 10.000000",
            "usleep 0.250000",
            "condwait timedout 5.000000",
            "condwait signalled 2.000000",
            "poll 1.500000",
            "select 0 2.500000",
            "select ready 1 1 0.000000",
            "end 3621.250000",
        ],
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A wrapper that works for seconds of wall time before it execs the
/// program (Kueue's run.sh makes certificates so; on a loaded machine it
/// took over the 2 s the launcher once waited before handing the process
/// over with the vDSO hidden): the program still gets its vDSO pointed at
/// the clock page (no clock read reaches the supervisor) and runs exactly
/// as without the wrapper. The wrapper measures wall time with
/// `/proc/uptime`, which no simulated clock touches, and spins over 2 s.
#[test]
fn a_wrapper_that_works_seconds_before_its_exec_leaves_the_program_on_the_clock_page() {
    let probe = support::cc_static("timeprobe.c");
    let probe = probe.to_str().unwrap();
    let direct = simrun(&["--seed", "3"], &[probe]);
    let script = format!(
        "read t0 _ < /proc/uptime; t0=${{t0%.*}}; \
         while :; do read t _ < /proc/uptime; [ $(( ${{t%.*}} - t0 )) -ge 3 ] && break; done; \
         exec env {probe}"
    );
    let wall = Instant::now();
    let wrapped = simrun(&["--seed", "3"], &["/bin/sh", "-c", &script]);
    assert!(
        wall.elapsed() >= Duration::from_secs(2),
        "the wrapper did not work long: {:?}",
        wall.elapsed()
    );
    assert_eq!(stdout(&wrapped), stdout(&direct));
    assert_eq!(
        supervisor_clock_reads(&wrapped),
        0,
        "the program's clock reads reached the supervisor (vDSO not patched): {}",
        String::from_utf8_lossy(&wrapped.stderr)
    );
    assert_eq!(stdout(&wrapped)[0], "start 1700000000 1700000000");
}

#[test]
fn a_seed_makes_the_randomness_a_program_is_given_reproducible() {
    for probe in [
        support::cc_static("randprobe.c"),
        support::go_build("randprobe"),
    ] {
        let p = probe.to_str().unwrap();
        // Go: only crypto/rand is the process's own draw (see the module doc).
        let given = |o: Output| -> Vec<String> {
            stdout(&o)
                .into_iter()
                .filter(|l| !l.starts_with("map ") && !l.starts_with("math/rand "))
                .collect()
        };
        let a = given(simrun(&["--seed", "42"], &[p]));
        let b = given(simrun(&["--seed", "42"], &[p]));
        let c = given(simrun(&["--seed", "7"], &[p]));
        let free = given(simrun(&[], &[p]));
        assert!(
            !a.is_empty() && a.iter().all(|l| !l.contains("error")),
            "{a:?}"
        );
        assert_eq!(a, b, "{p}: the same seed gave different randomness");
        assert_ne!(a, c, "{p}: two seeds gave the same randomness");
        assert_ne!(a, free, "{p}: without a seed the randomness is the OS's");
    }
}

/// Each `connect` of a supervised program (an IPv4 socket) is counted in
/// the run's table of ports by destination port, before the kernel makes
/// it, whatever its outcome: the broker sets that count against the
/// connections its API established to know whether a handshake may be in
/// progress (`timeshim::Ports::connects_to`), without counting what other
/// processes of the machine connect.
#[test]
fn a_programs_connects_are_counted_in_the_runs_table() {
    let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listening.local_addr().unwrap().port();
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ports = timeshim::Ports::new();
    let clock = Controller::new(SimTime::from_secs_f64(1_700_000_000.0)).unwrap();
    clock.set_ports(&ports);
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        &format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port}; exec 4<>/dev/tcp/127.0.0.1/{port}; \
             (exec 5<>/dev/tcp/127.0.0.1/{refused}) 2>/dev/null; echo done"
        ),
    ])
    .stdout(Stdio::piped());
    let out = clock
        .spawn(
            cmd,
            &ShimMode::Seccomp {
                seed: None,
                deterministic: false,
            },
        )
        .unwrap()
        .wait_with_output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    // A connection from outside the run is not counted.
    let _outside = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(ports.connects_to(&[port]), 2);
    assert_eq!(ports.connects_to(&[refused]), 1);
    assert_eq!(ports.connects_to(&[port, refused]), 3);
    drop(listening);
}

/// The launcher gives the command `GOGC=400` (a Go program's collector
/// then runs a quarter as often; `gort::GOGC_DEFAULT`), unless batkube's
/// environment sets `GOGC` (kept), `TIMESHIM_GO_GC` says otherwise, or the
/// run is deterministic. A shell's own assignment wins as usual.
#[test]
fn go_programs_get_a_larger_heap_growth_unless_told_otherwise() {
    let gogc = |args: &[&str], env: &[(&str, &str)], cmd: &str| -> Vec<String> {
        stdout(&simrun_env(args, &["sh", "-c", cmd], env))
    };
    let show = "echo ${GOGC-unset}";
    assert_eq!(gogc(&[], &[], show), ["400"]);
    assert_eq!(gogc(&[], &[("GOGC", "50")], show), ["50"]);
    assert_eq!(gogc(&[], &[("TIMESHIM_GO_GC", "keep")], show), ["unset"]);
    assert_eq!(gogc(&[], &[("TIMESHIM_GO_GC", "off")], show), ["off"]);
    assert_eq!(gogc(&["--deterministic"], &[], show), ["unset"]);
    assert_eq!(
        gogc(&["--deterministic"], &[("TIMESHIM_GO_GC", "250")], show),
        ["250"]
    );
    assert_eq!(gogc(&[], &[], "GOGC=77 sh -c 'echo $GOGC'"), ["77"]);
}

/// Go's runtime forces a collection when none ran for two minutes of its
/// clock, the simulated one: over months of simulated time, one per
/// program wake-up. The launcher sets the period to never (stripped
/// binaries too); `TIMESHIM_GO_FORCED_GC=keep` leaves it, and the same ten
/// idle minutes then force collections. How many depends on where sysmon's
/// wake-ups fall against the main goroutine's in a run without a seed (it
/// tests the period only when it wakes: 2 to 5 were seen), so the kept run
/// asserts at least one, and the run with the period off exactly none.
/// What the program computes is the same either way. (A deterministic run keeps the period unless
/// `TIMESHIM_GO_FORCED_GC=never`: `gort`'s unit tests.)
#[test]
fn go_programs_are_not_forced_to_collect_on_simulated_time() {
    for probe in [
        support::go_build("gcprobe"),
        support::go_build_stripped("gcprobe"),
    ] {
        let p = probe.to_str().unwrap();
        let off = simrun(&[], &[p]);
        let kept = simrun_env(&[], &[p], &[("TIMESHIM_GO_FORCED_GC", "keep")]);
        let forced = |o: &Output| -> u64 {
            stdout(o)
                .iter()
                .find_map(|l| l.strip_prefix("idle collections ")?.parse().ok())
                .unwrap_or_else(|| panic!("no forced count: {:?}", stdout(o)))
        };
        assert_eq!(
            stdout(&off),
            ["slept 600", "idle collections 0", "heap 4096"],
            "{p}: stderr {}",
            String::from_utf8_lossy(&off.stderr)
        );
        assert!(forced(&kept) >= 1, "{p}: {:?}", stdout(&kept));
        assert_eq!(stdout(&kept)[0], "slept 600");
    }
}

/// The count of a field of simrun's last line (`N <name>`).
fn simrun_count(o: &Output, name: &str) -> u64 {
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .rfind(|l| l.starts_with("simrun: simulated"))
        .expect("simrun's summary");
    line.split([',', ';'])
        .find_map(|f| f.trim().strip_suffix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name:?} in {line:?}"))
}

/// Go's poller waits for its timers in whole milliseconds rounded down, so
/// a timer due off the millisecond wakes it early, for nothing, and then a
/// millisecond later. Under `--elide go-poller` (here
/// `TIMESHIM_GO_EARLY_WAKE=pass`) the supervisor reads the runtime's
/// deadline (`runtime.sched.pollUntil`, found in stripped binaries and in
/// an older Go's too) and holds the first wait until the second would end:
/// in this program, the same instants for everything it does, and fewer
/// clock moves.
#[test]
fn go_pollers_early_wake_ups_are_passed_over_when_asked() {
    let probes = [
        support::go_build("pollprobe"),
        support::go_build_stripped("pollprobe"),
        // A release older than the machine's Go, from the module proxy.
        support::go_build_with_toolchain("pollprobe", "go1.20.6"),
    ];
    let expected = [
        "ticks [2000 3000 5000 6000 8000 9000 11000 12000 14000 15000 17000 18000 20000 21000 \
         23000 24000 26000 27000 29000 30000 32000 33000 35000 36000 38000 39000 41000 42000 \
         44000 45000 47000 48000 50000 51000 53000 54000 56000 57000 59000 60000]",
        "slept [63000 64000 71000 82000]",
        "afterfunc 86000",
    ];
    for probe in &probes {
        let p = probe.to_str().unwrap();
        let passed = simrun_env(&[], &[p], &[("TIMESHIM_GO_EARLY_WAKE", "pass")]);
        let kept = simrun(&[], &[p]);
        assert_eq!(stdout(&passed), expected, "{p}");
        assert_eq!(stdout(&kept), expected, "{p}");
        // 20 ticks off the millisecond, a sleep and a timer.
        let n = simrun_count(&passed, "early wake-ups passed over");
        assert!(n >= 22, "{p}: {n} passed over");
        assert_eq!(simrun_count(&kept, "early wake-ups passed over"), 0, "{p}");
        let (mp, mk) = (
            simrun_count(&passed, "clock moves"),
            simrun_count(&kept, "clock moves"),
        );
        assert!(mp < mk, "{p}: {mp} clock moves passing over, {mk} keeping");
        // Deterministic mode too, where it is the same wait.
        let det = simrun_env(
            &["--deterministic", "--seed", "1"],
            &[p],
            &[("TIMESHIM_GO_EARLY_WAKE", "pass")],
        );
        assert_eq!(stdout(&det), expected, "{p}");
        assert!(
            simrun_count(&det, "early wake-ups passed over") >= 22,
            "{p}"
        );
    }
}
