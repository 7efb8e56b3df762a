//! fakeapi held to the real kube-apiserver: the same requests go to both,
//! and their answers (status, content type, body, watch events), once
//! normalised (`normalise.rs`), must be the same, or the difference must be
//! written down as intended, with its reason (`intended.yaml`).
//!
//! A step that asks for protobuf (`accept`) has its answer and watch
//! events decoded by fakeapi's reader on both servers and compared as JSON,
//! zero values left out (`target::from_protobuf`).
//!
//! The requests are cases: written by hand at the edges real clients hit
//! (`cases/*.yaml`, format in `script.rs`) and recorded from real clients
//! doing their normal work (`recorded/*.json`). Each case was run once
//! against a real kube-apiserver v1.35.8 (`apiserver/`) and its normalised
//! answers committed (`fixtures/*.json`), so that this test replays them
//! against fakeapi in a second, without Go or etcd.
//!
//! Modes (the environment variable `BATKUBE_APIDIFF`):
//! - unset: replay the fixtures against fakeapi (this process's, or the
//!   `batkube serve` whose kubeconfig `BATKUBE_APIDIFF_FAKE` names);
//! - `live`: build and start the real server (`schedulers/build-go.sh
//!   kube-apiserver etcd`, `apiserver/run.sh`), run every case against both;
//! - `record`: run every case against the real server and rewrite its
//!   fixture (then look at `git diff`).
//!
//! - `record-clients`: run real clients (`clients.rs`: kubectl, client-go
//!   informers, kube-rs reflectors) against the real server through a
//!   recording proxy (`record.rs`), write their requests as cases
//!   (`recorded/<client>.json`), then record those cases' fixtures against
//!   a fresh real server (`BATKUBE_APIDIFF_CLIENTS=a,b`: only those).
//!
//! `BATKUBE_APIDIFF_CASES=a,b` runs only those cases.

mod clients;
mod compare;
mod controllers;
mod normalise;
mod record;
mod script;
mod target;

use compare::{diff, Difference, Intended};
use normalise::Normaliser;
use script::{render_str, render_value, Case, Step};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use target::{RealServer, Target};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/differential")
}

/// The server the fixtures were recorded from.
const REAL: &str = "kube-apiserver v1.35.8";

/// What a case starts with on every server: its namespace, and the
/// ServiceAccount the real server's `ServiceAccount` admission wants
/// before it admits a pod (kube-controller-manager would make it).
fn prelude() -> Vec<Step> {
    let step = |req: &str, body: Value| Step {
        req: Some(req.into()),
        label: None,
        content_type: None,
        accept: None,
        body: Some(body),
        text: None,
        base64: None,
        file: None,
        watch: None,
        end: None,
        events: None,
        until: None,
        compare: None,
    };
    vec![
        step(
            "POST /api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "$ns"}}),
        ),
        step(
            "POST /api/v1/namespaces/$ns/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
        ),
    ]
}

/// Every case, hand-written and recorded, by name.
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (sub, yaml) in [("cases", true), ("recorded", false)] {
        let Ok(rd) = std::fs::read_dir(dir().join(sub)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let mut case = if yaml && name.ends_with(".yaml") {
                Case::parse_yaml(&name, &text).unwrap_or_else(|e| panic!("{e}"))
            } else if !yaml && name.ends_with(".json") {
                let c: Case =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                c.check().unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                c
            } else {
                continue;
            };
            let stem = name.rsplit_once('.').unwrap().0;
            assert_eq!(
                case.name,
                stem,
                "{}: `name` must be the file's name",
                f.display()
            );
            let mut steps = prelude();
            steps.append(&mut case.steps);
            case.steps = steps;
            out.push(case);
        }
    }
    if let Ok(only) = std::env::var("BATKUBE_APIDIFF_CASES") {
        let only: Vec<&str> = only.split(',').collect();
        out.retain(|c| only.contains(&c.name.as_str()));
    }
    out
}

