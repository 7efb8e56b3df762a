//! `batkube replay`: runs a Batsim workload on a real cluster (k3s, kind,
//! any) in real time, one pod per job, and records what happened in Batsim's
//! `jobs.csv` layout plus the `scheduled`, `pulling`, `pulled` and `created`
//! columns of the 2020 k3s recordings, so a real run and a simulated one
//! compare line by line.
//!
//! Times are wall seconds since the replay started (the first job's
//! submission instant), measured when this process observes each change
//! through a watch: millisecond precision, unlike the API's 1-second
//! timestamps. `--speedup F` divides submission times and durations by F
//! and multiplies the recorded times back, for quick trials.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::Value;
use tokio::time::Instant;

use batkube_translate as translate;
use batsim::protocol::Job;
use batsim::workload::{ProfileKind, Workload, WorkloadJob};

/// Options of `batkube replay`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// Kubeconfig of the cluster to run on.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Batsim workload (delay profiles).
    #[arg(long)]
    pub workload: PathBuf,
    /// Output directory: jobs.csv (Batsim layout + k3s columns), nodes.csv.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Container image (needs a `sleep` that takes fractions of seconds).
    #[arg(long, default_value = "busybox")]
    pub image: String,
    /// schedulerName of the pods (default: the cluster's default scheduler).
    #[arg(long)]
    pub scheduler_name: Option<String>,
    /// Run F times faster than the workload says (times are scaled back).
    #[arg(long, default_value_t = 1.0)]
    pub speedup: f64,
    /// Give up after this many wall seconds; unfinished jobs are recorded
    /// as killed and their pods deleted.
    #[arg(long)]
    pub deadline: Option<f64>,
    /// Leave the pods in the cluster afterwards.
    #[arg(long)]
    pub keep_pods: bool,
}

/// The pod for one job, exactly as the broker makes it
/// ([`batkube_translate::pod_from_job`]: name from the Batsim id `w0!<id>`,
/// requests from the job or its profile, schedulerName, priority,
/// nodeSelector, labels, the job id in an annotation, `sleep <delay>`,
/// restartPolicy Never), so replayed and simulated pods are the same pods.
pub fn pod_from_job(workload: &Workload, job: &WorkloadJob) -> anyhow::Result<Pod> {
    let profile = workload
        .profile(&job.profile)
        .with_context(|| format!("job {:?}: no profile {:?}", job.id, job.profile))?;
    if !matches!(profile.kind, ProfileKind::Delay { .. }) {
        anyhow::bail!(
            "job {:?}: only delay profiles can be replayed (profile {:?})",
            job.id,
            job.profile
        );
    }
    let mut fields = job.json();
    fields.insert("id".into(), Value::String(job.id.clone()));
    let batsim_job: Job = serde_json::from_value(Value::Object(fields))
        .with_context(|| format!("job {:?}", job.id))?;
    let batsim_id = format!("{}!{}", workload.name, job.id);
    let created = Time(k8s_openapi::jiff::Timestamp::now());
    let mut pod = translate::pod_from_job(&batsim_id, &batsim_job, Some(&profile.json()), created)
        .map_err(|why| anyhow::anyhow!("job {:?} cannot be a pod: {why}", job.id))?;
    // The API server sets these on creation.
    pod.status = None;
    pod.metadata.creation_timestamp = None;
    pod.metadata.namespace = None;
    if let Some(spec) = pod.spec.as_mut() {
        spec.termination_grace_period_seconds = Some(0);
    }
    Ok(pod)
}

