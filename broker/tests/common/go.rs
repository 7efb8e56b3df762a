//! The Go schedulers of `schedulers/` for tests: built by
//! `schedulers/build-go.sh` into `<target>/go/` at most once per test process
//! and per program, whichever test asks first; the others wait for that build
//! and share its binary. Test binaries run one after another (and `cargo test`
//! runs may overlap): build-go.sh takes a lock in `<target>/go/` so that two
//! processes never compile at once, and the second one finds everything up to
//! date in Go's build cache (about a second).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// Per program: `Ok(checked)` once built (`checked`: with `--check`), or the
/// failure, so that the tests after the first do not build again to fail again.
static BUILT: Mutex<BTreeMap<String, Result<bool, String>>> = Mutex::new(BTreeMap::new());

/// `<target>/go`: build-go.sh's default output directory when the target
/// directory is the repository's `target/` (the same for every profile).
pub fn go_dir() -> PathBuf {
    super::profile_dir().parent().unwrap().join("go")
}

/// `<target>/go/<name>`, built first if this process has not built it yet.
/// `name` is a program of build-go.sh (`kube-scheduler`,
/// `kube-scheduler-with-plugin`, `kube-scheduler-explain`, `kube-scheduler-coscheduling`,
/// `kube-controller-manager`, `vc-scheduler`, `vc-controller-manager`,
/// `vc-webhook-manager`, `kueue-manager`, `jobset-manager`, `yunikorn-scheduler`); `check` adds
/// build-go.sh's `--check` (go vet and go test in that program's module).
/// Needs bash, Go and, the first time on a machine, the Go module proxy.
/// A failed build fails every test that asks for the program.
pub fn go_program(name: &str, check: bool) -> PathBuf {
    let out = go_dir();
    let bin = out.join(name);
    // Held during the build: a test asking for the same program waits for
    // it, and one asking for another program would wait for build-go.sh's
    // lock anyway.
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    match built.get(name) {
        Some(Ok(checked)) if *checked || !check => return bin,
        Some(Err(e)) => panic!("{e}"),
        _ => {}
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("schedulers/build-go.sh"));
    if check {
        cmd.arg("--check");
    }
    cmd.arg(&out).arg(name);
    let result = match cmd.status() {
        Err(e) => Err(format!(
            "running schedulers/build-go.sh {name} (needs bash and Go): {e}"
        )),
        Ok(st) if !st.success() => Err(format!(
            "schedulers/build-go.sh {name} failed ({st}); its output is above"
        )),
        Ok(_) if !bin.is_file() => Err(format!("{} missing after the build", bin.display())),
        Ok(_) => Ok(check),
    };
    built.insert(name.to_string(), result.clone());
    drop(built);
    if let Err(e) = result {
        panic!("{e}");
    }
    bin
}
