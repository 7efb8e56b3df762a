//! The commit `batkube --version` names, read from git when the binary is
//! compiled (`lib.rs`'s macros); also compiled into the CLI's tests
//! (`broker/tests/cli.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The commit a build of the package in `dir` is from: its hash (12
/// digits) and its date, with the files whose change means another
/// commit (files, never directories: the macro includes them). `None` outside a git checkout
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
    // then writes a new loose ref: a file that does not exist yet cannot
    // be watched, so the reflog, which every commit appends to, is.
    let path = |p: &str| git(dir, &["rev-parse", "--git-path", p]).map(|p| dir.join(p));
    let mut watch: Vec<PathBuf> = path("HEAD").into_iter().collect();
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        match path(&branch) {
            Some(loose) if loose.is_file() => watch.push(loose),
            Some(_) => watch.extend(path("packed-refs").filter(|p| p.is_file())),
            None => {}
        }
    }
    watch.extend(path("logs/HEAD").filter(|p| p.is_file()));
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
