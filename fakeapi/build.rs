//! Kubernetes' protobuf message descriptors, read at build time from the
//! `.proto` files that the Go modules `k8s.io/api`, `k8s.io/apimachinery`,
//! `k8s.io/apiextensions-apiserver` and `k8s.io/kube-aggregator` (its
//! APIService) publish (the source kube-apiserver's own types are
//! generated from), into static tables that
//! `src/protobuf/schema.rs` includes: for every message its fields, with
//! their numbers, names, JSON names, labels and types. Nothing of those
//! files is kept in the repository: the modules are read from Go's module
//! cache, where `go mod download` puts them when Go is on `PATH` (as the
//! tests' machines have it: the Go programs they build come from the same
//! module proxy). Without Go, fakeapi is built without protobuf answers
//! (clients get JSON, which all of them accept) and says so: a build needs
//! nothing but Rust. Why not from a crate: see ARCHITECTURE.md.
//!
//! The version is the one of the kube-apiserver the differential harness
//! holds fakeapi to (and of k8s-openapi's `latest`).
//!
//! The files' grammar is the small proto2 subset go-to-protobuf writes:
//! `package`, `import`, `option`, `message` blocks of `optional`/`repeated`
//! fields and `map<string, T>` fields. Anything else fails the build,
//! naming the file and the token, rather than being skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = "v0.35.8";
const MODULES: &[&str] = &[
    "k8s.io/api",
    "k8s.io/apimachinery",
    "k8s.io/apiextensions-apiserver",
    "k8s.io/kube-aggregator",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Where Go keeps its module cache, as Go finds it (`go env GOMODCACHE`).
    for v in ["GOMODCACHE", "GOPATH", "HOME"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("k8s_proto.rs");
    let mut cache = module_cache();
    let absent = |cache: &Option<PathBuf>| -> Vec<String> {
        MODULES
            .iter()
            .filter(|m| {
                !cache
                    .as_ref()
                    .is_some_and(|c| module_dir(c, m).join("go.mod").is_file())
            })
            .map(|m| format!("{m}@{VERSION}"))
            .collect()
    };
    let mut missing = absent(&cache);
    // Go is there (the tests' machines, where the Go programs are built from
    // the same module proxy): fetched once into its module cache. Without Go
    // nothing is fetched and fakeapi is built JSON-only (below).
    if !missing.is_empty() && download(&missing) {
        cache = module_cache();
        missing = absent(&cache);
    }
    let out = if missing.is_empty() {
        tables(cache.as_ref().expect("a module cache"))
    } else {
        let why = format!(
            "the Go modules {} are not in Go's module cache ({})",
            missing.join(", "),
            cache
                .as_ref()
                .map(|c| c.display().to_string())
                .unwrap_or_else(
                    || "none found: no GOMODCACHE, no `go` on PATH, no GOPATH or HOME".into()
                )
        );
        println!("cargo:warning=fakeapi is built without protobuf answers (clients get JSON): {why}. To build with them: go mod download {}, then build again", missing.join(" "));
        // Rebuilt when `go mod download` adds them: watch the download
        // cache's nearest existing directory (never a missing path, which
        // would rebuild fakeapi on every build).
        if let Some(c) = &cache {
            let mut watched = BTreeSet::new();
            for m in MODULES {
                let dl = c.join("cache/download");
                let found = [dl.join(m).join("@v"), dl.join("k8s.io"), dl]
                    .into_iter()
                    .find(|d| d.is_dir());
                if let Some(d) = found {
                    if watched.insert(d.clone()) {
                        println!("cargo:rerun-if-changed={}", d.display());
                    }
                }
            }
        }
        format!(
            "// fakeapi/build.rs found no .proto files: protobuf answers are off in this build.\n\
             pub(crate) static MESSAGES: &[MessageDesc] = &[];\n\
             pub(crate) const UNAVAILABLE: Option<&str> = Some({:?});\n",
            format!(
                "{why}; run `go mod download {}` and build fakeapi again",
                missing.join(" ")
            )
        )
    };
    std::fs::write(&dest, out).expect("write the descriptor tables");
}

/// `go mod download` of `modules` (in an empty directory of the build's
/// own, outside any Go module), when `go` is on `PATH`. Whether it ran and
/// succeeded; its failure (no network) leaves the build JSON-only, with the
/// warning below.
fn download(modules: &[String]) -> bool {
    let dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("gomod");
    if std::fs::create_dir_all(&dir).is_err() {
        return false;
    }
    match Command::new("go")
        .arg("mod")
        .arg("download")
        .args(modules)
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=mod")
        .output()
    {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            println!(
                "cargo:warning=go mod download {} failed: {}",
                modules.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            false
        }
        Err(_) => false, // no Go
    }
}

/// The tables, from the modules in `cache`.
fn tables(cache: &Path) -> String {
    let mut files = Vec::new();
    for module in MODULES {
        let dir = module_dir(cache, module);
        let root = match *module {
            "k8s.io/api" => dir.clone(),
            _ => dir.join("pkg"),
        };
        collect(&root, &mut files);
    }
    files.sort();
    let mut messages: BTreeMap<String, Vec<Field>> = BTreeMap::new();
    let mut tags = BTreeMap::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let package = parse(f, &text, &mut messages);
        go_tags(f.parent().expect("a directory"), &package, &mut tags);
    }
    let index: BTreeMap<&str, usize> = messages
        .keys()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let mut out = String::new();
    writeln!(out, "// Generated by fakeapi/build.rs from the .proto files of k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver and k8s.io/kube-aggregator {VERSION}.").unwrap();
    writeln!(out, "pub(crate) const UNAVAILABLE: Option<&str> = None;").unwrap();
    writeln!(out, "pub(crate) static MESSAGES: &[MessageDesc] = &[").unwrap();
    for (name, fields) in &messages {
        let mut fields = fields.clone();
        fields.sort_by_key(|f| f.number);
        write!(out, "MessageDesc {{ name: {name:?}, fields: &[").unwrap();
        for f in &fields {
            let ty = ty(&f.ty, name, &index);
            let (json, inline) = match tags.get(&(name.clone(), f.number)) {
                Some(GoTag::Inline) => (f.name.as_str(), true),
                Some(GoTag::Json(j)) => (j.as_str(), false),
                // No Go struct beside it, or `json:"-"`: the proto name.
                None => (f.name.as_str(), false),
            };
            let label = match &f.label {
                Label::Optional => "Label::Optional",
                Label::Repeated => "Label::Repeated",
                Label::Map => "Label::Map",
            };
            write!(
                out,
                "FieldDesc {{ name: {:?}, json: {json:?}, number: {}, label: {label}, ty: {ty}, inline: {inline} }},",
                f.name, f.number
            )
            .unwrap();
        }
        writeln!(out, "] }},").unwrap();
    }
    writeln!(out, "];").unwrap();
    out
}

