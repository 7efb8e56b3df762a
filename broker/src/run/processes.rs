//! Process supervision: the programs a run starts (the scheduler and the
//! `--controller` programs, each in its own process group, under the
//! shim; real Batsim as a child), their command lines and environment,
//! and how their exits before or during the run are noticed and told.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use timeshim::{Controller, ShimMode};

use super::args::{resolve_shim, RunArgs, ShimChoice};
use crate::ending::{Interrupt, Shared};
use batsim::link::BatsimLink;
use batsim::platform::Platform;
use batsim::standin::{Options, StandIn};
use batsim::workload::Workload;

/// The program a `--scheduler` command line runs: its first word after
/// leading `VAR=value` assignments (and an `env` prefix), found on PATH.
pub(super) fn scheduler_program(command: &str) -> Option<PathBuf> {
    let words = shell_words(command)?;
    let mut it = words.iter().skip_while(|w| {
        w.as_str() == "exec"
            || w.as_str() == "env"
            || (w.contains('=') && !w.starts_with('=') && !w.starts_with('-'))
    });
    let prog = it.next()?;
    if prog.contains('/') {
        return Some(PathBuf::from(prog));
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(prog))
                .collect::<Vec<_>>()
        })?
        .into_iter()
        .find(|p| p.is_file())
}

/// The length `--deterministic` gives PATH and PWD: the program's memory
/// layout follows its variables' sizes, so the same run from another
/// directory, or from a tool that prepends to PATH (pyenv's shims do),
/// would otherwise start from another layout.
pub(super) const FIXED_VARIABLE_LEN: usize = 2048;

/// PATH padded with a directory that does not exist (searched last, never
/// found) to [`FIXED_VARIABLE_LEN`] bytes; a longer PATH is left as is.
pub(super) fn fixed_length_path(path: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    const PAD: &str = ":/nonexistent-batkube-padding";
    let mut bytes = path.as_bytes().to_vec();
    if bytes.len() + PAD.len() <= FIXED_VARIABLE_LEN {
        bytes.extend_from_slice(PAD.as_bytes());
        bytes.resize(FIXED_VARIABLE_LEN, b'/');
    }
    std::ffi::OsStr::from_bytes(&bytes).to_os_string()
}

/// The working directory as `dir/./././…`, the same directory, at
/// [`FIXED_VARIABLE_LEN`] bytes (the shell keeps a PWD that names the
/// working directory); a longer one is left as is.
pub(super) fn fixed_length_dir(dir: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = dir.as_bytes().to_vec();
    while bytes.len() + 2 <= FIXED_VARIABLE_LEN {
        bytes.extend_from_slice(b"/.");
    }
    std::ffi::OsStr::from_bytes(&bytes).to_os_string()
}

/// `exec CMD` for `sh -c`, so that the shell becomes the scheduler (one
/// process to watch and stop). Leading `VAR=value` words go through `env`:
/// `exec VAR=1 cmd` would ask the shell to exec a program named `VAR=1`.
pub(super) fn exec_line(command: &str) -> String {
    let assigns = shell_words(command)
        .and_then(|w| w.first().cloned())
        .is_some_and(|w| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        });
    if assigns {
        format!("exec env {command}")
    } else {
        format!("exec {command}")
    }
}

/// Minimal POSIX word splitting (quotes and backslashes, no expansion).
pub(super) fn shell_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => cur.push(chars.next()?),
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(chars.next()?);
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// Whether a binary links timeshim: its linked shim reads `TIMESHIM_PAGE`.
/// Read in chunks (the upstream kube-scheduler is 80 MB).
pub(super) fn carries_shim(program: &Path) -> bool {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(program) else {
        return false;
    };
    let finder = memchr::memmem::Finder::new(timeshim::ENV_PAGE.as_bytes());
    let keep = finder.needle().len() - 1;
    let mut buf = vec![0u8; 1 << 20];
    let mut filled = 0;
    loop {
        let n = match file.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        filled += n;
        if finder.find(&buf[..filled]).is_some() {
            return true;
        }
        // The needle may straddle two chunks.
        let tail = filled.saturating_sub(keep);
        buf.copy_within(tail..filled, 0);
        filled -= tail;
    }
}

/// A child is killed when batkube dies, even by SIGKILL (no orphans), and
/// leads its own process group, so that stopping it stops whatever it
/// forked (a wrapper script's children); a Ctrl-C at the terminal reaches
/// batkube only, which then stops the group.
pub(super) fn own_group_dying_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

