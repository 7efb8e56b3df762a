//! The commit `batkube --version` names, read from git by the build script
//! (`build.rs`); also compiled into the CLI's tests (`tests/cli.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The commit a build of the package in `dir` is from: its hash (12
/// digits) and its date, with the files whose change means another
/// commit (for `cargo:rerun-if-changed`). `None` outside a git checkout
/// of this repository: no git, a tarball, or a tarball unpacked inside
/// another project's checkout (its files are not tracked there).
pub fn commit(dir: &Path) -> Option<(String, Vec<PathBuf>)> {
    git(dir, &["ls-files", "--error-unmatch", "Cargo.toml"])?;
    let hash = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    let text = match git(dir, &["log", "-1", "--format=%cs", "HEAD"]) {
        Some(date) => format!("{hash} {date}"),
        None => hash,
    };
    // HEAD names the branch (or, detached, the commit); the branch's
    // commit is its loose ref, or in packed-refs, where a commit on it
    // then writes a loose ref.
    let path = |p: &str| git(dir, &["rev-parse", "--git-path", p]).map(|p| dir.join(p));
    let mut watch: Vec<PathBuf> = path("HEAD").into_iter().collect();
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        match path(&branch) {
            Some(loose) if loose.exists() => watch.push(loose),
            Some(loose) => {
                watch.extend(path("packed-refs").filter(|p| p.exists()));
                watch.extend(loose.parent().map(Path::to_path_buf));
            }
            None => {}
        }
    }
    Some((text, watch))
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}
