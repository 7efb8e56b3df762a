//! `batkube run` and `batkube serve`: putting the pieces together.
//!
//! `run` starts the API, the scheduler under the shim (with a generated
//! kubeconfig), Batsim (the real one when given or on PATH, else the
//! built-in stand-in, in-process) and the broker; waits for the end; writes
//! the outputs; tears everything down whatever happened. `serve` runs only
//! the API and the broker, for users who start Batsim and their scheduler
//! themselves.
//!
//! `args.rs` holds their flags; `processes.rs` the processes a run starts
//! and watches (the scheduler and `--controller` programs under the shim,
//! real Batsim as a child); `api.rs` the API server on simulated time;
//! `outputs.rs` what a run writes at its end; this file the run itself,
//! from checking the inputs to the teardown, and the exchange with Batsim
//! (`drive`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use parking_lot::Mutex;
use timeshim::{Controller, ShimMode};

use crate::broker::record::{self, EndReason};
use crate::broker::sync::ShimSide;
use crate::broker::{sim_time, Broker, BrokerConfig, Classified, SchedulerSide};
use crate::ending::{error_text, Incomplete, Interrupt, Reaper, Shared, Stopped};
use api::{api_objects, start_api, Api};
use batsim::link::BatsimLink;
use batsim::platform::Platform;
use batsim::workload::Workload;
use outputs::{flags, write_outputs};
use processes::{
    batsim_exited, check_attached, exit_details, processes, program_command, spawn_programs,
    start_batsim, wait_for_batsim_exit, wait_for_scheduler, BatsimExited, ControllerExitedEarly,
    ExitedEarly, NeverWatched, Started,
};

mod api;
mod args;
pub mod compare;
pub mod cpus;
mod outputs;
mod processes;

pub use args::{
    parse_duration, resolve_shim, scheduler_name, ClockArgs, KubeletArgs, RunArgs, ServeArgs,
    ShimChoice,
};

