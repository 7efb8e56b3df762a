//! scheduler-plugins' kube-scheduler with Coscheduling
//! (`schedulers/coscheduling/`), built from its Go modules by
//! `schedulers/build-go.sh kube-scheduler-coscheduling` (once per test
//! process, see `common/go.rs`): the binary is stamped with the pinned
//! Kubernetes release, the PodGroup and ElasticQuota CRDs come with it
//! (copied from the module cache), and `config.yaml` gets through loading,
//! validation and the plugin's construction without an API to talk to.
//!
//! And under `batkube run`, unmodified, on simulated time: a workload of
//! parallel jobs (gangs of pods, `--gang coscheduling`, its CRDs given with
//! `--crds`) runs to completion, every gang's pods started together.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `--scheduler` of `batkube run` for this binary: with `--config`,
/// kube-scheduler ignores `--kubeconfig`, so the API's address goes in
/// `--master`, read from the kubeconfig batkube writes.
fn scheduler_command(bin: &Path) -> String {
    format!(
        "{} --config {} --secure-port=0 --master \"$(sed -n 's/^ *server: *//p' \"$KUBECONFIG\")\"",
        bin.display(),
        root().join("schedulers/coscheduling/config.yaml").display()
    )
}

/// The Kubernetes release schedulers/coscheduling/go.mod pins (its replace).
fn pinned_kubernetes() -> String {
    let gomod = std::fs::read_to_string(root().join("schedulers/coscheduling/go.mod")).unwrap();
    gomod
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("k8s.io/kubernetes => k8s.io/kubernetes ")
        })
        .expect("go.mod replaces k8s.io/kubernetes")
        .trim()
        .to_string()
}

