//! Real Batsim as `batkube run`'s child, played by fake `batsim` scripts on
//! PATH (no real Batsim on the test machines): a Batsim that aborts at start
//! ends the run at once with its message, and each run gets its own
//! endpoint unless `--socket-endpoint` fixes one.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory holding an executable `batsim` with this shell body.
fn fake_batsim(dir: &Path, body: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("batsim");
    std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn run_with(bin: &Path, out: &Path, extra: &[&str]) -> Output {
    let inputs = common::shared().join("reference/batsim/under-broker/inputs");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("run")
        .arg("--platform")
        .arg(inputs.join("16-node.xml"))
        .arg("--workload")
        .arg(inputs.join("200_delay170.json"))
        .arg("--scheduler")
        .arg(common::batkube_scheduler())
        .arg("--out")
        .arg(out)
        .args(extra)
        .env("PATH", path)
        .output()
        .unwrap()
}

const ABORT: &str = "echo \"$@\" > \"$(dirname \"$0\")/args\"\n\
echo '[0.000000] [xbt/INFO] Batsim version: fake' >&2\n\
echo \"terminate called after throwing an instance of 'std::invalid_argument'\" >&2\n\
echo \"  what():  Cannot create any role from string description 'master,master' existing roles are: compute_node, master, storage, \" >&2\n\
exit 134";

#[test]
fn a_batsim_that_aborts_at_start_ends_the_run_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_batsim(dir.path(), ABORT);
    let out = dir.path().join("out");
    let run = run_with(&bin, &out, &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Batsim exited"), "{stderr}");
    assert!(
        stderr.contains("Cannot create any role from string description 'master,master'"),
        "{stderr}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["completed"], false);
    assert_eq!(summary["end_reason"], "batsim-failed", "{summary}");
    let status = std::fs::read_to_string(out.join("batsim.exit")).unwrap();
    assert!(status.contains("134"), "{status}");
    let err = std::fs::read_to_string(out.join("batsim.err.log")).unwrap();
    assert!(err.contains("master,master"));
    // Started with a free port of its own, not Batsim's default 28000.
    let args = std::fs::read_to_string(bin.join("args")).unwrap();
    let endpoint = args
        .split_whitespace()
        .skip_while(|a| *a != "-s")
        .nth(1)
        .unwrap()
        .to_string();
    assert!(endpoint.starts_with("tcp://127.0.0.1:"), "{args}");
    assert!(
        !endpoint.ends_with(":28000") && !endpoint.ends_with(":*"),
        "{args}"
    );
}

#[test]
fn parallel_runs_get_different_endpoints_and_a_fixed_one_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let endpoints: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let d = dir.path().join(format!("r{i}"));
                s.spawn(move || {
                    let bin = fake_batsim(&d, ABORT);
                    let run = run_with(&bin, &d.join("out"), &[]);
                    assert_eq!(run.status.code(), Some(1));
                    let args = std::fs::read_to_string(bin.join("args")).unwrap();
                    args.split_whitespace()
                        .skip_while(|a| *a != "-s")
                        .nth(1)
                        .unwrap()
                        .to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_ne!(endpoints[0], endpoints[1]);

    let d = dir.path().join("fixed");
    let bin = fake_batsim(&d, ABORT);
    let run = run_with(
        &bin,
        &d.join("out"),
        &["--socket-endpoint", "tcp://127.0.0.1:28731"],
    );
    assert_eq!(run.status.code(), Some(1));
    let args = std::fs::read_to_string(bin.join("args")).unwrap();
    assert!(args.contains("-s tcp://127.0.0.1:28731"), "{args}");
}

/// `--record-protocol` on `run` writes the whole conversation in the shared
/// transcript format, and `batkube batsim --replay` finds the stand-in
/// sending it again message for message.
#[test]
fn a_recorded_run_replays_identically() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = common::shared().join("reference/batsim/under-broker/inputs");
    let record = dir.path().join("conversation.jsonl");
    let out = dir.path().join("out");
    let run = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("run")
        .arg("--standin")
        .arg("--platform")
        .arg(inputs.join("16-node.xml"))
        .arg("--workload")
        .arg(inputs.join("200_delay170.json"))
        .arg("--scheduler")
        .arg(common::batkube_scheduler())
        .arg("--out")
        .arg(&out)
        .arg("--record-protocol")
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() > 4);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["seq"], i);
        let dir = if i % 2 == 0 {
            "batsim->scheduler"
        } else {
            "scheduler->batsim"
        };
        assert_eq!(l["dir"], dir);
        assert!(l["wall"].as_f64().unwrap() > 0.0);
        let raw: serde_json::Value = serde_json::from_str(l["raw"].as_str().unwrap()).unwrap();
        assert_eq!(raw["now"].as_f64(), l["msg"]["now"].as_f64());
    }
    let last = &lines[lines.len() - 2]["msg"]["events"][0]["type"];
    assert_eq!(last, "SIMULATION_ENDS");
    let replay = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["batsim", "--enable-compute-sharing", "-p"])
        .arg(inputs.join("16-node.xml"))
        .arg("-w")
        .arg(inputs.join("200_delay170.json"))
        .arg("-e")
        .arg(format!("{}/replay_", dir.path().display()))
        .arg("--replay")
        .arg(&record)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&replay.stderr);
    assert!(replay.status.success(), "{stderr}");
    assert!(stderr.contains("identically"), "{stderr}");
}

/// Real Batsim writes `<prefix>_jobs.csv`, `<prefix>_schedule.csv`, … for
/// `-e <prefix>`. Played here by the stand-in behind a script that appends
/// that `_` to the prefix it is given: the run's outputs are still
/// `DIR/jobs.csv` and `DIR/schedule.csv`, Batsim's own (with profiles),
/// and no fallback jobs.csv replaces them.
#[test]
fn batsim_outputs_keep_the_stand_in_names() {
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "n=$#; prev=''\n\
         while [ $n -gt 0 ]; do\n\
           a=$1; shift; n=$((n-1))\n\
           if [ \"$prev\" = '-e' ]; then set -- \"$@\" \"${{a}}_\"; else set -- \"$@\" \"$a\"; fi\n\
           prev=$a\n\
         done\n\
         exec {} batsim \"$@\"",
        env!("CARGO_BIN_EXE_batkube")
    );
    let bin = fake_batsim(dir.path(), &body);
    let out = dir.path().join("out");
    let run = run_with(&bin, &out, &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    for name in ["jobs.csv", "schedule.csv"] {
        assert!(out.join(name).is_file(), "no {name} in {}", out.display());
        assert!(
            !out.join(format!("_{name}")).exists(),
            "_{name} left beside {name}"
        );
    }
    let jobs = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    let mut lines = jobs.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let profile = header.iter().position(|h| *h == "profile").unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 200);
    // The fallback writer knows no profile; Batsim's file names it.
    assert!(rows.iter().all(|r| r[profile] == "delay"), "{jobs}");
}
