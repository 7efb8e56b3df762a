//! `timeshim`: command-line tools around the time shim.
//!
//! `timeshim patch <crate dir>` makes a Rust scheduler run on simulated
//! time under a controller (see the timeshim crate's docs). A package of its
//! own: its dependencies (clap, toml_edit, anyhow) never reach the
//! scheduler, which links only the small `timeshim` library.

mod patch;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use patch::{patch, Dependency, LockUpdate};

#[derive(Parser)]
#[command(name = "timeshim", version, about = "Tools around the time shim")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Put a Rust scheduler on the time shim: adds the `timeshim`
    /// dependency to <CRATE_DIR>/Cargo.toml and `timeshim::install();` as
    /// the first line of `fn main` of every binary target. With a
    /// Cargo.lock, adds the packages timeshim needs to it, and nothing else
    /// (`cargo update --workspace`: locked versions stay, the lock-file
    /// version stays). Running it again changes nothing.
    Patch {
        /// The scheduler's crate directory (the one with its Cargo.toml).
        crate_dir: PathBuf,
        /// A path dependency on this timeshim directory (default: the
        /// timeshim this tool was built from).
        #[arg(long, value_name = "DIR", conflicts_with = "version")]
        path: Option<PathBuf>,
        /// A registry dependency with this version requirement.
        #[arg(long, value_name = "REQ")]
        version: Option<String>,
        /// Leave Cargo.lock alone (cargo updates it at the next build).
        #[arg(long)]
        no_lock: bool,
        /// Resolve the lock from the local registry cache only.
        #[arg(long)]
        offline: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let Cmd::Patch {
        crate_dir,
        path,
        version,
        no_lock,
        offline,
    } = Cli::parse().command;
    let dep = match (path, version) {
        (Some(p), _) => Dependency::Path(p),
        (None, Some(v)) => Dependency::Version(v),
        (None, None) => Dependency::default(),
    };
    let lock = match (no_lock, offline) {
        (true, _) => LockUpdate::No,
        (false, true) => LockUpdate::Offline,
        (false, false) => LockUpdate::Yes,
    };
    let report = patch(&crate_dir, &dep, lock)
        .with_context(|| format!("cannot patch {}", crate_dir.display()))?;
    for line in &report.already {
        println!("unchanged: {line}");
    }
    for line in &report.changes {
        println!("changed: {line}");
    }
    if report.changes.is_empty() {
        println!("{} is already patched", crate_dir.display());
    }
    Ok(())
}
