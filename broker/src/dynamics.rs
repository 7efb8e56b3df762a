//! The flags of `batkube run` for cluster dynamics (external events, the
//! node lifecycle's delays, resubmission, scenarios), and their inputs
//! checked before anything starts.

use std::path::PathBuf;
use std::time::Duration;

use crate::broker::lifecycle::LifecycleConfig;
use crate::scenario::{self, Known};
use crate::translate;
use batsim::platform::Platform;
use batsim::workload::Workload;

#[derive(Debug, Clone, clap::Args)]
pub struct DynamicsArgs {
    /// External events (Batsim 4.2's format: one JSON object per line,
    /// `machine_unavailable` / `machine_available`); passed to Batsim's
    /// `--events` (or played by the stand-in). May be repeated.
    #[arg(long = "events", value_name = "FILE")]
    pub events: Vec<PathBuf>,
    /// Operations on the cluster at simulated times (YAML; see the guide,
    /// docs/src/tasks/dynamics.md).
    #[arg(long = "scenario", value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Register an evicted job again (Batsim dynamic jobs, full duration),
    /// as a Job controller would.
    #[arg(long = "resubmit-evicted")]
    pub resubmit_evicted: bool,
    /// How long a node whose machine became unavailable stays Ready before
    /// it turns Unknown and gets the unreachable taints (kube-controller-manager's
    /// flag; upstream default 50s since Kubernetes 1.32).
    #[arg(long = "node-monitor-grace-period", value_parser = crate::run::parse_duration, default_value = "50s")]
    pub node_monitor_grace: Duration,
    /// tolerationSeconds of the not-ready and unreachable NoExecute
    /// tolerations every pod gets (kube-apiserver's DefaultTolerationSeconds
    /// admission plugin; upstream default 300).
    #[arg(long = "default-unreachable-toleration-seconds", default_value_t = 300)]
    pub toleration_seconds: i64,
}

impl DynamicsArgs {
    /// Checks the events files and the scenario against the platform and
    /// the workloads; the broker's configuration.
    pub fn config(
        &self,
        platform: &Platform,
        workloads: &[Workload],
        api: &[fakeapi::Manifest],
    ) -> anyhow::Result<LifecycleConfig> {
        let machines = platform
            .machines(None)
            .map_err(|e| anyhow::anyhow!("platform: {e}"))?
            .compute;
        for e in &self.events {
            batsim::standin::events::load_events(e, machines.len() as u32, false)?;
        }
        if self.toleration_seconds < 0 {
            anyhow::bail!(
                "--default-unreachable-toleration-seconds must be >= 0, not {}",
                self.toleration_seconds
            );
        }
        let scenario = match &self.scenario {
            None => Vec::new(),
            Some(path) => {
                let known = Known {
                    nodes: machines
                        .iter()
                        .map(|h| translate::dns1123(&h.name))
                        .collect(),
                    // A job's pod, or each pod of a parallel job's gang
                    // (`<pod>-0` …).
                    pods: workloads
                        .iter()
                        .flat_map(|w| {
                            w.jobs.iter().flat_map(|j| {
                                let pod = translate::pod_name(&format!("{}!{}", w.name, j.id));
                                let names: Vec<String> = if j.res > 1 {
                                    (0..j.res).map(|k| format!("{pod}-{k}")).collect()
                                } else {
                                    vec![pod]
                                };
                                names.into_iter().map(move |n| (n, j.subtime))
                            })
                        })
                        .collect(),
                    api: api.to_vec(),
                };
                scenario::load(path, &known)?
            }
        };
        Ok(LifecycleConfig {
            node_monitor_grace: self.node_monitor_grace.as_secs_f64(),
            default_toleration_seconds: self.toleration_seconds,
            resubmit_evicted: self.resubmit_evicted,
            scenario,
        })
    }
}
