//! `timeshim`: command-line tools around the time shim.
//!
//! `timeshim patch <crate dir> [--path DIR | --version REQ]` makes a Rust
//! scheduler run on simulated time under a controller (see the crate docs).

use anyhow::{bail, Context};
use std::path::PathBuf;
use timeshim::patch::{patch, Dependency};

const USAGE: &str = "usage: timeshim patch <crate dir> [--path <timeshim dir> | --version <req>]

Adds the timeshim dependency to <crate dir>/Cargo.toml (default: a path
dependency on this timeshim) and `timeshim::install();` as the first line of
fn main of every binary target. Running it again changes nothing.";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("patch") => {}
        Some("-h") | Some("--help") | Some("help") => {
            println!("{USAGE}");
            return Ok(());
        }
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    }
    let mut dir: Option<PathBuf> = None;
    let mut dep = Dependency::default();
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--path" => {
                dep = Dependency::Path(it.next().context("--path needs a directory")?.into())
            }
            "--version" => {
                dep =
                    Dependency::Version(it.next().context("--version needs a requirement")?.clone())
            }
            s if s.starts_with('-') => bail!("unknown option {s}\n\n{USAGE}"),
            s if dir.is_none() => dir = Some(s.into()),
            s => bail!("unexpected argument {s}\n\n{USAGE}"),
        }
    }
    let Some(dir) = dir else {
        bail!("missing <crate dir>\n\n{USAGE}")
    };
    let report = patch(&dir, &dep).with_context(|| format!("cannot patch {}", dir.display()))?;
    for line in &report.already {
        println!("unchanged: {line}");
    }
    for line in &report.changes {
        println!("changed: {line}");
    }
    if report.changes.is_empty() {
        println!("{} is already patched", dir.display());
    }
    Ok(())
}
