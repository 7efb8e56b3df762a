//! Kubernetes' own API-machinery e2e tests against `batkube serve`, CI's
//! subset: `fakeapi/conformance/run.sh --ci` runs the tests that
//! `fakeapi/conformance/ci.txt` names (the fast ones of the selection whose
//! outcomes `fakeapi/CONFORMANCE.md` publishes) with
//! `e2e-apimachinery.test` (the suite's API-machinery tests, built unmodified
//! from k8s.io/kubernetes by `schedulers/build-go.sh`, with
//! kube-controller-manager's workload controllers beside the server, as
//! `run.sh` always runs them), and fails unless every outcome is the one
//! `fakeapi/conformance/expected.tsv` holds. The whole selection is a
//! documented command (fakeapi/conformance/README.md): its slowest tests wait
//! out minutes of real time (compaction, quota resyncs).

mod common;

use std::path::PathBuf;
use std::process::Command;

#[test]
fn kubernetes_api_machinery_e2e_subset_passes_against_batkube_serve() {
    let e2e = common::go::go_program("e2e-apimachinery.test", false);
    common::go::go_program("kube-controller-manager", false);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let out = std::env::temp_dir().join(format!("batkube-conformance-{}", std::process::id()));
    let st = Command::new("bash")
        .arg(root.join("fakeapi/conformance/run.sh"))
        .arg("--ci")
        .arg("--no-build")
        .arg("--bin")
        .arg(e2e.parent().unwrap())
        .arg("--batkube")
        .arg(env!("CARGO_BIN_EXE_batkube"))
        .arg("--out")
        .arg(&out)
        .status()
        .expect("running fakeapi/conformance/run.sh (needs bash, python3, kubectl)");
    let summary = std::fs::read_to_string(out.join("summary.tsv")).unwrap_or_default();
    let unexpected: Vec<&str> = summary
        .lines()
        .filter(|l| !l.starts_with("passed\t"))
        .collect();
    assert!(
        st.success(),
        "run.sh --ci: not every test as fakeapi/conformance/expected.tsv has it ({st}); \
         the tests that did not pass:\n{}\nlogs in {}",
        unexpected.join("\n"),
        out.display()
    );
    let _ = std::fs::remove_dir_all(&out);
}
