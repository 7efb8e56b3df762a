//! The user guide (`docs/`, an mdBook) as a reader meets it:
//!
//! - `SUMMARY.md` lists every chapter, and every chapter it lists exists;
//! - every relative link and anchor of a chapter resolves (to a chapter and
//!   one of its headings, or to a file of the repository);
//! - the command reference, `docs/src/reference/cli.md`, is what
//!   `batkube reference-cli` prints from the command's definition;
//! - the commands of every ```` ```console,run ```` block run, from a copy
//!   of a fresh clone, as they are written, and print the lines shown under
//!   them (in order; `...` in a line stands for any text, lines not shown
//!   are allowed). Blocks tagged `console,skip-ci` (a Go build, real
//!   Batsim, minutes of work) are not run, and each chapter that has one
//!   is listed in `reference/not-in-ci.md`. Every `console` block is one
//!   or the other.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn src() -> PathBuf {
    repo().join("docs/src")
}

/// Every `.md` file under docs/src, relative to it.
fn chapters() -> Vec<PathBuf> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, base, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p.strip_prefix(base).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(&src(), &src(), &mut out);
    out
}

/// The text of a chapter without its fenced code blocks (links and
/// headings inside code are not links and headings).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(f) = &fence {
            if t.starts_with(f.as_str()) {
                fence = None;
            }
            out.push('\n');
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            let ch = &t[..3];
            let n = t.len() - t.trim_start_matches(ch.chars().next().unwrap()).len();
            fence = Some(ch[..1].repeat(n));
            out.push('\n');
            continue;
        }
        // Inline code spans hold no links.
        let mut kept = String::new();
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
                kept.push(' ');
            } else if !in_code {
                kept.push(c);
            } else {
                kept.push(' ');
            }
        }
        out.push_str(&kept);
        out.push('\n');
    }
    out
}

/// mdBook's anchor of a heading: lower case, letters, digits, `-` and `_`
/// kept, spaces to `-`, anything else dropped; repeats get `-1`, `-2`…
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose_keep_code_spans(text).lines() {
        let t = line.trim_start();
        if !t.starts_with('#') {
            continue;
        }
        let title = t.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let title = title.trim().replace('`', "");
        let mut id = String::new();
        for c in title.chars().flat_map(char::to_lowercase) {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                id.push(c);
            } else if c == ' ' {
                id.push('-');
            }
        }
        let n = seen.entry(id.clone()).or_insert(0);
        let unique = if *n == 0 {
            id.clone()
        } else {
            format!("{id}-{n}")
        };
        *n += 1;
        out.insert(unique);
    }
    out
}

/// Like `prose`, but keeps inline code (headings carry it).
fn prose_keep_code_spans(text: &str) -> String {
    let mut out = String::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if !fence {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The targets of the Markdown links and images of `text`: `](target)`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        if let Some(end) = after.find(')') {
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_string());
            rest = &after[end..];
        } else {
            break;
        }
    }
    out
}

