//! `batkube run --submit-as job|vcjob|jobset`: each Batsim job becomes the
//! object users submit (a batch/v1 Job, a Volcano Job, a JobSet), created
//! through the API's admission path, and the real controller makes its pods
//! on simulated time: kube-controller-manager's job controller beside the
//! upstream kube-scheduler, vc-controller-manager beside vc-scheduler,
//! JobSet's controller manager (and its webhooks) beside the job controller. The broker
//! follows the controller's pods (EXECUTE_JOB once a gang is bound, the
//! kubelet's statuses), and the controller's reaction to their ends is its
//! own: the Job's Complete or Failed condition, the Volcano Job's phase, in
//! timeline.csv. And the styles a run cannot serve are refused before it
//! starts, naming the flag that adds what is missing.

mod common;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

/// The command of `--scheduler` (or `--controller`) for `bin` with `args`.
fn command(bin: &Path, args: &str) -> String {
    format!("{} --kubeconfig \"$KUBECONFIG\" {args}", bin.display())
}

/// [`command`] for a Volcano program: its log-level socket in the run's
/// directory, not at the machine's `/tmp/klog-socks` that tests running
/// side by side would take from each other.
fn volcano(bin: &Path, args: &str) -> String {
    format!(
        "DEBUG_SOCKET_DIR=\"${{KUBECONFIG%/*}}\" {}",
        command(bin, args)
    )
}

fn kcm() -> String {
    command(
        &common::go::go_program("kube-controller-manager", false),
        "--kube-api-content-type=application/json \
         --controllers=job-controller,garbage-collector-controller --leader-elect=false \
         --secure-port=0",
    )
}

/// A workload on platforms/16-node.xml: `(res, subtime, delay, walltime)`.
fn workload(dir: &Path, jobs: &[(u32, f64, f64, Option<f64>)]) -> PathBuf {
    let jobs: Vec<Value> = jobs
        .iter()
        .enumerate()
        .map(|(i, &(res, subtime, delay, walltime))| {
            let mut j = json!({"id": (i + 1).to_string(), "subtime": subtime, "res": res,
                "profile": format!("d{delay}")});
            if let Some(w) = walltime {
                j["walltime"] = json!(w);
            }
            j
        })
        .collect();
    let mut profiles = serde_json::Map::new();
    for j in &jobs {
        let p = j["profile"].as_str().unwrap();
        let delay: f64 = p[1..].parse().unwrap();
        profiles.insert(
            p.into(),
            json!({"type": "delay", "delay": delay, "cpu": "1"}),
        );
    }
    let w = dir.join("w.json");
    std::fs::write(
        &w,
        json!({"nb_res": 16, "jobs": jobs, "profiles": profiles}).to_string(),
    )
    .unwrap();
    w
}

