//! Recording a real client's requests as a case (`recorded/*.json`).
//!
//! The client talks to a proxy on loopback (plain HTTP, no credentials)
//! that passes every request to the real kube-apiserver through the
//! harness's own client (TLS, the token) and every answer back, streaming
//! watches as they come. The proxy writes down each request (method, path,
//! content type, accept, body), its answer, each watch's events and who
//! ended the watch and when, in the order things happened. `to_case` turns
//! that into steps: the case's namespace becomes `$ns`, and every
//! resourceVersion, uid, generated name and continue token the client sent
//! back becomes the `{{@rv:N}}`-style placeholder the normaliser gave it
//! in the answers before, so that the same steps mean the same thing on any
//! server.

use crate::normalise::{Kind, Normaliser};
use crate::script::{Case, Step};
use crate::target::{is_progress_bookmark, Target};
use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the client made, with what the real server answered.
#[derive(Debug, Clone, Default)]
pub struct Exchange {
    pub method: String,
    /// Path and query, as the client sent them.
    pub path: String,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    pub body: Option<Bytes>,
    pub status: u16,
    /// The answer's body (not a watch's).
    pub answer: Bytes,
    /// A watch's events, in order.
    pub events: Vec<Value>,
    pub is_watch: bool,
    /// The client closed the watch (rather than the server ending it).
    pub closed_by_client: bool,
}

/// What happened, in order: a request sent, a watch's event arrived, a
/// watch ended (each naming its exchange).
#[derive(Debug, Clone, Copy)]
pub enum Moment {
    Sent(usize),
    Event(usize),
    Ended(usize),
}

#[derive(Default)]
struct Log {
    exchanges: Vec<Exchange>,
    moments: Vec<Moment>,
    /// Watches not ended yet.
    open: usize,
}

/// A recording proxy in front of `target`; stops when dropped.
pub struct Recorder {
    log: Arc<Mutex<Log>>,
    changed: Arc<tokio::sync::Notify>,
    pub addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn is_watch(path: &str) -> bool {
    path.split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|kv| kv == "watch=1" || kv == "watch=true"))
}

fn header(h: &http::HeaderMap, name: http::header::HeaderName) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

type ProxyBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

impl Recorder {
    pub async fn start(target: Target) -> Recorder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let changed = Arc::new(tokio::sync::Notify::new());
        let (l2, c2) = (log.clone(), changed.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (log, changed, target) = (l2.clone(), c2.clone(), target.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        proxy(req, target.clone(), log.clone(), changed.clone())
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Recorder {
            log,
            changed,
            addr,
            task,
        }
    }

    /// A kubeconfig for the client: this proxy, no credentials, `ns` as
    /// the context's namespace.
    pub fn kubeconfig(&self, ns: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: recorder\n  cluster:\n    server: http://{}\nusers:\n- name: client\n  user: {{}}\ncontexts:\n- name: recorder\n  context:\n    cluster: recorder\n    user: client\n    namespace: {ns}\ncurrent-context: recorder\n",
            self.addr
        )
    }

    /// Waits (at most `patience`) until every watch has ended, then
    /// returns what was recorded.
    pub async fn finish(&self, patience: Duration) -> (Vec<Exchange>, Vec<Moment>) {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let notified = self.changed.notified();
            if self.log.lock().unwrap().open == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "the recorded client left {} watch(es) open",
                    self.log.lock().unwrap().open
                );
            }
        }
        let log = self.log.lock().unwrap();
        (log.exchanges.clone(), log.moments.clone())
    }
}

