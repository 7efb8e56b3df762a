//! `batkube workload …`: tools for Batsim workloads: `validate`, `generate`,
//! `convert swf`, `convert volcano`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::quantity;
use super::workload_check;
use super::workload_gen::{self, Arrival, Dist, GenerateSpec, SwfSpec};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check workloads against Batsim's rules, the broker's and the
    /// stand-in's; every problem with the line of the offending job.
    Validate {
        /// Workload files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Generate a synthetic workload (deterministic for a given seed).
    ///
    /// Distributions: V, const:V, uniform:A:B, exp:MEAN, normal:MEAN:SD,
    /// lognormal:MU:SIGMA, choice:A,B,C.
    Generate {
        /// Number of jobs.
        #[arg(short = 'n', long = "jobs")]
        jobs: usize,
        /// burst (all at 0), interval:SECONDS, poisson:MEAN_SECONDS.
        #[arg(long, default_value = "burst")]
        arrival: Arrival,
        /// Job duration in seconds.
        #[arg(long, default_value = "170")]
        duration: String,
        /// Cpu request in cores or quantities (500m).
        #[arg(long, default_value = "1")]
        cpu: String,
        /// Memory request (4Gi, 512Mi, bytes); none by default.
        #[arg(long)]
        memory: Option<String>,
        /// Walltime of every job in seconds (none by default).
        #[arg(long)]
        walltime: Option<f64>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file (stdout when absent).
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// Convert traces into workloads.
    #[command(subcommand)]
    Convert(Convert),
}

#[derive(Debug, clap::Subcommand)]
pub enum Convert {
    /// A Standard Workload Format trace (Parallel Workloads Archive), the way
    /// the 2020 study made KIT_10h_80.json: one pod per job, cpu =
    /// processors / reference × node cpu (1m floor, capped), duration trimmed.
    ///
    /// KIT_10h_80: --node-cpu 6 --cpu-cap 5.9 --trim 3600.
    Swf {
        trace: PathBuf,
        /// Window start in trace seconds (default: first submission).
        #[arg(long)]
        window_start: Option<f64>,
        /// Window length in seconds (default: to the end of the trace).
        #[arg(long)]
        window_length: Option<f64>,
        /// Search the first window of --window-length with this utilisation
        /// (0..1) of the traced machine, as evalys' period extraction.
        #[arg(long)]
        utilisation: Option<f64>,
        #[arg(long, default_value_t = 0.01)]
        tolerance: f64,
        /// Cap job durations at this many seconds.
        #[arg(long)]
        trim: Option<f64>,
        /// Cpu of the node a job of --procs-reference processors fills.
        #[arg(long, default_value_t = 1.0)]
        node_cpu: f64,
        /// Largest cpu request written (default: --node-cpu).
        #[arg(long)]
        cpu_cap: Option<f64>,
        /// Processors that map to --node-cpu (default: the largest job of
        /// the window, as in 2020).
        #[arg(long)]
        procs_reference: Option<f64>,
        /// Memory request for jobs whose trace line gives none.
        #[arg(long)]
        memory: Option<String>,
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// A Volcano-simulator pods.csv (cpu_request, memory_request, runsec,
    /// createtime, nodeSelector, priority, queueName).
    Volcano {
        pods_csv: PathBuf,
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

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Validate { files } => {
            let mut failed = 0;
            for f in &files {
                let shown = f.display().to_string();
                let text = read(f)?;
                match workload_check::check_counted(&text, &shown) {
                    Ok(c) => {
                        for w in &c.warnings {
                            eprintln!("{shown}:{w}");
                        }
                        println!("{shown}: {} jobs, {} profiles: ok", c.jobs, c.profiles);
                    }
                    Err(findings) => {
                        failed += 1;
                        for e in &findings {
                            eprintln!("{shown}:{e}");
                        }
                    }
                }
            }
            if failed > 0 {
                anyhow::bail!("{failed} of {} workloads are not valid", files.len());
            }
            Ok(())
        }
        Command::Generate {
            jobs,
            arrival,
            duration,
            cpu,
            memory,
            walltime,
            seed,
            output,
        } => {
            let secs = |s: &str| {
                s.parse::<f64>()
                    .map_err(|_| format!("{s:?} is not a number of seconds"))
            };
            let spec = GenerateSpec {
                jobs,
                arrival,
                duration: Dist::parse(&duration, &secs).map_err(anyhow::Error::msg)?,
                cpu: Some(Dist::parse(&cpu, &quantity::parse_cpu).map_err(anyhow::Error::msg)?),
                memory: memory
                    .map(|m| Dist::parse(&m, &quantity::parse_memory))
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
                walltime,
                seed,
            };
            let b = workload_gen::generate(&spec);
            let desc = format!(
                "batkube workload generate -n {jobs} --arrival {:?} --duration {duration} --cpu {cpu} --seed {seed}",
                spec.arrival
            );
            write_out(output.as_deref(), &b.to_json(&desc))
        }
        Command::Convert(Convert::Swf {
            trace,
            window_start,
            window_length,
            utilisation,
            tolerance,
            trim,
            node_cpu,
            cpu_cap,
            procs_reference,
            memory,
            output,
        }) => {
            let t = workload_gen::parse_swf(&read(&trace)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", trace.display()))?;
            let spec = SwfSpec {
                start: window_start,
                length: window_length,
                utilisation,
                tolerance,
                trim,
                node_cpu,
                cpu_cap,
                procs_reference,
                memory: memory
                    .map(|m| quantity::parse_memory(&m))
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
            };
            let (b, sel) = workload_gen::convert_swf(&t, &spec)
                .map_err(|e| anyhow::anyhow!("{}: {e}", trace.display()))?;
            let name = trace
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let desc = format!(
                "converted from {name} by batkube workload convert swf: window start {}, {} jobs, \
                 cpu = procs / {} x {node_cpu} (cap {}), durations trimmed at {}{}",
                sel.start,
                b.len(),
                sel.procs_reference,
                cpu_cap.unwrap_or(node_cpu),
                trim.map_or("none".to_string(), |t| format!("{t} s")),
                sel.utilisation
                    .map_or(String::new(), |u| format!(", utilisation {u:.3}"))
            );
            eprintln!(
                "{}: {} jobs ({} lines skipped, {} durations trimmed), window start {}, procs reference {}{}",
                trace.display(),
                b.len(),
                t.skipped,
                sel.trimmed,
                sel.start,
                sel.procs_reference,
                sel.utilisation.map_or(String::new(), |u| format!(", utilisation {u:.3}"))
            );
            write_out(output.as_deref(), &b.to_json(&desc))
        }
        Command::Convert(Convert::Volcano { pods_csv, output }) => {
            let b = workload_gen::convert_volcano_pods(&read(&pods_csv)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", pods_csv.display()))?;
            let name = pods_csv.display().to_string();
            write_out(
                output.as_deref(),
                &b.to_json(&format!(
                    "converted from {name} by batkube workload convert volcano"
                )),
            )
        }
    }
}