pub(super) fn find_batsim(args: &RunArgs) -> Option<PathBuf> {
    if args.standin {
        return None;
    }
    if let Some(p) = &args.batsim {
        return Some(p.clone());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("batsim"))
            .find(|p| p.is_file())
    })
}

/// A program of the run on simulated time: the scheduler (index 0) or a
/// `--controller` (index N from 1).
pub(super) struct Program {
    pub(super) index: usize,
    /// `--shim` resolved for this program's command.
    pub(super) shim: ShimChoice,
    /// How messages name it.
    pub(super) name: String,
    pub(super) command: String,
    /// Its output, in --out.
    pub(super) log: String,
}

impl Program {
    /// How requests.csv names it: `scheduler`, `controller-1`, …
    pub(super) fn short_name(&self) -> String {
        match self.index {
            0 => "scheduler".into(),
            n => format!("controller-{n}"),
        }
    }
}

pub(super) fn processes(args: &RunArgs) -> Vec<Program> {
    let mut all = vec![Program {
        index: 0,
        shim: resolve_shim(args.shim, &args.scheduler),
        name: "the scheduler".into(),
        command: args.scheduler.clone(),
        log: "scheduler.log".into(),
    }];
    for (i, c) in args.controllers.iter().enumerate() {
        let n = i + 1;
        all.push(Program {
            index: n,
            shim: resolve_shim(args.shim, c),
            name: format!("controller {n} ({})", short_command(c)),
            command: c.clone(),
            log: format!("controller-{n}.log"),
        });
    }
    all
}

/// A command line as messages quote it: its first 60 characters.
pub(super) fn short_command(c: &str) -> String {
    let c = c.trim();
    match c.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &c[..i]),
        None => c.to_string(),
    }
}