async fn proxy(
    req: http::Request<Incoming>,
    target: Target,
    log: Arc<Mutex<Log>>,
    changed: Arc<tokio::sync::Notify>,
) -> Result<http::Response<ProxyBody>, Infallible> {
    let method = req.method().as_str().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let content_type = header(req.headers(), http::header::CONTENT_TYPE);
    let accept = header(req.headers(), http::header::ACCEPT);
    let user_agent = header(req.headers(), http::header::USER_AGENT);
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body = (!body.is_empty()).then_some(body);
    let watch = method == "GET" && is_watch(&path);
    let index = {
        let mut l = log.lock().unwrap();
        let i = l.exchanges.len();
        l.exchanges.push(Exchange {
            method: method.clone(),
            path: path.clone(),
            content_type: content_type.clone(),
            accept: accept.clone(),
            body: body.clone(),
            is_watch: watch,
            ..Default::default()
        });
        l.moments.push(Moment::Sent(i));
        if watch {
            l.open += 1;
        }
        i
    };
    let resp = target
        .send_raw(
            &method,
            &path,
            content_type.as_deref(),
            accept.as_deref(),
            user_agent.as_deref(),
            body.map(|b| b.to_vec()),
        )
        .await;
    let status = resp.status();
    let mut builder = http::Response::builder().status(status);
    for name in [http::header::CONTENT_TYPE, http::header::WARNING] {
        if let Some(v) = resp.headers().get(&name) {
            builder = builder.header(name, v);
        }
    }
    log.lock().unwrap().exchanges[index].status = status.as_u16();
    if !watch {
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        log.lock().unwrap().exchanges[index].answer = bytes.clone();
        let body = http_body_util::Full::new(bytes).boxed();
        return Ok(builder.body(body).unwrap());
    }
    // A watch: each frame passed on as it comes, its events noted; the
    // watch ends when the server ends it or the client goes away.
    let protobuf = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with(fakeapi::protobuf::MEDIA_TYPE));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let mut upstream = resp.into_body();
        let mut buf: Vec<u8> = Vec::new();
        let by_client = loop {
            tokio::select! {
                _ = tx.closed() => break true,
                frame = upstream.frame() => {
                    let Some(Ok(frame)) = frame else { break false };
                    let Ok(data) = frame.into_data() else { continue };
                    buf.extend_from_slice(&data);
                    {
                        let mut l = log.lock().unwrap();
                        let mut events = Vec::new();
                        if protobuf {
                            // Read as the harness reads a protobuf watch.
                            if let Ok((evs, rest)) = fakeapi::protobuf::decode_watch(&buf) {
                                let rest = rest.to_vec();
                                events.extend(evs.into_iter().map(crate::target::from_protobuf));
                                buf = rest;
                            }
                        } else {
                            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                                let line: Vec<u8> = buf.drain(..=pos).collect();
                                if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                                    events.push(v);
                                }
                            }
                        }
                        for v in events {
                            l.exchanges[index].events.push(v);
                            l.moments.push(Moment::Event(index));
                        }
                    }
                    if tx.send(data).await.is_err() {
                        break true;
                    }
                }
            }
        };
        let mut l = log.lock().unwrap();
        if !by_client && !buf.is_empty() && !protobuf {
            if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                l.exchanges[index].events.push(v);
                l.moments.push(Moment::Event(index));
            }
        }
        l.exchanges[index].closed_by_client = by_client;
        l.moments.push(Moment::Ended(index));
        l.open -= 1;
        drop(l);
        changed.notify_waiters();
    });
    let stream = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|o| o.map(|b| Ok::<_, Infallible>(Frame::data(b))))
    });
    Ok(builder.body(StreamBody::new(stream).boxed()).unwrap())
}

/// Documents that describe everything a server serves (discovery, OpenAPI,
/// its version): fakeapi serves a subset of kube-apiserver's kinds, so
/// only their status and content type are compared.
fn describes_server(path: &str) -> bool {
    let p = path.split('?').next().unwrap_or("");
    let segs: Vec<&str> = p.trim_matches('/').split('/').collect();
    p.starts_with("/openapi/")
        || p == "/version"
        || matches!(
            segs.as_slice(),
            ["api"] | ["apis"] | ["api", _] | ["apis", _] | ["apis", _, _]
        )
}

