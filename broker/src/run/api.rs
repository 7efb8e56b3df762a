//! The API server of a run, on simulated time, and the objects installed
//! in it before the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};

use crate::broker::SimClock;

/// The API server on simulated time, and the kubeconfig clients use.
pub(super) struct Api {
    pub(super) rt: tokio::runtime::Runtime,
    /// The API runtime's workers not parked (see `sync::settle_hook`).
    pub(super) awake: Arc<std::sync::atomic::AtomicI64>,
    pub(super) clock: SimClock,
    pub(super) store: fakeapi::Store,
    pub(super) server: fakeapi::RunningServer,
    pub(super) kubeconfig: PathBuf,
}

/// The objects to install in the API before the run (`--crds`, and the
/// group kind `--gang` writes), checked now: a bad manifest is refused with
/// its file, document and reason, and a gang style whose group kind would
/// not be served stops the run before it starts.
pub(super) fn api_objects(
    crds: &[PathBuf],
    gang: crate::translate::GangStyle,
) -> anyhow::Result<Vec<fakeapi::Manifest>> {
    let mut all = Vec::new();
    for path in crds {
        all.extend(fakeapi::load_manifests(path).map_err(|e| anyhow::anyhow!("--crds: {e}"))?);
    }
    if let Some(resource) = gang.group_resource() {
        if !defines_resource(&all, resource) {
            if gang == crate::translate::GangStyle::Coscheduling {
                // batkube's own definition (fakeapi/crds), for the stand-in
                // path to need nothing else.
                let object: serde_json::Value =
                    serde_yaml::from_str(fakeapi::COSCHEDULING_PODGROUP_CRD)
                        .context("the shipped PodGroup CRD")?;
                all.insert(
                    0,
                    fakeapi::Manifest {
                        file: PathBuf::from("(batkube's PodGroup CRD)"),
                        document: 1,
                        object,
                    },
                );
            } else {
                bail!(
                    "--gang {} writes {resource} objects, whose CustomResourceDefinition is not \
                     installed: give it with --crds PATH (the project's CRD manifests), or choose \
                     another --gang",
                    gang.as_str()
                );
            }
        }
    }
    fakeapi::check_manifests(&all).map_err(|e| anyhow::anyhow!("--crds: {e}"))?;
    Ok(all)
}

/// `timers`: what the API's watch timers (timeoutSeconds, bookmarks) run
/// on: the simulated clock under `run` (the broker fires them), the wall
/// clock under `serve` (the user's scheduler runs on real time).
pub(super) fn start_api(
    addr: std::net::SocketAddr,
    out: &Path,
    start: f64,
    timers: fakeapi::WatchTimers,
    objects: &[fakeapi::Manifest],
    id_seed: Option<u64>,
    frame_per_event: bool,
    ports: Option<timeshim::Ports>,
    compaction_interval: Option<std::time::Duration>,
) -> anyhow::Result<Api> {
    if let Some(why) = fakeapi::protobuf::unavailable() {
        // Once per process: `batkube run` and `serve` start one API.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "batkube: this build answers clients in JSON only (no protobuf, which client-go's programs ask for first; their results are the same, only decoding costs more): {why}"
            )
        });
    }
    // Workers start running, park when they find nothing to do, unpark
    // when woken: how many are awake says whether the API is still working
    // on what it was given (the settle of `--deterministic`). One per CPU
    // the run may use, two at most: on one CPU (`--cpus auto`) a second
    // worker only adds hand-offs, each request's task woken on one worker
    // and stolen by the other (20,000 jobs: 30.9 s against 35.5 s of wall,
    // medians of three, the same outputs).
    let workers = super::cpus::usable().clamp(1, 2);
    let awake = Arc::new(std::sync::atomic::AtomicI64::new(workers as i64));
    let (park, unpark) = (awake.clone(), awake.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .on_thread_park(move || {
            if park.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                // The API has done all it can: a deterministic program's
                // supervisor waiting for that goes on at once.
                timeshim::settle_progress();
            }
        })
        .on_thread_unpark(move || {
            unpark.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
        .enable_all()
        .build()?;
    let clock = SimClock::starting_at(start);
    let store = fakeapi::Store::with_config(fakeapi::StoreConfig {
        clock: clock.store_clock(),
        // A watch resumes from at most this many changes back per resource
        // (older: 410 Gone and a relist, as with a real API server's watch
        // cache). The default (100k) kept every pod version of an 18k-job
        // trace in memory: 1.2 GB.
        watch_history: 10_000,
        // On the watch timers' clock: simulated under `run`.
        compaction_interval,
        watch_timers: timers,
        id_seed,
        frame_per_event,
        // A webhook's program may listen elsewhere than it asked
        // (`timeshim::Ports`): its calls go there.
        loopback_ports: ports.map(|p| Arc::new(move |port| p.real(port)) as fakeapi::LoopbackPorts),
        ..Default::default()
    });
    store
        .install_manifests(objects)
        .map_err(|e| anyhow::anyhow!("--crds: {e}"))?;
    let server = rt
        .block_on(fakeapi::serve(store.clone(), addr))
        .with_context(|| format!("starting the API server on {addr}"))?;
    let kubeconfig = out.join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, fakeapi::kubeconfig_yaml(server.addr()))
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    Ok(Api {
        rt,
        awake,
        clock,
        store,
        server,
        kubeconfig,
    })
}

/// Whether `objects` hold the CustomResourceDefinition of `resource`
/// (`plural.group`).
pub(super) fn defines_resource(objects: &[fakeapi::Manifest], resource: &str) -> bool {
    objects.iter().any(|m| {
        let o = &m.object;
        o["kind"] == "CustomResourceDefinition"
            && format!(
                "{}.{}",
                o["spec"]["names"]["plural"].as_str().unwrap_or(""),
                o["spec"]["group"].as_str().unwrap_or("")
            ) == resource
    })
}

/// Whether `objects` hold a MutatingWebhookConfiguration with a webhook
/// whose rules cover creating `resource` (`plural.group`), as
/// kube-apiserver matches rules (`*` for any group, resource or operation).
pub(super) fn mutates_resource(objects: &[fakeapi::Manifest], resource: &str) -> bool {
    let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
    let has = |list: &serde_json::Value, want: &str| {
        list.as_array()
            .is_some_and(|l| l.iter().any(|v| v == want || v == "*"))
    };
    objects.iter().any(|m| {
        let o = &m.object;
        o["kind"] == "MutatingWebhookConfiguration"
            && o["webhooks"].as_array().is_some_and(|hooks| {
                hooks.iter().any(|h| {
                    h["rules"].as_array().is_some_and(|rules| {
                        rules.iter().any(|r| {
                            has(&r["apiGroups"], group)
                                && has(&r["resources"], plural)
                                && has(&r["operations"], "CREATE")
                        })
                    })
                })
            })
    })
}