/// For a scheduler or controller that exited during the run: the exit
/// status of the first one found gone, and the end of its log.
///
/// The broker learns of the exit from the program's own process (its
/// threads gone or a zombie), while the child batkube waits on may be the
/// seccomp launcher's reaper, which ends as the program ended a moment
/// later: the status is waited for, up to `EXIT_STATUS_WAIT` (a program
/// that exits under a wrapper which stays has no status to give).
pub(super) fn exit_details(children: &Shared, out: &Path) -> String {
    let start = std::time::Instant::now();
    loop {
        if let Some(d) = exited_child(children, out) {
            return d;
        }
        if start.elapsed() >= EXIT_STATUS_WAIT {
            return String::new();
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// How long `exit_details` waits for the exited program's status.
const EXIT_STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn exited_child(children: &Shared, out: &Path) -> Option<String> {
    let mut guard = children.0.lock();
    let c = &mut *guard;
    let logs = std::iter::once("scheduler.log".to_string())
        .chain((1..=c.controllers.len()).map(|n| format!("controller-{n}.log")));
    let kids = c.scheduler.iter_mut().chain(c.controllers.iter_mut());
    for (child, log) in kids.zip(logs) {
        if let Ok(Some(status)) = child.try_wait() {
            let path = out.join(&log);
            let tail = log_tail(&path, 10);
            return Some(format!(
                " ({status}); the end of {}:\n{}",
                path.display(),
                if tail.is_empty() {
                    "(empty)".into()
                } else {
                    tail
                }
            ));
        }
    }
    None
}

/// Real Batsim's process ended before SIMULATION_ENDS.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct BatsimExited(String);

/// The last `n` lines of a log file (empty if it cannot be read).
pub(super) fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Real Batsim's exit, once it happened: its status is written to
/// `batsim.exit` in the outputs, and the error quotes the end of its
/// stderr (where Batsim and SimGrid say why they abort).
pub(super) fn batsim_exited(children: &Shared, out: &Path) -> Option<BatsimExited> {
    let status = children.0.lock().batsim.as_mut()?.try_wait().ok()??;
    let _ = std::fs::write(out.join("batsim.exit"), format!("{status}\n"));
    let tail = log_tail(&out.join("batsim.err.log"), 15);
    Some(BatsimExited(format!(
        "Batsim exited ({status}) before the simulation ended; the end of its stderr ({}):\n{}",
        out.join("batsim.err.log").display(),
        if tail.is_empty() {
            "(empty)".to_string()
        } else {
            tail
        }
    )))
}

/// After SIMULATION_ENDS real Batsim writes its outputs and exits: give it
/// the time to, then record its exit status in `batsim.exit`.
pub(super) fn wait_for_batsim_exit(children: &Shared, out: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = match children.0.lock().batsim.as_mut() {
            None => return,
            Some(c) => c.try_wait().ok().flatten(),
        };
        if let Some(status) = status {
            let _ = std::fs::write(out.join("batsim.exit"), format!("{status}\n"));
            return;
        }
        if std::time::Instant::now() > deadline {
            let _ = std::fs::write(
                out.join("batsim.exit"),
                "still running 10 s after SIMULATION_ENDS; stopped by batkube\n",
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The scheduler did not watch the API within the window bound.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct NeverWatched(String);

/// The scheduler process ended before it watched the API.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct ExitedEarly(String);

/// A `--controller` ended before the simulation started.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct ControllerExitedEarly(String);

/// Waits until the scheduler watches the API (it has started and listed),
/// or says why it did not.
pub(super) fn wait_for_scheduler(
    store: &fakeapi::Store,
    children: &Shared,
    interrupt: &Interrupt,
    bound: Duration,
    out: &Path,
    take_changes: &mut dyn FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let start = std::time::Instant::now();
    loop {
        take_changes()?;
        if store.watcher_count() > 0 {
            return Ok(());
        }
        interrupt.check()?;
        if let Some(e) = batsim_exited(children, out) {
            return Err(e.into());
        }
        if let Some(c) = children.0.lock().scheduler.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(ExitedEarly(format!(
                    "the scheduler exited ({status}) before watching the API; the end of its \
                     log:\n{}",
                    log_tail(&out.join("scheduler.log"), 15)
                ))
                .into());
            }
        }
        for (i, c) in children.0.lock().controllers.iter_mut().enumerate() {
            if let Ok(Some(status)) = c.try_wait() {
                let log = out.join(format!("controller-{}.log", i + 1));
                return Err(ControllerExitedEarly(format!(
                    "controller {} exited ({status}) before the simulation started; the end of \
                     its log ({}):\n{}",
                    i + 1,
                    log.display(),
                    log_tail(&log, 15)
                ))
                .into());
            }
        }
        if start.elapsed() > bound {
            return Err(NeverWatched(format!(
                "the scheduler did not watch the API within --window-bound {:?}; see {}",
                bound,
                out.join("scheduler.log").display()
            ))
            .into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A scheduler that watches the API but never read the clock through the
/// linked or preloaded shim runs on real time: say so at once, with what to
/// do, rather than letting the simulation crawl on wall-clock timeouts.
pub(super) fn check_attached(
    c: &Controller,
    name: &str,
    shim: ShimChoice,
    interrupt: &Interrupt,
) -> anyhow::Result<()> {
    if !matches!(shim, ShimChoice::Linked | ShimChoice::Preload) {
        return Ok(());
    }
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if c.attached_pid().is_some() {
            return Ok(());
        }
        interrupt.check()?;
        std::thread::sleep(Duration::from_millis(5));
    }
    let what = match shim {
        ShimChoice::Linked => "its binary does not link timeshim (`timeshim::install()` in main)",
        _ => "the preloaded library did not take (a static or Go binary ignores LD_PRELOAD)",
    };
    bail!(
        "{name} never read the clock through the time shim ({what}), so it would run on real \
         time; run it with --shim seccomp (any binary) or --shim auto"
    )
}

/// A program's command line: `sh -c 'exec …'` with its own kubeconfig (a
/// copy at a path of fixed length under --deterministic, with PATH, PWD
/// and a home of fixed length and nothing else of the environment), its
/// output to its log in --out, in its own process group.
pub(super) fn program_command(
    p: &Program,
    args: &RunArgs,
    out: &Path,
    kubeconfig: &Path,
    api_addr: std::net::SocketAddr,
    fixed_paths: Option<&tempfile::TempDir>,
) -> anyhow::Result<Command> {
    let log_path = out.join(&p.log);
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let own_kubeconfig = if p.index == 0 {
        kubeconfig.to_path_buf()
    } else {
        let path = out.join(format!("kubeconfig-controller-{}.yaml", p.index));
        let text = fakeapi::kubeconfig_yaml(api_addr)
            .replace("user: batkube", &format!("user: controller-{}", p.index))
            .replace(
                "- name: batkube\n  user:",
                &format!("- name: controller-{}\n  user:", p.index),
            );
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        path
    };
    let own_kubeconfig = match &fixed_paths {
        Some(dir) => {
            let path = dir.path().join(format!("kubeconfig-{}.yaml", p.index));
            std::fs::copy(&own_kubeconfig, &path)
                .with_context(|| format!("writing {}", path.display()))?;
            path
        }
        None => own_kubeconfig,
    };
    let mut cmd = Command::new("sh");
    if args.deterministic {
        // The program's memory layout follows the size of every
        // variable of its environment (Go's runtime copies each to
        // its heap), and Go's garbage collector pacing and its maps
        // keyed by pointers see the layout: one more character in
        // OLDPWD after a `cd` could change the outcome. So it
        // starts with PATH and what batkube sets, nothing else; a
        // variable it needs goes in the command (`GOGC=50 prog`).
        cmd.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", fixed_length_path(&path));
        }
        // The shell adds PWD (the working directory) if it is not
        // there: given here at a fixed length too.
        if let Ok(dir) = std::env::current_dir() {
            cmd.env("PWD", fixed_length_dir(dir.as_os_str()));
        }
        // A home and a user name, which many programs look up
        // (controller-runtime's kubeconfig loading fails without
        // them in a binary built without cgo): the run's own
        // directory, of fixed length, and a fixed name.
        if let Some(dir) = &fixed_paths {
            cmd.env("HOME", dir.path())
                .env("USER", "batkube")
                .env("LOGNAME", "batkube");
        }
    }
    if let Some(n) = super::cpus::go_maxprocs() {
        // A Go program on the run's one CPU keeps the GOMAXPROCS of the
        // CPUs it would have had (`cpus::go_maxprocs`).
        cmd.env("GOMAXPROCS", n);
    }
    cmd.arg("-c")
        .arg(exec_line(&p.command))
        .env("KUBECONFIG", &own_kubeconfig)
        // The run's seed, for the command (`--tie-break-seed
        // $BATKUBE_SEED`): it reaches the program under
        // --deterministic too, whose environment is cleared.
        .envs(args.scheduler_seed.map(|s| ("BATKUBE_SEED", s.to_string())))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if args.explain && p.index == 0 {
        // Read by batkube-scheduler (its --explain); other
        // schedulers ignore it.
        cmd.env("BATKUBE_EXPLAIN", "1");
    }
    own_group_dying_with_parent(&mut cmd);
    Ok(cmd)
}

/// Starts the programs, each on its clock page when it runs under the
/// shim. Only a seccomp start may run on a thread of its own: its launcher
/// forks from a thread that stays, while a plain spawn forks from the
/// calling thread, and the child's death signal
/// (`own_group_dying_with_parent`) fires when that thread ends.
pub(super) fn spawn_programs(
    starts: Vec<(&Program, Command, Option<ShimMode>)>,
    clocks: &[Arc<Controller>],
) -> Vec<std::io::Result<std::process::Child>> {
    std::thread::scope(|scope| {
        enum Start<'s> {
            Done(std::io::Result<std::process::Child>),
            Running(std::thread::ScopedJoinHandle<'s, std::io::Result<std::process::Child>>),
        }
        let starts: Vec<Start> = starts
            .into_iter()
            .map(|(p, mut cmd, mode)| match (clocks.get(p.index), mode) {
                (Some(c), Some(mode @ ShimMode::Seccomp { .. })) => {
                    tracing::info!(shim = ?p.shim, "starting {}", p.name);
                    Start::Running(scope.spawn(move || c.spawn(cmd, &mode)))
                }
                (Some(c), Some(mode)) => {
                    tracing::info!(shim = ?p.shim, "starting {}", p.name);
                    Start::Done(c.spawn(cmd, &mode))
                }
                _ => Start::Done(cmd.spawn()),
            })
            .collect();
        starts
            .into_iter()
            .map(|s| match s {
                Start::Done(r) => r,
                Start::Running(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("panicked"))),
            })
            .collect()
    })
}

/// What a run started that the teardown must know of.
pub(super) struct Started {
    pub(super) link: Option<BatsimLink>,
    pub(super) standin:
        Option<std::thread::JoinHandle<anyhow::Result<batsim::standin::RunSummary>>>,
}

/// Batsim: real when available (a child writing its outputs in --out),
/// else the stand-in in-process.
pub(super) fn start_batsim(
    args: &RunArgs,
    out: &Path,
    platform: Platform,
    workloads: Vec<Workload>,
    children: &Shared,
    started: &mut Started,
) -> anyhow::Result<()> {
    match find_batsim(args) {
        Some(batsim) => {
            // A free port unless the user fixed the endpoint: runs in
            // parallel must not collide on Batsim's default 28000.
            let requested = args
                .socket
                .clone()
                .unwrap_or_else(|| "tcp://127.0.0.1:*".to_string());
            let link = BatsimLink::bind(&requested)?;
            let endpoint = link.endpoint().unwrap_or(&requested).to_string();
            started.link = Some(link);
            let mut c = Command::new(&batsim);
            c.arg("-p").arg(&args.platform);
            for w in &args.workloads {
                c.arg("-w").arg(w);
            }
            let file = |name: &str| {
                let p = out.join(name);
                std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))
            };
            c.arg("-e")
                .arg(format!("{}/", out.display()))
                .arg("-s")
                .arg(&endpoint)
                .arg("--enable-compute-sharing");
            for e in &args.dynamics.events {
                c.arg("--events").arg(e);
            }
            if dynamic_jobs(args) {
                c.arg("--enable-dynamic-jobs")
                    .arg("--acknowledge-dynamic-jobs");
            }
            c.stdin(Stdio::null())
                .stdout(file("batsim.log")?)
                .stderr(file("batsim.err.log")?);
            own_group_dying_with_parent(&mut c);
            let child = c
                .spawn()
                .with_context(|| format!("starting Batsim: {}", batsim.display()))?;
            children.0.lock().batsim = Some(child);
        }
        None => {
            let (link, mut batsim_side) = BatsimLink::in_process();
            started.link = Some(link);
            let opts = Options {
                compute_sharing: true,
                export_prefix: Some(PathBuf::from(format!("{}/", out.display()))),
                events: args.dynamics.events.clone(),
                dynamic_jobs: dynamic_jobs(args),
                acknowledge_dynamic_jobs: dynamic_jobs(args),
                ..Options::default()
            };
            let sim = StandIn::new(platform, workloads, opts)?;
            started.standin = Some(
                std::thread::Builder::new()
                    .name("batsim-standin".into())
                    .spawn(move || sim.run(&mut batsim_side))?,
            );
        }
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{carries_shim, exec_line};

    #[test]
    fn the_shim_marker_is_found_anywhere_in_a_binary() {
        let dir = tempfile::tempdir().unwrap();
        let needle = timeshim::ENV_PAGE.as_bytes();
        for at in [
            0,
            17,
            (1 << 20) - 3,
            (1 << 20) - needle.len(),
            1 << 20,
            (3 << 20) + 5,
        ] {
            let mut bytes = vec![b'x'; (4 << 20) + 11];
            bytes[at..at + needle.len()].copy_from_slice(needle);
            let p = dir.path().join(format!("b{at}"));
            std::fs::write(&p, &bytes).unwrap();
            assert!(carries_shim(&p), "marker at {at}");
        }
        let p = dir.path().join("none");
        std::fs::write(&p, vec![b'x'; 3 << 20]).unwrap();
        assert!(!carries_shim(&p));
        assert!(!carries_shim(&dir.path().join("missing")));
    }

    #[test]
    fn leading_assignments_go_through_env() {
        assert_eq!(exec_line("sched --x"), "exec sched --x");
        assert_eq!(
            exec_line("RUST_LOG=debug sched"),
            "exec env RUST_LOG=debug sched"
        );
        assert_eq!(exec_line("A=1 B='x y' sched"), "exec env A=1 B='x y' sched");
        assert_eq!(exec_line("./sched --opt=1"), "exec ./sched --opt=1");
        assert_eq!(exec_line("1A=2 sched"), "exec 1A=2 sched");
    }
}

/// Whether Batsim takes dynamic jobs: to register evicted jobs again
/// (`--resubmit-evicted`), or the later attempts of a workload object
/// (`--submit-as` other than `pod`).
fn dynamic_jobs(args: &RunArgs) -> bool {
    args.dynamics.resubmit_evicted || args.submit_as != crate::translate::SubmitAs::Pod
}
