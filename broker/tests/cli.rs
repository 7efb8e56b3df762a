//! `batkube` as a user runs it: real files, exit codes, messages; the
//! conventions of a command-line tool (`--version` with the commit, shell
//! completions, manual pages).

#[path = "../commit/src/commit.rs"]
mod commit;
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

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn bad_inputs_of_a_run_name_the_file_line_and_field() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let platform = repo.join("platforms/16-node.xml");
    let platform = platform.to_str().unwrap();
    let workload = repo.join("workloads/200_delay170.json");
    let workload = workload.to_str().unwrap();
    let run = |p: &str, w: &str, extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> = ["run", "-p", p, "-w", w, "--scheduler", "true"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(["--out".to_string(), "out".to_string()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    // A platform: the file, line and column, the attribute.
    let xml = "<?xml version=\"1.0\"?>\n<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">\n\
               <host id=\"master_host\" speed=\"1Gf\"/>\n<host id=\"n0\" speed=\"1Gf\" speed=\"2Gf\"/>\
               </zone></platform>\n";
    fails_with(
        &strs(&run("p.xml", workload, &[])),
        &[("p.xml", xml)],
        "platform p.xml is not valid XML: attribute 'speed' at 4:27",
    );
    let xml = xml.replace(" speed=\"1Gf\" speed=\"2Gf\"", " speed=\"fast\"");
    fails_with(
        &strs(&run("p.xml", workload, &[])),
        &[("p.xml", &xml)],
        "platform p.xml: line 4: host \"n0\": speed: \"fast\"",
    );
    // A scenario: the file and the line of the operation, the field.
    let scenario = "- at: 0\n  cordon: node-1\n- at: 10\n  drain: node-2\n  gracePeriod: 30\n";
    fails_with(
        &strs(&run(platform, workload, &["--scenario", "s.yaml"])),
        &[("s.yaml", scenario)],
        "s.yaml:3: unknown field \"gracePeriod\"",
    );
    // A workload: `batkube workload validate` gives the line and column,
    // `run` the file, the job and the field.
    let bad = "{\"nb_res\": 4,\n \"jobs\": [\n  {\"id\": \"a\", \"subtime\": 0, \"res\": 1, \"profile\": \"p\"},\n  \
               {\"id\": \"b\", \"subtime\": \"x\", \"res\": 1, \"profile\": \"p\"}],\n \
               \"profiles\": {\"p\": {\"type\": \"delay\", \"delay\": 10}}}\n";
    fails_with(
        &["workload", "validate", "w.json"],
        &[("w.json", bad)],
        "w.json:line 4, column 3: error: job \"b\": \"subtime\"",
    );
    fails_with(
        &strs(&run(platform, "w.json", &[])),
        &[("w.json", bad)],
        "workload w.json: job \"b\" (#1): \"subtime\"",
    );
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let run = batkube().arg("--version").output().unwrap();
    assert!(run.status.success());
    let stdout = String::from_utf8(run.stdout).unwrap();
    let built = batkube_commit::commit!();
    assert_eq!(
        stdout,
        format!("batkube {} ({built})\n", env!("CARGO_PKG_VERSION"))
    );
    // In a checkout, the commit git names (these tests are built from the
    // working tree, so their build saw the same HEAD); "commit unknown"
    // outside one.
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    match commit::commit(here) {
        Some((text, _)) => assert_eq!(built, text),
        None => assert_eq!(built, "commit unknown"),
    }
}

#[test]
fn the_commit_comes_from_this_repositorys_git_and_is_unknown_elsewhere() {
    let git = |dir: &std::path::Path, args: &[&str]| {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .expect("git is installed");
        assert!(o.status.success(), "git {args:?}: {o:?}");
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    // A tarball: no git around it.
    let tarball = tempfile::tempdir().unwrap();
    std::fs::write(tarball.path().join("Cargo.toml"), "[package]\n").unwrap();
    assert!(commit::commit(tarball.path()).is_none());
    // A tarball unpacked inside another project's checkout: its files are
    // not tracked there.
    let other = tempfile::tempdir().unwrap();
    git(other.path(), &["init", "-q"]);
    std::fs::write(other.path().join("README"), "x").unwrap();
    git(other.path(), &["add", "README"]);
    git(other.path(), &["commit", "-qm", "other"]);
    let unpacked = other.path().join("batkube/broker");
    std::fs::create_dir_all(&unpacked).unwrap();
    std::fs::write(unpacked.join("Cargo.toml"), "[package]\n").unwrap();
    assert!(commit::commit(&unpacked).is_none());
    // A checkout: the commit's hash and date, and the files that move
    // with the next commit.
    git(other.path(), &["add", "batkube"]);
    git(other.path(), &["commit", "-qm", "ours"]);
    let (text, watch) = commit::commit(&unpacked).expect("tracked");
    let hash = git(other.path(), &["rev-parse", "--short=12", "HEAD"]);
    let date = git(other.path(), &["log", "-1", "--format=%cs"]);
    assert_eq!(text, format!("{hash} {date}"));
    let branch = git(other.path(), &["symbolic-ref", "HEAD"]);
    let is = |p: &std::path::Path, want: &str| {
        p.canonicalize().unwrap() == other.path().join(".git").join(want).canonicalize().unwrap()
    };
    assert!(watch.iter().any(|p| is(p, "HEAD")), "{watch:?}");
    assert!(watch.iter().any(|p| is(p, &branch)), "{watch:?}");
    assert!(watch.iter().any(|p| is(p, "logs/HEAD")), "{watch:?}");
    // Its ref packed: packed-refs, and the reflog the next commit appends
    // to as it writes the ref again; files only (the macro includes them).
    git(other.path(), &["pack-refs", "--all"]);
    let (_, watch) = commit::commit(&unpacked).unwrap();
    assert!(watch.iter().any(|p| is(p, "packed-refs")), "{watch:?}");
    assert!(watch.iter().any(|p| is(p, "logs/HEAD")), "{watch:?}");
    assert!(watch.iter().all(|p| p.is_file()), "{watch:?}");
}

#[test]
fn completions_are_generated_for_each_shell_and_complete_in_bash() {
    for (shell, marker) in [
        ("bash", "_batkube()"),
        ("zsh", "#compdef batkube"),
        ("fish", "complete -c batkube"),
        ("elvish", "edit:completion:arg-completer[batkube]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let run = batkube().args(["completions", shell]).output().unwrap();
        assert!(run.status.success(), "{shell}: {run:?}");
        let script = String::from_utf8(run.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("platform"), "{shell}");
    }
    fails_with(
        &["completions", "tcsh"],
        &[],
        "invalid value 'tcsh' for '<SHELL>'",
    );
    // The bash script, sourced as a user's shell does, completes
    // subcommands and flags.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("batkube.bash");
    let run = batkube().args(["completions", "bash"]).output().unwrap();
    std::fs::write(&script, run.stdout).unwrap();
    let complete = |words: &str, cur: &str, prev: &str| -> Vec<String> {
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source \"$1\"; COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); \
                 _batkube batkube {cur} {prev}; printf '%s\\n' \"${{COMPREPLY[@]}}\""
            ))
            .arg("_")
            .arg(&script)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(complete("batkube ru", "ru", "batkube"), ["run"]);
    assert_eq!(
        complete("batkube run --pla", "--pla", "run"),
        ["--platform"]
    );
    assert!(complete("batkube workload ''", "''", "workload")
        .iter()
        .any(|w| w == "generate"));
}

/// The long flags `batkube ARGS --help` lists.
fn long_flags(args: &[&str]) -> Vec<String> {
    let run = batkube().args(args).arg("--help").output().unwrap();
    assert!(run.status.success());
    let mut flags: Vec<String> = String::from_utf8(run.stdout)
        .unwrap()
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn man_pages_cover_every_command_and_flag() {
    let run = batkube().arg("man").output().unwrap();
    assert!(run.status.success());
    let page = String::from_utf8(run.stdout).unwrap();
    assert!(page.contains(".TH batkube 1"), "{page}");
    assert!(page.contains(batkube_commit::commit!()), "{page}");
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let run = batkube()
        .arg("man")
        .arg("--dir")
        .arg(&pages)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    for command in [
        vec!["run"],
        vec!["serve"],
        vec!["batsim"],
        vec!["report"],
        vec!["replay"],
        vec!["workload", "generate"],
        vec!["workload", "convert", "swf"],
        vec!["workload", "validate"],
        vec!["platform", "gen"],
        vec!["platform", "validate"],
        vec!["completions"],
    ] {
        let name = format!("batkube-{}.1", command.join("-"));
        let page =
            std::fs::read_to_string(pages.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        for flag in long_flags(&command) {
            assert!(
                page.contains(&flag.replace('-', "\\-")),
                "{name} lacks {flag}"
            );
        }
    }
    assert!(long_flags(&["run"]).contains(&"--platform".to_string()));
}

/// `--cpus`: a list pins the run and what it starts there, the same
/// outputs as the OS's choice; a CPU the run may not use and a word it does
/// not know are refused before the run, naming the flag.
#[test]
fn cpus_pin_the_run_and_its_programs_and_bad_lists_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let platform = common::platform(dir.path(), 4);
    let workload = dir.path().join("w.json");
    std::fs::write(
        &workload,
        r#"{"jobs":[{"id":"1","subtime":0,"res":1,"profile":"p"},{"id":"2","subtime":3,"res":1,"profile":"p"}],
"profiles":{"p":{"type":"delay","delay":5}}}"#,
    )
    .unwrap();
    // The scheduler says where it may run before it becomes batkube-scheduler.
    let wrapper = dir.path().join("scheduler.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status > {0}/cpus.txt\necho \"GOMAXPROCS=$GOMAXPROCS\" > {0}/gomaxprocs.txt\nexec {1} \"$@\"\n",
            dir.path().display(),
            common::batkube_scheduler().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let run = |cpus: &str, out: &str| {
        batkube()
            .arg("run")
            .arg("--platform")
            .arg(&platform)
            .arg("--workload")
            .arg(&workload)
            .arg("--scheduler")
            .arg(&wrapper)
            .args(["--shim", "seccomp", "--cpus", cpus, "--out"])
            .arg(dir.path().join(out))
            .output()
            .unwrap()
    };
    let pinned = run("0", "pinned");
    assert!(
        pinned.status.success(),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );
    let cpus = std::fs::read_to_string(dir.path().join("cpus.txt")).unwrap();
    assert_eq!(cpus.split_whitespace().last(), Some("0"), "{cpus}");
    // An explicit list is the user's say: no GOMAXPROCS from batkube.
    let gomaxprocs = || std::fs::read_to_string(dir.path().join("gomaxprocs.txt")).unwrap();
    assert_eq!(gomaxprocs().trim(), "GOMAXPROCS=");
    // `auto` keeps one CPU, and a Go program the GOMAXPROCS it would have
    // had (on GOMAXPROCS=1 some Go schedulers behave otherwise).
    let auto = run("auto", "auto");
    assert!(
        auto.status.success(),
        "{}",
        String::from_utf8_lossy(&auto.stderr)
    );
    let allowed = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = allowed
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list"))
        .unwrap();
    let count: usize = allowed
        .split_whitespace()
        .last()
        .unwrap()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum();
    let cpus = std::fs::read_to_string(dir.path().join("cpus.txt")).unwrap();
    let kept = cpus.split_whitespace().last().unwrap();
    assert!(kept.parse::<usize>().is_ok(), "auto keeps one CPU: {cpus}");
    if count > 1 && std::env::var_os("GOMAXPROCS").is_none() {
        assert_eq!(gomaxprocs().trim(), format!("GOMAXPROCS={count}"));
    }
    let free = run("all", "all");
    assert!(
        free.status.success(),
        "{}",
        String::from_utf8_lossy(&free.stderr)
    );
    let jobs = |d: &str| std::fs::read_to_string(dir.path().join(d).join("jobs.csv")).unwrap();
    assert_eq!(jobs("pinned"), jobs("all"));
    assert_eq!(jobs("auto"), jobs("all"));
    for (cpus, expect) in [
        ("4095", "--cpus 4095: CPU 4095 is not one this run may use"),
        ("some", "not a CPU number"),
        ("3-1", "runs backwards"),
    ] {
        let o = run(cpus, "bad");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "--cpus {cpus} should fail");
        assert!(stderr.contains(expect), "--cpus {cpus}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// `--spin-bound` counts the calls of programs run one thread at a time:
/// without `--deterministic` (or `--seed`) it is refused before the run,
/// naming the flag.
#[test]
fn a_spin_bound_without_the_deterministic_mode_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .args(["run", "--standin", "--platform"])
        .arg(common::platform(dir.path(), 2))
        .arg("--workload")
        .arg(common::shared().join("reference/batkube/workloads/200_delay170.json"))
        .args(["--scheduler", "true"])
        .args(["--spin-bound", "500", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains("--spin-bound 500 needs --deterministic"),
        "{stderr}"
    );
    assert!(!dir.path().join("out/summary.json").exists());
}
