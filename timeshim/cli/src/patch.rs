//! `timeshim patch`: applies the linked patch to a scheduler's source tree:
//! the `timeshim` dependency in `Cargo.toml`, `timeshim::install();` as the
//! first statement of `fn main` of every binary target, and (with a
//! Cargo.lock) the new packages in the lock, nothing else. Idempotent.

use std::path::{Path, PathBuf};
use std::process::Command;
use toml_edit::{DocumentMut, Item, Table, Value};

/// Where the patched crate gets `timeshim` from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dependency {
    Path(PathBuf),
    Version(String),
}

impl Default for Dependency {
    /// The timeshim library this tool was built beside, by path.
    fn default() -> Self {
        Dependency::Path(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
    }
}

/// Whether the scheduler's Cargo.lock gets the new packages now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockUpdate {
    No,
    Yes,
    /// From the local registry cache only (`--offline`).
    Offline,
}

#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("{0}: no Cargo.toml here; give the directory of the scheduler's crate")]
    NoManifest(PathBuf),
    #[error("cannot read or write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("{0} is a virtual workspace manifest (no [package]); run `timeshim patch` on the scheduler's own crate directory{1}")]
    VirtualWorkspace(PathBuf, String),
    #[error("{0} has no [package] table; cannot tell what to patch")]
    NoPackage(PathBuf),
    #[error("{0}: [dependencies] is not a table; cannot add timeshim")]
    OddDependencies(PathBuf),
    #[error("no binary target found in {0} (looked for src/main.rs and [[bin]] paths)")]
    NoBinary(PathBuf),
    #[error("{0}: no `fn main` found; add `timeshim::install();` at the top of the program's entry point by hand")]
    NoMain(PathBuf),
    #[error("Cargo.toml is patched, but `cargo update --workspace` could not add timeshim's packages to {lock}:\n{stderr}")]
    Lock { lock: PathBuf, stderr: String },
}

/// What `patch` did, one line per change, for the user.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub changes: Vec<String>,
    pub already: Vec<String>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> PatchError + '_ {
    move |source| PatchError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Patches the crate in `dir`.
pub fn patch(dir: &Path, dep: &Dependency, lock: LockUpdate) -> Result<Report, PatchError> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        return Err(PatchError::NoManifest(dir.to_owned()));
    }
    let text = std::fs::read_to_string(&manifest).map_err(io_err(&manifest))?;
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| PatchError::Toml {
                path: manifest.clone(),
                message: e.to_string(),
            })?;
    let Some(package) = doc.get("package").and_then(Item::as_table_like) else {
        if let Some(ws) = doc.get("workspace") {
            let members = ws
                .get("members")
                .and_then(Item::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .map(|m| format!(" (members: {m})"))
                .unwrap_or_default();
            return Err(PatchError::VirtualWorkspace(manifest, members));
        }
        return Err(PatchError::NoPackage(manifest));
    };
    let package_name = package
        .get("name")
        .and_then(Item::as_str)
        .unwrap_or_default()
        .to_owned();

    let mut report = Report::default();

    // Binary targets.
    let mut mains: Vec<PathBuf> = Vec::new();
    if let Some(bins) = doc.get("bin").and_then(Item::as_array_of_tables) {
        for bin in bins.iter() {
            let name = bin
                .get("name")
                .and_then(Item::as_str)
                .unwrap_or(&package_name);
            let path = match bin.get("path").and_then(Item::as_str) {
                Some(p) => PathBuf::from(p),
                None if name == package_name => PathBuf::from("src/main.rs"),
                None => PathBuf::from(format!("src/bin/{name}.rs")),
            };
            if !mains.contains(&path) {
                mains.push(path);
            }
        }
    }
    if mains.is_empty() && dir.join("src/main.rs").is_file() {
        mains.push(PathBuf::from("src/main.rs"));
    }
    if mains.is_empty() {
        return Err(PatchError::NoBinary(dir.to_owned()));
    }
    // Check every main before writing anything, so a refusal changes nothing.
    let mut edits = Vec::new();
    for rel in &mains {
        let path = dir.join(rel);
        let src = std::fs::read_to_string(&path).map_err(io_err(&path))?;
        if src.contains("timeshim::install()") || src.contains("#[timeshim::main]") {
            report.already.push(format!(
                "{} already calls timeshim::install()",
                rel.display()
            ));
            continue;
        }
        let patched = insert_install(&src).ok_or_else(|| PatchError::NoMain(path.clone()))?;
        edits.push((path, rel.clone(), patched));
    }

    // The dependency.
    let deps = doc
        .entry("dependencies")
        .or_insert_with(|| Item::Table(Table::new()));
    let Some(deps) = deps.as_table_like_mut() else {
        return Err(PatchError::OddDependencies(manifest));
    };
    if deps.contains_key("timeshim") {
        report
            .already
            .push("Cargo.toml already depends on timeshim".into());
    } else {
        let value: Value = match dep {
            Dependency::Path(p) => {
                let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
                let mut t = toml_edit::InlineTable::new();
                t.insert("path", p.display().to_string().into());
                Value::InlineTable(t)
            }
            Dependency::Version(v) => v.as_str().into(),
        };
        let shown = value.to_string();
        deps.insert("timeshim", Item::Value(value));
        std::fs::write(&manifest, doc.to_string()).map_err(io_err(&manifest))?;
        report.changes.push(format!(
            "Cargo.toml: added dependency timeshim = {}",
            shown.trim()
        ));
    }
    for (path, rel, patched) in edits {
        std::fs::write(&path, patched).map_err(io_err(&path))?;
        report.changes.push(format!(
            "{}: inserted `timeshim::install();` at the top of fn main",
            rel.display()
        ));
    }
    let lock_file = dir.join("Cargo.lock");
    if lock != LockUpdate::No
        && lock_file.is_file()
        && report.changes.iter().any(|c| c.starts_with("Cargo.toml"))
    {
        let note = update_lock(&manifest, &lock_file, lock)?;
        report.changes.push(format!(
            "Cargo.lock: added the packages timeshim needs (locked versions unchanged{note})"
        ));
    }
    Ok(report)
}