fn format_secs(s: f64) -> String {
    let t = format!("{:.3}", s);
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What was seen of one job, in wall seconds since the start.
#[derive(Debug, Clone, Default)]
struct Record {
    submitted: Option<f64>,
    scheduled: Option<f64>,
    pulling: Option<f64>,
    pulled: Option<f64>,
    created: Option<f64>,
    started: Option<f64>,
    finished: Option<f64>,
    success: Option<bool>,
    /// The pod was deleted before it ended.
    killed: bool,
    node: Option<String>,
}

/// Replays the workload; returns the number of jobs that succeeded.
pub async fn replay(args: &ReplayArgs) -> anyhow::Result<usize> {
    anyhow::ensure!(args.speedup > 0.0, "--speedup must be positive");
    let workload = Workload::from_file(&args.workload, "w0")?;
    let mut pods = Vec::new();
    for j in &workload.jobs {
        let mut p = pod_from_job(&workload, j)?;
        if let Some(spec) = p.spec.as_mut() {
            if let Some(name) = &args.scheduler_name {
                spec.scheduler_name = Some(name.clone());
            }
            spec.containers[0].image = Some(args.image.clone());
            if args.speedup != 1.0 {
                let ProfileKind::Delay { delay } = workload
                    .profile(&j.profile)
                    .map(|p| p.kind.clone())
                    .unwrap_or(ProfileKind::Delay { delay: 0.0 })
                else {
                    unreachable!("checked by pod_from_job")
                };
                spec.containers[0].command =
                    Some(vec!["sleep".into(), format_secs(delay / args.speedup)]);
            }
        }
        pods.push(p);
    }
    let index: HashMap<String, usize> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| (p.metadata.name.clone().unwrap_or_default(), i))
        .collect();
    anyhow::ensure!(
        index.len() == pods.len(),
        "two job ids give the same pod name"
    );
    let run_id = format!("{}", std::process::id());
    for p in &mut pods {
        p.metadata.labels = Some(BTreeMap::from([(
            "batkube/replay".to_string(),
            run_id.clone(),
        )]));
    }

    let kc = kube::config::Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading kubeconfig {}", args.kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .context("using the kubeconfig")?;
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &args.namespace);
    let event_api: Api<Event> = Api::namespaced(client.clone(), &args.namespace);
    let nodes: Api<Node> = Api::all(client.clone());
    let mut node_names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .context("listing the cluster's nodes")?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    node_names.sort();

    let mut records = vec![Record::default(); pods.len()];
    let scale = args.speedup;
    let mut pod_events = watcher(
        pod_api.clone(),
        watcher::Config::default().labels(&format!("batkube/replay={run_id}")),
    )
    .default_backoff()
    .boxed();
    let mut k8s_events = watcher(event_api, watcher::Config::default())
        .default_backoff()
        .boxed();

    // Both watches must be established before the first submission, or the
    // first changes would be seen late, through the initial list.
    let (mut pods_ready, mut events_ready) = (false, false);
    while !(pods_ready && events_ready) {
        tokio::select! {
            Some(ev) = pod_events.next(), if !pods_ready => {
                pods_ready = matches!(ev, Ok(watcher::Event::InitDone));
            }
            Some(ev) = k8s_events.next(), if !events_ready => {
                events_ready = matches!(ev, Ok(watcher::Event::InitDone));
            }
            else => anyhow::bail!("the cluster's watch streams ended before they started"),
        }
    }

    // Submissions on their own task, in subtime order.
    let start = Instant::now();
    let (sub_tx, mut sub_rx) =
        tokio::sync::mpsc::unbounded_channel::<(usize, anyhow::Result<f64>)>();
    let mut order: Vec<usize> = (0..pods.len()).collect();
    order.sort_by(|&a, &b| {
        workload.jobs[a]
            .subtime
            .total_cmp(&workload.jobs[b].subtime)
    });
    let submit_api = pod_api.clone();
    let subtimes: Vec<f64> = workload.jobs.iter().map(|j| j.subtime).collect();
    let to_submit = pods.clone();
    let submitter = tokio::spawn(async move {
        for i in order {
            tokio::time::sleep_until(start + Duration::from_secs_f64(subtimes[i] / scale)).await;
            let t = start.elapsed().as_secs_f64() * scale;
            let r = submit_api
                .create(&PostParams::default(), &to_submit[i])
                .await
                .map(|_| t)
                .map_err(anyhow::Error::from);
            if sub_tx.send((i, r)).is_err() {
                break;
            }
        }
    });

    let deadline = args
        .deadline
        .map(|d| start + Duration::from_secs_f64(d))
        .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 86400));
    let now = || start.elapsed().as_secs_f64() * scale;
    let done = |r: &[Record]| r.iter().all(|x| x.finished.is_some());
    let mut timed_out = false;
    while !done(&records) {
        tokio::select! {
            Some((i, r)) = sub_rx.recv() => {
                let t = r.with_context(|| format!("creating pod {}", pods[i].metadata.name.as_deref().unwrap_or("")))?;
                records[i].submitted.get_or_insert(t);
            }
            Some(ev) = pod_events.next() => {
                let pod = match ev {
                    Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => p,
                    Ok(watcher::Event::Delete(p)) => {
                        // Deleted (evicted, preempted, by hand) before it ended:
                        // recorded as killed.
                        if let Some(&i) = p.metadata.name.as_ref().and_then(|n| index.get(n)) {
                            if records[i].finished.is_none() {
                                records[i].finished = Some(now());
                                records[i].killed = true;
                            }
                        }
                        continue;
                    }
                    Ok(_) => continue,
                    Err(e) => { tracing::debug!(error = %e, "pod watch"); continue }
                };
                let Some(&i) = pod.metadata.name.as_ref().and_then(|n| index.get(n)) else { continue };
                let t = now();
                let r = &mut records[i];
                if let Some(n) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                    r.scheduled.get_or_insert(t);
                    r.node.get_or_insert(n);
                }
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
                let running = pod.status.as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.state.as_ref().is_some_and(|st| st.running.is_some() || st.terminated.is_some())));
                if phase == "Running" || running {
                    r.started.get_or_insert(t);
                }
                if phase == "Succeeded" || phase == "Failed" {
                    r.started.get_or_insert(t);
                    r.finished.get_or_insert(t);
                    r.success.get_or_insert(phase == "Succeeded");
                }
            }
            Some(ev) = k8s_events.next() => {
                let e = match ev {
                    Ok(watcher::Event::Apply(e)) | Ok(watcher::Event::InitApply(e)) => e,
                    Ok(_) => continue,
                    Err(e) => { tracing::debug!(error = %e, "event watch"); continue }
                };
                record_event(&mut records, &index, &e, now());
            }
            _ = tokio::time::sleep_until(deadline) => { timed_out = true; break; }
        }
    }
    submitter.abort();
    // Events travel on their own watch and may trail the pods': wait a little
    // for the kubelets' Created events still on their way.
    let grace = Instant::now() + Duration::from_secs(5);
    while !timed_out && records.iter().any(|r| r.created.is_none()) {
        tokio::select! {
            Some(ev) = k8s_events.next() => {
                if let Ok(watcher::Event::Apply(e)) | Ok(watcher::Event::InitApply(e)) = ev {
                    record_event(&mut records, &index, &e, now());
                }
            }
            _ = tokio::time::sleep_until(grace) => break,
        }
    }
    if timed_out {
        eprintln!("batkube replay: deadline reached; unfinished jobs are recorded as killed");
    }
    if !args.keep_pods {
        for p in &pods {
            if let Some(n) = &p.metadata.name {
                let _ = pod_api.delete(n, &DeleteParams::default()).await;
            }
        }
    }
    for r in &records {
        if let Some(n) = &r.node {
            if !node_names.contains(n) {
                node_names.push(n.clone());
            }
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let csv = jobs_csv(&workload, &records, &node_names);
    std::fs::write(args.out.join("jobs.csv"), csv)?;
    let mut nodes_csv = String::from("resource_id,node\n");
    for (i, n) in node_names.iter().enumerate() {
        let _ = writeln!(nodes_csv, "{i},{n}");
    }
    std::fs::write(args.out.join("nodes.csv"), nodes_csv)?;
    Ok(records.iter().filter(|r| r.success == Some(true)).count())
}

/// Notes a kubelet event (Scheduled, Pulling, Pulled, Created) of one of our pods.
fn record_event(records: &mut [Record], index: &HashMap<String, usize>, e: &Event, t: f64) {
    let Some(&i) = e.involved_object.name.as_ref().and_then(|n| index.get(n)) else {
        return;
    };
    let r = &mut records[i];
    let slot = match e.reason.as_deref() {
        Some("Scheduled") => &mut r.scheduled,
        Some("Pulling") => &mut r.pulling,
        Some("Pulled") => &mut r.pulled,
        Some("Created") => &mut r.created,
        _ => return,
    };
    slot.get_or_insert(t);
}

fn opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.6}")).unwrap_or_default()
}