/// `@wN#K:/pointer`: the value at `pointer` in the K-th event (progress
/// bookmarks not counted) of watch wN.
fn event_ref(r: &str) -> Option<(String, usize, &str)> {
    let rest = r.strip_prefix('@')?;
    let (wk, pointer) = rest.split_once(':')?;
    let (w, k) = wk.split_once('#')?;
    Some((w.to_string(), k.parse().ok()?, pointer))
}

/// The watch events a step's path and body refer to.
fn event_refs(step: &Step) -> Vec<(String, usize)> {
    let mut text = step.req.clone().unwrap_or_default();
    if let Some(b) = &step.body {
        text.push_str(&b.to_string());
    }
    text.split("{{")
        .skip(1)
        .filter_map(|t| t.split("}}").next())
        .filter_map(|r| event_ref(r).map(|(w, k, _)| (w, k)))
        .collect()
}

/// A step's `file`, as JSON (see `script::Step::file`).
fn file_body(file: &str) -> Value {
    let p = target::go_dir().join(file);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (made by `bash schedulers/build-go.sh {}`, which the harness runs first)",
            p.display(),
            script::crd_program(file).unwrap_or("?")
        )
    });
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Copies the files the cases' steps read (CRDs from their Go modules:
/// `schedulers/build-go.sh crds-*`, a module download, no build).
fn ensure_files(cases: &[Case]) {
    let mut programs: Vec<&str> = cases
        .iter()
        .flat_map(|c| c.steps.iter())
        .filter_map(|s| s.file.as_deref().and_then(script::crd_program))
        .collect();
    programs.sort();
    programs.dedup();
    if programs.is_empty() {
        return;
    }
    let st = std::process::Command::new("bash")
        .arg(target::repo_root().join("schedulers/build-go.sh"))
        .arg(target::go_dir())
        .args(&programs)
        .status()
        .expect("running schedulers/build-go.sh (needs bash and Go)");
    assert!(
        st.success(),
        "schedulers/build-go.sh {} failed: its output is above",
        programs.join(" ")
    );
}

fn namespace(case: &Case) -> String {
    format!("apidiff-{}", case.name)
}

