//! `batkube workload …`: tools for Batsim workloads.

use std::path::PathBuf;

use crate::standin::workload::Workload;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check workloads against Batsim's rules and the stand-in's.
    Validate {
        /// Workload files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Validate { files } => {
            for (i, f) in files.iter().enumerate() {
                let w = Workload::from_file(f, &format!("w{i}"))?;
                println!(
                    "{}: {} jobs, {} profiles: ok",
                    f.display(),
                    w.jobs.len(),
                    w.profiles.len()
                );
            }
            Ok(())
        }
    }
}