fn jobs_csv(w: &Workload, records: &[Record], nodes: &[String]) -> String {
    let mut s = String::from(
        "job_id,workload_name,profile,submission_time,requested_number_of_resources,requested_time,\
         success,final_state,starting_time,execution_time,finish_time,waiting_time,turnaround_time,\
         stretch,allocated_resources,consumed_energy,metadata,scheduled,pulling,pulled,created\n",
    );
    for (j, r) in w.jobs.iter().zip(records) {
        let sub = r.submitted.unwrap_or(0.0);
        let (state, success) = match (r.killed, r.success) {
            (false, Some(true)) => ("COMPLETED_SUCCESSFULLY", 1),
            (false, Some(false)) => ("COMPLETED_FAILED", 0),
            _ => ("COMPLETED_KILLED", 0),
        };
        let start = r.started;
        let fin = r.finished;
        let exec = start.zip(fin).map(|(a, b)| b - a);
        let wait = start.map(|a| a - sub);
        let turn = fin.map(|b| b - sub);
        let stretch = turn.zip(exec).and_then(|(t, e)| (e > 0.0).then(|| t / e));
        let res = r
            .node
            .as_ref()
            .and_then(|n| nodes.iter().position(|x| x == n))
            .map(|i| i.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "{},w0,{},{:.6},1,{:.6},{success},{state},{},{},{},{},{},{},{res},-1,,{},{},{},{}",
            j.id,
            j.profile,
            sub,
            j.walltime.unwrap_or(-1.0),
            opt(start),
            opt(exec),
            opt(fin),
            opt(wait),
            opt(turn),
            opt(stretch),
            opt(r.scheduled),
            opt(r.pulling),
            opt(r.pulled),
            opt(r.created),
        );
    }
    s
}