#[test]
fn the_summary_lists_every_chapter_and_every_link_resolves() {
    let summary = std::fs::read_to_string(src().join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary).iter().map(PathBuf::from).collect();
    let mut problems = Vec::new();
    for c in chapters() {
        if c != Path::new("SUMMARY.md") && !listed.contains(&c) {
            problems.push(format!(
                "docs/src/{}: not listed in docs/src/SUMMARY.md (add it, or the book leaves it out)",
                c.display()
            ));
        }
    }
    for l in &listed {
        if !src().join(l).is_file() {
            problems.push(format!(
                "docs/src/SUMMARY.md lists {}, which does not exist",
                l.display()
            ));
        }
    }
    let mut anchor_cache: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut anchors_of = |p: &Path| -> BTreeSet<String> {
        anchor_cache
            .entry(p.to_path_buf())
            .or_insert_with(|| anchors(&std::fs::read_to_string(p).unwrap_or_default()))
            .clone()
    };
    let repo_root = repo().canonicalize().unwrap();
    // The chapters, and README.md, which links into them.
    let mut files: Vec<(PathBuf, PathBuf)> = chapters()
        .into_iter()
        .map(|c| (Path::new("docs/src").join(&c), src().join(&c)))
        .collect();
    files.push(("README.md".into(), repo().join("README.md")));
    for (c, path) in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for target in links(&prose(&text)) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if file.is_empty() {
                path.clone()
            } else {
                path.parent().unwrap().join(file)
            };
            let Ok(canon) = dest.canonicalize() else {
                problems.push(format!(
                    "{}: link to {target}: {} does not exist",
                    c.display(),
                    dest.display()
                ));
                continue;
            };
            if !canon.starts_with(&repo_root) {
                problems.push(format!(
                    "{}: link to {target} leaves the repository",
                    c.display()
                ));
                continue;
            }
            if let Some(a) = anchor {
                if canon.extension().is_some_and(|e| e == "md") && !anchors_of(&canon).contains(a) {
                    problems.push(format!(
                        "{}: link to {target}: no heading with anchor #{a} in {}",
                        c.display(),
                        dest.display()
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "the guide:\n{}", problems.join("\n"));
}

#[test]
fn the_command_reference_is_current() {
    let out = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("reference-cli")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    let path = src().join("reference/cli.md");
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        generated == current,
        "docs/src/reference/cli.md is not what the command's definition gives; regenerate it:\n  \
         cargo run --release -p batkube -- reference-cli > docs/src/reference/cli.md"
    );
    // Every command of the reference has a section.
    for cmd in [
        "run", "serve", "batsim", "workload", "platform", "replay", "report",
    ] {
        assert!(
            generated.contains(&format!("\n## batkube {cmd}\n")),
            "no section for {cmd}"
        );
    }
}

/// A fenced block of a chapter: its info string and its lines.
struct Block {
    chapter: PathBuf,
    line: usize,
    info: String,
    body: Vec<String>,
}

fn blocks(chapter: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(src().join(chapter)).unwrap();
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match &mut current {
            Some(b) => {
                if t.starts_with("```") {
                    out.push(current.take().unwrap());
                } else {
                    b.body.push(line.to_string());
                }
            }
            None => {
                if let Some(info) = t.strip_prefix("```") {
                    current = Some(Block {
                        chapter: chapter.to_path_buf(),
                        line: i + 1,
                        info: info.trim().to_string(),
                        body: Vec::new(),
                    });
                }
            }
        }
    }
    out
}

/// A command of a `console` block (`$ ` lines, continuation lines after a
/// trailing `\`, here-documents) and the output lines shown under it.
struct Step {
    command: String,
    expect: Vec<String>,
}

fn steps(block: &Block) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut lines = block.body.iter().peekable();
    while let Some(line) = lines.next() {
        if let Some(cmd) = line.strip_prefix("$ ") {
            let mut command = cmd.to_string();
            let mut last = cmd.to_string();
            while last.ends_with('\\') {
                let Some(next) = lines.next() else { break };
                command.push('\n');
                command.push_str(next);
                last = next.clone();
            }
            if let Some(tag) = heredoc_tag(&command) {
                for next in lines.by_ref() {
                    command.push('\n');
                    command.push_str(next);
                    if next.trim() == tag {
                        break;
                    }
                }
            }
            out.push(Step {
                command,
                expect: Vec::new(),
            });
        } else if let Some(step) = out.last_mut() {
            if !line.trim().is_empty() && line.trim() != "..." {
                step.expect.push(line.trim_end().to_string());
            }
        } else {
            panic!(
                "docs/src/{}:{}: a console block starts with a command (`$ ...`), not {line:?}",
                block.chapter.display(),
                block.line
            );
        }
    }
    out
}

fn heredoc_tag(command: &str) -> Option<String> {
    let i = command.find("<<")?;
    let rest = command[i + 2..].trim_start_matches('-').trim_start();
    let tag: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!tag.is_empty()).then_some(tag)
}

/// `expected` with `...` standing for any text.
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.trim().split("...").collect();
    let actual = actual.trim();
    let mut pos = 0;
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            continue;
        }
        if i == 0 {
            if !actual.starts_with(part) {
                return false;
            }
            pos = part.len();
        } else if let Some(j) = actual[pos..].find(part) {
            pos += j + part.len();
        } else {
            return false;
        }
    }
    parts
        .last()
        .is_none_or(|p| p.is_empty() || actual.ends_with(p) && pos == actual.len())
}

