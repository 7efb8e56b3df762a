//! `batkube platform …`: tools for SimGrid platforms.

use std::path::PathBuf;

use crate::standin::platform::Platform;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check platforms as the stand-in (and Batsim) read them.
    Validate {
        /// Platform files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Master host name, as Batsim's -m.
        #[arg(short = 'm', long = "master-host")]
        master: Option<String>,
    },
}

pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Validate { files, master } => {
            for f in &files {
                let p = Platform::from_file(f)?;
                let m = p
                    .machines(master.as_deref())
                    .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
                println!(
                    "{}: {} compute hosts, master {:?}: ok",
                    f.display(),
                    m.compute.len(),
                    m.master.name
                );
            }
            Ok(())
        }
    }
}