/// `cargo update --workspace`: resolves the manifest's new dependency into
/// the lock; packages already locked keep their versions unless the new
/// dependency's requirements exclude them, and the lock keeps its format
/// version (a plain `cargo build` may do the same, but the user sees the
/// change now, with the patch).
fn update_lock(manifest: &Path, lock: &Path, how: LockUpdate) -> Result<String, PatchError> {
    let before = std::fs::read_to_string(lock).map_err(io_err(lock))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["update", "--workspace", "--quiet", "--manifest-path"])
        .arg(manifest);
    if how == LockUpdate::Offline {
        cmd.arg("--offline");
    }
    let out = cmd.output().map_err(io_err(manifest))?;
    if !out.status.success() {
        return Err(PatchError::Lock {
            lock: lock.to_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    // Cargo writes format 4 whatever the lock had. Format 3 reads the same
    // as long as no git source is locked (4 only changed how git URLs are
    // encoded): then the lock keeps its format, as the user's toolchain
    // may not read 4.
    let after = std::fs::read_to_string(lock).map_err(io_err(lock))?;
    let version = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("version = "))
            .map(str::to_owned)
    };
    match (version(&before), version(&after)) {
        (Some(old), Some(new)) if old != new => {
            if old == "version = 3" && new == "version = 4" && !after.contains("source = \"git+") {
                let restored = after.replacen("\nversion = 4\n", "\nversion = 3\n", 1);
                std::fs::write(lock, restored).map_err(io_err(lock))?;
                Ok(", lock-file version 3 kept".into())
            } else {
                Ok(format!("; cargo changed the lock-file {old} to {new}"))
            }
        }
        _ => Ok(", lock-file version unchanged".into()),
    }
}

/// Inserts `timeshim::install();` as the first statement of the top-level
/// `fn main` (plain or `async`, e.g. under `#[tokio::main]`).
fn insert_install(src: &str) -> Option<String> {
    let fn_main = find_main(src)?;
    let open = fn_main + src[fn_main..].find('{')?;
    // Indentation of the body: that of the next non-empty line, or 4 spaces.
    let after = &src[open + 1..];
    let indent = after
        .lines()
        .skip(1)
        .find(|l| !l.trim().is_empty())
        .map(|l| l[..l.len() - l.trim_start().len()].to_owned())
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| "    ".into());
    let mut out = String::with_capacity(src.len() + 32);
    out.push_str(&src[..=open]);
    out.push('\n');
    out.push_str(&indent);
    out.push_str("timeshim::install();");
    if !after.starts_with('\n') && !after.starts_with("\r\n") {
        out.push('\n');
    }
    out.push_str(after);
    Some(out)
}

/// Byte offset of `fn main(` at the start of a line (possibly after
/// `pub`/`async`/`unsafe`), falling back to any `fn main(`.
fn find_main(src: &str) -> Option<usize> {
    let mut fallback = None;
    let mut offset = 0;
    for line in src.split_inclusive('\n') {
        let mut rest = line;
        let mut col = 0;
        for kw in ["pub ", "async ", "unsafe "] {
            if let Some(r) = rest.strip_prefix(kw) {
                col += kw.len();
                rest = r;
            }
        }
        if let Some(pos) = line.find("fn main") {
            let tail = line[pos + 7..].trim_start();
            let before_ok = pos == 0 || !line.as_bytes()[pos - 1].is_ascii_alphanumeric();
            if before_ok && tail.starts_with('(') {
                if rest.starts_with("fn main") && pos == col {
                    return Some(offset + pos);
                }
                fallback.get_or_insert(offset + pos);
            }
        }
        offset += line.len();
    }
    fallback
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_in_plain_main() {
        let out = insert_install("fn main() {\n    println!(\"hi\");\n}\n").unwrap();
        assert_eq!(
            out,
            "fn main() {\n    timeshim::install();\n    println!(\"hi\");\n}\n"
        );
    }

    #[test]
    fn inserts_in_tokio_main_with_return_type() {
        let src = "#[tokio::main]\nasync fn main() -> Result<(), Box<dyn std::error::Error>> {\n  run().await\n}\n";
        let out = insert_install(src).unwrap();
        assert!(
            out.contains("Error>> {\n  timeshim::install();\n  run().await"),
            "{out}"
        );
    }

    #[test]
    fn ignores_main_lookalikes() {
        let src = "fn main_loop() {}\nmod m { fn main() {} }\npub fn main() {\n}\n";
        let out = insert_install(src).unwrap();
        assert!(
            out.contains("pub fn main() {\n    timeshim::install();\n}"),
            "{out}"
        );
    }

    #[test]
    fn no_main_is_none() {
        assert_eq!(insert_install("fn mainly() {}\n"), None);
    }
}