/// The recorded exchanges as a case's steps (after the prelude, whose
/// answers `prelude` are, in order): see the module's doc.
pub fn to_case(
    name: &str,
    about: &str,
    ns: &str,
    prelude: &[Value],
    exchanges: &[Exchange],
    moments: &[Moment],
) -> Result<Case, String> {
    let mut norm = Normaliser::default();
    for a in prelude {
        norm.body(a);
    }
    let mut steps: Vec<Step> = Vec::new();
    // The list each watch starts from: (path, list resourceVersion) -> the
    // step of the latest list of that path that answered it. A watch from
    // it refers to that step's answer (`{{lN:/metadata/resourceVersion}}`),
    // not to the normaliser's numbering: a real server's lists of
    // different kinds at `resourceVersion=0` answer each from its own watch
    // cache, whose versions differ from one run to the next.
    let mut listed: std::collections::HashMap<(String, String), usize> = Default::default();
    // Values the client may have read from a watch's event before the
    // watch ended (when the normaliser numbers its events): value -> the
    // reference to it, `{{@wN#K:/object/metadata/resourceVersion}}`, the
    // K-th event (progress bookmarks not counted) of watch wN.
    let mut arrived: std::collections::HashMap<usize, usize> = Default::default();
    let mut from_events: std::collections::HashMap<String, String> = Default::default();
    for &m in moments {
        let (sent, i) = match m {
            Moment::Sent(i) => (true, i),
            Moment::Ended(i) => (false, i),
            Moment::Event(i) => {
                let x = &exchanges[i];
                let n = arrived.entry(i).or_default();
                let e = &x.events[*n];
                *n += 1;
                let counted = x.events[..*n]
                    .iter()
                    .filter(|e| !is_progress_bookmark(e))
                    .count();
                if !is_progress_bookmark(e) {
                    for ptr in ["/object/metadata/resourceVersion", "/object/metadata/uid"] {
                        if let Some(v) = e.pointer(ptr).and_then(Value::as_str) {
                            from_events.insert(
                                v.to_string(),
                                format!("{{{{@w{}#{}:{ptr}}}}}", i + 1, counted - 1),
                            );
                        }
                    }
                }
                continue;
            }
        };
        let refs = Refs {
            norm: &norm,
            events: &from_events,
        };
        let x = &exchanges[i];
        let w = format!("w{}", i + 1);
        if !sent {
            // Events are numbered by the normaliser when the watch ends,
            // as the harness does.
            // As the harness reads it back: a watch the client closed is
            // counted, and compared, without its progress bookmarks.
            let events: Vec<&Value> = x
                .events
                .iter()
                .filter(|e| !x.closed_by_client || !is_progress_bookmark(e))
                .collect();
            for e in &events {
                norm.event(e);
            }
            steps.push(Step {
                end: Some(w),
                events: x.closed_by_client.then_some(events.len()),
                ..empty_step()
            });
            continue;
        }
        let mut path = template_path(&x.path, ns, &refs);
        if x.is_watch {
            let (p, q) = x.path.split_once('?').unwrap_or((&x.path, ""));
            let rv = q
                .split('&')
                .find_map(|kv| kv.strip_prefix("resourceVersion="))
                .map(percent_decode);
            if let Some(&k) = rv.and_then(|rv| listed.get(&(p.to_string(), rv))) {
                let label = format!("l{}", k + 1);
                steps[k].label = Some(label.clone());
                let (tp, tq) = path.split_once('?').unwrap();
                let q: Vec<String> = tq
                    .split('&')
                    .map(|kv| {
                        if kv.starts_with("resourceVersion=") {
                            format!("resourceVersion={{{{{label}:/metadata/resourceVersion}}}}")
                        } else {
                            kv.to_string()
                        }
                    })
                    .collect();
                path = format!("{tp}?{}", q.join("&"));
            }
        }
        let mut step = Step {
            req: Some(format!("{} {path}", x.method)),
            watch: x.is_watch.then_some(w),
            ..empty_step()
        };
        if let Some(a) = &x.accept {
            let a = json_accept(a);
            if a != "application/json" {
                step.accept = Some(a);
            }
        }
        if let Some(b) = &x.body {
            let ct = x
                .content_type
                .clone()
                .unwrap_or_else(|| "application/json".into());
            step.content_type = Some(short_media_type(&ct)).filter(|t| t != "json");
            // A protobuf body that carries a value the server made (a
            // pod's uid in a binding) is sent as JSON, with that value's
            // placeholder: the steps must mean the same on any server.
            let templated = ct
                .contains("protobuf")
                .then(|| fakeapi::protobuf::decode_any(b).ok())
                .flatten()
                .map(crate::target::from_protobuf)
                .and_then(|v| {
                    let t = template_value(&v, None, ns, &refs);
                    (t != v).then_some(t)
                });
            if let Some(t) = templated {
                step.content_type = None;
                step.body = Some(t);
            } else if ct.contains("protobuf") {
                step.base64 = Some(base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    b,
                ));
            } else {
                match serde_json::from_slice::<Value>(b) {
                    Ok(v) => step.body = Some(template_value(&v, None, ns, &refs)),
                    Err(_) => {
                        let text = String::from_utf8(b.to_vec()).map_err(|_| {
                            format!("{} {}: a body that is not text", x.method, x.path)
                        })?;
                        step.text = Some(text.replace(ns, "$ns"));
                    }
                }
            }
        }
        if describes_server(&x.path) && x.method == "GET" {
            step.compare = Some("status".into());
        }
        if !x.is_watch {
            // A protobuf answer (to a client that asked for one) is read as
            // the harness reads one (`Answer::json`).
            let answer = if x.answer.starts_with(fakeapi::protobuf::MAGIC) {
                fakeapi::protobuf::decode_any(&x.answer)
                    .ok()
                    .map(crate::target::from_protobuf)
            } else {
                serde_json::from_slice::<Value>(&x.answer).ok()
            };
            if let Some(v) = answer {
                norm.body(&v);
                if x.method == "GET" && v["kind"].as_str().is_some_and(|k| k.ends_with("List")) {
                    if let Some(rv) = v["metadata"]["resourceVersion"].as_str() {
                        let p = x.path.split('?').next().unwrap_or("").to_string();
                        listed.insert((p, rv.to_string()), steps.len());
                    }
                }
            }
        }
        steps.push(step);
    }
    let case = Case {
        name: name.into(),
        about: about.into(),
        steps,
    };
    case.check()?;
    Ok(case)
}