/// A fresh clone as a reader has it after `cargo build --release
/// --workspace`: every top-level entry of the repository, the binaries of
/// this test build in `target/release`, and nothing of earlier runs.
fn fresh_clone(dir: &Path) {
    let root = repo();
    for e in std::fs::read_dir(&root).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "target" || name == "out" || name == ".git" {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), dir.join(&name)).unwrap();
    }
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_batkube")).parent().unwrap();
    // The project's scheduler beside it, built if missing or stale (a
    // `cargo test -p batkube` alone does not build it).
    let scheduler = common::batkube_scheduler();
    assert_eq!(
        scheduler.parent(),
        Some(bin_dir),
        "batkube-scheduler is not beside batkube"
    );
    std::fs::create_dir_all(dir.join("target")).unwrap();
    std::os::unix::fs::symlink(bin_dir, dir.join("target/release")).unwrap();
}

#[test]
fn the_guides_commands_run_as_written() {
    let mut failures = Vec::new();
    let mut skipped_chapters = BTreeSet::new();
    let mut ran = 0;
    let mut clones = Vec::new();
    for chapter in chapters() {
        let bs = blocks(&chapter);
        if !bs.iter().any(|b| b.info.contains("run")) {
            for b in &bs {
                if b.info.starts_with("console") && b.info.contains("skip-ci") {
                    skipped_chapters.insert(chapter.clone());
                } else if b.info.starts_with("console") {
                    failures.push(format!(
                        "docs/src/{}:{}: a console block is tagged `console,run` or `console,skip-ci`",
                        chapter.display(),
                        b.line
                    ));
                }
            }
            continue;
        }
        // One fresh clone per chapter: its commands build on each other.
        let dir = tempfile::tempdir().unwrap();
        fresh_clone(dir.path());
        let dir = clones.push_and_get(dir);
        for b in &bs {
            if !b.info.starts_with("console") {
                continue;
            }
            if b.info.contains("skip-ci") {
                skipped_chapters.insert(chapter.clone());
                continue;
            }
            if !b.info.split(',').any(|t| t.trim() == "run") {
                failures.push(format!(
                    "docs/src/{}:{}: a console block is tagged `console,run` or `console,skip-ci`",
                    chapter.display(),
                    b.line
                ));
                continue;
            }
            for step in steps(b) {
                ran += 1;
                let out = Command::new("bash")
                    .arg("-c")
                    .arg(format!("{{\n{}\n}} 2>&1", step.command))
                    .current_dir(dir.path())
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let where_ = format!("docs/src/{}:{}", chapter.display(), b.line);
                if !out.status.success() {
                    failures.push(format!(
                        "{where_}: `{}` exited with {}:\n{text}",
                        step.command, out.status
                    ));
                    continue;
                }
                let mut actual = text.lines();
                for expected in &step.expect {
                    if !actual.any(|a| line_matches(expected, a)) {
                        failures.push(format!(
                            "{where_}: `{}` did not print {expected:?} (in order); it printed:\n{text}",
                            step.command
                        ));
                        break;
                    }
                }
            }
        }
    }
    assert!(ran > 0, "no runnable command found in the guide");
    failures.extend(undocumented_outputs(&clones));
    // The chapters with commands CI does not run are listed for the reader.
    let listed = std::fs::read_to_string(src().join("reference/not-in-ci.md")).unwrap();
    for c in &skipped_chapters {
        let link = Path::new("..").join(c);
        if !listed.contains(&format!("({})", link.display())) {
            failures.push(format!(
                "docs/src/{} has `console,skip-ci` blocks but docs/src/reference/not-in-ci.md does not link it",
                c.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

trait PushAndGet<T> {
    fn push_and_get(&mut self, t: T) -> &T;
}

impl<T> PushAndGet<T> for Vec<T> {
    fn push_and_get(&mut self, t: T) -> &T {
        self.push(t);
        self.last().unwrap()
    }
}

/// Every column and `summary.json` field of the outputs the guide's runs
/// wrote is named (in backquotes) in `reference/outputs.md`.
fn undocumented_outputs(clones: &[tempfile::TempDir]) -> Vec<String> {
    let reference = std::fs::read_to_string(src().join("reference/outputs.md")).unwrap();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for clone in clones {
        let Ok(outs) = std::fs::read_dir(clone.path().join("out")) else {
            continue;
        };
        for run in outs {
            let run = run.unwrap().path();
            if !run.is_dir() {
                continue;
            }
            for file in [
                "pods.csv",
                "nodes.csv",
                "timeline.csv",
                "queues.csv",
                "jobs.csv",
                "schedule.csv",
            ] {
                if let Ok(text) = std::fs::read_to_string(run.join(file)) {
                    for col in text.lines().next().unwrap_or("").split(',') {
                        names.insert(col.to_string(), file.to_string());
                    }
                }
            }
            if let Ok(text) = std::fs::read_to_string(run.join("summary.json")) {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                for (k, q) in v.as_object().unwrap() {
                    names.insert(k.clone(), "summary.json".into());
                    if k == "queues" {
                        for per_queue in q.as_object().unwrap().values() {
                            for k in per_queue.as_object().unwrap().keys() {
                                names.insert(k.clone(), "summary.json's queues".into());
                            }
                        }
                    }
                }
            }
            if let Ok(text) = std::fs::read_to_string(run.join("decisions.jsonl")) {
                if let Some(line) = text.lines().next() {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap();
                    for k in v.as_object().unwrap().keys() {
                        names.insert(k.clone(), "decisions.jsonl".into());
                    }
                }
            }
        }
    }
    assert!(
        names.contains_key("makespan"),
        "the guide's runs wrote no summary.json"
    );
    names
        .iter()
        .filter(|(n, _)| !reference.contains(&format!("`{n}`")))
        .map(|(n, file)| {
            format!("{file} has `{n}`, which docs/src/reference/outputs.md does not name")
        })
        .collect()
}

#[test]
fn the_checks_themselves() {
    assert!(line_matches(
        "makespan ... s, mean wait",
        "makespan 2210 s, mean wait"
    ));
    assert!(!line_matches("makespan 2210", "makespan 2211"));
    assert!(line_matches("jobs.csv", "jobs.csv"));
    assert!(!line_matches("jobs.csv", "jobs.csv.bak"));
    let a = anchors(
        "# A first `run`\n## What is exact?\n## What is exact?\n```\n# not a heading\n```\n",
    );
    assert_eq!(
        a,
        BTreeSet::from([
            "a-first-run".into(),
            "what-is-exact".into(),
            "what-is-exact-1".into()
        ])
    );
    assert_eq!(
        links("see [a](b.md#c) and ![i](x.png)"),
        ["b.md#c", "x.png"]
    );
    assert_eq!(heredoc_tag("cat > f <<'EOF'"), Some("EOF".into()));
}

/// The table of the resources fakeapi serves, from its own table
/// (`fakeapi/src/resources.rs`), as `reference/api.md` shows it between
/// its markers.
fn resource_table() -> String {
    let mut out = String::from(
        "| group/version | kind | resource | scope | subresources | short names |\n|---|---|---|---|---|---|\n",
    );
    for r in fakeapi::resources::RESOURCES {
        let gv = if r.group.is_empty() {
            r.version.to_string()
        } else {
            format!("{}/{}", r.group, r.version)
        };
        let list = |xs: &[&str]| {
            xs.iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| `{gv}` | {} | `{}` | {} | {} | {} |\n",
            r.kind,
            r.plural,
            if r.namespaced {
                "namespaced"
            } else {
                "cluster"
            },
            list(r.subresources),
            list(r.short_names),
        ));
    }
    out
}

const BEGIN: &str =
    "<!-- resources: generated from fakeapi/src/resources.rs by broker/tests/docs.rs -->\n";
const END: &str = "<!-- end of resources -->\n";

#[test]
fn the_api_reference_lists_what_fakeapi_serves() {
    let path = src().join("reference/api.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        panic!("docs/src/reference/api.md lacks its markers {BEGIN:?} and {END:?}");
    };
    let current = &text[b + BEGIN.len()..e];
    let table = resource_table();
    if current != table {
        if std::env::var_os("BATKUBE_BLESS_DOCS").is_some() {
            let new = format!("{}{BEGIN}{table}{}", &text[..b], &text[e..]);
            std::fs::write(&path, new).unwrap();
        } else {
            panic!(
                "docs/src/reference/api.md's resource table is not fakeapi's; regenerate it:\n  \
                 BATKUBE_BLESS_DOCS=1 cargo test --release -p batkube --test docs the_api_reference"
            );
        }
    }
}