/// Runs a whole simulation; `Ok(summary)` only if it completed and no
/// invariant failed. Once the API is up, every ending (done, a signal, a
/// child that died, a failed invariant, a bound hit) writes pods.csv,
/// nodes.csv, summary.json (and jobs.csv if Batsim could not), stops the
/// children and removes the clock page; a run that did not complete
/// returns [`Incomplete`]. Made for a process that ends with it (`batkube
/// run`): the API's objects are left for the process's exit to free.
pub fn run(mut args: RunArgs) -> anyhow::Result<record::Summary> {
    // A seed names an outcome: the same seed, the same outputs.
    if args.scheduler_seed.is_some() && !args.no_deterministic {
        args.deterministic = true;
    }
    // Before the run starts its threads and programs: they inherit it.
    if let Some(on) = cpus::apply(&args.cpus)? {
        tracing::info!(cpus = ?on, "the run's CPUs (--cpus {})", args.cpus);
    }
    let children = Shared::default();
    let interrupt = Interrupt::install(children.clone());
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating the output directory {}", args.out.display()))?;
    let out = args.out.clone();
    // Inputs are checked before anything starts.
    let platform = Platform::from_file(&args.platform)?;
    let mut workloads = Vec::new();
    for (i, p) in args.workloads.iter().enumerate() {
        workloads.push(Workload::from_file(p, &format!("w{i}"))?);
    }
    let shim_choice = resolve_shim(args.shim, &args.scheduler);
    let shim = shim_choice != ShimChoice::None;
    if args.scheduler_seed.is_some() && shim_choice != ShimChoice::Seccomp {
        anyhow::bail!(
            "--seed works under the seccomp supervisor only (the scheduler runs with --shim {:?}); add --shim seccomp",
            shim_choice
        );
    }
    if args.deterministic {
        // Every program under the supervisor: one left to the OS decides
        // by its own thread timing, and the settle counts the sends the
        // supervisors let through.
        for p in processes(&args) {
            if p.shim != ShimChoice::Seccomp {
                anyhow::bail!(
                    "--deterministic works under the seccomp supervisor only ({} runs with --shim {:?}); add --shim seccomp",
                    p.name,
                    p.shim
                );
            }
        }
    }
    if args.spin_bound != timeshim::DEFAULT_SPIN_BOUND && !args.deterministic {
        bail!(
            "--spin-bound {} needs --deterministic (or --seed): it counts the system calls of \
             programs whose threads the supervisor runs one at a time",
            args.spin_bound
        );
    }
    timeshim::set_spin_bound(args.spin_bound);
    timeshim::set_go_poller_elision(args.elide.go_poller);
    let policy = args.clock.policy(shim)?;
    if args.elide.any() && !matches!(policy.end, timeshim::policy::WindowEnd::Exact { .. }) {
        bail!(
            "--elide {} needs the exact policy (programs under the time shim, --sync exact): \
             it passes over timers only the shim sees",
            args.elide
        );
    }
    if !(args.warm_up >= 0.0 && args.warm_up.is_finite()) {
        bail!(
            "--warm-up must be a non-negative number of seconds, not {}",
            args.warm_up
        );
    }
    // Each program's mode: `--shim auto` resolves per program (a Go
    // controller beside a linked scheduler goes under seccomp).
    let shim_mode = |choice: ShimChoice, index: usize| -> anyhow::Result<Option<ShimMode>> {
        Ok(match choice {
            ShimChoice::Preload => Some(ShimMode::Preloaded(args.shim_lib.clone().ok_or_else(
                || anyhow::anyhow!("--shim preload needs --shim-lib PATH/libtimeshim.so"),
            )?)),
            // Another seed per process: two Go programs given the same
            // AT_RANDOM would share their hash seeds.
            ShimChoice::Seccomp => Some(ShimMode::Seccomp {
                seed: args.scheduler_seed.map(|s| s.wrapping_add(index as u64)),
                deterministic: args.deterministic,
            }),
            ShimChoice::None => None,
            _ => Some(ShimMode::Linked),
        })
    };
    let mut any_seccomp = false;
    for p in processes(&args) {
        any_seccomp |= matches!(shim_mode(p.shim, p.index)?, Some(ShimMode::Seccomp { .. }));
    }
    if args.elide.go_poller && !any_seccomp {
        bail!(
            "--elide go-poller acts in the seccomp supervisor, and no program runs under it \
             (--shim seccomp, the default for binaries without the shim)"
        );
    }
    let kubelet = args.kubelet.model()?;
    let objects = api_objects(&args.translate.crds, args.translate.gang)?;
    args::check_submit_as(&args, &objects)?;
    let lifecycle = args.dynamics.config(&platform, &workloads, &objects)?;
    interrupt.check()?;
    // The run's table of ports: the connections its programs start are
    // counted there; under --deterministic a program's fixed ports are the run's: another
    // run beside it cannot make its bind fail (`timeshim::Ports`), and the
    // API's webhook calls follow a port that had to move.
    let ports = timeshim::Ports::new();
    let Api {
        rt,
        awake,
        clock,
        store,
        mut server,
        kubeconfig,
    } = start_api(
        "127.0.0.1:0".parse()?,
        &out,
        if shim { -args.warm_up } else { 0.0 },
        // Nothing of the API's may happen at a wall-clock instant.
        fakeapi::WatchTimers::Simulated(Default::default()),
        &objects,
        // UIDs and generated names from a stream, the same on every run
        // (programs key their caches by UID), another one per seed.
        Some(args.scheduler_seed.unwrap_or(0)),
        // Under --deterministic the bytes a program reads must not depend
        // on how far a watch's queue had filled when it wrote.
        args.deterministic,
        args.deterministic.then(|| ports.clone()),
        args.translate.compaction(),
    )?;
    // Declared after the API and the controller: dropped (children stopped)
    // before them, on every path.
    // One clock page per process (the scheduler, then each controller),
    // all moved as one clock by the broker.
    let programs = processes(&args);
    // Each controller talks to the API on a port of its own (the scheduler
    // on the first, that of kubeconfig.yaml): what each program asks and
    // is sent is counted apart (`fakeapi::Activity::group_activity`, for
    // the timer elision) and its requests are logged under its name.
    for p in programs.iter().skip(1) {
        rt.block_on(server.add_listener("127.0.0.1:0".parse()?))
            .with_context(|| format!("starting the API's listener for {}", p.name))?;
    }
    // Quiescence looks for handshakes to these ports among IPv4 sockets
    // only (`SockDiag::handshakes`).
    anyhow::ensure!(
        server
            .addrs()
            .iter()
            .all(|a| a.ip().is_loopback() && a.is_ipv4()),
        "the API must listen on 127.0.0.1 only, not {:?}",
        server.addrs()
    );
    let api_ports: Vec<u16> = server.addrs().iter().map(|a| a.port()).collect();
    let mut clocks: Vec<Arc<Controller>> = Vec::new();
    if shim {
        for _ in &programs {
            let c =
                Controller::new(sim_time(-args.warm_up)).context("creating the shim clock page")?;
            c.set_clock_mode(policy.clock);
            children.0.lock().files.push(c.page_path().to_path_buf());
            clocks.push(Arc::new(c));
        }
    }
    let controller = clocks.first().cloned();
    let reaper = Reaper(children.clone());
    // Every program shares the run's table of ports: under --deterministic
    // its fixed ports are the run's, and in every mode the connections it
    // starts are counted there. When every program is supervised, that
    // count tells the handshakes in progress (`SockDiag::handshakes`).
    for c in &clocks {
        c.set_ports(&ports);
    }
    // Every program counts the connections it starts (the supervisor, or
    // the shim it links or preloads): the handshakes in progress are known
    // from the run's own counts (`SockDiag::handshakes`).
    let counting = shim && programs.iter().all(|p| p.shim != ShimChoice::None);
    let linked: Vec<Arc<Controller>> = programs
        .iter()
        .zip(&clocks)
        .filter(|(p, _)| p.shim != ShimChoice::Seccomp)
        .map(|(_, c)| c.clone())
        .collect();
    let diag: Arc<parking_lot::Mutex<Option<crate::broker::sync::SockDiag>>> = Arc::new(
        parking_lot::Mutex::new(crate::broker::sync::SockDiag::open().ok().map(|d| {
            if counting {
                d.counting_run(ports.clone(), linked)
            } else {
                d
            }
        })),
    );
    let side = if shim {
        SchedulerSide::Shim(ShimSide {
            procs: programs
                .iter()
                .zip(&clocks)
                .map(|(p, c)| crate::broker::sync::SimProcess {
                    name: p.name.clone(),
                    controller: c.clone(),
                    is_scheduler: p.index == 0,
                    group: p.index as u32,
                })
                .collect(),
            activity: server.activity(),
            api_ports: api_ports.clone(),
            diag: diag.clone(),
            proven: Default::default(),
        })
    } else {
        SchedulerSide::External
    };
    let mut broker = Broker::new(
        store.clone(),
        rt.handle().clone(),
        clock,
        side,
        BrokerConfig {
            policy,
            strict: args.translate.strict,
            kubelet,
            give_up_after: args.translate.give_up_after,
            terminated_pod_gc_threshold: args.translate.terminated_pod_gc_threshold,
            gang: args.translate.gang,
            progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            activity: Some(server.activity()),
            scheduler_name: scheduler_name(args.scheduler_name.clone(), args.translate.gang),
            default_queue: args.translate.default_queue.clone(),
            no_requests: args.translate.no_requests,
            lifecycle,
            elide: args.elide,
            submit_as: args.submit_as,
            reply_message_time: reply_message_time(&platform),
            completion_message_time: completion_message_time(&platform),
        },
    );
    if let Some(p) = processes::scheduler_program(&args.scheduler) {
        broker.name_scheduler(&p.file_name().unwrap_or_default().to_string_lossy());
    }
    broker
        .mount_secrets(args.mount_secrets.clone())
        .map_err(anyhow::Error::msg)?;
    if args.deterministic {
        let hook = crate::broker::sync::settle_hook(
            server.activity(),
            diag.clone(),
            api_ports.clone(),
            store.clone(),
            broker.processed_changes(),
            awake.clone(),
            clocks.clone(),
        );
        for c in &clocks {
            c.set_settle(hook.clone());
        }
        // Several programs: one thread of all of them at a time, so that
        // which one's request reaches the API first is the seed's choice.
        if clocks.len() > 1 {
            let ensemble = timeshim::Ensemble::new(clocks.len(), args.scheduler_seed.unwrap_or(0));
            for (i, c) in clocks.iter().enumerate() {
                c.join_ensemble(&ensemble, i);
            }
        }
    }
    broker
        .stream_timeline(&out.join("timeline.csv"))
        .with_context(|| format!("writing {}", out.join("timeline.csv").display()))?;
    broker
        .stream_records(&out)
        .with_context(|| format!("writing pods.csv and nodes.csv in {}", out.display()))?;
    broker
        .stream_decisions(&out.join("decisions.jsonl"), args.explain)
        .with_context(|| format!("writing {}", out.join("decisions.jsonl").display()))?;
    let metrics = Arc::new(Mutex::new(String::new()));
    {
        let m = metrics.clone();
        server.set_extra_metrics(move || m.lock().clone());
    }
    let requests = if args.log_requests {
        let names: Vec<String> = programs.iter().map(|p| p.short_name()).collect();
        Some(outputs::RequestLog::start(
            &server,
            &out.join("requests.csv"),
            names,
        )?)
    } else {
        None
    };

    let mut started = Started {
        link: None,
        standin: None,
    };
    // Under --deterministic a program's outcome is a function of the bytes
    // it starts with: the length of its command line and environment moves
    // its memory layout, which Go's garbage collector pacing and its maps
    // keyed by pointers see. So its kubeconfig path must not depend on
    // --out: each program gets a copy at a path of fixed length (removed at
    // the end of the run).
    let fixed_paths = if args.deterministic {
        Some(
            tempfile::Builder::new()
                .prefix("batkube-")
                .rand_bytes(12)
                .tempdir()
                .context("creating a directory for the programs' kubeconfigs")?,
        )
    } else {
        None
    };
    let result = (|| -> anyhow::Result<()> {
        // The scheduler and the controllers, under the shim. Under
        // --deterministic with several programs, none moves before every
        // one has started (see `timeshim::Ensemble`): they start at once,
        // each on its own thread, and each start waits for its program to
        // be past its shell wrapper, which needs the others to be there.
        let mut starts = Vec::new();
        for p in &programs {
            let cmd = program_command(
                p,
                &args,
                &out,
                &kubeconfig,
                server.addrs()[p.index],
                fixed_paths.as_ref(),
            )?;
            starts.push((p, cmd, shim_mode(p.shim, p.index)?));
        }
        let started_children = spawn_programs(starts, &clocks);
        // Every child started is kept (and stopped on every path) before a
        // failure is reported.
        let mut first_error = None;
        for (p, child) in programs.iter().zip(started_children) {
            match child {
                Ok(child) => {
                    let mut ch = children.0.lock();
                    if p.index == 0 {
                        ch.scheduler = Some(child);
                    } else {
                        ch.controllers.push(child);
                    }
                }
                Err(e) => {
                    first_error.get_or_insert_with(|| {
                        anyhow::Error::new(e).context(format!("starting {}: {}", p.name, p.command))
                    });
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        interrupt.check()?;

        start_batsim(&args, &out, platform, workloads, &children, &mut started)?;

        wait_for_scheduler(
            &store,
            &children,
            &interrupt,
            args.clock.window_bound,
            &out,
            &mut || broker.take_early_changes(),
        )?;
        if let Some(e) = batsim_exited(&children, &out) {
            return Err(e.into());
        }
        for (p, c) in programs.iter().zip(&clocks) {
            check_attached(c, &p.name, p.shim, &interrupt)?;
        }
        let link = started.link.as_mut().expect("set above");
        if let Some(path) = &args.record_protocol {
            link.record_to(batsim::transcript::Recorder::create(path)?);
        }
        let watch = || -> anyhow::Result<()> {
            interrupt.check()?;
            match batsim_exited(&children, &out) {
                Some(e) => Err(e.into()),
                None => Ok(()),
            }
        };
        drive(&mut broker, link, &metrics, rt.handle(), watch)
    })();
    drop(started.link.take());
    let standin_result = started.standin.take().map(|h| h.join());
    let (_, _, mut summary) = broker.report();
    summary.flags = flags();
    summary.shim = format!("{shim_choice:?}").to_lowercase();
    summary.supervisor = clocks
        .iter()
        .filter_map(|c| c.supervisor_counts())
        .reduce(|a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
        .map(|(reads, waits, wakes)| {
            [
                ("clock_reads", reads),
                ("timed_waits", waits),
                ("futex_wakes", wakes),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        });
    summary.quiescence_looks = (!clocks.is_empty()).then(|| {
        let l = clocks
            .iter()
            .map(|c| c.look_counts())
            .fold(timeshim::Looks::default(), |a, b| timeshim::Looks {
                probes: a.probes + b.probes,
                thread_reads: a.thread_reads + b.thread_reads,
                activity_wake_ups: a.activity_wake_ups + b.activity_wake_ups,
            });
        [
            ("probes", l.probes),
            ("thread_reads", l.thread_reads),
            ("activity_wake_ups", l.activity_wake_ups),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    });
    summary.program_cpu_seconds = programs
        .iter()
        .zip(&clocks)
        .filter_map(|(p, c)| Some((p.short_name(), c.cpu_time_ns()? as f64 / 1e9)))
        .collect();
    summary.batkube_cpu_seconds = own_cpu_seconds();
    let ending = ending_of(
        result,
        &standin_result,
        &summary,
        &children,
        &out,
        &interrupt,
    );
    if let Some((reason, message)) = &ending {
        summary.completed = false;
        summary.end_reason = *reason;
        summary.error = Some(message.clone());
    }
    if summary.completed {
        wait_for_batsim_exit(&children, &out);
    }
    // The scheduler goes first: its open connections would otherwise hold
    // the API's graceful shutdown for its full 5 s.
    drop(reaper);
    let requests_written = requests.map_or(Ok(()), |r| r.finish());
    let written = requests_written
        .and_then(|()| write_outputs(&out, &mut broker, &summary, true))
        .and_then(|()| {
            broker
                .write_timeline(&out.join("timeline.csv"))
                .with_context(|| format!("writing {}", out.join("timeline.csv").display()))
        });
    rt.block_on(server.shutdown());
    drop(broker);
    drop(controller);
    drop(clocks);
    // The API's objects (every pod of the run, up to the pod GC's
    // threshold) are not freed one by one: `batkube run` ends with the
    // run, and the kernel takes the memory back at once (freeing them
    // took 1.5 % of a 10,000-job run's CPU).
    std::mem::forget(store);
    written?;
    if args.write_report {
        batkube_report::after_run(&out);
    }
    match ending {
        None => Ok(summary),
        Some((_, message)) => Err(Incomplete {
            summary,
            message: format!("{message} (outputs in {})", out.display()),
        }
        .into()),
    }
}

/// Why a run did not complete, if it did not (or completed with an
/// overcommit): its first error (an exited program's with its status and
/// the end of its log), the stand-in's failure, a Batsim that ended the
/// exchange early, a signal.
/// The time one message of the broker's reply takes to reach Batsim's
/// server: one byte over the master host's route to itself (see the
/// stand-in's module doc). 0 when the platform names no master (the run
/// fails later, with Batsim's own message).
fn reply_message_time(platform: &Platform) -> f64 {
    match platform.machines(None) {
        Ok(m) => platform.message_time(&m.master.name, &m.master.name, 1.0),
        Err(_) => 0.0,
    }
}

/// The longest a job executor's message takes to reach Batsim's server:
/// one byte over the slowest compute host's route to the master. 0 when
/// the platform names no master.
fn completion_message_time(platform: &Platform) -> f64 {
    match platform.machines(None) {
        Ok(m) => m
            .compute
            .iter()
            .map(|h| platform.message_time(&h.name, &m.master.name, 1.0))
            .fold(0.0, f64::max),
        Err(_) => 0.0,
    }
}

fn ending_of(
    result: anyhow::Result<()>,
    standin_result: &Option<std::thread::Result<anyhow::Result<batsim::standin::RunSummary>>>,
    summary: &record::Summary,
    children: &Shared,
    out: &Path,
    interrupt: &Interrupt,
) -> Option<(EndReason, String)> {
    // (an exit before the start already quotes the program's log)
    let quoted = result.as_ref().err().is_some_and(|e| {
        e.downcast_ref::<ExitedEarly>().is_some()
            || e.downcast_ref::<ControllerExitedEarly>().is_some()
    });
    let mut ending = result.err().map(|e| (end_reason(&e), error_text(&e)));
    if let Some((EndReason::SchedulerExited | EndReason::ControllerExited, message)) = &mut ending {
        if !quoted {
            message.push_str(&exit_details(children, out));
        }
    }
    match standin_result {
        Some(Ok(Err(e))) if ending.is_none() => {
            ending = Some((
                EndReason::BatsimFailed,
                format!("Batsim stand-in: {}", error_text(e)),
            ))
        }
        Some(Err(_)) if ending.is_none() => {
            ending = Some((
                EndReason::BatsimFailed,
                "the Batsim stand-in panicked".into(),
            ))
        }
        _ => {}
    }
    if ending.is_none() && !summary.completed {
        ending = Some((
            EndReason::BatsimFailed,
            "Batsim ended the exchange before SIMULATION_ENDS".into(),
        ));
    }
    // A signal is why the run ended, whatever it broke on its way (the
    // scheduler it stopped, first of all).
    if let Some(r) = interrupt.reason() {
        if !summary.completed {
            ending = Some((
                r,
                format!("{} at simulated time {:.6}", Stopped(r), summary.end_time),
            ));
        }
    }
    if ending.is_none() && summary.overcommit_count > 0 {
        ending = Some((
            EndReason::Overcommit,
            format!(
                "{} overcommit(s): a node ran pods whose requests exceed its allocatable (see \
                 nodes.csv in {})",
                summary.overcommit_count,
                out.display()
            ),
        ));
    }
    ending
}

/// Which way an error ended the run.
fn end_reason(e: &anyhow::Error) -> EndReason {
    if let Some(s) = e.downcast_ref::<Stopped>() {
        s.0
    } else if let Some(c) = e.downcast_ref::<Classified>() {
        c.reason
    } else if e.downcast_ref::<BatsimExited>().is_some() {
        EndReason::BatsimFailed
    } else if e.downcast_ref::<NeverWatched>().is_some() {
        EndReason::WindowBound
    } else if e.downcast_ref::<ExitedEarly>().is_some() {
        EndReason::SchedulerExited
    } else if e.downcast_ref::<ControllerExitedEarly>().is_some() {
        EndReason::ControllerExited
    } else if e.downcast_ref::<batsim::link::LinkError>().is_some() {
        EndReason::BatsimFailed
    } else {
        EndReason::Error
    }
}

/// Answers Batsim until SIMULATION_ENDS or the peer is gone. `watch` is
/// called after every message and every 100 ms while Batsim is silent: an
/// error from it (a signal, Batsim's process gone) ends the run.
fn drive(
    broker: &mut Broker,
    link: &mut BatsimLink,
    metrics: &Mutex<String>,
    rt: &tokio::runtime::Handle,
    watch: impl Fn() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    loop {
        let msg = loop {
            let next = rt.block_on(async {
                tokio::time::timeout(Duration::from_millis(100), link.recv()).await
            });
            match next {
                Ok(m) => break m,
                Err(_) => watch()?,
            }
        };
        let Some(msg) = msg else { return Ok(()) };
        let reply = broker.handle(msg?)?;
        link.reply(reply)?;
        *metrics.lock() = broker.metrics_text();
        if broker.ended() {
            return Ok(());
        }
        watch()?;
    }
}

/// `batkube serve`: the API and the broker; Batsim and the scheduler are
/// the user's. SIGINT and SIGTERM end it with every output written.
pub fn serve(args: ServeArgs) -> anyhow::Result<record::Summary> {
    let interrupt = Interrupt::install(Shared::default());
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating the output directory {}", args.out.display()))?;
    let policy = args.clock.policy(false)?;
    let kubelet = args.kubelet.model()?;
    let objects = api_objects(&args.translate.crds, args.translate.gang)?;
    let Api {
        rt,
        awake: _,
        clock,
        store,
        server,
        kubeconfig,
    } = start_api(
        args.api,
        &args.out,
        0.0,
        fakeapi::WatchTimers::Wall,
        &objects,
        // A live API server: random UIDs, as a real one.
        None,
        false,
        None,
        args.translate.compaction(),
    )?;
    let mut link = BatsimLink::bind(&args.socket)?;
    if let Some(path) = &args.record_protocol {
        link.record_to(batsim::transcript::Recorder::create(path)?);
    }
    eprintln!(
        "batkube serve: API on http://{} (kubeconfig {}), waiting for Batsim on {}",
        server.addr(),
        kubeconfig.display(),
        args.socket
    );
    let mut broker = Broker::new(
        store,
        rt.handle().clone(),
        clock,
        SchedulerSide::External,
        BrokerConfig {
            policy,
            strict: args.translate.strict,
            kubelet,
            give_up_after: args.translate.give_up_after,
            terminated_pod_gc_threshold: args.translate.terminated_pod_gc_threshold,
            gang: args.translate.gang,
            progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            activity: None,
            scheduler_name: scheduler_name(None, args.translate.gang),
            default_queue: args.translate.default_queue.clone(),
            no_requests: args.translate.no_requests,
            lifecycle: Default::default(),
            elide: Default::default(),
            submit_as: Default::default(),
            reply_message_time: 0.0,
            completion_message_time: 0.0,
        },
    );
    broker
        .stream_timeline(&args.out.join("timeline.csv"))
        .with_context(|| format!("writing {}", args.out.join("timeline.csv").display()))?;
    broker
        .stream_records(&args.out)
        .with_context(|| format!("writing pods.csv and nodes.csv in {}", args.out.display()))?;
    broker
        .stream_decisions(&args.out.join("decisions.jsonl"), args.explain)
        .with_context(|| format!("writing {}", args.out.join("decisions.jsonl").display()))?;
    let metrics = Arc::new(Mutex::new(String::new()));
    {
        let m = metrics.clone();
        server.set_extra_metrics(move || m.lock().clone());
    }
    let result = drive(&mut broker, &mut link, &metrics, rt.handle(), || {
        interrupt.check()
    });
    drop(link);
    let (_, _, mut summary) = broker.report();
    summary.flags = flags();
    let mut ending = result.err().map(|e| (end_reason(&e), error_text(&e)));
    if ending.is_none() && !summary.completed {
        ending = Some((
            EndReason::BatsimFailed,
            "Batsim ended the exchange before SIMULATION_ENDS".into(),
        ));
    }
    if let Some((reason, message)) = &ending {
        summary.completed = false;
        summary.end_reason = *reason;
        summary.error = Some(message.clone());
    }
    let written = write_outputs(&args.out, &mut broker, &summary, false).and_then(|()| {
        broker
            .write_timeline(&args.out.join("timeline.csv"))
            .with_context(|| format!("writing {}", args.out.join("timeline.csv").display()))
    });
    rt.block_on(server.shutdown());
    written?;
    if args.write_report {
        batkube_report::after_run(&args.out);
    }
    match ending {
        None => Ok(summary),
        Some((_, message)) => Err(Incomplete {
            summary,
            message: format!("{message} (outputs in {})", args.out.display()),
        }
        .into()),
    }
}

/// User and system CPU time this process has used so far (every thread).
fn own_cpu_seconds() -> Option<f64> {
    // SAFETY: getrusage fills the struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(u.ru_utime) + secs(u.ru_stime))
}
