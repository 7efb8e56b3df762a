//! `timeshim patch` on a copy of a small scheduler-like crate makes it run on
//! simulated time without other edits.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::{drive_to_line, field, Lines};
use timeshim::{Controller, ShimMode, SimTime};

const S: u64 = 1_000_000_000;
const START: SimTime = SimTime::from_nanos(1_893_456_000 * S);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mini-scheduler")
}

/// A fresh copy of the fixture under the target directory.
fn copy_fixture(name: &str) -> PathBuf {
    let dir = support::profile_dir()
        .join("timeshim-patch-test")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).expect("mkdir");
    for f in ["Cargo.toml", "src/main.rs"] {
        std::fs::copy(fixture().join(f), dir.join(f)).expect("copy fixture");
    }
    dir
}

fn timeshim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_timeshim"))
        .args(args)
        .output()
        .expect("run timeshim")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn patch_is_idempotent_and_says_what_it_changed() {
    let dir = copy_fixture("idempotent");
    let d = dir.to_str().unwrap();
    let first = timeshim(&["patch", d]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let out = text(&first.stdout);
    assert!(
        out.contains("changed: Cargo.toml: added dependency timeshim"),
        "{out}"
    );
    assert!(
        out.contains("changed: src/main.rs: inserted `timeshim::install();`"),
        "{out}"
    );
    let main = std::fs::read_to_string(dir.join("src/main.rs")).unwrap();
    assert!(
        main.contains("async fn main() {\n    timeshim::install();\n"),
        "{main}"
    );
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("timeshim = { path = "), "{manifest}");
    assert!(
        manifest.contains("[workspace]"),
        "the rest of the manifest is kept: {manifest}"
    );

    let second = timeshim(&["patch", d]);
    assert!(second.status.success());
    assert!(
        text(&second.stdout).contains("is already patched"),
        "{}",
        text(&second.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("src/main.rs")).unwrap(),
        main
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("Cargo.toml")).unwrap(),
        manifest
    );
}

#[test]
fn patch_with_a_version_requirement() {
    let dir = copy_fixture("version");
    let out = timeshim(&["patch", dir.to_str().unwrap(), "--version", "0.1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(manifest.contains("timeshim = \"0.1\""), "{manifest}");
}