fn yaml(path: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs the scheduler on `config` with `--write-config-to`: it loads and
/// validates the file, builds its profile (constructing Coscheduling, whose
/// PodGroup client connects lazily), writes the completed configuration and
/// exits. The API address is unreachable on purpose.
fn write_config(bin: &Path, config: &Path, to: &Path) -> std::process::Output {
    Command::new(bin)
        .arg("--config")
        .arg(config)
        .args(["--master", "http://127.0.0.1:1", "--secure-port=0"])
        .arg("--write-config-to")
        .arg(to)
        .output()
        .unwrap()
}

#[test]
fn coscheduling_scheduler_builds_with_its_crds_and_accepts_its_config() {
    let bin = common::go::go_program("kube-scheduler-coscheduling", false);

    let v = Command::new(&bin).arg("--version").output().unwrap();
    assert!(v.status.success(), "{v:?}");
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("Kubernetes {}", pinned_kubernetes())
    );

    let crds = common::go::go_dir().join("crds/coscheduling");
    for (file, kind) in [
        ("scheduling.x-k8s.io_podgroups.yaml", "PodGroup"),
        ("scheduling.x-k8s.io_elasticquotas.yaml", "ElasticQuota"),
    ] {
        let crd = yaml(&crds.join(file));
        assert_eq!(crd["kind"], "CustomResourceDefinition", "{file}");
        assert_eq!(crd["spec"]["group"], "scheduling.x-k8s.io", "{file}");
        assert_eq!(crd["spec"]["names"]["kind"], kind, "{file}");
        // The version the plugins read (sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1).
        let versions = crd["spec"]["versions"].as_sequence().unwrap();
        assert!(
            versions
                .iter()
                .any(|v| v["name"] == "v1alpha1" && v["served"] == true && v["storage"] == true),
            "{file}: no served v1alpha1"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let config = root().join("schedulers/coscheduling/config.yaml");
    let written = dir.path().join("written.yaml");
    let o = write_config(&bin, &config, &written);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = yaml(&written);
    assert_eq!(c["leaderElection"]["leaderElect"], false);
    let profile = &c["profiles"][0];
    let names = |list: &serde_yaml::Value| -> Vec<String> {
        list.as_sequence()
            .map(|s| {
                s.iter()
                    .map(|p| p["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        names(&profile["plugins"]["multiPoint"]["enabled"]).contains(&"Coscheduling".to_string()),
        "{profile:?}"
    );
    assert_eq!(
        names(&profile["plugins"]["queueSort"]["enabled"]),
        ["Coscheduling"]
    );
    let args = profile["pluginConfig"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Coscheduling")
        .map(|p| &p["args"])
        .expect("Coscheduling's pluginConfig");
    // Decoded as the plugin's typed args (apis/config/scheme registered) and defaulted.
    assert_eq!(args["kind"], "CoschedulingArgs");
    assert_eq!(args["permitWaitingTimeSeconds"], 60);
    assert_eq!(args["podGroupRejectPercentage"], 10);

    // The args reach the plugin, which rejects a negative wait.
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("permitWaitingTimeSeconds: 60"));
    std::fs::write(
        &bad,
        text.replace(
            "permitWaitingTimeSeconds: 60",
            "permitWaitingTimeSeconds: -1",
        ),
    )
    .unwrap();
    let o = write_config(&bin, &bad, &dir.path().join("bad-written.yaml"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a negative wait was accepted: {err}");
    assert!(err.contains("permitWaitingTimeSeconds"), "{err}");
}

/// The platform (6 one-cpu machines) and workload (10 jobs on 1 to 4 of
/// them, arriving in twos every 5 s, 20 s each) both tests run.
fn ten_jobs_on_six_machines(dir: &Path) -> (PathBuf, PathBuf) {
    let p = common::platform(dir, 6);
    let res = [4, 2, 1, 3, 4, 2, 2, 1, 4, 3];
    let jobs: Vec<serde_json::Value> = res
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::json!({"id": (i + 1).to_string(), "subtime": (i / 2) as f64 * 5.0,
                "res": r, "profile": "p"})
        })
        .collect();
    let w = dir.join("w.json");
    std::fs::write(
        &w,
        serde_json::json!({"nb_res": 6, "jobs": jobs,
            "profiles": {"p": {"type": "delay", "delay": 20, "cpu": "1"}}})
        .to_string(),
    )
    .unwrap();
    (p, w)
}

/// `batkube run` of the coscheduling scheduler on platform `p` and workload
/// `w` into `out`, with `extra` flags; the run must succeed; its summary.
fn run_coscheduling(
    bin: &Path,
    p: &Path,
    w: &Path,
    out: &Path,
    extra: &[&str],
) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--standin", "--strict", "--platform"])
        .arg(p)
        .arg("--workload")
        .arg(w)
        .arg("--crds")
        .arg(common::go::go_dir().join("crds/coscheduling"))
        .arg("--scheduler")
        .arg(scheduler_command(bin))
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// A small parallel workload through the stand-in: 10 jobs on 1 to 4 of
/// 6 machines, arriving in twos; every job completes, no node is
/// overcommitted, and the pods of each gang start and end together.
#[test]
fn coscheduling_runs_a_parallel_workload_to_completion_on_simulated_time() {
    let bin = common::go::go_program("kube-scheduler-coscheduling", false);
    let dir = tempfile::tempdir().unwrap();
    let (p, w) = ten_jobs_on_six_machines(dir.path());
    // The plugin itself can livelock a gang under some thread interleavings
    // of the Go program (seen once in ~25 runs with six CPU hogs beside it:
    // three pods of a 4-pod gang wait at Permit while the fourth sits in
    // the unschedulable queue with no event to move it, until Permit times
    // out; the members are then flushed back one by one, 5 min apart, never
    // together, and the broker rejects the gang after --give-up-after).
    // The Go program's races are issue 26's subject. Measured 2026-12-04
    // with two CPU hogs beside it: 5 of 20 runs livelocked so, with the
    // broker of then and of before (one CI run met it twice in a row). A
    // livelocked run is retried up to twice, any other failure is not.
    let mut attempt = 0;
    let (out, s) = loop {
        attempt += 1;
        let out = dir.path().join(format!("out-{attempt}"));
        let s = run_coscheduling(&bin, &p, &w, &out, &[]);
        let pods = std::fs::read_to_string(out.join("pods.csv")).unwrap();
        let livelocked = s["jobs_rejected"] != 0
            && pods
                .lines()
                .any(|l| l.contains("REJECTED") && l.contains("Coscheduling"));
        if livelocked && attempt < 3 {
            eprintln!("the plugin livelocked a gang (see the comment); running again");
            continue;
        }
        break (out, s);
    };
    if s["jobs_succeeded"] != 10 {
        // Diagnosable from CI's log: the pods that never started and what
        // the scheduler said last.
        let pods = std::fs::read_to_string(out.join("pods.csv")).unwrap_or_default();
        let unstarted: Vec<&str> = pods
            .lines()
            .filter(|l| l.contains("Unschedulable") || l.contains(",,"))
            .collect();
        let log = std::fs::read_to_string(out.join("scheduler.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "not every job succeeded: {s}\npods.csv rows of unstarted pods:\n{}\nthe end of scheduler.log:\n{}",
            unstarted.join("\n"),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    assert_eq!(s["gangs_started"], 8, "{s}");
    assert_eq!(s["overcommit_count"], 0);
    let pods = std::fs::read_to_string(out.join("pods.csv")).unwrap();
    let mut started: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for line in pods.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        started
            .entry(f[0].to_string())
            .or_default()
            .insert(format!("{}/{}", f[5], f[6]));
    }
    assert_eq!(started.len(), 10);
    for (job, times) in started {
        assert_eq!(
            times.len(),
            1,
            "{job}: its pods started or ended apart: {times:?}"
        );
    }
}

/// Under most seeds the same workload makes the plugin spin at one
/// instant: a 4-pod gang that cannot fit yet is tried again and again (its
/// pods wait at Permit, the last one rejects them, all are activated again
/// at once) until a running job ends. The supervisor holds the scheduler at
/// the busy bound (`--spin-bound`) and the clock moves on to that job's
/// end: every job completes, no window waits out its wall-clock bound, and
/// two runs, the second beside CPU hogs, give the same jobs.csv and
/// pods.csv. Before the bound, the window stayed open until
/// `--window-bound` (60 s of wall time) and the outcome followed the
/// machine (9 or 10 jobs done).
///
/// Which seeds spin is not fixed: a seed fixes a run for the same inputs,
/// and the scheduler's command line is one (CI's checkout path gave seed 3
/// a run without a spin, 409.1 s long, where /work/main's spun once). Of
/// seeds 1 to 9, 8 spun at both paths measured; the first that spins here
/// is the one run twice. The seeds are in the order of the cheapest spins
/// first (held once, about 12 s); 1 and 4 are held again at the plugin's
/// every timer tick for 20 simulated seconds (40 s of wall time).
#[test]
fn a_gang_spinning_at_one_instant_under_a_seed_is_held_and_the_run_is_the_same_twice() {
    let bin = common::go::go_program("kube-scheduler-coscheduling", false);
    let dir = tempfile::tempdir().unwrap();
    let (p, w) = ten_jobs_on_six_machines(dir.path());
    let run = |name: &str, seed: u64| {
        let out = dir.path().join(name);
        let seed = seed.to_string();
        let s = run_coscheduling(&bin, &p, &w, &out, &["--shim", "seccomp", "--seed", &seed]);
        let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
        assert_eq!(s["jobs_succeeded"], 10, "seed {seed}: {s}");
        assert_eq!(s["windows_bound_hit"], 0, "seed {seed}: {s}");
        (s, read("jobs.csv"), read("pods.csv"))
    };
    let mut tried = vec![];
    let (seed, (s, jobs, pods)) = [3, 2, 8, 5, 6, 9, 1, 4]
        .into_iter()
        .find_map(|seed| {
            let r = run(&format!("seed-{seed}"), seed);
            tried.push((seed, r.0["makespan"].clone()));
            (r.0["spins_held"].as_u64().unwrap() >= 1).then_some((seed, r))
        })
        .unwrap_or_else(|| panic!("no seed made the plugin spin (seed, makespan): {tried:?}"));
    let hogs = common::Hogs::start(3);
    let (s2, jobs2, pods2) = run("again", seed);
    drop(hogs);
    assert_eq!(jobs, jobs2, "seed {seed}: jobs.csv differs beside CPU hogs");
    assert_eq!(pods, pods2, "seed {seed}: pods.csv differs beside CPU hogs");
    assert_eq!(s["spins_held"], s2["spins_held"]);
}