/// Runs a case against one server; one normalised answer per step.
async fn run_case(case: &Case, target: &Target) -> Vec<Value> {
    let ns = namespace(case);
    let mut norm = Normaliser::default();
    let mut labels: HashMap<String, Value> = HashMap::new();
    let mut watches: HashMap<String, target::Watch> = HashMap::new();
    let mut answers = Vec::new();
    for step in &case.steps {
        if let Some(w) = &step.end {
            // A watch that could not be opened (its step unsent) has no end.
            let Some(watch) = watches.remove(w) else {
                answers.push(json!({"unsent": format!("watch {w} was never opened")}));
                continue;
            };
            match step.events {
                Some(count) => watch.until_count(count, Duration::from_secs(2)).await,
                None => watch.until_end().await,
            }
            let log = watch.close();
            // A watch the client closed after so many events: its progress
            // bookmarks are left out (see `target::is_progress_bookmark`).
            let mut events: Vec<Value> = log
                .events
                .iter()
                .filter(|e| step.events.is_none() || !target::is_progress_bookmark(e))
                .map(|e| norm.event(e))
                .collect();
            // Bookmarks in a row that say the same thing are one: how many a
            // real server sends before a timeout depends on its 1 s ticker.
            events.dedup_by(|b, a| a["type"] == "BOOKMARK" && a == b);
            let mut a = json!({"status": log.status, "type": log.content_type, "events": events});
            if !log.garbage.is_empty() {
                a["garbage"] = json!(log.garbage);
            }
            answers.push(a);
            continue;
        }
        let req = step.req.as_deref().expect("checked by Case::check");
        // Values a recorded client read from a watch's events: wait for
        // the event (see `record::to_case`).
        for (w, k) in event_refs(step) {
            if let Some(watch) = watches.get(&w) {
                watch.until_count(k + 1, Duration::from_secs(5)).await;
            }
        }
        let lookup = |r: &str| -> Result<Value, String> {
            if let Some((w, k, pointer)) = event_ref(r) {
                let watch = watches
                    .get(&w)
                    .ok_or_else(|| format!("{{{{{r}}}}}: watch {w} is not open"))?;
                let log = watch.log.lock().unwrap();
                return log
                    .events
                    .iter()
                    .filter(|e| !target::is_progress_bookmark(e))
                    .nth(k)
                    .and_then(|e| e.pointer(pointer))
                    .cloned()
                    .ok_or_else(|| format!("{{{{{r}}}}}: this server sent no such event"));
            }
            if r.starts_with('@') {
                return norm
                    .resolve(r)
                    .map(Value::String)
                    .ok_or_else(|| format!("{{{{{r}}}}} names nothing this server showed"));
            }
            let (label, pointer) = r
                .split_once(':')
                .ok_or_else(|| format!("{{{{{r}}}}}: write {{{{label:/pointer}}}}"))?;
            labels
                .get(label)
                .and_then(|v| v.pointer(pointer))
                .cloned()
                .ok_or_else(|| format!("{{{{{r}}}}}: no such value in the answer to {label}"))
        };
        // A value this server never gave (an earlier answer differed): the
        // step cannot be sent, which is a difference of its own.
        let rendered = (|| -> Result<(String, Option<Vec<u8>>), String> {
            let path = render_str(path_template(req), &ns, &lookup)?;
            let body = match (&step.body, &step.text, &step.base64) {
                (Some(b), _, _) => {
                    Some(serde_json::to_vec(&render_value(b, &ns, &lookup)?).unwrap())
                }
                _ if step.file.is_some() => {
                    let b = file_body(step.file.as_deref().unwrap());
                    Some(serde_json::to_vec(&render_value(&b, &ns, &lookup)?).unwrap())
                }
                (_, Some(t), _) => Some(render_str(t, &ns, &lookup)?.into_bytes()),
                (_, _, Some(b)) => Some(
                    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b)
                        .map_err(|e| format!("`base64`: {e}"))?,
                ),
                _ => None,
            };
            Ok((path, body))
        })();
        let (path, body) = match rendered {
            Ok(r) => r,
            Err(e) => {
                answers.push(json!({"unsent": e}));
                continue;
            }
        };
        let method = req.split_once(' ').expect("checked by Case::check").0;
        if let Some(w) = &step.watch {
            let watch = target.watch(&path, step.accept.as_deref()).await;
            watches.insert(w.clone(), watch);
            answers.push(json!({"watch": w}));
            continue;
        }
        let ct = step.media_type();
        let send = || {
            target.request(
                method,
                &path,
                ct.as_deref(),
                step.accept.as_deref(),
                body.clone(),
            )
        };
        let mut a = send().await;
        if let Some(want) = step.until {
            let deadline = tokio::time::Instant::now() + target::PATIENCE;
            while a.status != want && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                a = send().await;
            }
        }
        let body = match a.json() {
            Some(v) => {
                if let Some(l) = &step.label {
                    labels.insert(l.clone(), v.clone());
                }
                norm.body(&v)
            }
            None => Value::String(String::from_utf8_lossy(&a.body).into_owned()),
        };
        if step.compare.as_deref() == Some("status") {
            answers.push(json!({"status": a.status, "type": a.content_type}));
            continue;
        }
        answers.push(json!({"status": a.status, "type": a.content_type, "body": body}));
    }
    for (_, w) in watches {
        w.close();
    }
    answers
}

fn path_template(req: &str) -> &str {
    req.split_once(' ').expect("checked by Case::check").1
}

/// The recorded answers of a case.
#[derive(serde::Serialize, serde::Deserialize)]
struct Fixture {
    server: String,
    /// The steps as they were run (the prelude included): a fixture whose
    /// steps are not the case's is stale.
    steps: Vec<Step>,
    answers: Vec<Value>,
}

fn fixture_path(case: &Case) -> PathBuf {
    dir().join("fixtures").join(format!("{}.json", case.name))
}