#[test]
fn patch_refuses_what_it_does_not_understand() {
    let base = support::profile_dir().join("timeshim-patch-test");
    // A virtual workspace.
    let ws = base.join("virtual");
    let _ = std::fs::remove_dir_all(&ws);
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        "[workspace]\nmembers = [\"sched\"]\n",
    )
    .unwrap();
    let out = timeshim(&["patch", ws.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("virtual workspace") && err.contains("sched"),
        "{err}"
    );

    // No fn main: refused, and nothing written.
    let dir = copy_fixture("nomain");
    std::fs::write(
        dir.join("src/main.rs"),
        "// entry point generated elsewhere\n",
    )
    .unwrap();
    let before = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let out = timeshim(&["patch", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no `fn main` found"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("Cargo.toml")).unwrap(),
        before
    );

    // Not a crate at all.
    let out = timeshim(&["patch", base.join("does-not-exist").to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no Cargo.toml here"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn patched_fixture_runs_on_simulated_time() {
    let dir = copy_fixture("run");
    let out = timeshim(&["patch", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Reuse the workspace's resolved versions so the build needs no index update.
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    if lock.is_file() {
        std::fs::copy(&lock, dir.join("Cargo.lock")).expect("copy Cargo.lock");
    }

    // Its own target dir (kept between runs, so only the first run compiles tokio).
    let target = support::profile_dir().join("timeshim-fixture-target");
    let build = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .expect("cargo build of the patched fixture");
    assert!(build.success(), "the patched fixture does not build");

    let clock = Controller::new(START).expect("controller");
    let mut cmd = Command::new(target.join("release/mini-scheduler"));
    cmd.stdout(Stdio::piped());
    clock.configure(&mut cmd, &ShimMode::Linked);
    let mut child = cmd.spawn().expect("spawn patched fixture");
    let mut lines = Lines::new(child.stdout.take().expect("stdout"));
    for (i, at) in [0u64, 30, 60].into_iter().enumerate() {
        let (line, _) = drive_to_line(&clock, &mut lines, &mut child);
        assert!(line.starts_with(&format!("cycle {i} ")), "{line}");
        assert_eq!(field::<u64>(&line, "at_ns"), START.as_nanos() + at * S);
    }
    let (line, _) = drive_to_line(&clock, &mut lines, &mut child);
    assert_eq!(
        field::<u64>(&line, "at_ns"),
        START.as_nanos() + 660 * S,
        "{line}"
    );
    let status = child.wait().expect("wait");
    assert!(status.success());
    assert_eq!(clock.now(), START + Duration::from_secs(660));
}

/// The `[[package]]` blocks of a Cargo.lock by (name, version), and the
/// rest (the header with the lock-file version).
fn lock_packages(text: &str) -> (String, std::collections::BTreeMap<(String, String), String>) {
    let mut parts = text.split("\n[[package]]\n");
    let header = parts.next().unwrap_or_default().to_string();
    let mut m = std::collections::BTreeMap::new();
    for block in parts {
        let get = |k: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_default()
                .to_string()
        };
        m.insert((get("name"), get("version")), block.trim_end().to_string());
    }
    (header, m)
}

fn lines_added(before: &str, after: &str) -> Vec<String> {
    let mut old: Vec<&str> = before.lines().collect();
    let mut added = Vec::new();
    for l in after.lines() {
        match old.iter().position(|o| *o == l) {
            Some(i) => {
                old.remove(i);
            }
            None => added.push(l.to_string()),
        }
    }
    assert!(old.is_empty(), "lines removed: {old:?}");
    added
}

/// A fresh kube-rs scheduler crate with its own Cargo.lock (resolved from
/// the local registry cache when it can be): the patch adds one dependency
/// line and one line of code, and the lock gains timeshim's packages only
/// (no locked version moves, the lock-file version stays).
#[test]
fn patch_on_a_fresh_kube_crate_changes_only_what_timeshim_needs() {
    let dir = support::profile_dir().join("timeshim-patch-test/kube");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"kube-sched\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\n\
         kube = { version = \"5\", default-features = false, features = [\"client\", \"runtime\"] }\n\
         k8s-openapi = { version = \"0.29\", features = [\"latest\"] }\n\
         tokio = { version = \"1\", features = [\"rt-multi-thread\", \"macros\"] }\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "#[tokio::main]\nasync fn main() -> Result<(), kube::Error> {\n    \
         let _client = kube::Client::try_default().await?;\n    Ok(())\n}\n",
    )
    .unwrap();
    let generate = |offline: bool| {
        let mut c = Command::new(env!("CARGO"));
        c.args(["generate-lockfile", "--quiet", "--manifest-path"])
            .arg(dir.join("Cargo.toml"));
        if offline {
            c.arg("--offline");
        }
        c.status().expect("cargo generate-lockfile").success()
    };
    let offline = generate(true);
    assert!(
        offline || generate(false),
        "no Cargo.lock for the kube crate"
    );
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let main = std::fs::read_to_string(dir.join("src/main.rs")).unwrap();
    // An older lock-file format, as a scheduler's repository may have: it
    // must stay so (a registry-only v4 lock reads the same as v3).
    let lock = std::fs::read_to_string(dir.join("Cargo.lock"))
        .unwrap()
        .replace("\nversion = 4\n", "\nversion = 3\n");
    assert!(lock.contains("\nversion = 3\n"), "{}", &lock[..200]);
    std::fs::write(dir.join("Cargo.lock"), &lock).unwrap();

    let mut args = vec!["patch", dir.to_str().unwrap()];
    if offline {
        args.push("--offline");
    }
    let out = timeshim(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("changed: Cargo.lock"),
        "{}",
        text(&out.stdout)
    );

    let added = lines_added(
        &manifest,
        &std::fs::read_to_string(dir.join("Cargo.toml")).unwrap(),
    );
    assert_eq!(added.len(), 1, "{added:?}");
    assert!(added[0].starts_with("timeshim = { path = "), "{added:?}");
    let added = lines_added(
        &main,
        &std::fs::read_to_string(dir.join("src/main.rs")).unwrap(),
    );
    assert_eq!(added, ["    timeshim::install();"]);

    let (head_before, before) = lock_packages(&lock);
    let (head_after, after) =
        lock_packages(&std::fs::read_to_string(dir.join("Cargo.lock")).unwrap());
    assert_eq!(head_before, head_after, "the lock-file version changed");
    for (key, block) in &before {
        let now = after
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} left the lock (a version moved?)"));
        if key.0 == "kube-sched" {
            // Its own entry gains the dependency.
            assert_eq!(
                lines_added(block, now),
                [" \"timeshim\","],
                "{block}\n--\n{now}"
            );
        } else {
            assert_eq!(block, now, "{key:?} changed");
        }
    }
    let new: Vec<&str> = after
        .keys()
        .filter(|k| !before.contains_key(*k))
        .map(|k| k.0.as_str())
        .collect();
    assert!(new.contains(&"timeshim"), "{new:?}");
    // Nothing of the patch tool's own (it lives in its own package).
    for tool in ["toml_edit", "anyhow", "clap", "thiserror", "syn"] {
        assert!(!new.contains(&tool), "{tool} came with timeshim: {new:?}");
    }
}

#[test]
fn patch_help_works() {
    let out = timeshim(&["patch", "--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Usage: timeshim patch"));
}
