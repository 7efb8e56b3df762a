//! How a `batkube run` ends, whatever ends it.
//!
//! Every ending (done, SIGINT, SIGTERM, a child that died, an invariant that
//! failed, a bound hit) goes through the same teardown in `run.rs`: the
//! outputs are written, the children are stopped and reaped, the files made
//! outside `--out` (the shim's clock page) removed by their owners' `Drop`.
//! This module holds the pieces: the children and their process groups,
//! the signal watcher that turns a signal into an ending rather than an
//! exit, and [`Incomplete`], the error a run that did not complete returns
//! (its summary line is printed before the error, its exit status says
//! why).

use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::broker::record::{EndReason, Summary};

/// The processes a run started, each the leader of its own process group
/// (so that whatever it forks is stopped with it), and the files to remove
/// if batkube must exit before their owners are dropped.
#[derive(Default)]
pub struct Children {
    pub scheduler: Option<Child>,
    /// The programs of `--controller`, in flag order.
    pub controllers: Vec<Child>,
    pub batsim: Option<Child>,
    /// Removed on a forced exit (a second signal) only; otherwise their
    /// owners remove them.
    pub files: Vec<PathBuf>,
}

impl Children {
    fn each(&mut self) -> impl Iterator<Item = &mut Child> {
        self.scheduler
            .iter_mut()
            .chain(self.controllers.iter_mut())
            .chain(self.batsim.iter_mut())
    }

    /// SIGKILL to each child's process group (the child and whatever it
    /// forked); the children are left to be reaped.
    pub fn kill_groups(&mut self) {
        for c in self.each() {
            // Not reaped yet (or reaped by a `try_wait` that saw it end):
            // the group id stays the leader's while any member lives.
            let pgid = c.id() as libc::pid_t;
            // SAFETY: plain system call; a negative pid names a group.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }

    /// Stops every child and its group and reaps the children.
    pub fn stop(&mut self) {
        self.kill_groups();
        for c in self.each() {
            let _ = c.wait();
        }
    }
}

/// Children shared between the run and the signal watcher.
#[derive(Clone, Default)]
pub struct Shared(pub Arc<Mutex<Children>>);

/// Stops the children on drop, whatever happened (an early `?` included).
pub struct Reaper(pub Shared);

impl Drop for Reaper {
    fn drop(&mut self) {
        self.0 .0.lock().stop();
    }
}

/// SIGINT and SIGTERM end the run as any other ending does: the first one
/// stops the children (so that the broker, waiting on the scheduler, sees
/// it go at once) and is remembered as the reason; the run then writes its
/// outputs and exits with 128 + the signal's number. A second signal exits
/// at once.
#[derive(Clone)]
pub struct Interrupt {
    signal: Arc<AtomicI32>,
}

impl Interrupt {
    /// Starts watching for SIGINT and SIGTERM (they no longer kill the
    /// process). Returns once the handlers are in place.
    pub fn install(children: Shared) -> Self {
        let signal = Arc::new(AtomicI32::new(0));
        let seen = signal.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || watch_signals(seen, children, ready_tx));
        if spawned.is_ok() {
            let _ = ready_rx.recv();
        }
        Interrupt { signal }
    }

    /// The ending a signal asked for, if one came.
    pub fn reason(&self) -> Option<EndReason> {
        match self.signal.load(Ordering::Acquire) {
            0 => None,
            libc::SIGINT => Some(EndReason::Sigint),
            _ => Some(EndReason::Sigterm),
        }
    }

    /// An error that ends the run, if a signal came.
    pub fn check(&self) -> anyhow::Result<()> {
        match self.reason() {
            None => Ok(()),
            Some(r) => Err(Stopped(r).into()),
        }
    }
}

/// The run was stopped by a signal.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {}", match .0 { EndReason::Sigint => "SIGINT", _ => "SIGTERM" })]
pub struct Stopped(pub EndReason);

fn watch_signals(seen: Arc<AtomicI32>, children: Shared, ready: std::sync::mpsc::Sender<()>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async move {
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        let _ = ready.send(());
        loop {
            let sig = tokio::select! {
                _ = int.recv() => libc::SIGINT,
                _ = term.recv() => libc::SIGTERM,
            };
            let name = if sig == libc::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            if seen
                .compare_exchange(0, sig, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                eprintln!(
                    "\nbatkube: {name}: stopping the scheduler and Batsim, writing the outputs \
                     (again to exit at once)"
                );
                children.0.lock().kill_groups();
            } else {
                eprintln!("\nbatkube: {name} again: exiting at once");
                let mut c = children.0.lock();
                c.kill_groups();
                for f in &c.files {
                    let _ = std::fs::remove_file(f);
                }
                std::process::exit(128 + sig);
            }
        }
    });
}

/// A run that did not complete: its outputs are written; the summary line
/// is printed before this error, and the exit status follows the reason.
#[derive(Debug)]
pub struct Incomplete {
    pub summary: Summary,
    pub message: String,
}

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Incomplete {}

/// Where batkube prints an error (`batsim`, whose errors are the ones that
/// say their cause in their message, has it for the input tools too).
pub use batsim::error_text;