fn compare_case(case: &Case, real: &[Value], fake: &[Value]) -> Vec<Difference> {
    let mut out = Vec::new();
    for (i, step) in case.steps.iter().enumerate() {
        let mut d = Vec::new();
        diff("", real.get(i), fake.get(i), &mut d);
        for (path, r, f) in d {
            out.push(Difference {
                case: case.name.clone(),
                step: i + 1,
                request: step.describe(),
                path,
                real: r,
                fake: f,
            });
        }
    }
    out
}

fn intended() -> Vec<Intended> {
    let p = dir().join("intended.yaml");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A fresh fakeapi (as `batkube serve` configures it), or the `batkube
/// serve` of `BATKUBE_APIDIFF_FAKE`.
async fn fake() -> (Target, Option<fakeapi::RunningServer>) {
    if let Ok(kc) = std::env::var("BATKUBE_APIDIFF_FAKE") {
        return (
            Target::from_kubeconfig("batkube serve", Path::new(&kc)).await,
            None,
        );
    }
    // As `batkube serve` configures it, but with the deletion of bound
    // pods left pending, as on a cluster with no kubelet (the real server
    // here has none); the broker, which plays the kubelet, deletes them.
    // Without the service-account controller: the real server runs no
    // kube-controller-manager, and the prelude writes each namespace's
    // `default` ServiceAccount on both servers, as that controller would
    // (fakeapi's own would make the prelude's create a 409 and every later
    // resourceVersion one apart; `tests/conformance.rs` holds it).
    let store = fakeapi::Store::with_config(fakeapi::StoreConfig {
        watch_history: 10_000,
        graceful_pod_deletion: true,
        service_accounts: false,
        ..Default::default()
    });
    let server = fakeapi::serve(store, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("bind 127.0.0.1:0");
    let cfg = kube::Config::new(format!("http://{}", server.addr()).parse().unwrap());
    let client = kube::Client::try_from(cfg).expect("a client");
    (Target::new("fakeapi", client), Some(server))
}

/// Differences not written down as intended, and intended entries that
/// covered nothing (stale: the difference is gone, or the entry is wrong).
fn judge(all: Vec<Difference>, full_run: bool) -> Result<(), String> {
    let intended = intended();
    let mut used = vec![false; intended.len()];
    let mut unexplained = Vec::new();
    for d in all {
        match intended.iter().position(|i| i.covers(&d)) {
            Some(k) => used[k] = true,
            None => unexplained.push(d),
        }
    }
    let mut report = String::new();
    if !unexplained.is_empty() {
        report.push_str(&format!(
            "{} difference(s) between kube-apiserver and fakeapi, neither fixed nor written down in tests/differential/intended.yaml:\n",
            unexplained.len()
        ));
        for d in &unexplained {
            report.push_str(&format!("  {d}\n"));
        }
    }
    if full_run {
        for (k, i) in intended.iter().enumerate() {
            if !used[k] {
                report.push_str(&format!(
                    "intended.yaml entry {} ({:?}, {}) covers no difference any more: remove it\n",
                    k + 1,
                    i.paths,
                    i.reason
                ));
            }
        }
    }
    if report.is_empty() {
        Ok(())
    } else {
        Err(report)
    }
}

/// `BATKUBE_APIDIFF_DUMP=DIR`: fakeapi's normalised answers written to
/// `DIR/<case>.json`, to read beside the fixtures.
fn dump(case: &Case, answers: &[Value]) {
    if let Ok(d) = std::env::var("BATKUBE_APIDIFF_DUMP") {
        std::fs::create_dir_all(&d).unwrap();
        let p = Path::new(&d).join(format!("{}.json", case.name));
        std::fs::write(&p, serde_json::to_string_pretty(answers).unwrap()).unwrap();
    }
}

/// A case's answers from a real server: a fresh one for a recorded
/// client's case (a controller lists and watches the whole cluster, and
/// fakeapi starts each case empty), `shared` (started on first use) for the
/// others.
async fn real_answers(case: &Case, shared: &mut Option<(RealServer, Target)>) -> Vec<Value> {
    let start = || async {
        let server = tokio::task::spawn_blocking(RealServer::start)
            .await
            .unwrap();
        let real = Target::from_kubeconfig("kube-apiserver", &server.kubeconfig).await;
        (server, real)
    };
    if dir()
        .join("recorded")
        .join(format!("{}.json", case.name))
        .exists()
    {
        let (server, real) = start().await;
        let answers = run_case(case, &real).await;
        drop(server);
        return answers;
    }
    if shared.is_none() {
        *shared = Some(start().await);
    }
    run_case(case, &shared.as_ref().unwrap().1).await
}

fn mode() -> String {
    std::env::var("BATKUBE_APIDIFF").unwrap_or_default()
}

/// The default mode: every fixture replayed against fakeapi.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fakeapi_answers_as_the_recorded_kube_apiserver() {
    let cases = cases();
    assert!(!cases.is_empty(), "no cases in {}", dir().display());
    ensure_files(&cases);
    let full = std::env::var("BATKUBE_APIDIFF_CASES").is_err();
    let mut all = Vec::new();
    for case in &cases {
        let p = fixture_path(case);
        let text = std::fs::read_to_string(&p).unwrap_or_else(|_| {
            panic!(
                "{} has no fixture ({}): record it with BATKUBE_APIDIFF=record BATKUBE_APIDIFF_CASES={} cargo test --release -p fakeapi --test differential -- --ignored",
                case.name,
                p.display(),
                case.name
            )
        });
        let fx: Fixture =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(
            fx.steps == case.steps,
            "{}: the case changed since its fixture was recorded: record it again (BATKUBE_APIDIFF=record BATKUBE_APIDIFF_CASES={} ... -- --ignored)",
            p.display(),
            case.name
        );
        let (target, _server) = fake().await;
        let answers = run_case(case, &target).await;
        dump(case, &answers);
        all.extend(compare_case(case, &fx.answers, &answers));
    }
    if let Err(report) = judge(all, full) {
        panic!("{report}");
    }
}

/// `live` and `record`: against the real kube-apiserver, built here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Go and the module proxy to build kube-apiserver and etcd: BATKUBE_APIDIFF=live (or record) cargo test --release -p fakeapi --test differential -- --ignored"]
async fn fakeapi_answers_as_a_live_kube_apiserver() {
    let mode = mode();
    assert!(
        mode == "live" || mode == "record",
        "set BATKUBE_APIDIFF=live (compare with a real kube-apiserver) or record (rewrite the fixtures), not {mode:?}"
    );
    let cases = cases();
    ensure_files(&cases);
    let full = std::env::var("BATKUBE_APIDIFF_CASES").is_err();
    let mut all = Vec::new();
    let mut shared = None;
    for case in &cases {
        let real_answers = real_answers(case, &mut shared).await;
        if mode == "record" {
            let fx = Fixture {
                server: REAL.into(),
                steps: case.steps.clone(),
                answers: real_answers,
            };
            let p = fixture_path(case);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, serde_json::to_string_pretty(&fx).unwrap() + "\n").unwrap();
            eprintln!("recorded {}", p.display());
            continue;
        }
        let (target, _server) = fake().await;
        let answers = run_case(case, &target).await;
        all.extend(compare_case(case, &real_answers, &answers));
    }
    drop(shared);
    if mode == "live" {
        if let Err(report) = judge(all, full) {
            panic!("{report}");
        }
    }
}

