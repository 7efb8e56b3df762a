//! `batkube-scheduler`: command line, kubeconfig, logging; the scheduler
//! itself is the library. Patched with the batkube time shim (first line of
//! `main`), a no-op outside a simulation.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use batkube_scheduler::explain::ExplainConfig;
use batkube_scheduler::metrics::{self, Metrics};
use batkube_scheduler::runner::{self, RunOptions};
use batkube_scheduler::{Scheduler, SchedulerConfig, TieBreak};
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Requests the API client sends at once, as many as the connections
/// client-go keeps idle per host.
const MAX_REQUESTS: usize = 25;

/// mimalloc, as batkube's: decoding a watch's pods allocates and frees many
/// small objects, which glibc's malloc serves at twice the cost.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A Kubernetes scheduler with the upstream default profile's semantics.
#[derive(Debug, Parser)]
#[command(name = "batkube-scheduler", version)]
struct Args {
    /// KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Kubeconfig file. Default: the config file's clientConnection.kubeconfig,
    /// then KUBECONFIG, ~/.kube/config, or the in-cluster service account.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:10259).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<SocketAddr>,
    /// Break score ties by seeded reservoir sampling (as upstream, but
    /// reproducible) instead of by node name.
    #[arg(long, value_name = "SEED")]
    tie_break_seed: Option<u64>,
    /// Leader election with a Lease (not implemented: only one replica may run).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    leader_elect: bool,
    /// Accepted for compatibility with upstream's flags; JSON is always used.
    #[arg(long, value_name = "TYPE")]
    kube_api_content_type: Option<String>,
    /// Write on each pod why it went where it went, after every attempt:
    /// each filter's verdict per node, each score, the choice, in the
    /// kube-scheduler-simulator's annotations (see the README). Also
    /// BATKUBE_EXPLAIN=1 (as `batkube run --explain` sets it).
    #[arg(long, env = "BATKUBE_EXPLAIN", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    explain: bool,
    /// With --explain: also write the simulator's result-history annotation
    /// (every attempt's results), cut oldest attempts first to this many
    /// bytes (the simulator's bound: 262144); 0, the default: not written.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    explain_history_bytes: usize,
    /// More logs: -v info, -vv debug, -vvv trace (RUST_LOG overrides).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> ExitCode {
    timeshim::install();
    let args = Args::parse();
    let level = match args.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("batkube_scheduler={level},kube=warn"))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("batkube-scheduler: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("batkube-scheduler: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the configuration {}", path.display()))?;
            SchedulerConfig::from_yaml(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => SchedulerConfig::default(),
    };
    if args.leader_elect || config.leader_elect {
        anyhow::bail!(
            "leader election is not implemented; run a single replica with --leader-elect=false \
             (or leaderElection.leaderElect: false in the configuration)"
        );
    }
    let kubeconfig = args
        .kubeconfig
        .clone()
        .or_else(|| config.kubeconfig.clone().map(PathBuf::from));
    let client_config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(&path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("invalid kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a cluster")?,
    };
    // At most MAX_REQUESTS requests at once (a watch's counts until its
    // answer starts). kube's HTTP/1.1 pool keeps every connection it opened
    // (client-go keeps at most 25 idle per host), so a cycle that patched
    // 600 unschedulable pods at once left 600 connections open for the rest
    // of the run; under batkube every one of them is looked at again
    // whenever the scheduler has run, to tell whether a byte is on its way.
    let client = kube::client::ClientBuilder::try_from(client_config)
        .context("cannot build the API client")?
        .with_layer(&tower::limit::ConcurrencyLimitLayer::new(MAX_REQUESTS))
        .build();

    let metrics = Metrics::new();
    if let Some(addr) = args.metrics_addr {
        let bound = metrics::serve(addr, metrics.clone())
            .await
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
        tracing::info!(%bound, "serving metrics");
    }
    let tie_break = match args.tie_break_seed {
        Some(s) => TieBreak::Seeded(s),
        None => TieBreak::NodeName,
    };
    let profiles: Vec<&str> = config
        .profiles
        .iter()
        .map(|p| p.scheduler_name.as_str())
        .collect();
    tracing::info!(?profiles, "starting");
    let mut sched = Scheduler::new(config, tie_break);
    if args.explain {
        sched.set_explain(Some(ExplainConfig {
            history_bytes: args.explain_history_bytes,
        }));
    }
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    runner::run(
        client,
        sched,
        RunOptions {
            metrics: Some(metrics),
            notices: None,
        },
        shutdown,
    )
    .await;
    Ok(())
}
