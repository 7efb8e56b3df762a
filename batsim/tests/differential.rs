//! Conversations of real Batsim 4.2.1 on generated cases (`batkube batsim
//! --compare-with BATSIM --generate N`), replayed against the stand-in:
//! every message must be identical. No Batsim needed.
//!
//! Each directory under `tests/differential/` holds a case's
//! `platform.xml`, `workload.json`, `case.json` (options) and `real.jsonl`
//! (real Batsim's conversation under the case's scripted scheduler).
//! `BATSIM_DIFF_CASES=DIR` replays the cases of another directory too
//! (those a `--compare-with` run left), and prints one line per case.

use std::path::{Path, PathBuf};

use batsim::compare::{read_case_options, replay_files};
use batsim::transcript;

fn case_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("real.jsonl").is_file())
        .collect();
    v.sort();
    v
}

/// Replays every case of `root`; returns the cases that differ, with why.
fn replay_all(root: &Path, verbose: bool) -> (usize, Vec<String>) {
    let mut bad = Vec::new();
    let dirs = case_dirs(root);
    for dir in &dirs {
        let opts = read_case_options(dir).unwrap();
        let lines = transcript::read(&dir.join("real.jsonl")).unwrap();
        let r = replay_files(
            &dir.join("platform.xml"),
            &dir.join("workload.json"),
            &opts,
            &lines,
        );
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        match r {
            Ok(n) => {
                if verbose {
                    println!("{name}: identical ({n} messages)");
                }
            }
            Err(d) => {
                let line = format!("{name}: {}", d.to_string().replace('\n', "\n    "));
                if verbose {
                    println!("{line}");
                }
                bad.push(line);
            }
        }
    }
    (dirs.len(), bad)
}

#[test]
fn recorded_cases_replay_identically() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/differential");
    let (n, bad) = replay_all(&root, false);
    assert!(n >= 50, "only {n} recorded cases under {}", root.display());
    assert!(
        bad.is_empty(),
        "{} of {n} recorded cases differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn cases_of_another_directory() {
    let Some(root) = std::env::var_os("BATSIM_DIFF_CASES") else {
        return;
    };
    let (n, bad) = replay_all(Path::new(&root), true);
    println!(
        "{n} case(s), {} identical, {} not",
        n - bad.len(),
        bad.len()
    );
    assert!(bad.is_empty());
}