#[derive(Clone)]
enum Label {
    Optional,
    Repeated,
    Map,
}

#[derive(Clone)]
struct Field {
    name: String,
    number: u32,
    label: Label,
    /// Scalar name, or the fully qualified message name.
    ty: String,
}

fn ty(t: &str, msg: &str, index: &BTreeMap<&str, usize>) -> String {
    match t {
        "string" => "Ty::String".into(),
        "bytes" => "Ty::Bytes".into(),
        "int32" => "Ty::Int32".into(),
        "int64" => "Ty::Int64".into(),
        "bool" => "Ty::Bool".into(),
        "double" => "Ty::Double".into(),
        m => match index.get(m) {
            Some(i) => format!("Ty::Message({i})"),
            None => panic!("message {msg} refers to {m}, which no .proto file defines"),
        },
    }
}

/// Go's module cache, found as Go finds it: `$GOMODCACHE`, else what
/// `go env GOMODCACHE` says (Go on `PATH`; `go env` reads only its
/// settings), else `$GOPATH/pkg/mod` (its first entry), else
/// `$HOME/go/pkg/mod`. Only [`download`] fetches, and only with Go on
/// `PATH`: a build without Go needs no network.
fn module_cache() -> Option<PathBuf> {
    if let Some(c) = std::env::var_os("GOMODCACHE").filter(|c| !c.is_empty()) {
        return Some(c.into());
    }
    if let Ok(out) = Command::new("go").args(["env", "GOMODCACHE"]).output() {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !dir.is_empty() {
            return Some(dir.into());
        }
    }
    if let Some(p) = std::env::var_os("GOPATH").filter(|p| !p.is_empty()) {
        if let Some(first) = std::env::split_paths(&p).next() {
            return Some(first.join("pkg/mod"));
        }
    }
    std::env::var_os("HOME").map(|h| Path::new(&h).join("go/pkg/mod"))
}

/// A module's directory in the cache (`k8s.io/api@v0.35.8`).
fn module_dir(cache: &Path, module: &str) -> PathBuf {
    cache.join(format!("{module}@{VERSION}"))
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let p = e.expect("a directory entry").path();
        if p.is_dir() {
            // Test-only API groups are not served.
            if p.file_name()
                .is_some_and(|n| n == "testapigroup" || n == "testdata")
            {
                continue;
            }
            collect(&p, files);
        } else if p.file_name().is_some_and(|n| n == "generated.proto") {
            files.push(p);
        }
    }
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(std::mem::take(cur));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                flush(&mut cur, &mut out);
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                flush(&mut cur, &mut out);
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            '"' => {
                flush(&mut cur, &mut out);
                let mut s = String::from('"');
                for c in chars.by_ref() {
                    s.push(c);
                    if c == '"' {
                        break;
                    }
                }
                out.push(s);
            }
            '{' | '}' | '<' | '>' | ';' | '=' | ',' | '[' | ']' | '(' | ')' => {
                flush(&mut cur, &mut out);
                out.push(c.to_string());
            }
            c if c.is_whitespace() => flush(&mut cur, &mut out),
            c => cur.push(c),
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// What the Go struct beside a `.proto` file says of a field (by its
/// message and number): embedded (`json:",inline"`: in JSON its fields are
/// the struct's own, in protobuf a message of their own), or its JSON name.
/// The `.proto` files say neither: their names are the `protobuf` tags'
/// `name=`, mostly the JSON name but not always (`Expression` for
/// `expression`, `Webhooks` for `webhooks`, `ref` for `$ref`).
enum GoTag {
    Inline,
    Json(String),
}