/// A client's `Accept` less its protobuf clauses: fakeapi answers JSON
/// only (client-go always offers JSON after protobuf and reads an answer
/// by its content type), and a protobuf answer cannot be compared here; a
/// protobuf request body is sent as the client sent it.
fn json_accept(accept: &str) -> String {
    let kept: Vec<&str> = accept
        .split(',')
        .map(str::trim)
        .filter(|c| !c.contains("protobuf"))
        .collect();
    if kept.is_empty() {
        "application/json".into()
    } else {
        kept.join(",")
    }
}

fn empty_step() -> Step {
    Step {
        req: None,
        label: None,
        content_type: None,
        accept: None,
        body: None,
        text: None,
        base64: None,
        file: None,
        watch: None,
        end: None,
        events: None,
        until: None,
        compare: None,
    }
}

fn short_media_type(ct: &str) -> String {
    let base = ct.split(';').next().unwrap_or(ct).trim();
    match base {
        "application/json" if base == ct => "json",
        "application/merge-patch+json" => "merge",
        "application/strategic-merge-patch+json" => "strategic",
        "application/json-patch+json" => "jsonpatch",
        "application/apply-patch+yaml" => "apply",
        "application/apply-patch+json" => "apply-json",
        "application/yaml" => "yaml",
        _ => ct,
    }
    .to_string()
}

/// A value the client sent back that the server gave it before, as the
/// placeholder the normaliser numbered it by.
/// What a recorded value may be replaced with: the normaliser's
/// placeholder for a value an answer or an ended watch showed, else a
/// reference to the event that carried it.
struct Refs<'a> {
    norm: &'a Normaliser,
    events: &'a std::collections::HashMap<String, String>,
}

fn placeholder(refs: &Refs, kinds: &[Kind], value: &str) -> Option<String> {
    placeholder_of(refs.norm, kinds, value).or_else(|| {
        kinds
            .iter()
            .any(|k| matches!(k, Kind::Rv | Kind::Uid))
            .then(|| refs.events.get(value).cloned())
            .flatten()
    })
}

fn placeholder_of(norm: &Normaliser, kinds: &[Kind], value: &str) -> Option<String> {
    kinds.iter().find_map(|k| {
        norm.ordinal(*k, value)
            .map(|n| format!("{{{{@{}:{n}}}}}", k.tag()))
    })
}

fn template_path(path: &str, ns: &str, norm: &Refs) -> String {
    let (p, q) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let segs: Vec<String> = p
        .split('/')
        .map(|s| {
            if s == ns {
                "$ns".to_string()
            } else {
                placeholder(norm, &[Kind::Name], s).unwrap_or_else(|| s.to_string())
            }
        })
        .collect();
    let mut out = segs.join("/");
    if let Some(q) = q {
        let pairs: Vec<String> = q
            .split('&')
            .map(|kv| {
                let Some((k, v)) = kv.split_once('=') else {
                    return kv.to_string();
                };
                let decoded = percent_decode(v);
                let rep = match k {
                    "resourceVersion" if v != "0" && !v.is_empty() => {
                        placeholder(norm, &[Kind::ListRv, Kind::Rv], &decoded)
                    }
                    "continue" => placeholder(norm, &[Kind::Continue], &decoded),
                    _ => None,
                };
                format!("{k}={}", rep.unwrap_or_else(|| v.replace(ns, "$ns")))
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(x) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(x);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn template_value(v: &Value, key: Option<&str>, ns: &str, norm: &Refs) -> Value {
    match v {
        Value::String(s) => {
            let kinds: &[Kind] = match key {
                Some("resourceVersion") => &[Kind::Rv, Kind::ListRv],
                Some("uid") => &[Kind::Uid],
                _ => &[Kind::Uid, Kind::Name, Kind::Continue],
            };
            match placeholder(norm, kinds, s) {
                Some(p) => Value::String(p),
                None if s == ns => Value::String("$ns".into()),
                None => Value::String(s.replace(ns, "$ns")),
            }
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| template_value(x, None, ns, norm))
                .collect(),
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.replace(ns, "$ns"), template_value(x, Some(k), ns, norm)))
                .collect(),
        ),
        other => other.clone(),
    }
}
