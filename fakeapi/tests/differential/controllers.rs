//! The controllers and schedulers whose normal work is recorded (see
//! `clients.rs`): Volcano's controller manager, Kueue's, and
//! scheduler-plugins' kube-scheduler with Coscheduling, each unmodified,
//! built by `schedulers/build-go.sh`, doing what it does in a batkube run.
//!
//! Each has a setup (its CRDs, sent before the recording starts, each
//! followed by a list of its kind repeated until the real server serves
//! it: `setup`), then runs against the recording proxy while the harness
//! plays the parts of the programs that are not there, through the proxy
//! too (so that its writes are steps of the case): the broker's (nodes,
//! pods and their status, as `translate` writes them), and for Volcano the
//! scheduler's (the PodGroup's phase, the bindings). What the harness waits
//! for it reads from the real server directly, which is not recorded.

use crate::script::Step;
use crate::target::{go_dir, repo_root, Answer, Target};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

pub const ALL: [&str; 3] = ["volcano-controllers", "kueue-manager", "coscheduling"];

pub fn about(client: &str) -> Option<&'static str> {
    Some(match client {
        "volcano-controllers" => {
            "Volcano v1.10.0's vc-controller-manager (every default controller) starting on its CRDs, a Job of 2 replicas made into a PodGroup and pods once the harness, as vc-scheduler, puts the PodGroup Inqueue, the pods bound, running and succeeded as the broker reports them, the Job completed; recorded through the proxy of record.rs"
        }
        "kueue-manager" => {
            "Kueue v0.17.0's controller manager (schedulers/kueue/config.yaml: pods only) starting on its CRDs, a ResourceFlavor, ClusterQueue and LocalQueue, a gated pod as the broker writes it admitted (its Workload made, quota reserved, the gate removed), bound, succeeded, its Workload finished and finalizer removed; recorded through the proxy of record.rs"
        }
        "coscheduling" => {
            "scheduler-plugins v0.34.7's kube-scheduler with Coscheduling (schedulers/coscheduling/config.yaml) starting on its CRDs, a node, a PodGroup of 2 and its 2 pods bound together, their status as the broker reports them; recorded through the proxy of record.rs"
        }
        _ => return None,
    })
}

/// The CRD files (under `target/go`) a client needs.
fn crds(client: &str) -> Vec<String> {
    let (set, names): (&str, &[&str]) = match client {
        "volcano-controllers" => (
            "volcano",
            &[
                "scheduling.volcano.sh_queues.yaml",
                "scheduling.volcano.sh_podgroups.yaml",
                "batch.volcano.sh_jobs.yaml",
                "bus.volcano.sh_commands.yaml",
                "nodeinfo.volcano.sh_numatopologies.yaml",
                "flow.volcano.sh_jobflows.yaml",
                "flow.volcano.sh_jobtemplates.yaml",
            ],
        ),
        "kueue-manager" => (
            "kueue",
            &[
                "kueue.x-k8s.io_admissionchecks.yaml",
                "kueue.x-k8s.io_clusterqueues.yaml",
                "kueue.x-k8s.io_cohorts.yaml",
                "kueue.x-k8s.io_localqueues.yaml",
                "kueue.x-k8s.io_multikueueclusters.yaml",
                "kueue.x-k8s.io_multikueueconfigs.yaml",
                "kueue.x-k8s.io_provisioningrequestconfigs.yaml",
                "kueue.x-k8s.io_resourceflavors.yaml",
                "kueue.x-k8s.io_topologies.yaml",
                "kueue.x-k8s.io_workloadpriorityclasses.yaml",
                "kueue.x-k8s.io_workloads.yaml",
            ],
        ),
        "coscheduling" => (
            "coscheduling",
            &[
                "scheduling.x-k8s.io_podgroups.yaml",
                "scheduling.x-k8s.io_elasticquotas.yaml",
            ],
        ),
        _ => return Vec::new(),
    };
    names.iter().map(|n| format!("crds/{set}/{n}")).collect()
}

fn step(req: String) -> Step {
    serde_json::from_value(json!({ "req": req })).unwrap()
}