/// `batkube replay`, with its own runtime.
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let ok = rt.block_on(replay(&args))?;
    eprintln!(
        "batkube replay: {ok} jobs succeeded; wrote {}",
        args.out.join("jobs.csv").display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_follow_the_job_and_profile() {
        let w = Workload::parse(
            r#"{"jobs":[{"id":"A_1","subtime":0,"res":1,"profile":"p","memory":"1Gi"}],
                "profiles":{"p":{"type":"delay","delay":0.05,"cpu":"500m"}}}"#,
            "w0",
            "x",
        )
        .unwrap();
        let p = pod_from_job(&w, &w.jobs[0]).unwrap();
        assert_eq!(
            p.metadata.name.as_deref(),
            Some(translate::pod_name("w0!A_1").as_str())
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            c.command.as_ref().unwrap(),
            &vec!["sleep".to_string(), "0.05".to_string()]
        );
        let req = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(req["cpu"].0, "500m");
        assert_eq!(req["memory"].0, "1073741824");
        assert_eq!(
            p.metadata.annotations.unwrap()[translate::JOB_ID_ANNOTATION],
            "w0!A_1"
        );
        assert!(p.status.is_none() && p.metadata.namespace.is_none());
        let parallel = Workload::parse(
            r#"{"jobs":[{"id":"x","subtime":0,"res":1,"profile":"p"}],
                "profiles":{"p":{"type":"parallel_homogeneous","cpu":1e9,"com":0}}}"#,
            "w0",
            "x",
        )
        .unwrap();
        assert!(pod_from_job(&parallel, &parallel.jobs[0]).is_err());
    }
}
