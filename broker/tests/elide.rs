//! `--elide`: the rules that let the clock pass over programs' timers, their
//! counts in summary.json, `--compare-exact` and `batkube compare`, with the
//! upstream kube-scheduler (whose timers tick whatever happens: its queue's
//! flushes every second, its cache's cleanup, its informers' resyncs).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn batkube(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(args)
        .output()
        .unwrap()
}

/// 10 jobs on 4 or 8 of 16 machines, 15 s apart on average, lasting 60 to
/// 120 s: pods wait for machines, and meanwhile the scheduler's timers tick.
fn workload(dir: &Path) -> PathBuf {
    let w = dir.join("w.json");
    let o = batkube(&[
        "workload",
        "generate",
        "-n",
        "10",
        "--arrival",
        "poisson:15",
        "--duration",
        "uniform:60:120",
        "--cpu",
        "1",
        "--res",
        "choice:4,8",
        "--seed",
        "5",
        "-o",
        w.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    w
}

fn run_args(w: &Path, out: &Path) -> Vec<String> {
    let sched = common::go::go_program("kube-scheduler", true);
    vec![
        "run".into(),
        "--standin".into(),
        "--strict".into(),
        "--shim".into(),
        "seccomp".into(),
        "--seed".into(),
        "1".into(),
        "--gang".into(),
        "none".into(),
        "--platform".into(),
        root().join("platforms/16-node.xml").display().to_string(),
        "--workload".into(),
        w.display().to_string(),
        "--scheduler".into(),
        format!(
            "{} --kubeconfig \"$KUBECONFIG\" --leader-elect=false --secure-port=0",
            sched.display()
        ),
        "--out".into(),
        out.display().to_string(),
    ]
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn compare_exact_runs_both_and_the_elided_run_costs_less() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let out = dir.path().join("cmp");
    let mut args = run_args(&w, &out);
    args.extend(["--elide".into(), "idle".into(), "--compare-exact".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = batkube(&args);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let text = std::fs::read_to_string(out.join("compare.txt"))
        .unwrap_or_else(|e| panic!("no compare.txt ({e}): {stderr}"));
    assert!(
        stdout.contains(&text),
        "the comparison is printed: {stdout}"
    );
    // Exit status 0 exactly when identical.
    assert_eq!(
        o.status.success(),
        text.trim_end().ends_with("identical"),
        "{text}\n{stderr}"
    );
    if !o.status.success() {
        assert!(
            text.contains("first difference, at simulated time"),
            "{text}"
        );
    }
    let (exact, elided) = (summary(&out.join("exact")), summary(&out.join("elided")));
    for s in [&exact, &elided] {
        assert_eq!(s["jobs_succeeded"], 10, "{s}");
        assert!(
            s["program_cpu_seconds"]["scheduler"].as_f64().unwrap() > 0.0,
            "{s}"
        );
        // batkube's own process: the broker, the API, the supervisor.
        assert!(s["batkube_cpu_seconds"].as_f64().unwrap() > 0.0, "{s}");
    }
    assert_eq!(exact["elide"], "none");
    assert_eq!(exact["wake_ups_elided"], serde_json::json!({}));
    assert_eq!(elided["elide"], "idle");
    let passed = elided["wake_ups_elided"]["idle"].as_u64().unwrap();
    assert!(passed > 0, "{elided}");
    let (we, wl) = (
        exact["windows"].as_u64().unwrap(),
        elided["windows"].as_u64().unwrap(),
    );
    assert!(wl * 2 < we, "windows: exact {we}, elided {wl}");
    // Each program's requests, with simulated times.
    for run in ["exact", "elided"] {
        let csv = std::fs::read_to_string(out.join(run).join("requests.csv")).unwrap();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some("time,program,method,verb,resource,path,query,code")
        );
        assert!(
            csv.lines()
                .any(|l| l.contains(",scheduler,POST,create,pods/binding,") && l.ends_with(",201")),
            "{run}: no binding in requests.csv"
        );
    }
    // A run compared with itself is identical.
    let o = batkube(&[
        "compare",
        out.join("exact").to_str().unwrap(),
        out.join("exact").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("identical"));
}

/// With `--seed`, an elided run is the same at any machine load: which
/// timers it passes over depends only on what the programs did.
#[test]
fn elided_runs_with_a_seed_are_identical_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let w = workload(dir.path());
    let _hogs = common::Hogs::start(2);
    let mut outs = Vec::new();
    for i in 0..2 {
        let out = dir.path().join(format!("run{i}"));
        let mut args = run_args(&w, &out);
        args.extend(["--elide".into(), "idle".into(), "--log-requests".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = batkube(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        outs.push(out);
    }
    let o = batkube(&[
        "compare",
        outs[0].to_str().unwrap(),
        outs[1].to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        summary(&outs[0])["wake_ups_elided"],
        summary(&outs[1])["wake_ups_elided"]
    );
}

#[test]
fn bad_rules_and_policies_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.json");
    std::fs::write(&w, r#"{"nb_res":1,"jobs":[],"profiles":{}}"#).unwrap();
    let base = |extra: &[&str]| {
        let mut a = vec![
            "run",
            "--standin",
            "--platform",
            "platforms/16-node.xml",
            "--workload",
            w.to_str().unwrap(),
            "--scheduler",
            "true",
            "--out",
            dir.path().to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
            .current_dir(root())
            .args(&a)
            .output()
            .unwrap();
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let e = base(&["--elide", "idel"]);
    assert!(e.contains("idel") && e.contains("controllers"), "{e}");
    let e = base(&["--elide", "idle", "--sync", "timeout", "--shim", "none"]);
    assert!(e.contains("--elide idle needs the exact policy"), "{e}");
    // A rule the chosen shim cannot apply: the Go poller's is the seccomp
    // supervisor's, and a linked scheduler has none.
    let e = base(&["--elide", "go-poller", "--shim", "linked"]);
    assert!(
        e.contains("--elide go-poller acts in the seccomp supervisor"),
        "{e}"
    );
    let e = base(&["--compare-exact"]);
    assert!(
        e.contains("--compare-exact compares a run under --elide"),
        "{e}"
    );
    // Two runs that do not hold the same files.
    let o = batkube(&["compare", dir.path().to_str().unwrap(), "/nonexistent"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("jobs.csv"));
}