/// What a client's case does after the prelude and before the recording:
/// each CRD created (only the status compared: the `custom` case holds
/// CRDs' answers, and these are large), then its kind listed until it is
/// served (a real server establishes a CRD moments after its create).
pub fn setup(client: &str) -> Vec<Step> {
    let mut out = Vec::new();
    let mut lists = Vec::new();
    let files = crds(client);
    if let Some(program) = files.first().and_then(|f| crate::script::crd_program(f)) {
        build(program);
    }
    for f in files {
        let p = go_dir().join(&f);
        let crd: Value = serde_yaml::from_str(
            &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let group = crd["spec"]["group"].as_str().unwrap();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap();
        let version = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["storage"] == true)
            .unwrap()["name"]
            .as_str()
            .unwrap();
        let mut s = step("POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions".into());
        s.file = Some(f);
        s.compare = Some("status".into());
        out.push(s);
        let mut l = step(format!("GET /apis/{group}/{version}/{plural}?limit=1"));
        l.until = Some(200);
        l.compare = Some("status".into());
        lists.push(l);
    }
    out.extend(lists);
    out
}

/// A program the recording runs, stopped (SIGTERM, then SIGKILL to its
/// process group) when dropped.
struct Program {
    child: tokio::process::Child,
    what: &'static str,
}

impl Program {
    fn start(what: &'static str, cmd: &mut std::process::Command) -> Program {
        std::os::unix::process::CommandExt::process_group(cmd, 0);
        let cmd = std::mem::replace(cmd, std::process::Command::new("true"));
        let child = tokio::process::Command::from(cmd)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        Program { child, what }
    }

    /// Fails the recording if the program has already exited.
    fn alive(&mut self) {
        if let Ok(Some(st)) = self.child.try_wait() {
            panic!(
                "{} exited ({st}) during the recording: its output is above",
                self.what
            );
        }
    }

    async fn stop(mut self) {
        self.alive();
        let pid = self.child.id().unwrap() as i32;
        // SAFETY: kill(2) on the process group this harness started.
        unsafe {
            libc::kill(-pid, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            // SAFETY: as above.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = self.child.wait().await;
        }
    }
}

fn build(program: &str) {
    let st = std::process::Command::new("bash")
        .arg(repo_root().join("schedulers/build-go.sh"))
        .arg(go_dir())
        .arg(program)
        .status()
        .expect("running schedulers/build-go.sh");
    assert!(st.success(), "building {program} failed: see above");
}

/// The harness's own writes, through the proxy (recorded).
struct Via<'a> {
    proxy: &'a Target,
    real: &'a Target,
}