fn run(out: &Path, w: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--standin", "--strict", "--platform"])
        .arg(root().join("platforms/16-node.xml"))
        .arg("--workload")
        .arg(w)
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

fn log_tail(out: &Path, name: &str) -> String {
    let log = std::fs::read_to_string(out.join(name)).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(30).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// What a failed check needs to be understood from a CI log alone: the
/// tail of batkube's stderr (its warnings: windows that hit their bound,
/// webhook calls that failed) and of every program's log.
fn diagnosis(out: &Path, o: &Output) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
    let mut d = format!(
        "batkube's stderr (last 40 lines):\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    let mut logs: Vec<_> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    logs.sort();
    for name in logs {
        d += &format!("\n{name} (last 30 lines):\n{}", log_tail(out, &name));
    }
    d
}

fn succeeded(out: &Path, o: &Output) -> Value {
    assert!(
        o.status.success(),
        "{}\nscheduler.log:\n{}\ncontroller-1.log:\n{}",
        String::from_utf8_lossy(&o.stderr),
        log_tail(out, "scheduler.log"),
        log_tail(out, "controller-1.log")
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

fn csv(path: &Path) -> Vec<Vec<String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    r.records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

/// pods.csv's rows by job: (pod, node, outcome).
fn pods_by_job(out: &Path) -> std::collections::BTreeMap<String, Vec<(String, String, String)>> {
    let mut by = std::collections::BTreeMap::<String, Vec<_>>::new();
    for r in csv(&out.join("pods.csv")) {
        by.entry(r[0].clone())
            .or_default()
            .push((r[1].clone(), r[2].clone(), r[9].clone()));
    }
    by
}

/// Four jobs, one with a walltime shorter than its run: under the job
/// controller and kube-scheduler, every Job gets its pods (an Indexed Job
/// per gang), the gangs start together on distinct nodes, the Jobs whose
/// pods succeed become Complete and the one Batsim kills at its walltime
/// Failed (backoffLimit 0), written by kube-controller-manager itself.
#[test]
fn jobs_run_as_batch_v1_jobs_under_the_job_controller() {
    let sched = command(
        &common::go::go_program("kube-scheduler", false),
        "--leader-elect=false --secure-port=0",
    );
    let dir = tempfile::tempdir().unwrap();
    // The last job runs longest: the job controller writes a Job's
    // condition a second after its last pod ends (its sync batch period),
    // while the simulation still runs.
    let w = workload(
        dir.path(),
        &[
            (1, 0.0, 10.0, None),
            (3, 0.0, 10.0, None),
            (2, 5.0, 30.0, Some(8.0)),
            (2, 5.0, 40.0, None),
        ],
    );
    let out = dir.path().join("out");
    let o = run(
        &out,
        &w,
        &[
            "--gang",
            "none",
            "--submit-as",
            "job",
            "--scheduler",
            &sched,
            "--controller",
            &kcm(),
        ],
    );
    let s = succeeded(&out, &o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(s["jobs_succeeded"], 3, "{s}");
    assert_eq!(s["jobs_failed"], 1, "{s}");
    assert_eq!(s["gangs_started"], 3, "{s}");
    assert!(
        stderr.contains("--submit-as job: no admission webhook is registered for jobs.batch"),
        "the run says which webhook acts: {stderr}"
    );
    // The pods are the job controller's: named after their Job and index.
    let pods = pods_by_job(&out);
    assert_eq!(pods.len(), 4, "{pods:?}");
    for (job, rows) in &pods {
        let name = job.replace('!', "-");
        let n = rows.len();
        let nodes: std::collections::BTreeSet<&String> = rows.iter().map(|r| &r.1).collect();
        assert_eq!(nodes.len(), n, "{job}: one pod per node: {rows:?}");
        for (k, (pod, _, _)) in rows.iter().enumerate() {
            let prefix = if n > 1 {
                format!("{name}-{k}-")
            } else {
                format!("{name}-")
            };
            assert!(pod.starts_with(&prefix), "{job}: pod {pod} of index {k}");
        }
    }
    assert!(pods["w0!3"]
        .iter()
        .all(|r| r.2 == "COMPLETED_WALLTIME_REACHED"));
    // The Jobs' conditions, as the job controller wrote them.
    let timeline = csv(&out.join("timeline.csv"));
    let conditions = |job: &str| -> Vec<String> {
        timeline
            .iter()
            .filter(|r| r[3] == "Job" && r[5] == job && r[2] == "status")
            .map(|r| {
                assert_eq!(r[1], "kube-controller-manager/job-controller", "{r:?}");
                r[6].clone()
            })
            .collect()
    };
    for job in ["w0-1", "w0-2"] {
        assert!(
            conditions(job).iter().any(|c| c.contains("Complete")),
            "{job}: {:?}",
            conditions(job)
        );
    }
    assert!(
        conditions("w0-3").iter().any(|c| c.contains("Failed")),
        "{:?}",
        conditions("w0-3")
    );
    // The broker created the Jobs; the scheduler bound their pods.
    let created = timeline
        .iter()
        .filter(|r| r[1] == "broker" && r[2] == "create" && r[3] == "Job")
        .count();
    assert_eq!(created, 4);
    assert!(timeline
        .iter()
        .any(|r| r[1] == "scheduler" && r[2] == "bind" && r[3] == "Pod"));
    assert!(
        !timeline
            .iter()
            .any(|r| r[1] == "broker" && r[2] == "create" && r[3] == "Pod"),
        "the broker writes no pod"
    );
}

/// A Job whose pods fail within its `backoffLimit`: the job controller
/// makes new pods after its backoff, and that second attempt is a new
/// Batsim job (`<id>-r1`, registered with the same profile) that runs on
/// its own machines and ends as the first did (its walltime), after which
/// the Job is Failed and the run ends. The pods of both attempts are in
/// pods.csv under their own job; summary.json counts the registration.
#[test]
fn a_job_retried_by_its_controller_is_a_new_batsim_job() {
    let sched = command(
        &common::go::go_program("kube-scheduler", false),
        "--leader-elect=false --secure-port=0",
    );
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.json");
    std::fs::write(
        &w,
        json!({"nb_res": 16, "jobs": [
            {"id": "1", "subtime": 0, "res": 2, "profile": "d30", "walltime": 8, "backoffLimit": 3},
            {"id": "2", "subtime": 0, "res": 1, "profile": "d10"}],
          "profiles": {"d30": {"type": "delay", "delay": 30, "cpu": "1"},
                       "d10": {"type": "delay", "delay": 10, "cpu": "1"}}})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = run(
        &out,
        &w,
        &[
            "--gang",
            "none",
            "--submit-as",
            "job",
            "--scheduler",
            &sched,
            "--controller",
            &kcm(),
        ],
    );
    let s = succeeded(&out, &o);
    assert_eq!(s["resubmissions"], 1, "{s}");
    assert_eq!(s["warnings"], json!([]), "{s}");
    let jobs = csv(&out.join("jobs.csv"));
    let row = |id: &str| {
        jobs.iter()
            .find(|r| r[0] == id)
            .unwrap_or_else(|| panic!("no job {id}: {jobs:?}"))
            .clone()
    };
    // Two pods failed of 3 allowed: one more attempt, whose two failures
    // exceed the limit.
    assert_eq!(row("1")[7], "COMPLETED_WALLTIME_REACHED");
    assert_eq!(row("1-r1")[7], "COMPLETED_WALLTIME_REACHED");
    assert_eq!(row("2")[7], "COMPLETED_SUCCESSFULLY");
    assert_eq!(jobs.len(), 3, "no third attempt: {jobs:?}");
    let first_end: f64 = row("1")[10].parse().unwrap();
    let second_start: f64 = row("1-r1")[8].parse().unwrap();
    assert!(
        second_start > first_end + 1.0,
        "the controller's backoff before the new pods: {first_end} -> {second_start}"
    );
    let pods = pods_by_job(&out);
    let retry = &pods["w0!1-r1"];
    assert_eq!(retry.len(), 2, "{pods:?}");
    for (pod, _, outcome) in retry {
        assert!(pod.starts_with("w0-1-"), "the Job's own pods: {pod}");
        assert_eq!(outcome, "COMPLETED_WALLTIME_REACHED");
        assert!(
            !pods["w0!1"].iter().any(|r| &r.0 == pod),
            "new pods, not the first attempt's"
        );
    }
    let timeline = csv(&out.join("timeline.csv"));
    assert!(timeline
        .iter()
        .any(|r| r[2] == "REGISTER_JOB" && r[5] == "w0!1-r1"));
    assert!(timeline
        .iter()
        .any(|r| r[3] == "Job" && r[5] == "w0-1" && r[6].contains("Failed")));
}

/// A Job readmitted and evicted in one instant (Kueue did it in
/// queue_compare's tenants case): its controller makes a pod, which
/// registers the next attempt with Batsim, and deletes it before Batsim
/// has submitted that attempt. The attempt then takes the controller's next
/// pod and runs it. It used to keep the deleted pod instead: the next pod
/// was "made while the job's own pods still ran" and not simulated (it sat
/// bound on its node for ever), and the attempt was rejected at the end.
/// The controller is a scripted one (tests/controllers/attempts.py, named
/// kube-controller-manager so that `--submit-as job` takes it as the job
/// controller), to make that sequence exactly.
#[test]
fn an_attempt_whose_pod_went_before_batsim_submitted_it_takes_the_next_pod() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let controller = bin.join("kube-controller-manager");
    std::fs::copy(
        root().join("broker/tests/controllers/attempts.py"),
        &controller,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&controller, std::fs::Permissions::from_mode(0o755)).unwrap();
    let w = workload(dir.path(), &[(1, 0.0, 100.0, None)]);
    let out = dir.path().join("out");
    let o = run(
        &out,
        &w,
        &[
            "--submit-as",
            "job",
            "--scheduler",
            &common::batkube_scheduler().display().to_string(),
            "--controller",
            &format!("{} w0-1", controller.display()),
        ],
    );
    let s = succeeded(&out, &o);
    let log = std::fs::read_to_string(out.join("controller-1.log")).unwrap_or_default();
    assert_eq!(s["warnings"], json!([]), "{s}\n{log}");
    assert_eq!(s["resubmissions"], 1, "{s}\n{log}");
    let jobs = csv(&out.join("jobs.csv"));
    let row = |id: &str| {
        jobs.iter()
            .find(|r| r[0] == id)
            .unwrap_or_else(|| panic!("no job {id}: {jobs:?}\n{log}"))
            .clone()
    };
    assert_eq!(row("1")[7], "COMPLETED_KILLED", "{jobs:?}");
    assert_eq!(row("1-r1")[7], "COMPLETED_SUCCESSFULLY", "{jobs:?}\n{log}");
    let start: f64 = row("1-r1")[8].parse().unwrap();
    assert!((start - 30.0).abs() < 1.0, "the third pod's start: {start}");
    let pods = pods_by_job(&out);
    assert_eq!(
        pods["w0!1-r1"],
        vec![(
            "w0-1-c".to_string(),
            pods["w0!1-r1"][0].1.clone(),
            "COMPLETED_SUCCESSFULLY".to_string()
        )],
        "{pods:?}"
    );
}

/// Three jobs as Volcano Jobs under vc-scheduler and vc-controller-manager:
/// the controller makes each one's PodGroup and pods (JOB-main-INDEX), the
/// gangs start together, and the Volcano Jobs end Completed.
#[test]
fn jobs_run_as_volcano_jobs_under_volcano() {
    let scheduler = common::go::go_program("vc-scheduler", false);
    let controller = common::go::go_program("vc-controller-manager", false);
    let dir = tempfile::tempdir().unwrap();
    let w = workload(
        dir.path(),
        &[
            (1, 0.0, 10.0, None),
            (3, 0.0, 10.0, None),
            (2, 5.0, 20.0, None),
        ],
    );
    let out = dir.path().join("out");
    let conf = root().join("schedulers/volcano/scheduler.conf");
    let crds = common::go::go_dir().join("crds/volcano");
    let o = run(
        &out,
        &w,
        &[
            "--gang",
            "volcano",
            "--submit-as",
            "vcjob",
            "--crds",
            crds.to_str().unwrap(),
            "--scheduler",
            &volcano(
                &scheduler,
                &format!("--scheduler-conf {} --leader-elect=false", conf.display()),
            ),
            "--controller",
            &volcano(&controller, "--leader-elect=false"),
        ],
    );
    let s = succeeded(&out, &o);
    assert_eq!(s["jobs_succeeded"], 3, "{s}");
    assert_eq!(s["gangs_started"], 2, "{s}");
    let pods = pods_by_job(&out);
    for (job, rows) in &pods {
        let name = job.replace('!', "-");
        for (k, (pod, _, outcome)) in rows.iter().enumerate() {
            assert_eq!(pod, &format!("{name}-main-{k}"), "{job}");
            assert_eq!(outcome, "COMPLETED_SUCCESSFULLY", "{job}");
        }
    }
    let timeline = csv(&out.join("timeline.csv"));
    for job in ["w0-1", "w0-2"] {
        assert!(
            timeline.iter().any(|r| r[1] == "vc-controller-manager"
                && r[3] == "Job"
                && r[5] == job
                && r[6] == "phase=Completed"),
            "{job} Completed"
        );
    }
    let groups = timeline
        .iter()
        .filter(|r| r[1] == "vc-controller-manager" && r[2] == "create" && r[3] == "PodGroup")
        .count();
    assert_eq!(groups, 3, "one PodGroup per Volcano Job, made by Volcano");
}

/// Four jobs as JobSets under JobSet's controller manager (its defaulting
/// and validating webhooks served for real: certificates, Service and
/// webhook configurations from schedulers/jobset/webhook.sh), the job
/// controller and kube-scheduler. JobSet's controller makes each JobSet's
/// Job (`JOBSET-main-0`) and headless Service (the webhook's default
/// `network`), the job controller their pods; the gangs start together;
/// the JobSets whose pods succeed end Completed. The third, killed at its
/// walltime, fails its Job; JobSet restarts it once (`maxRestarts` 1): new
/// Job, new pods, a new Batsim job `3-r1`, killed too, then the JobSet is
/// Failed. The fourth's name is too long for the names JobSet would give
/// its pods: its validating webhook refuses it, and the job is rejected
/// with JobSet's message.
#[test]
fn jobs_run_as_jobsets_under_jobsets_controller() {
    let sched = command(
        &common::go::go_program("kube-scheduler", false),
        "--leader-elect=false --secure-port=0",
    );
    let manager = common::go::go_program("jobset-manager", false);
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook");
    let prepared = Command::new("sh")
        .arg(root().join("schedulers/jobset/webhook.sh"))
        .arg(&hook)
        .arg(common::go::go_dir())
        .output()
        .unwrap();
    assert!(
        prepared.status.success(),
        "webhook.sh: {}",
        String::from_utf8_lossy(&prepared.stderr)
    );
    let long = "a-job-whose-name-is-far-too-long-for-jobset-pods";
    let w = dir.path().join("w.json");
    std::fs::write(
        &w,
        json!({"nb_res": 16, "jobs": [
            {"id": "1", "subtime": 0, "res": 1, "profile": "d10"},
            {"id": "2", "subtime": 0, "res": 3, "profile": "d10"},
            {"id": "3", "subtime": 5, "res": 2, "profile": "d40", "walltime": 8, "maxRestarts": 1},
            {"id": long, "subtime": 5, "res": 1, "profile": "d10"}],
          "profiles": {"d10": {"type": "delay", "delay": 10, "cpu": "1"},
                       "d40": {"type": "delay", "delay": 40, "cpu": "1"}}})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let crds = common::go::go_dir().join("crds/jobset");
    let o = run(
        &out,
        &w,
        &[
            "--gang",
            "none",
            "--submit-as",
            "jobset",
            "--crds",
            crds.to_str().unwrap(),
            "--crds",
            hook.join("webhook.yaml").to_str().unwrap(),
            "--scheduler",
            &sched,
            "--controller",
            &kcm(),
            "--controller",
            &command(
                &manager,
                &format!("--config {}", hook.join("config.yaml").display()),
            ),
        ],
    );
    let s = succeeded(&out, &o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(
            "--submit-as jobset: admission webhooks act on the jobs' objects \
             (jobsets.jobset.x-k8s.io): mjobset.kb.io (mutating, \
             jobset-mutating-webhook-configuration), vjobset.kb.io (validating, \
             jobset-validating-webhook-configuration)"
        ),
        "the run says which webhooks act: {stderr}"
    );
    assert_eq!(
        s["jobs_succeeded"],
        2,
        "{s}\ncontroller-2.log:\n{}",
        log_tail(&out, "controller-2.log")
    );
    assert_eq!(s["resubmissions"], 1, "{s}");
    assert_eq!(s["warnings"], json!([]), "{s}");
    let jobs = csv(&out.join("jobs.csv"));
    let row = |id: &str| {
        jobs.iter()
            .find(|r| r[0] == id)
            .unwrap_or_else(|| panic!("no job {id}: {jobs:?}"))
            .clone()
    };
    assert_eq!(row("1")[7], "COMPLETED_SUCCESSFULLY");
    assert_eq!(row("2")[7], "COMPLETED_SUCCESSFULLY");
    assert_eq!(row("3")[7], "COMPLETED_WALLTIME_REACHED");
    assert_eq!(row("3-r1")[7], "COMPLETED_WALLTIME_REACHED");
    assert_eq!(row(long)[7], "REJECTED", "{jobs:?}");
    assert_eq!(jobs.len(), 5, "no third attempt: {jobs:?}");
    // The pods are the job controller's, of the Job JobSet made:
    // JOBSET-main-0-INDEX-xxxxx, one per node.
    let pods = pods_by_job(&out);
    for job in ["w0!1", "w0!2", "w0!3", "w0!3-r1"] {
        let rows = &pods[job];
        let name = job.split('-').next().unwrap().replace('!', "-");
        let nodes: std::collections::BTreeSet<&String> = rows.iter().map(|r| &r.1).collect();
        assert_eq!(nodes.len(), rows.len(), "{job}: one pod per node: {rows:?}");
        for (k, (pod, _, _)) in rows.iter().enumerate() {
            assert!(
                pod.starts_with(&format!("{name}-main-0-{k}-")),
                "{job}: pod {pod} of index {k}"
            );
        }
    }
    assert_eq!(pods["w0!2"].len(), 3);
    assert!(
        pods["w0!3-r1"]
            .iter()
            .all(|r| !pods["w0!3"].iter().any(|q| q.0 == r.0)),
        "the restart's pods are new"
    );
    let refused = &pods[&format!("w0!{long}")];
    assert!(
        refused[0].2.starts_with("REJECTED: its JobSet was refused")
            && refused[0].2.contains("JobSet name is too long"),
        "JobSet's validating webhook's message: {refused:?}"
    );
    let timeline = csv(&out.join("timeline.csv"));
    let by = |who: &str, verb: &str, kind: &str, name: &str| {
        timeline
            .iter()
            .filter(|r| r[1] == who && r[2] == verb && r[3] == kind && r[5] == name)
            .count()
    };
    for js in ["w0-1", "w0-2", "w0-3"] {
        assert_eq!(by("broker", "create", "JobSet", js), 1, "{js}");
        // The Job JobSet's controller makes (twice for the restarted one),
        // and the headless Service of the network its webhook defaults.
        let jobs_made = by("jobset", "create", "Job", &format!("{js}-main-0"));
        assert_eq!(jobs_made, if js == "w0-3" { 2 } else { 1 }, "{js}");
        assert_eq!(by("jobset", "create", "Service", js), 1, "{js}");
    }
    let conditions = |js: &str| -> Vec<String> {
        timeline
            .iter()
            .filter(|r| r[1] == "jobset" && r[3] == "JobSet" && r[5] == js && r[2] == "status")
            .map(|r| r[6].clone())
            .collect()
    };
    for js in ["w0-1", "w0-2"] {
        assert!(
            conditions(js).iter().any(|c| c == "conditions=Completed"),
            "{js}: {:?}",
            conditions(js)
        );
    }
    assert!(
        conditions("w0-3").iter().any(|c| c == "conditions=Failed"),
        "{:?}",
        conditions("w0-3")
    );
    assert!(timeline
        .iter()
        .any(|r| r[2] == "REGISTER_JOB" && r[5] == "w0!3-r1"));
    assert!(
        !timeline
            .iter()
            .any(|r| r[1] == "broker" && r[2] == "create" && r[3] == "Pod"),
        "the broker writes no pod"
    );
}

/// Styles the run cannot serve are refused before anything starts,
/// naming what to add; nothing is simulated.
#[test]
fn submission_styles_without_their_controller_are_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path(), &[(1, 0.0, 10.0, None)]);
    let out = dir.path().join("out");
    let refused = |args: &[&str], says: &[&str]| {
        let o = run(&out, &w, args);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        for s in says {
            assert!(err.contains(s), "{args:?}: {err}");
        }
        assert!(!out.join("summary.json").exists() || !err.contains("simulation complete"));
    };
    let sched = ["--scheduler", "true"];
    refused(
        &[&sched[..], &["--submit-as", "job"]].concat(),
        &["--submit-as job", "--controller", "kube-controller-manager"],
    );
    // A controller, but not the job controller's program.
    refused(
        &[
            &sched[..],
            &["--submit-as", "job", "--controller", "sleep 100"],
        ]
        .concat(),
        &["--submit-as job", "kube-controller-manager"],
    );
    refused(
        &[&sched[..], &["--submit-as", "vcjob"]].concat(),
        &["--submit-as vcjob", "--controller", "vc-controller-manager"],
    );
    let vcm = command(Path::new("/nonexistent/vc-controller-manager"), "");
    refused(
        &[&sched[..], &["--submit-as", "vcjob", "--controller", &vcm]].concat(),
        &["--submit-as vcjob", "jobs.batch.volcano.sh", "--crds"],
    );
    // A JobSet needs JobSet's controller, the job controller (for its
    // Job's pods), its CRD and its defaulting webhook: each missing one is
    // named, with what adds it.
    refused(
        &[
            &sched[..],
            &["--submit-as", "jobset", "--controller", &kcm()],
        ]
        .concat(),
        &[
            "--submit-as jobset",
            "--controller",
            "jobset-manager",
            "webhook.sh",
        ],
    );
    let jsm = command(Path::new("/nonexistent/jobset-manager"), "");
    refused(
        &[&sched[..], &["--submit-as", "jobset", "--controller", &jsm]].concat(),
        &[
            "--submit-as jobset",
            "kube-controller-manager",
            "job controller",
        ],
    );
    let kcm_fake = command(Path::new("/nonexistent/kube-controller-manager"), "");
    let both = [
        "--submit-as",
        "jobset",
        "--controller",
        &jsm,
        "--controller",
        &kcm_fake,
    ];
    refused(
        &[&sched[..], &both].concat(),
        &[
            "--submit-as jobset",
            "jobsets.jobset.x-k8s.io",
            "--crds",
            "crds/jobset",
        ],
    );
    // Its CRD but no webhook configuration for JobSets.
    let crd = dir.path().join("jobset-crd.yaml");
    std::fs::write(
        &crd,
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
         metadata: {name: jobsets.jobset.x-k8s.io}\nspec:\n  group: jobset.x-k8s.io\n  \
         names: {kind: JobSet, plural: jobsets}\n  scope: Namespaced\n  versions:\n  - \
         name: v1alpha2\n    served: true\n    storage: true\n    schema:\n      \
         openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n",
    )
    .unwrap();
    refused(
        &[&sched[..], &both, &["--crds", crd.to_str().unwrap()]].concat(),
        &[
            "--submit-as jobset",
            "webhook",
            "schedulers/jobset/webhook.sh",
            "--crds",
        ],
    );
    refused(
        &[&sched[..], &["--submit-as", "deployment"]].concat(),
        &["--submit-as", "deployment", "pod", "vcjob"],
    );
}

/// Kueue's controller manager on batch/v1 Jobs (its `batch/job`
/// integration) beside the job controller and kube-scheduler: three jobs
/// of 6 machines in team-a's ClusterQueue (8 cpu, borrowing up to 4, of
/// schedulers/kueue/kueue-queues.yaml): each Job is created suspended
/// (Kueue's webhook is not registered: the broker suspends it as the
/// webhook would, and says so), Kueue admits two by unsuspending them, the
/// job controller makes their pods; the third waits, suspended, for quota
/// and runs once one of the first two has ended.
#[test]
fn kueue_admits_batch_v1_jobs_by_unsuspending_them() {
    let sched = command(
        &common::go::go_program("kube-scheduler", false),
        "--leader-elect=false --secure-port=0",
    );
    let kueue = common::go::go_program("kueue-manager", false);
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(root().join("schedulers/kueue/config.yaml"))
        .unwrap()
        .replace("  - \"pod\"\n", "  - \"batch/job\"\n");
    assert!(
        config.contains("batch/job"),
        "Kueue's integrations in config.yaml moved"
    );
    let config_path = dir.path().join("kueue-jobs.yaml");
    std::fs::write(&config_path, config).unwrap();
    let jobs: Vec<Value> = (1..=3)
        .map(|i| {
            json!({"id": i.to_string(), "subtime": 0, "res": 6, "profile": "p",
            "queue": "team-a"})
        })
        .collect();
    let w = dir.path().join("w.json");
    std::fs::write(
        &w,
        json!({"nb_res": 16, "jobs": jobs,
            "profiles": {"p": {"type": "delay", "delay": 30, "cpu": "1"}}})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .current_dir(root())
        .args([
            "run",
            "--standin",
            "--strict",
            "--gang",
            "kueue",
            "--submit-as",
            "job",
        ])
        .arg("--platform")
        .arg(root().join("platforms/16-node.xml"))
        .arg("--workload")
        .arg(&w)
        .arg("--crds")
        .arg(common::go::go_dir().join("crds/kueue"))
        .arg("--scenario")
        .arg(root().join("schedulers/kueue/kueue-queues.yaml"))
        .args([
            "--scheduler",
            &sched,
            "--controller",
            &kcm(),
            "--controller",
        ])
        .arg(format!(
            "schedulers/kueue/run.sh {} --config {}",
            kueue.display(),
            config_path.display()
        ))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let s = succeeded(&out, &o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("the broker suspends the Jobs of a Kueue queue as Kueue's webhook would"),
        "{stderr}"
    );
    assert_eq!(
        s["jobs_succeeded"],
        3,
        "{s}\ncontroller-2.log:\n{}",
        log_tail(&out, "controller-2.log")
    );
    let pods = csv(&out.join("pods.csv"));
    let started = |job: &str| -> f64 {
        pods.iter()
            .filter(|r| r[0] == job)
            .map(|r| r[5].parse::<f64>().unwrap())
            .fold(f64::INFINITY, f64::min)
    };
    let mut starts: Vec<f64> = ["w0!1", "w0!2", "w0!3"]
        .iter()
        .map(|j| started(j))
        .collect();
    starts.sort_by(f64::total_cmp);
    // Two fit in team-a's quota with its borrowing; the third waits for
    // one of them to end (30 s).
    assert!(starts[2] >= starts[0] + 30.0, "starts {starts:?}");
    let timeline = csv(&out.join("timeline.csv"));
    for job in ["w0-1", "w0-2", "w0-3"] {
        let rows: Vec<&Vec<String>> = timeline
            .iter()
            .filter(|r| r[3] == "Job" && r[5] == job)
            .collect();
        assert!(
            rows.iter()
                .any(|r| r[1] == "kube-controller-manager/job-controller"
                    && r[6] == "conditions=Suspended"),
            "{job} created suspended: {rows:?}"
        );
        assert!(
            rows.iter().any(|r| r[1] == "kueue" && r[2] == "update"),
            "{job} admitted by Kueue (unsuspended): {rows:?}"
        );
    }
}

/// Kueue on batch/v1 Jobs with its own webhooks (schedulers/kueue/webhook.sh:
/// Kueue's cert controller makes its certificates, patches the caBundle of
/// its webhook configurations and CRDs, and reads its certificate from the
/// Secret's volume, `--mount-secret`), beside the job controller and
/// kube-scheduler, in the cohort of schedulers/kueue/kueue-queues.yaml. Job
/// 1 (12 machines, team-a: 8 of its own, 4 borrowed from cq-b) runs; job 2
/// (8 machines, team-b) comes and reclaims cq-b's quota: Kueue preempts job
/// 1 (its Job suspended again, its pods deleted: Batsim kills it), admits
/// job 2, and once job 2 is over readmits job 1, whose new pods run as the
/// new Batsim job `1-r1` to its end. Kueue's webhook suspended the Jobs, the
/// run says so, and the broker imitated nothing.
#[test]
fn kueue_preempts_a_running_job_and_readmits_it_with_its_own_webhook() {
    let sched = command(
        &common::go::go_program("kube-scheduler", false),
        "--leader-elect=false --secure-port=0",
    );
    let kueue = common::go::go_program("kueue-manager", false);
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(root().join("schedulers/kueue/config.yaml"))
        .unwrap()
        .replace("  - \"pod\"\n", "  - \"batch/job\"\n");
    assert!(
        config.contains("batch/job"),
        "Kueue's integrations in config.yaml moved"
    );
    let base = dir.path().join("kueue-jobs.yaml");
    std::fs::write(&base, config).unwrap();
    let hook = dir.path().join("hook");
    let prepared = Command::new("sh")
        .arg(root().join("schedulers/kueue/webhook.sh"))
        .arg(&hook)
        .arg(common::go::go_dir())
        .arg(&base)
        .output()
        .unwrap();
    assert!(
        prepared.status.success(),
        "webhook.sh: {}",
        String::from_utf8_lossy(&prepared.stderr)
    );
    let w = dir.path().join("w.json");
    std::fs::write(
        &w,
        json!({"nb_res": 16, "jobs": [
            {"id": "1", "subtime": 0, "res": 12, "profile": "d60", "queue": "team-a"},
            {"id": "2", "subtime": 5, "res": 8, "profile": "d20", "queue": "team-b"}],
          "profiles": {"d60": {"type": "delay", "delay": 60, "cpu": "1"},
                       "d20": {"type": "delay", "delay": 20, "cpu": "1"}}})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = run(
        &out,
        &w,
        &[
            "--gang",
            "kueue",
            "--submit-as",
            "job",
            // Kueue's certificates and webhook server are ready before t = 0.
            "--warm-up",
            "5",
            "--crds",
            hook.join("webhook.yaml").to_str().unwrap(),
            "--scenario",
            root()
                .join("schedulers/kueue/kueue-queues.yaml")
                .to_str()
                .unwrap(),
            "--mount-secret",
            &format!(
                "kueue-system/kueue-webhook-server-cert={}",
                hook.join("certs").display()
            ),
            "--scheduler",
            &sched,
            "--controller",
            &kcm(),
            "--controller",
            &command(
                &kueue,
                &format!("--config {}", hook.join("config.yaml").display()),
            ),
        ],
    );
    let s = succeeded(&out, &o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(
            "--submit-as job: admission webhooks act on the jobs' objects (jobs.batch): \
             mjob.kb.io (mutating, kueue-mutating-webhook-configuration), vjob.kb.io \
             (validating, kueue-validating-webhook-configuration)"
        ),
        "the run names Kueue's webhooks: {stderr}"
    );
    assert!(!stderr.contains("the broker suspends"), "{stderr}");
    assert_eq!(s["jobs_rejected"], 0, "{s}\n{}", diagnosis(&out, &o));
    assert_eq!(s["resubmissions"], 1, "{s}\n{}", diagnosis(&out, &o));
    assert_eq!(s["warnings"], json!([]), "{s}");
    let jobs = csv(&out.join("jobs.csv"));
    let row = |id: &str| {
        jobs.iter()
            .find(|r| r[0] == id)
            .unwrap_or_else(|| panic!("no job {id}: {jobs:?}"))
            .clone()
    };
    let time = |id: &str, col: usize| -> f64 { row(id)[col].parse().unwrap() };
    assert_eq!(row("1")[7], "COMPLETED_KILLED", "{jobs:?}");
    assert_eq!(time("1", 10), 5.0, "preempted when job 2 comes");
    assert_eq!(row("2")[7], "COMPLETED_SUCCESSFULLY");
    assert_eq!(row("1-r1")[7], "COMPLETED_SUCCESSFULLY");
    assert_eq!(time("1-r1", 9), 60.0, "the readmitted job runs whole");
    assert!(
        time("1-r1", 8) >= time("2", 10),
        "readmitted once job 2 has given cq-b's quota back: {jobs:?}"
    );
    assert_eq!(jobs.len(), 3, "{jobs:?}");
    let pods = pods_by_job(&out);
    let first = &pods["w0!1"];
    assert_eq!(first.len(), 12);
    assert_eq!(
        first.iter().filter(|r| r.2 == "PREEMPTED").count(),
        1,
        "{first:?}"
    );
    assert!(first
        .iter()
        .all(|r| r.2 == "PREEMPTED" || r.2.starts_with("KILLED")));
    let again = &pods["w0!1-r1"];
    assert_eq!(again.len(), 12);
    for (pod, _, outcome) in again {
        assert!(pod.starts_with("w0-1-"), "the Job's own pods: {pod}");
        assert!(!first.iter().any(|r| &r.0 == pod), "new pods: {pod}");
        assert_eq!(outcome, "COMPLETED_SUCCESSFULLY");
    }
    // Kueue's own doings: its certificates and caBundles before t = 0, the
    // Job suspended again at the preemption.
    let timeline = csv(&out.join("timeline.csv"));
    let kueue_did = |kind: &str, name: &str, at: Option<f64>| {
        timeline.iter().any(|r| {
            r[1] == "kueue"
                && r[3] == kind
                && r[5] == name
                && at.is_none_or(|t| r[0].parse::<f64>().unwrap() == t)
        })
    };
    assert!(kueue_did("Secret", "kueue-webhook-server-cert", None));
    assert!(kueue_did(
        "MutatingWebhookConfiguration",
        "kueue-mutating-webhook-configuration",
        None
    ));
    assert!(kueue_did(
        "CustomResourceDefinition",
        "workloads.kueue.x-k8s.io",
        None
    ));
    assert!(kueue_did("Job", "w0-1", Some(5.0)), "suspended at 5 s");
    assert!(timeline
        .iter()
        .any(|r| r[2] == "REGISTER_JOB" && r[5] == "w0!1-r1"));
}