/// `record-clients`: real clients' normal work recorded as cases, then
/// their fixtures (see the module's doc).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Go, kubectl and the module proxy: BATKUBE_APIDIFF=record-clients cargo test --release -p fakeapi --test differential -- --ignored"]
async fn real_clients_recorded_against_kube_apiserver() {
    if mode() != "record-clients" {
        eprintln!("BATKUBE_APIDIFF is not record-clients: nothing recorded");
        return;
    }
    let wanted: Vec<String> = match std::env::var("BATKUBE_APIDIFF_CLIENTS") {
        Ok(v) => v.split(',').map(str::to_string).collect(),
        Err(_) => clients::ALL.iter().map(|c| c.to_string()).collect(),
    };
    let go_dir = target::repo_root().join("target/go");
    let mut recorded = Vec::new();
    for client in &wanted {
        let about = clients::about(client);
        let server = tokio::task::spawn_blocking(RealServer::start)
            .await
            .unwrap();
        let real = Target::from_kubeconfig("kube-apiserver", &server.kubeconfig).await;
        let placeholder = Case {
            name: client.clone(),
            about: String::new(),
            steps: Vec::new(),
        };
        let ns = namespace(&placeholder);
        // The prelude, straight to the server (not recorded).
        let mut prelude_answers = Vec::new();
        for step in prelude() {
            let path = path_template(step.req.as_deref().unwrap()).replace("$ns", &ns);
            let body = serde_json::to_vec(
                &render_value(step.body.as_ref().unwrap(), &ns, &|_| {
                    Err("no references in the prelude".into())
                })
                .unwrap(),
            )
            .unwrap();
            let a = real.request("POST", &path, None, None, Some(body)).await;
            assert_eq!(a.status, 201, "prelude {path}: {:?}", a.json());
            prelude_answers.push(a.json().unwrap());
        }
        // The client's setup (a controller's CRDs), straight to the server.
        let setup = controllers::setup(client);
        for step in &setup {
            let req = step.req.as_deref().unwrap();
            let (method, path) = req.split_once(' ').unwrap();
            let path = path.replace("$ns", &ns);
            let body = step
                .file
                .as_deref()
                .map(|f| serde_json::to_vec(&file_body(f)).unwrap());
            let mut a = real.request(method, &path, None, None, body.clone()).await;
            if let Some(want) = step.until {
                let deadline = tokio::time::Instant::now() + target::PATIENCE;
                while a.status != want && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    a = real.request(method, &path, None, None, body.clone()).await;
                }
            }
            assert!(
                (200..300).contains(&a.status),
                "setup {req}: {} {}",
                a.status,
                String::from_utf8_lossy(&a.body)
            );
            prelude_answers.push(a.json().unwrap());
        }
        let rec = record::Recorder::start(real.clone()).await;
        let kc_dir =
            std::env::temp_dir().join(format!("batkube-apidiff-kc-{}", std::process::id()));
        std::fs::create_dir_all(&kc_dir).unwrap();
        let kc = kc_dir.join("kubeconfig.yaml");
        std::fs::write(&kc, rec.kubeconfig(&ns)).unwrap();
        clients::run(
            client,
            &kc,
            &format!("http://{}", rec.addr),
            &ns,
            &go_dir,
            &real,
        )
        .await;
        let (exchanges, moments) = rec.finish(Duration::from_secs(30)).await;
        drop(rec);
        drop(server);
        let _ = std::fs::remove_dir_all(&kc_dir);
        let mut case = record::to_case(client, about, &ns, &prelude_answers, &exchanges, &moments)
            .unwrap_or_else(|e| panic!("{client}: {e}"));
        case.steps.splice(0..0, setup);
        let p = dir().join("recorded").join(format!("{client}.json"));
        std::fs::write(&p, serde_json::to_string_pretty(&case).unwrap() + "\n").unwrap();
        eprintln!("recorded {} ({} steps)", p.display(), case.steps.len());
        recorded.push(client.clone());
    }
    // Their fixtures, each against a fresh server.
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| recorded.contains(&c.name))
        .collect();
    ensure_files(&cases);
    for case in &cases {
        let fx = Fixture {
            server: REAL.into(),
            steps: case.steps.clone(),
            answers: real_answers(case, &mut None).await,
        };
        let p = fixture_path(case);
        std::fs::write(&p, serde_json::to_string_pretty(&fx).unwrap() + "\n").unwrap();
        eprintln!("recorded {}", p.display());
    }
}