impl Via<'_> {
    async fn send(&self, method: &str, path: &str, ct: Option<&str>, body: Value) -> Answer {
        let a = self
            .proxy
            .request(
                method,
                path,
                ct,
                None,
                Some(serde_json::to_vec(&body).unwrap()),
            )
            .await;
        assert!(
            (200..300).contains(&a.status),
            "{method} {path}: {} {:?}",
            a.status,
            String::from_utf8_lossy(&a.body)
        );
        a
    }

    async fn create(&self, path: &str, body: Value) {
        self.send("POST", path, None, body).await;
    }

    async fn merge(&self, path: &str, body: Value) {
        self.send("PATCH", path, Some("application/merge-patch+json"), body)
            .await;
    }

    /// Waits (reading the real server, not recorded) until `want` holds
    /// of the object at `path`.
    async fn until(
        &self,
        what: &str,
        path: &str,
        program: &mut Program,
        want: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            program.alive();
            let a = self.real.request("GET", path, None, None, None).await;
            if let Some(v) = a.json().filter(|_| a.status == 200) {
                if want(&v) {
                    return v;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: {what} did not happen in 90 s (last answer to GET {path}: {} {})",
                program.what,
                a.status,
                String::from_utf8_lossy(&a.body)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The broker's node: `translate`'s shape, 4 cpu.
    async fn node(&self, name: &str) {
        self.create(
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                   "status": {"capacity": {"cpu": "4", "memory": "4Gi", "pods": "110"},
                              "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "110"},
                              "conditions": [{"type": "Ready", "status": "True",
                                              "reason": "KubeletReady", "message": "batkube"}]}}),
        )
        .await;
        // kube-apiserver's TaintNodesByCondition admission gives a new node
        // the not-ready taint, which kube-controller-manager's node
        // lifecycle controller (not running here) takes off a Ready node.
        self.merge(
            &format!("/api/v1/nodes/{name}"),
            json!({"spec": {"taints": null}}),
        )
        .await;
    }

    /// What the broker reports of a pod that ran: Running, then Succeeded.
    async fn ran(&self, ns: &str, pod: &str) {
        let path = format!("/api/v1/namespaces/{ns}/pods/{pod}/status");
        self.merge(
            &path,
            json!({"status": {"phase": "Running",
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .await;
        self.merge(
            &path,
            json!({"status": {"phase": "Succeeded",
                              "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}]}}),
        )
        .await;
    }

    async fn bind(&self, ns: &str, pod: &str, node: &str) {
        self.create(
            &format!("/api/v1/namespaces/{ns}/pods/{pod}/binding"),
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}),
        )
        .await;
    }
}

fn container(cpu: &str) -> Value {
    json!([{"name": "main", "image": "batkube/job",
            "resources": {"requests": {"cpu": cpu, "memory": "100Mi"},
                          "limits": {"cpu": cpu, "memory": "100Mi"}}}])
}

/// Runs `client` (one of [`ALL`]) against the proxy's kubeconfig `kc`.
pub async fn run(client: &str, kc: &Path, proxy_url: &str, ns: &str, real: &Target) {
    let proxy = Target::from_kubeconfig("proxy", kc).await;
    let via = Via {
        proxy: &proxy,
        real,
    };
    let go = go_dir();
    // Each program's settling: once what it was asked to do is done, it
    // runs on for this long (its resyncs, status writes) before it stops.
    let settle = Duration::from_secs(3);
    match client {
        "volcano-controllers" => {
            build("vc-controller-manager");
            let mut p = Program::start(
                "vc-controller-manager",
                std::process::Command::new(go.join("vc-controller-manager"))
                    .arg("--kubeconfig")
                    .arg(kc)
                    .args(["--leader-elect=false", "--logtostderr", "-v=2"]),
            );
            // vc-scheduler makes the `default` queue (as it does at its
            // start); the queue controller opens it.
            via.create(
                "/apis/scheduling.volcano.sh/v1beta1/queues",
                json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                       "metadata": {"name": "default"},
                       "spec": {"weight": 1, "reclaimable": true}}),
            )
            .await;
            via.until(
                "the default queue",
                "/apis/scheduling.volcano.sh/v1beta1/queues/default",
                &mut p,
                |q| q["status"]["state"] == "Open",
            )
            .await;
            let jobs = format!("/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs");
            via.create(
                &jobs,
                json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                       "metadata": {"name": "w0-1", "labels": {"batkube.io/job": "w0-1"}},
                       "spec": {"minAvailable": 2, "schedulerName": "volcano", "queue": "default",
                                "maxRetry": 3,
                                "tasks": [{"name": "main", "replicas": 2,
                                           "template": {"metadata": {"labels": {"batkube.io/job": "w0-1"}},
                                                        "spec": {"restartPolicy": "Never",
                                                                 "schedulerName": "volcano",
                                                                 "containers": container("1")}}}]}}),
            )
            .await;
            let groups = format!("/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups");
            let list = via
                .until("the Job's PodGroup", &groups, &mut p, |l| {
                    l["items"].as_array().is_some_and(|i| i.len() == 1)
                })
                .await;
            let pg = list["items"][0]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string();
            // vc-scheduler's enqueue action: the job controller makes the
            // pods once its PodGroup is no longer Pending.
            via.send(
                "PATCH",
                &format!("{groups}/{pg}"),
                Some("application/merge-patch+json"),
                json!({"status": {"phase": "Inqueue"}}),
            )
            .await;
            let pods = format!("/api/v1/namespaces/{ns}/pods");
            via.node(&format!("{ns}-node")).await;
            let list = via
                .until("the Job's 2 pods", &pods, &mut p, |l| {
                    l["items"].as_array().is_some_and(|i| i.len() == 2)
                })
                .await;
            let mut names: Vec<String> = list["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
                .collect();
            names.sort();
            for n in &names {
                via.bind(ns, n, &format!("{ns}-node")).await;
            }
            via.send(
                "PATCH",
                &format!("{groups}/{pg}"),
                Some("application/merge-patch+json"),
                json!({"status": {"phase": "Running", "running": 2}}),
            )
            .await;
            for n in &names {
                via.ran(ns, n).await;
            }
            via.until("the Job completed", &format!("{jobs}/w0-1"), &mut p, |j| {
                j["status"]["state"]["phase"] == "Completed"
            })
            .await;
            tokio::time::sleep(settle).await;
            p.stop().await;
        }
        "kueue-manager" => {
            build("kueue-manager");
            let mut p = Program::start(
                "kueue-manager",
                std::process::Command::new("sh")
                    .arg(repo_root().join("schedulers/kueue/run.sh"))
                    .arg(go.join("kueue-manager"))
                    .arg("--config")
                    .arg(repo_root().join("schedulers/kueue/config.yaml"))
                    .arg("--kubeconfig")
                    .arg(kc),
            );
            let kueue = "/apis/kueue.x-k8s.io/v1beta2";
            via.create(
                &format!("{kueue}/resourceflavors"),
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                       "metadata": {"name": format!("{ns}-flavor")}}),
            )
            .await;
            via.create(
                &format!("{kueue}/clusterqueues"),
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                       "metadata": {"name": format!("{ns}-cq")},
                       "spec": {"namespaceSelector": {},
                                "resourceGroups": [{"coveredResources": ["cpu", "memory"],
                                                    "flavors": [{"name": format!("{ns}-flavor"),
                                                                 "resources": [{"name": "cpu", "nominalQuota": "4"},
                                                                               {"name": "memory", "nominalQuota": "4Gi"}]}]}]}}),
            )
            .await;
            via.create(
                &format!("{kueue}/namespaces/{ns}/localqueues"),
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                       "metadata": {"name": "lq"},
                       "spec": {"clusterQueue": format!("{ns}-cq")}}),
            )
            .await;
            via.until(
                "the LocalQueue active",
                &format!("{kueue}/namespaces/{ns}/localqueues/lq"),
                &mut p,
                |q| {
                    q["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Active" && c["status"] == "True")
                    })
                },
            )
            .await;
            via.node(&format!("{ns}-node")).await;
            // As `translate::kueue_admission` writes a job's pod.
            let pods = format!("/api/v1/namespaces/{ns}/pods");
            via.create(
                &pods,
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "w0-1",
                                    "labels": {"batkube.io/job": "w0-1",
                                               "kueue.x-k8s.io/queue-name": "lq",
                                               "kueue.x-k8s.io/managed": "true"},
                                    "finalizers": ["kueue.x-k8s.io/managed"]},
                       "spec": {"restartPolicy": "Never",
                                "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                                "containers": container("1")}}),
            )
            .await;
            via.until("the pod admitted", &format!("{pods}/w0-1"), &mut p, |pod| {
                pod["spec"]["schedulingGates"]
                    .as_array()
                    .is_none_or(|g| g.is_empty())
            })
            .await;
            via.bind(ns, "w0-1", &format!("{ns}-node")).await;
            via.ran(ns, "w0-1").await;
            via.until(
                "the pod's finalizer removed",
                &format!("{pods}/w0-1"),
                &mut p,
                |pod| {
                    pod["metadata"]["finalizers"]
                        .as_array()
                        .is_none_or(|f| f.is_empty())
                },
            )
            .await;
            tokio::time::sleep(settle).await;
            p.stop().await;
        }
        "coscheduling" => {
            build("kube-scheduler-coscheduling");
            let mut p = Program::start(
                "kube-scheduler-coscheduling",
                std::process::Command::new(go.join("kube-scheduler-coscheduling"))
                    .arg("--config")
                    .arg(repo_root().join("schedulers/coscheduling/config.yaml"))
                    .args(["--secure-port=0", "--master", proxy_url]),
            );
            via.node(&format!("{ns}-node")).await;
            via.create(
                &format!("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"),
                json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                       "metadata": {"name": "w0-1"},
                       "spec": {"minMember": 2}}),
            )
            .await;
            let pods = format!("/api/v1/namespaces/{ns}/pods");
            for i in 0..2 {
                via.create(
                    &pods,
                    json!({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": format!("w0-1-{i}"),
                                        "labels": {"batkube.io/job": "w0-1",
                                                   "scheduling.x-k8s.io/pod-group": "w0-1"}},
                           "spec": {"restartPolicy": "Never", "containers": container("1")}}),
                )
                .await;
            }
            for i in 0..2 {
                via.until(
                    "the pod bound",
                    &format!("{pods}/w0-1-{i}"),
                    &mut p,
                    |pod| pod["spec"]["nodeName"].is_string(),
                )
                .await;
            }
            for i in 0..2 {
                via.ran(ns, &format!("w0-1-{i}")).await;
            }
            tokio::time::sleep(settle).await;
            p.stop().await;
        }
        _ => panic!("unknown client {client:?}: one of {ALL:?}"),
    }
}
