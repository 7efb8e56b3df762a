//! `batkube platform …`: tools for SimGrid platforms: `validate`, `gen`,
//! `convert volcano`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::platform_gen::{self, GenSpec, Network};
use super::quantity;
use super::workload_gen::Dist;
use batsim::platform::Platform;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check platforms as the stand-in reads them, plus what SimGrid 3.32,
    /// Batsim 4.2 and the broker require (no smpi config keys, one master,
    /// cpu/memory props, a route from every compute host to the master).
    Validate {
        /// Platform files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Master host name, as Batsim's -m.
        #[arg(short = 'm', long = "master-host")]
        master: Option<String>,
    },
    /// Generate a platform: n compute hosts and a master with routes.
    ///
    /// Heterogeneity: --cpu and --memory take distributions (V, uniform:A:B,
    /// choice:A,B,…); --label KEY=V1,V2 assigns values round-robin.
    Gen {
        /// Number of compute hosts.
        #[arg(short = 'n', long = "hosts")]
        hosts: usize,
        #[arg(long, default_value = "1")]
        cpu: String,
        #[arg(long, default_value = "4Gi")]
        memory: String,
        /// Pod capacity per node (the broker's default is 110).
        #[arg(long)]
        pods: Option<u32>,
        /// KEY=VALUE[,VALUE…] (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        #[arg(long, default_value = "node-")]
        prefix: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// Convert cluster descriptions into platforms.
    #[command(subcommand)]
    Convert(Convert),
}

#[derive(Debug, clap::Subcommand)]
pub enum Convert {
    /// A Volcano-simulator nodes.csv (cpu_allocatable, memory_allocatable,
    /// label, maxPodNum; optionally name).
    Volcano {
        nodes_csv: PathBuf,
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
}

fn write_out(output: Option<&Path>, text: &str) -> anyhow::Result<()> {
    match output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// Validates one platform file; `Ok` carries warnings.
pub fn validate_file(
    f: &Path,
    master: Option<&str>,
) -> anyhow::Result<(usize, String, Vec<String>)> {
    let p = Platform::from_file(f)?;
    let m = p
        .machines(master)
        .map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
    let text = std::fs::read_to_string(f)?;
    let names: Vec<String> = m.compute.iter().map(|h| h.name.clone()).collect();
    let lints = platform_gen::lint(&text, &names, &m.master.name);
    let errors: Vec<&str> = lints
        .iter()
        .filter(|l| l.error)
        .map(|l| l.message.as_str())
        .collect();
    if !errors.is_empty() {
        anyhow::bail!("{}:\n  {}", f.display(), errors.join("\n  "));
    }
    let warnings = lints.into_iter().map(|l| l.message).collect();
    Ok((m.compute.len(), m.master.name, warnings))
}

pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Validate { files, master } => {
            let mut failed = 0;
            for f in &files {
                match validate_file(f, master.as_deref()) {
                    Ok((n, m, warnings)) => {
                        for w in warnings {
                            eprintln!("{}: warning: {w}", f.display());
                        }
                        println!("{}: {n} compute hosts, master {m:?}: ok", f.display());
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("{}", batsim::error_text(&e));
                    }
                }
            }
            if failed > 0 {
                anyhow::bail!("{failed} of {} platforms are not valid", files.len());
            }
            Ok(())
        }
        Command::Gen {
            hosts,
            cpu,
            memory,
            pods,
            labels,
            prefix,
            seed,
            output,
        } => {
            let labels_text = labels.join(" ");
            let labels = labels
                .iter()
                .map(|l| {
                    let (k, v) = l.split_once('=').ok_or_else(|| {
                        anyhow::anyhow!("--label {l:?}: expected KEY=VALUE[,VALUE…]")
                    })?;
                    Ok((k.to_string(), v.split(',').map(str::to_string).collect()))
                })
                .collect::<anyhow::Result<Vec<(String, Vec<String>)>>>()?;
            let spec = GenSpec {
                hosts,
                prefix,
                cpu: Dist::parse(&cpu, &quantity::parse_cpu).map_err(anyhow::Error::msg)?,
                memory: Dist::parse(&memory, &quantity::parse_memory)
                    .map_err(anyhow::Error::msg)?,
                pods,
                labels,
                seed,
            };
            if hosts == 0 {
                anyhow::bail!("a platform needs at least one compute host (-n)");
            }
            let h = platform_gen::generate_hosts(&spec);
            let desc = format!(
                "made by batkube platform gen: {hosts} hosts, cpu {cpu}, memory {memory}, labels [{}], \
                 seed {seed}",
                labels_text
            );
            write_out(
                output.as_deref(),
                &platform_gen::platform_xml(&desc, &h, &Network::default()),
            )
        }
        Command::Convert(Convert::Volcano { nodes_csv, output }) => {
            let text = std::fs::read_to_string(&nodes_csv)
                .with_context(|| format!("cannot read {}", nodes_csv.display()))?;
            let h = platform_gen::hosts_from_volcano(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", nodes_csv.display()))?;
            let desc = format!(
                "converted from {} by batkube platform convert volcano",
                nodes_csv.display()
            );
            write_out(
                output.as_deref(),
                &platform_gen::platform_xml(&desc, &h, &Network::default()),
            )
        }
    }
}
