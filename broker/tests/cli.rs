//! `batkube batsim` as a user runs it: real files, exit codes, messages.

mod common;

use std::process::Command;

fn batkube() -> Command {
    Command::new(env!("CARGO_BIN_EXE_batkube"))
}

#[test]
fn runs_the_burst_workload_and_writes_batsim_files() {
    let dir = tempfile::tempdir().unwrap();
    let platform = dir.path().join("g16.xml");
    std::fs::write(&platform, common::graphene16()).unwrap();
    let out = dir.path().join("out/");
    std::fs::create_dir_all(&out).unwrap();
    let run = batkube()
        .args(["batsim", "-p"])
        .arg(&platform)
        .arg("-w")
        .arg(common::shared().join("reference/batkube/workloads/200_delay170.json"))
        .arg("-e")
        .arg(format!("{}/", out.display()))
        .args(["--builtin-scheduler", "fcfs"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("makespan 2210.000000"), "{stderr}");
    let jobs = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    assert_eq!(jobs.lines().count(), 201);
    let schedule = std::fs::read_to_string(out.join("schedule.csv")).unwrap();
    assert!(schedule.starts_with("batsim_version,consumed_joules,makespan,"));
}

fn fails_with(args: &[&str], files: &[(&str, &str)], expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let run = batkube()
        .current_dir(dir.path())
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{args:?} should fail");
    assert!(
        stderr.contains(expect),
        "{args:?}: expected {expect:?} in: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

const PLATFORM: &str = r#"<platform version="4.1"><zone id="z" routing="Full">
<host id="master_host" speed="1Gf"/><host id="n0" speed="1Gf"/></zone></platform>"#;
const WORKLOAD: &str = r#"{"jobs":[{"id":"1","subtime":0,"res":1,"profile":"p"}],
"profiles":{"p":{"type":"delay","delay":1}}}"#;

#[test]
fn bad_inputs_get_clear_messages_and_nonzero_exits() {
    let base = [
        "batsim",
        "-p",
        "p.xml",
        "-w",
        "w.json",
        "-e",
        "./",
        "--builtin-scheduler",
        "fcfs",
    ];
    fails_with(
        &base,
        &[("w.json", WORKLOAD)],
        "cannot read platform file p.xml",
    );
    fails_with(
        &base,
        &[("p.xml", "<platform"), ("w.json", WORKLOAD)],
        "not valid XML",
    );
    fails_with(
        &base,
        &[("p.xml", PLATFORM), ("w.json", "{\"jobs\": [")],
        "not valid JSON",
    );
    fails_with(
        &base,
        &[
            ("p.xml", PLATFORM),
            (
                "w.json",
                r#"{"jobs":[{"id":"j9","subtime":0,"res":1,"profile":"s"}],"profiles":{"s":{"type":"smpi"}}}"#,
            ),
        ],
        "job \"j9\" uses profile \"s\"",
    );
    fails_with(
        &[
            "batsim",
            "-p",
            "p.xml",
            "-w",
            "w.json",
            "-e",
            "missing/dir/",
        ],
        &[("p.xml", PLATFORM), ("w.json", WORKLOAD)],
        "does the directory exist",
    );
    // A peer that answers garbage over ZeroMQ.
    let endpoint = format!("ipc:///tmp/batkube-cli-garbage-{}.sock", std::process::id());
    let _ipc = IpcFile(endpoint.clone());
    let ctx = zmq::Context::new();
    let rep = ctx.socket(zmq::REP).unwrap();
    rep.bind(&endpoint).unwrap();
    let peer = std::thread::spawn(move || {
        let _ = rep.recv_bytes(0).unwrap();
        rep.send("{\"now\": \"soon\"", 0).unwrap();
    });
    fails_with(
        &[
            "batsim", "-p", "p.xml", "-w", "w.json", "-e", "./", "-s", &endpoint,
        ],
        &[("p.xml", PLATFORM), ("w.json", WORKLOAD)],
        "sent an invalid message",
    );
    peer.join().unwrap();
}

/// Each cause of an error is said once (the library's message already
/// includes its source; the chain used to repeat it).
fn once(stderr: &str, cause: &str) {
    assert_eq!(stderr.matches(cause).count(), 1, "{stderr}");
}

#[test]
fn a_missing_input_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let run = batkube()
        .arg("run")
        .arg("-p")
        .arg(repo.join("platforms/16-node.xml"))
        .arg("-w")
        .arg(dir.path().join("missing.json"))
        .args(["--scheduler", "true", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(stderr.contains("cannot read workload file"), "{stderr}");
    once(&stderr, "No such file or directory");
}

#[test]
fn a_port_in_use_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    // The API's port.
    let serve = batkube()
        .args(["serve", "--api", &addr.to_string(), "--out"])
        .arg(dir.path().join("serve"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert!(!serve.status.success());
    assert!(stderr.contains("starting the API server"), "{stderr}");
    once(&stderr, "Address already in use");
    // Batsim's socket.
    let serve = batkube()
        .args(["serve", "--api", "127.0.0.1:0", "--out"])
        .arg(dir.path().join("serve2"))
        .args(["--socket-endpoint", &format!("tcp://{addr}")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert!(!serve.status.success());
    assert!(stderr.contains("cannot bind the Batsim socket"), "{stderr}");
    once(&stderr, "Address already in use");
}

/// Removes an `ipc://` socket file when the test ends (ZeroMQ leaves it).
struct IpcFile(String);

impl Drop for IpcFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0.trim_start_matches("ipc://"));
    }
}