fn go_tags(dir: &Path, package: &str, out: &mut BTreeMap<(String, u32), GoTag>) {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "go")
                && !p.to_string_lossy().ends_with("_test.go")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("zz_generated"))
        })
        .collect();
    names.sort();
    for p in names {
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let mut current: Option<&str> = None;
        for line in text.lines() {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix("type ") {
                let mut w = rest.split_whitespace();
                if let (Some(name), Some("struct")) = (w.next(), w.next()) {
                    current = Some(name);
                    continue;
                }
            }
            if l == "}" && !line.starts_with(char::is_whitespace) {
                current = None;
            }
            let Some(st) = current else { continue };
            let Some(tag) = l
                .split("protobuf:\"")
                .nth(1)
                .filter(|t| !t.starts_with('-'))
            else {
                continue;
            };
            let number: u32 = tag
                .split(',')
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{}: a field's protobuf tag: {l}", p.display()));
            let Some(json) = l.split("json:\"").nth(1) else {
                continue;
            };
            let json = json.split(['"', ',']).next().unwrap_or("");
            let what = if l.contains("json:\",inline") {
                GoTag::Inline
            } else if json.is_empty() || json == "-" {
                continue;
            } else {
                GoTag::Json(json.to_string())
            };
            out.insert((format!("{package}.{st}"), number), what);
        }
    }
}

/// Reads one file's messages into `messages`; returns its package.
fn parse(file: &Path, text: &str, messages: &mut BTreeMap<String, Vec<Field>>) -> String {
    let t = tokens(text);
    let bad = |i: usize, what: &str| -> ! {
        panic!(
            "{}: unexpected {:?} ({what}): fakeapi/build.rs reads only the proto2 subset go-to-protobuf writes",
            file.display(),
            t.get(i).map(String::as_str).unwrap_or("end of file")
        )
    };
    let mut package = String::new();
    let mut i = 0;
    let until_semicolon = |mut i: usize| {
        while t.get(i).is_some_and(|x| x != ";") {
            i += 1;
        }
        i + 1
    };
    while i < t.len() {
        match t[i].as_str() {
            "syntax" | "import" | "option" => i = until_semicolon(i),
            "package" => {
                package = t[i + 1].clone();
                i = until_semicolon(i);
            }
            "message" => {
                let name = format!("{package}.{}", t[i + 1]);
                if t.get(i + 2).map(String::as_str) != Some("{") {
                    bad(i + 2, "a message's body");
                }
                i += 3;
                let mut fields = Vec::new();
                while t.get(i).map(String::as_str) != Some("}") {
                    let (label, ty, j) = match t.get(i).map(String::as_str) {
                        Some("optional") | Some("required") => {
                            (Label::Optional, t[i + 1].clone(), i + 2)
                        }
                        Some("repeated") => (Label::Repeated, t[i + 1].clone(), i + 2),
                        Some("map") => {
                            // map < string , T >
                            if t[i + 1] != "<"
                                || t[i + 2] != "string"
                                || t[i + 3] != ","
                                || t[i + 5] != ">"
                            {
                                bad(i, "a map keyed by string");
                            }
                            (Label::Map, t[i + 4].clone(), i + 6)
                        }
                        _ => bad(i, "a field"),
                    };
                    let fname = t[j].clone();
                    if t[j + 1] != "=" {
                        bad(j + 1, "a field's number");
                    }
                    let number: u32 = t[j + 2]
                        .parse()
                        .unwrap_or_else(|_| bad(j + 2, "a field's number"));
                    if t[j + 3] != ";" {
                        bad(j + 3, "the end of a field (options are not read)");
                    }
                    let ty = match ty.as_str() {
                        "string" | "bytes" | "int32" | "int64" | "bool" | "double" => ty,
                        q if q.contains('.') => q.trim_start_matches('.').to_string(),
                        local => format!("{package}.{local}"),
                    };
                    fields.push(Field {
                        name: fname,
                        number,
                        label,
                        ty,
                    });
                    i = j + 4;
                }
                i += 1;
                if messages.insert(name.clone(), fields).is_some() {
                    panic!("{}: message {name} is defined twice", file.display());
                }
            }
            _ => bad(i, "a top-level declaration"),
        }
    }
    package
}
