//! `--cpus`: the CPUs a run's threads and programs run on.
//!
//! A run on exact simulated time is a relay: the broker hands an instant to
//! the API, the API to the scheduler, the scheduler answers the API, the API
//! the broker, the broker Batsim; almost never do two of them have work at
//! once. Spread over CPUs, every hand-off wakes a CPU that went idle, and
//! that wake-up costs more than the work it hands over (on a virtual
//! machine, an idle vCPU is halted and woken by the host). On one CPU a
//! hand-off is a context switch. The 20,000-job case
//! (`experiments/bench_pair.py`) on this project's 2-core machine: 83 to
//! 108 s of wall time and 36 to 53 s of system time spread, 55 to 61 s and
//! 13 to 15 s on one CPU, with the same outputs (nothing in the run depends
//! on where a thread runs: quiescence is decided from the programs' state
//! and the kernel's queues, not from time).
//!
//! `auto` (the default) gives the run one CPU of those it may use,
//! claiming it with a lock file (`$TMPDIR/batkube-cpus/cpu-N.lock`, held
//! until the process ends, whatever ends it) so that runs side by side (a
//! sweep, the test suite) take different CPUs while there are free ones;
//! when every CPU is claimed, the one the run started on. `all` leaves the
//! run where it was started (every CPU its parent allowed); a list (`0`,
//! `2,3`, `0-3`) pins it there. Programs started by the run inherit the
//! choice; under `auto` a Go program keeps the GOMAXPROCS it would have
//! had ([`go_maxprocs`]).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

use anyhow::{bail, Context};

/// What `--cpus` asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cpus {
    Auto,
    All,
    List(Vec<usize>),
}

impl std::str::FromStr for Cpus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => return Ok(Cpus::Auto),
            "all" => return Ok(Cpus::All),
            _ => {}
        }
        let mut cpus = Vec::new();
        for part in s.split(',').map(str::trim) {
            let num = |t: &str| {
                t.parse::<usize>().map_err(|_| {
                    format!("{t:?} is not a CPU number (give auto, all, or a list such as 0,2-3)")
                })
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("the range {part:?} runs backwards"));
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(num(part)?),
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(Cpus::List(cpus))
    }
}

impl std::fmt::Display for Cpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cpus::Auto => f.write_str("auto"),
            Cpus::All => f.write_str("all"),
            Cpus::List(l) => {
                let s: Vec<String> = l.iter().map(usize::to_string).collect();
                f.write_str(&s.join(","))
            }
        }
    }
}

/// The claimed CPU's lock, held for the process's life.
static CLAIM: Mutex<Option<(usize, File)>> = Mutex::new(None);

/// Under `auto`, how many CPUs the run was allowed before it kept one.
static BEFORE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The `GOMAXPROCS` the programs get under `--cpus auto`: the count of CPUs
/// the run was allowed before it kept one, which is what a Go program
/// would have sized itself to. A Go program sizes GOMAXPROCS from its
/// affinity, and on GOMAXPROCS=1 some change how they behave, not only
/// their speed: the coscheduling plugin's kube-scheduler then spun in a
/// window until its bound, on 1 CPU or 2 alike (64,703 windows and 70 s of
/// its CPU for a 10-job case that takes 2,029 windows and 2.5 s with
/// GOMAXPROCS=2 on one CPU). None when the run was not narrowed by `auto`
/// (an explicit list is the user's say). batkube's own GOMAXPROCS, when
/// set, is given as it is (also under `--deterministic`, whose cleared
/// environment would otherwise leave the program at 1); a command's own
/// `GOMAXPROCS=N prog` wins in either case.
pub fn go_maxprocs() -> Option<String> {
    match BEFORE.load(std::sync::atomic::Ordering::Relaxed) {
        0 | 1 => None,
        n => Some(std::env::var("GOMAXPROCS").unwrap_or_else(|_| n.to_string())),
    }
}

/// How many CPUs this process may run on now (after [`apply`]: the run's).
pub fn usable() -> usize {
    allowed().map_or(1, |a| a.len().max(1))
}

/// The CPUs this process may run on.
fn allowed() -> anyhow::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size is the set's own.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("reading the CPUs this run may use");
    }
    // SAFETY: reads bits of an initialised set within its size.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins every thread of this process (and so what it starts later) to `cpus`.
fn pin(cpus: &[usize]) -> anyhow::Result<()> {
    // SAFETY: as in `allowed`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c < CPU_SETSIZE, checked by the callers against `allowed`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // Threads already started (a signal watcher) move too.
    let tids: Vec<libc::pid_t> = match std::fs::read_dir("/proc/self/task") {
        Ok(d) => d
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => vec![0],
    };
    for tid in tids {
        // SAFETY: the set is initialised and sized as the call expects.
        let rc =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        let err = std::io::Error::last_os_error();
        // A thread that ended meanwhile is no matter.
        if rc != 0 && err.raw_os_error() != Some(libc::ESRCH) {
            return Err(err).with_context(|| format!("pinning the run to CPUs {cpus:?}"));
        }
    }
    Ok(())
}

/// Tries to claim `cpu` for this process: its lock file, locked.
fn claim(dir: &std::path::Path, cpu: usize) -> Option<File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("cpu-{cpu}.lock")))
        .ok()?;
    // SAFETY: flock on an open descriptor; the lock lives as long as the file.
    (unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0).then_some(f)
}

/// Applies `--cpus`; returns the CPUs the run is on (None: left as it was).
pub fn apply(choice: &Cpus) -> anyhow::Result<Option<Vec<usize>>> {
    let allowed = allowed()?;
    match choice {
        Cpus::All => Ok(None),
        Cpus::List(list) => {
            if let Some(c) = list.iter().find(|c| !allowed.contains(c)) {
                bail!(
                    "--cpus {choice}: CPU {c} is not one this run may use (it may use {allowed:?})"
                );
            }
            pin(list)?;
            Ok(Some(list.clone()))
        }
        Cpus::Auto => {
            let mut held = CLAIM.lock().unwrap_or_else(|e| e.into_inner());
            // A second run in this process (--compare-exact) keeps its CPU.
            if let Some((cpu, _)) = held.as_ref().filter(|(c, _)| allowed.contains(c)) {
                let cpu = *cpu;
                pin(&[cpu])?;
                return Ok(Some(vec![cpu]));
            }
            if allowed.len() <= 1 {
                return Ok(None);
            }
            // SAFETY: no arguments; -1 on error.
            let here = usize::try_from(unsafe { libc::sched_getcpu() }).ok();
            let here = here.filter(|c| allowed.contains(c)).unwrap_or(allowed[0]);
            // Starting from the CPU the run is on, the first free one.
            let start = allowed.iter().position(|&c| c == here).unwrap_or(0);
            let order = allowed[start..].iter().chain(&allowed[..start]).copied();
            let dir = std::env::temp_dir().join("batkube-cpus");
            let _ = std::fs::create_dir_all(&dir);
            let mut cpu = here;
            for c in order {
                if let Some(f) = claim(&dir, c) {
                    cpu = c;
                    *held = Some((c, f));
                    break;
                }
            }
            pin(&[cpu])?;
            BEFORE.store(allowed.len(), std::sync::atomic::Ordering::Relaxed);
            Ok(Some(vec![cpu]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_words_parse() {
        assert_eq!("auto".parse::<Cpus>(), Ok(Cpus::Auto));
        assert_eq!("all".parse::<Cpus>(), Ok(Cpus::All));
        assert_eq!("3,0-1, 1".parse::<Cpus>(), Ok(Cpus::List(vec![0, 1, 3])));
        assert!("2-1".parse::<Cpus>().unwrap_err().contains("backwards"));
        assert!("one"
            .parse::<Cpus>()
            .unwrap_err()
            .contains("not a CPU number"));
        assert_eq!(Cpus::List(vec![0, 2]).to_string(), "0,2");
    }

    #[test]
    fn a_cpu_outside_the_allowed_set_is_refused_by_name() {
        let err = apply(&Cpus::List(vec![libc::CPU_SETSIZE as usize - 1])).unwrap_err();
        assert!(err.to_string().contains("--cpus"), "{err}");
        assert!(
            err.to_string().contains("is not one this run may use"),
            "{err}"
        );
    }

    #[test]
    fn a_claimed_cpu_is_not_claimed_twice() {
        let dir = tempfile::tempdir().unwrap();
        let first = claim(dir.path(), 0).expect("a free CPU is claimed");
        assert!(claim(dir.path(), 0).is_none(), "a claimed CPU is refused");
        assert!(claim(dir.path(), 1).is_some(), "another CPU is free");
        drop(first);
        assert!(
            claim(dir.path(), 0).is_some(),
            "the claim ends with its file"
        );
    }
}
