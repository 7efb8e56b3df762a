//! The HTTP side: one catch-all handler parses Kubernetes API paths and
//! dispatches on the resource table, so no resource has its own handler.

use crate::activity::{Activity, InFlight, WatchTally};
use crate::admission;
use crate::conn::{ConnHandle, ConnTrack, TrackedListener};
use crate::discovery;
use crate::error::{ApiError, FieldError};
use crate::health;
use crate::negotiate::{negotiate_media, partial_json, Form, Media, Verb};
use crate::openapi;
use crate::patch::PatchKind;
use crate::registry::Served;
use crate::selector::Selection;
use crate::store::{
    BindRequest, DeleteOptions, Origin, Propagation, ScaleWrite, Store, WatchStart,
};
use crate::table::{self, IncludeObject};
use crate::watch::{Render, WatchStream};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tracing::Instrument;

type ExtraMetrics = Box<dyn Fn() -> String + Send + Sync>;

#[derive(Default)]
struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, String, u16), u64>>,
    extra: RwLock<Option<ExtraMetrics>>,
}

struct Ctx {
    store: Store,
    metrics: Arc<Metrics>,
    server_addr: String,
    request_log: std::sync::OnceLock<RequestLog>,
}

/// One request as the server answered it, for a log of requests
/// ([`RunningServer::set_request_log`]).
#[derive(Debug, Clone)]
pub struct RequestRecord<'a> {
    /// The listener it came in on ([`RunningServer::add_listener`]; 0 is
    /// the first), when it came over a connection.
    pub group: Option<u32>,
    /// The server's clock when it was answered (simulated under `batkube run`).
    pub time: chrono::DateTime<chrono::Utc>,
    pub method: &'a str,
    /// Path and query, as sent.
    pub uri: &'a str,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, ...).
    pub verb: &'static str,
    pub resource: &'a str,
    pub code: u16,
}

type RequestLog = Box<dyn Fn(&RequestRecord<'_>) + Send + Sync>;

/// A running API server. Dropping it stops accepting connections.
pub struct RunningServer {
    addr: SocketAddr,
    store: Store,
    metrics: Arc<Metrics>,
    ctx: Arc<Ctx>,
    /// Every listener's address, by group number.
    addrs: Vec<SocketAddr>,
    shutdown: tokio::sync::watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Serves `store` over plain HTTP on `addr` (`127.0.0.1:0` picks a port).
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let store = fakeapi::Store::new();
/// let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap()).await?;
/// std::fs::write("kubeconfig", fakeapi::kubeconfig_yaml(server.addr()))?;
/// server.activity().wait_idle().await;
/// server.shutdown().await;
/// # Ok(()) }
/// ```
pub async fn serve(store: Store, addr: SocketAddr) -> std::io::Result<RunningServer> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let metrics = Arc::new(Metrics::default());
    let ctx = Arc::new(Ctx {
        store: store.clone(),
        metrics: metrics.clone(),
        server_addr: addr.to_string(),
        request_log: std::sync::OnceLock::new(),
    });
    let (shutdown, _) = tokio::sync::watch::channel(false);
    let mut server = RunningServer {
        addr,
        store,
        metrics,
        ctx,
        addrs: Vec::new(),
        shutdown,
        tasks: Vec::new(),
    };
    server.serve_on(listener)?;
    tracing::info!(%addr, "fakeapi listening");
    Ok(server)
}

impl RunningServer {
    /// Serves on one more listener (a group of its own), returns its
    /// number and address.
    fn serve_on(
        &mut self,
        listener: tokio::net::TcpListener,
    ) -> std::io::Result<(u32, SocketAddr)> {
        let addr = listener.local_addr()?;
        let group = self.addrs.len() as u32;
        let listener = TrackedListener {
            inner: listener,
            activity: self.store.activity(),
            group,
        };
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(self.ctx.clone());
        let mut stop = self.shutdown.subscribe();
        self.tasks.push(tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<ConnHandle>();
            let server = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            });
            if let Err(e) = server.await {
                tracing::warn!(error = %e, "fakeapi server stopped with an error");
            }
        }));
        self.addrs.push(addr);
        Ok((group, addr))
    }

    /// Serves the same API on another address too (`127.0.0.1:0` picks a
    /// port): its connections are a group of their own, whose requests
    /// and watch events [`Activity::group_activity`] counts apart, and
    /// whose requests the log names. `batkube run` gives each program it
    /// starts a port of its own this way. Returns the group's number.
    pub async fn add_listener(&mut self, addr: SocketAddr) -> std::io::Result<(u32, SocketAddr)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        self.serve_on(listener)
    }

    /// Every listener's address, by group number (the first is [`Self::addr`]).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Calls `log` once for every request answered, after its response is
    /// made (set once; later calls are ignored).
    pub fn set_request_log(&self, log: impl Fn(&RequestRecord<'_>) + Send + Sync + 'static) {
        let _ = self.ctx.request_log.set(Box::new(log));
    }
}

impl RunningServer {
    /// The bound address (the real port when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests in flight, watch events pending, requests served.
    pub fn activity(&self) -> Arc<Activity> {
        self.store.activity()
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Appends the text this returns (Prometheus exposition format) to
    /// every `/metrics` response.
    pub fn set_extra_metrics(&self, f: impl Fn() -> String + Send + Sync + 'static) {
        *self.metrics.extra.write() = Some(Box::new(f));
    }

    /// Stops accepting connections, ends open watches, and waits (at most
    /// 5 s in all) for in-flight requests.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        self.store.close_watches();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        for task in std::mem::take(&mut self.tasks) {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for task in self.tasks.drain(..) {
            task.abort();
        }
    }
}

/// A kubeconfig for plain HTTP to `addr` (context `batkube`, namespace `default`).
pub fn kubeconfig_yaml(addr: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: batkube\n  cluster:\n    server: http://{addr}\ncontexts:\n- name: batkube\n  context:\n    cluster: batkube\n    user: batkube\n    namespace: default\ncurrent-context: batkube\nusers:\n- name: batkube\n  user: {{}}\n"
    )
}

/// Go's `time.ParseDuration`: `[-+]` then one or more decimal numbers
/// (with an optional fraction) each followed by a unit (`ns`, `us`, `µs`,
/// `μs`, `ms`, `s`, `m`, `h`), or `0`; in nanoseconds, with Go's error
/// messages.
pub(crate) fn go_duration(text: &str) -> Result<i128, String> {
    let quoted = format!("{text:?}");
    let invalid = || format!("time: invalid duration {quoted}");
    let mut s = text;
    let negative = s.starts_with('-');
    if let Some(rest) = s.strip_prefix('-').or_else(|| s.strip_prefix('+')) {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int, rest) = s.split_at(int_len);
        let (frac, rest) = match rest.strip_prefix('.') {
            Some(r) => {
                let n = r.bytes().take_while(u8::is_ascii_digit).count();
                r.split_at(n)
            }
            None => ("", rest),
        };
        if int.is_empty() && frac.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let (unit, rest) = rest.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!("time: missing unit in duration {quoted}"));
        }
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {unit:?} in duration {quoted}")),
        };
        let whole: i128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| invalid())?
        };
        let mut part = whole.checked_mul(scale).ok_or_else(invalid)?;
        if !frac.is_empty() {
            let digits = &frac[..frac.len().min(18)];
            let f: i128 = digits.parse().map_err(|_| invalid())?;
            part += f * scale / 10i128.pow(digits.len() as u32);
        }
        total = total.checked_add(part).ok_or_else(invalid)?;
        if total > i64::MAX as i128 + i128::from(negative) {
            return Err(invalid());
        }
        s = rest;
    }
    Ok(if negative { -total } else { total })
}

fn json_response(code: u16, body: impl Into<Bytes>) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.into()))
        .expect("valid response")
}

fn value_response(code: u16, v: &Value) -> Response {
    json_response(code, serde_json::to_vec(v).expect("json"))
}

fn error_response(e: &ApiError) -> Response {
    value_response(e.code(), &e.to_status())
}

fn proto_response(code: u16, body: impl Into<Bytes>) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, crate::protobuf::MEDIA_TYPE)
        .body(Body::from(body.into()))
        .expect("valid response")
}

/// How a request's single objects are written (what a write returns, a
/// `Status`, an error): the form and encoding its `Accept` asks for one
/// object (see [`crate::negotiate`]).
#[derive(Debug, Clone, Copy)]
struct Out {
    form: Form,
    media: Media,
    /// Errors' `Status`: protobuf for a client that asks for it first,
    /// custom resources included (kube-apiserver's error writer offers
    /// every serializer of the endpoint, protobuf too, where a custom
    /// object's answer offers JSON and YAML only).
    error_media: Media,
}

impl Out {
    /// Any value by its own `apiVersion` and `kind` (a `Status`, a
    /// `Scale`, a list): protobuf when asked for and the kind has a message.
    fn value(&self, code: u16, v: &Value) -> Response {
        if self.media == Media::Protobuf {
            if let Some(b) = crate::protobuf::encode(v) {
                return proto_response(code, b);
            }
        }
        value_response(code, v)
    }

    /// A stored object (its value and JSON bytes), in the form asked for
    /// (a table is for reads: a write answers the object).
    fn object(&self, code: u16, value: &Value, json: Bytes) -> Response {
        match (self.form, self.media) {
            (Form::Metadata, Media::Protobuf) => {
                proto_response(code, crate::protobuf::encode_partial(value))
            }
            (Form::Metadata, Media::Json) => json_response(code, partial_json(&json)),
            (_, Media::Protobuf) => match crate::protobuf::encode(value) {
                Some(b) => proto_response(code, b),
                None => json_response(code, json),
            },
            (_, Media::Json) => json_response(code, json),
        }
    }

    fn error(&self, e: &ApiError) -> Response {
        let out = Out {
            media: self.error_media,
            ..*self
        };
        out.value(e.code(), &e.to_status())
    }
}

fn success_status(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

fn text_response(code: u16, ctype: &str, body: String) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, ctype)
        .body(Body::from(body))
        .expect("valid response")
}

async fn handle(State(ctx): State<Arc<Ctx>>, req: Request) -> Response {
    let activity = ctx.store.activity();
    let conn = req
        .extensions()
        .get::<ConnectInfo<ConnHandle>>()
        .map(|c| c.0.track.clone());
    let group = conn.as_ref().map(|c| c.group);
    let _in_flight = InFlight::new(&activity, conn);
    let span = tracing::debug_span!("request", method = %req.method(), uri = %req.uri());
    let logged = ctx
        .request_log
        .get()
        .map(|_| (req.method().to_string(), req.uri().to_string()));
    // Who asks, for the changes it makes (`Change::client`).
    let client: Option<Arc<str>> = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .filter(|ua| !ua.is_empty())
        .map(Arc::from);
    let write = write_options_of(&req);
    let classified = classify(&ctx.store, &req);
    // What admission warns of (`Warning` headers).
    let warnings = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (verb, resource, mut resp) = crate::store::CLIENT
        .scope(
            client,
            crate::store::WRITE.scope(
                write,
                crate::admission::WARNINGS
                    .scope(warnings.clone(), route(&ctx, req).instrument(span)),
            ),
        )
        .await;
    for w in warnings.lock().iter() {
        if let Ok(v) = axum::http::HeaderValue::from_str(&warning_header(w)) {
            resp.headers_mut().append("warning", v);
        }
    }
    if let Some((fs, pl)) =
        classified.filter(|_| resp.extensions().get::<Unauthenticated>().is_none())
    {
        let headers = resp.headers_mut();
        headers.insert(crate::flowcontrol::PRIORITY_LEVEL_UID_HEADER, pl);
        headers.insert(crate::flowcontrol::FLOW_SCHEMA_UID_HEADER, fs);
    }
    // The server's clock is the store's (simulated under batkube run), as
    // a real API server dates its responses by its own clock: hyper would
    // otherwise write the wall clock's date.
    if let Ok(date) = axum::http::HeaderValue::from_str(
        &ctx.store
            .now()
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string(),
    ) {
        resp.headers_mut()
            .entry(axum::http::header::DATE)
            .or_insert(date);
    }
    let code = resp.status().as_u16();
    tracing::debug!(verb, resource, code, "served");
    if let (Some(log), Some((method, uri))) = (ctx.request_log.get(), &logged) {
        log(&RequestRecord {
            group,
            time: ctx.store.now(),
            method,
            uri,
            verb,
            resource: &resource,
            code,
        });
    }
    *ctx.metrics
        .requests
        .lock()
        .entry((verb, resource, code))
        .or_insert(0) += 1;
    resp
}

/// Marks an answer kube-apiserver gives before it authenticates the
/// request (an unreadable `timeout`): priority and fairness never saw it,
/// so it names no FlowSchema.
#[derive(Clone, Copy)]
struct Unauthenticated;

/// The uids of the FlowSchema and priority level `req` is classified as
/// (`crate::flowcontrol`), as header values; `None` for a long-running
/// request that is not a watch, which kube-apiserver does not classify.
fn classify(
    store: &Store,
    req: &Request,
) -> Option<(axum::http::HeaderValue, axum::http::HeaderValue)> {
    use crate::flowcontrol::{RequestInfo, Requester};
    // fakeapi's own user (every client's, unless it impersonates), whose
    // classification the bootstrap's schemas make the same for every
    // request: answered without looking at the request, but for the
    // long-running ones kube-apiserver leaves unclassified (found by
    // name in the path here, then looked at closely below).
    let config = store.flow_config();
    if !Requester::impersonates(req.headers()) {
        if let Some(fixed) = config.fixed() {
            let path = req.uri().path();
            let long_running = ["proxy", "attach", "exec", "log", "portforward", "pprof"]
                .iter()
                .any(|w| path.contains(w));
            if !long_running {
                return Some(fixed.clone());
            }
        }
    }
    let watch = req
        .uri()
        .query()
        .filter(|q| q.contains("watch"))
        .and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "watch")
                .map(|(_, v)| v.into_owned())
        });
    let info = RequestInfo::new(req.method().as_str(), req.uri().path(), watch.as_deref());
    if info.unclassified() {
        return None;
    }
    let who = Requester::from_headers(req.headers());
    let c = config.classify(&who, &info);
    Some((
        axum::http::HeaderValue::from_str(c.flow_schema).ok()?,
        axum::http::HeaderValue::from_str(c.priority_level).ok()?,
    ))
}

/// A `Warning` header as kube-apiserver writes one: code 299, agent `-`,
/// the text quoted, its quotes and backslashes escaped and what a header
/// cannot carry replaced.
fn warning_header(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                escaped.push('\\');
                escaped.push(c);
            }
            c if c.is_ascii_graphic() || c == ' ' => escaped.push(c),
            _ => escaped.push('?'),
        }
    }
    format!("299 - \"{escaped}\"")
}

struct Req {
    /// The connection it came in on (to count watch events as written
    /// only once they are flushed to it).
    conn: Option<Arc<ConnTrack>>,
    method: Method,
    query: HashMap<String, String>,
    headers: HeaderMap,
    body: Bytes,
}

impl Req {
    fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }
    fn flag(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true") | Some("1"))
    }
    fn header(&self, h: header::HeaderName) -> &str {
        self.headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
    /// The form and encoding of the response to a read of `served` (see
    /// [`crate::negotiate`]).
    fn answer(&self, verb: Verb, served: &Served) -> Result<(Form, Media), ApiError> {
        let accept = self.header(header::ACCEPT);
        negotiate_media(accept, verb, protobuf_objects(served)).ok_or_else(|| {
            ApiError::NotAcceptable(format!(
                "fakeapi cannot answer this {} in any form the request accepts ({accept:?}): it answers application/json, application/vnd.kubernetes.protobuf (built-in kinds), as a Table (JSON) or as PartialObjectMetadata(List) of meta.k8s.io/v1",
                match verb {
                    Verb::Get => "get",
                    Verb::List => "list",
                    Verb::Watch => "watch",
                }
            ))
        })
    }
    /// The version of aggregated discovery asked for, if any.
    fn wants_aggregated(&self) -> Option<&'static str> {
        let accept = self.header(header::ACCEPT);
        for part in accept.split(',') {
            if part.contains("as=APIGroupDiscoveryList") {
                return Some(if part.contains("v=v2beta1") {
                    "v2beta1"
                } else {
                    "v2"
                });
            }
        }
        None
    }
    /// The request body as JSON, whatever it came as: JSON, YAML, or
    /// protobuf (client-go's default; see [`crate::protobuf`]).
    fn body_json(&self) -> Result<Value, ApiError> {
        let ct = self.header(header::CONTENT_TYPE);
        let media = ct.split(';').next().unwrap_or("").trim();
        if media == crate::protobuf::MEDIA_TYPE {
            return crate::protobuf::decode(&self.body);
        }
        if ct.contains("protobuf") || ct.contains("cbor") {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body content type {ct:?} is not supported: send application/json or {}",
                crate::protobuf::MEDIA_TYPE
            )));
        }
        if ct.contains("yaml") {
            return serde_yaml::from_slice(&self.body).map_err(|e| {
                ApiError::BadRequest(format!("the request body is not valid YAML: {e}"))
            });
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::BadRequest(format!("the request body is not valid JSON: {e}")))
    }
}

/// `/openapi/v2`, in JSON, with an ETag that a client sends back in
/// `If-None-Match` to be answered 304 while nothing changed.
/// kube-apiserver serves it in protobuf too (what client-go's
/// `OpenAPISchema` asks for alone): such a request gets a 406 here, which
/// kubectl takes as no v2 document (it reads v3 first).
fn openapi_v2(ctx: &Ctx, r: &Req) -> Response {
    let accept = r.header(header::ACCEPT);
    let json_ok = accept.trim().is_empty()
        || accept.split(',').any(|m| {
            let m = m.split(';').next().unwrap_or("").trim();
            matches!(m, "application/json" | "application/*" | "*/*")
        });
    if !json_ok {
        return error_response(&ApiError::NotAcceptable(format!(
            "fakeapi answers /openapi/v2 in application/json only, which the request does not accept ({accept:?})"
        )));
    }
    let body = serde_json::to_vec(&openapi::v2(&ctx.store.custom_versions())).expect("json");
    let hash = body.iter().fold(14_695_981_039_346_656_037u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(1_099_511_628_211)
    });
    let etag = format!("\"{hash:016X}\"");
    if r.header(header::IF_NONE_MATCH) == etag {
        return Response::builder()
            .status(StatusCode::NOT_MODIFIED)
            .header(header::ETAG, etag)
            .body(Body::empty())
            .expect("valid response");
    }
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ETAG, etag)
        .body(Body::from(body))
        .expect("valid response")
}

async fn route(ctx: &Ctx, req: Request) -> (&'static str, String, Response) {
    let conn = req
        .extensions()
        .get::<ConnectInfo<ConnHandle>>()
        .map(|c| c.0.track.clone());
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, 256 << 20).await {
        Ok(b) => b,
        Err(e) => {
            let err = ApiError::BadRequest(format!("cannot read the request body: {e}"));
            return ("unknown", String::new(), error_response(&err));
        }
    };
    let query = parts
        .uri
        .query()
        .map(|q| {
            form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect::<HashMap<_, _>>()
        })
        .unwrap_or_default();
    // kube-apiserver reads `timeout` (a Go duration) on every request and
    // refuses one it cannot parse; a valid one bounds nothing here, as
    // fakeapi answers without waiting.
    if let Some(t) = query.get("timeout") {
        if let Err(e) = go_duration(t) {
            let err = ApiError::BadRequest(format!(
                "invalid timeout specified in the request URL - {e}"
            ));
            let mut resp = error_response(&err);
            resp.extensions_mut().insert(Unauthenticated);
            return ("unknown", String::new(), resp);
        }
    }
    let r = Req {
        conn,
        method: parts.method,
        query,
        headers: parts.headers,
        body,
    };
    let segs: Vec<&str> = parts
        .uri
        .path()
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let get = r.method == Method::GET;
    let not_found = || {
        error_response(&ApiError::NotFoundPath(
            "the server could not find the requested resource".into(),
        ))
    };
    let disc = |v: Option<Value>| match v {
        Some(v) => value_response(200, &v),
        None => not_found(),
    };
    // The rows served now: a CRD established a moment ago is in them.
    let rows = || ctx.store.resources();
    // A path under a group no row serves reaches no API handler on
    // kube-apiserver: its mux's plain-text 404 (a served group's unknown
    // version or resource is a 404 Status, as below).
    let unserved = |g: &str| !rows().iter().any(|r| r.group == g);
    let page_not_found = || {
        let mut resp = text_response(
            404,
            "text/plain; charset=utf-8",
            "404 page not found\n".into(),
        );
        resp.headers_mut().insert(
            "x-content-type-options",
            header::HeaderValue::from_static("nosniff"),
        );
        resp
    };
    if let ["apis", g, ..] = segs.as_slice() {
        if unserved(g) {
            return ("discovery", String::new(), page_not_found());
        }
    }
    let storage_of = |r: &'static crate::resources::ResourceInfo| {
        ctx.store.served_for(r).map_or(r, |s| s.storage_info())
    };
    let aggregated = |core: bool, v: &str| {
        text_response(
            200,
            &format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"),
            discovery::aggregated(&rows(), core, &format!("apidiscovery.k8s.io/{v}")).to_string(),
        )
    };
    let resp = match (get, segs.as_slice()) {
        (true, []) => value_response(
            200,
            &json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/metrics", "/readyz", "/version"]}),
        ),
        (true, ["version"]) => value_response(200, &discovery::version()),
        (true, [endpoint @ ("healthz" | "livez" | "readyz"), check @ ..]) => {
            let exclude: Vec<&str> = r.q("exclude").into_iter().collect();
            match health::answer(
                endpoint,
                &check.join("/"),
                r.query.contains_key("verbose"),
                &exclude,
            ) {
                Some((code, text)) => text_response(code, "text/plain; charset=utf-8", text),
                None => not_found(),
            }
        }
        (true, ["metrics"]) => text_response(200, "text/plain; version=0.0.4", render_metrics(ctx)),
        (true, ["api"]) => match r.wants_aggregated() {
            Some(v) => aggregated(true, v),
            None => value_response(200, &discovery::api_versions(&ctx.server_addr)),
        },
        (true, ["api", "v1"]) => disc(discovery::resource_list(&rows(), "", "v1", storage_of)),
        (true, ["apis"]) => match r.wants_aggregated() {
            Some(v) => aggregated(false, v),
            None => value_response(200, &discovery::api_group_list(&rows())),
        },
        (true, ["apis", g]) => disc(discovery::api_group(&rows(), g)),
        (true, ["openapi", "v2"]) => openapi_v2(ctx, &r),
        (true, ["openapi", "v3"]) => value_response(
            200,
            &openapi::v3_root(&rows(), &ctx.store.custom_versions()),
        ),
        (true, ["openapi", "v3", "api", v]) => disc(openapi::v3_group_version(
            &rows(),
            &ctx.store.custom_versions(),
            "",
            v,
        )),
        (true, ["openapi", "v3", "apis", g, v]) => disc(openapi::v3_group_version(
            &rows(),
            &ctx.store.custom_versions(),
            g,
            v,
        )),
        (true, ["apis", g, v]) => disc(discovery::resource_list(&rows(), g, v, storage_of)),
        (_, ["api", "v1", rest @ ..]) if !rest.is_empty() => {
            return resource_request(ctx, &r, "", "v1", rest).await;
        }
        (_, ["apis", g, v, rest @ ..]) if !rest.is_empty() => {
            return resource_request(ctx, &r, g, v, rest).await;
        }
        _ => not_found(),
    };
    ("discovery", String::new(), resp)
}

struct Target<'a> {
    served: Served,
    ns: Option<&'a str>,
    name: Option<&'a str>,
    sub: Option<&'a str>,
    watch_path: bool,
}

fn parse_target<'a>(
    store: &Store,
    group: &str,
    version: &str,
    mut rest: &'a [&'a str],
) -> Result<Target<'a>, ApiError> {
    let not_found =
        || ApiError::NotFoundPath("the server could not find the requested resource".into());
    let mut watch_path = false;
    if rest.first() == Some(&"watch") {
        watch_path = true;
        rest = &rest[1..];
    }
    let in_namespace = match rest {
        ["namespaces", ns, plural, tail @ ..] => store
            .served(group, version, plural)
            .filter(|s| s.info.namespaced)
            .map(|s| (s, Some(*ns), tail)),
        _ => None,
    };
    let (served, ns, tail) = match (in_namespace, rest) {
        (Some(found), _) => found,
        (None, [plural, tail @ ..]) => (
            store.served(group, version, plural).ok_or_else(not_found)?,
            None,
            tail,
        ),
        (None, []) => return Err(not_found()),
    };
    let (name, sub) = (tail.first().copied(), tail.get(1).copied());
    if tail.len() > 2 {
        return Err(not_found());
    }
    if let Some(e) = served.unconvertible() {
        return Err(e);
    }
    if let Some(s) = sub {
        // A custom kind's scale goes to the store even without a scale
        // subresource: a read of it then names the object as not found, as
        // kube-apiserver's CRD handler does (`Store::get_scale`).
        let custom_scale = served.custom.is_some() && s == "scale";
        if !served.info.subresources.contains(&s) && !custom_scale {
            return Err(not_found());
        }
    }
    Ok(Target {
        served,
        ns,
        name,
        sub,
        watch_path,
    })
}

async fn resource_request(
    ctx: &Ctx,
    r: &Req,
    group: &str,
    version: &str,
    rest: &[&str],
) -> (&'static str, String, Response) {
    let t = match parse_target(&ctx.store, group, version, rest) {
        Ok(t) => t,
        Err(e) => return ("unknown", rest.join("/"), error_response(&e)),
    };
    // A client that takes nothing fakeapi can write for this resource (a
    // custom resource's objects in protobuf only, CBOR) is told so, not
    // sent bytes it cannot decode.
    let accept = r.header(header::ACCEPT);
    let protobuf = protobuf_objects(&t.served);
    let servable = [Verb::Get, Verb::List, Verb::Watch]
        .into_iter()
        .find_map(|v| negotiate_media(accept, v, protobuf));
    let Some((form, media)) = servable else {
        let e = ApiError::NotAcceptable(format!(
            "fakeapi cannot answer {} in any form the request accepts ({accept:?}): it answers application/json{}",
            t.served.info.qualified_name(),
            match (crate::protobuf::unavailable(), protobuf) {
                (Some(_), _) => " (this build of fakeapi has no protobuf: it found no .proto files when it was built)",
                (None, true) => " or application/vnd.kubernetes.protobuf",
                (None, false) => " (a custom resource has no protobuf form)",
            }
        ));
        return (
            "unknown",
            t.served.info.qualified_name(),
            error_response(&e),
        );
    };
    // A single object (a write's answer, an error) is written as a get's.
    let (form, media) = negotiate_media(accept, Verb::Get, protobuf).unwrap_or((form, media));
    // As kube-apiserver, which turns into a Table only what a storage with
    // a table convertor answers: a create-only kind has none.
    if form == Form::Table && !t.served.info.stored {
        let e = ApiError::NotAcceptable(format!(
            "fakeapi cannot answer {} as a Table: only application/json, application/yaml and application/vnd.kubernetes.protobuf are accepted",
            t.served.info.qualified_name()
        ));
        return (
            "unknown",
            t.served.info.qualified_name(),
            error_response(&e),
        );
    }
    let error_media = match negotiate_media(accept, Verb::Get, true) {
        Some((Form::Object, m)) => m,
        _ => media,
    };
    let out = Out {
        form,
        media,
        error_media,
    };
    let mut resource = t.served.info.qualified_name();
    if let Some(s) = t.sub {
        resource = format!("{resource}/{s}");
    }
    let (verb, result) = dispatch(ctx, r, &t, out).await;
    let resp = result.unwrap_or_else(|e| out.error(&e));
    (verb, resource, resp)
}

/// Whether the objects of `served` have a protobuf form: a built-in kind's
/// do, a custom resource's do not (kube-apiserver serves them as JSON).
fn protobuf_objects(served: &Served) -> bool {
    served.custom.is_none()
        && crate::protobuf::has_message(&served.info.api_version(), served.info.kind)
}

async fn dispatch(
    ctx: &Ctx,
    r: &Req,
    t: &Target<'_>,
    out: Out,
) -> (&'static str, Result<Response, ApiError>) {
    let store = &ctx.store;
    let served = &t.served;
    let info = served.info;
    let ns = t.ns.unwrap_or("");
    let watching = t.watch_path || r.flag("watch");
    // A custom object's body is JSON or YAML: it has no protobuf form.
    let body = || {
        if served.custom.is_some() {
            let ct = r.header(header::CONTENT_TYPE);
            if ct.contains("protobuf") || ct.contains("cbor") {
                return Err(ApiError::UnsupportedMediaType(format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (custom resources have no {ct:?} form)"
                )));
            }
        }
        let v = r.body_json()?;
        if matches!(t.sub, None | Some("status")) {
            strict_fields(r, served, &v)?;
        }
        Ok(v)
    };
    match (&r.method, t.name, t.sub) {
        // A create-only kind (`ResourceInfo::stored`): a Binding binds its
        // pod, a review is answered (`crate::reviews`); nothing is kept,
        // so nothing else can be asked of them.
        (&Method::POST, None, None) if !info.stored && info.kind == "Binding" => {
            ("create", create_binding(ctx, r, ns, None, out).await)
        }
        (&Method::POST, None, None) if !info.stored => (
            "create",
            dry_run(r, "CreateOptions")
                .and_then(|_| body())
                .and_then(|b| crate::reviews::answer(info, t.ns, b, &store.now_str()))
                .map(|v| out.value(201, &v)),
        ),
        _ if !info.stored => (
            "unknown",
            Err(ApiError::MethodNotAllowed(format!(
                "the server does not allow this method on the requested resource ({} {})",
                r.method,
                info.qualified_name()
            ))),
        ),
        (&Method::GET, None, None) if watching => ("watch", watch(ctx, r, t, None)),
        (&Method::GET, Some(name), None) if watching => ("watch", watch(ctx, r, t, Some(name))),
        (&Method::GET, None, None) => ("list", list(ctx, r, t)),
        (&Method::GET, Some(name), Some("scale")) => (
            "get",
            store
                .get_scale(served, ns, name)
                .map(|s| out.value(200, &s)),
        ),
        (&Method::GET, Some(name), None | Some("status")) => (
            "get",
            r.answer(Verb::Get, served).and_then(|(form, media)| {
                let out = Out { form, media, ..out };
                store.get_in(served, ns, name).map(|s| match form {
                    Form::Table => {
                        let rv = s.value["metadata"]["resourceVersion"].clone();
                        let mut tbl = table::table(
                            served,
                            &[s.value],
                            store.now(),
                            true,
                            IncludeObject::parse(r.q("includeObject")),
                        );
                        // As kube-apiserver's: the Table of one object is
                        // at that object's version.
                        tbl["metadata"] = json!({"resourceVersion": rv});
                        value_response(200, &tbl)
                    }
                    Form::Metadata | Form::Object => out.object(200, &s.value, s.json),
                })
            }),
        ),
        (&Method::POST, None, None) => {
            let res = match dry_run(r, "CreateOptions").and_then(|_| body()) {
                Ok(body) => admission::create(
                    store,
                    served,
                    t.ns,
                    body,
                    write_options(r, "CreateOptions"),
                    Origin::Http,
                )
                .await
                .map(|s| out.object(201, &s.value, s.json)),
                Err(e) => Err(e),
            };
            ("create", res)
        }
        (&Method::POST, Some(name), Some("binding")) => {
            ("create", create_binding(ctx, r, ns, Some(name), out).await)
        }
        (&Method::POST, Some(name), Some("eviction")) => {
            let res = match r.body_json() {
                Ok(body) => {
                    match admission::subresource_create(store, served, ns, name, "eviction", body)
                        .await
                    {
                        Ok(_) => store
                            .delete_in(served, ns, name, &DeleteOptions::default(), Origin::Http)
                            .map(|_| out.value(201, &success_status(201))),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            ("create", res)
        }
        (&Method::PUT, Some(name), Some("scale")) => {
            let res = body().and_then(|body| {
                store
                    .write_scale(served, ns, name, ScaleWrite::Replace(body), Origin::Http)
                    .map(|s| out.value(200, &s))
            });
            ("update", res)
        }
        (&Method::PUT, Some(name), sub) => {
            let res = match dry_run(r, "UpdateOptions").and_then(|_| body()) {
                Ok(body) => admission::update(
                    store,
                    served,
                    ns,
                    name,
                    sub,
                    admission::Change::Replace(body),
                    write_options(r, "UpdateOptions"),
                    Origin::Http,
                )
                .await
                .map(|(s, _)| out.object(200, &s.value, s.json)),
                Err(e) => Err(e),
            };
            ("update", res)
        }
        (&Method::PATCH, Some(name), sub) => {
            let ct = r.header(header::CONTENT_TYPE);
            let res = match PatchKind::from_content_type(ct) {
                None if served.custom.is_some() => Err(ApiError::UnsupportedMediaType(format!(
                    "the body of the request was in an unknown format - accepted media types include: {}",
                    crate::patch::CUSTOM_PATCH_TYPES.join(", ")
                ))),
                // What kube-apiserver's router says of a content type no
                // patch handler takes.
                None => Err(ApiError::Plain {
                    code: 415,
                    reason: "UnsupportedMediaType",
                    message: "415: Unsupported Media Type".into(),
                }),
                Some(kind) => match patch_options(r, kind)
                    .and_then(|()| strict_patch(r, served, kind))
                {
                    Err(e) => Err(e),
                    Ok(()) if sub == Some("scale") => store
                        .write_scale(served, ns, name, ScaleWrite::Patch(kind, &r.body), Origin::Http)
                        .map(|s| out.value(200, &s)),
                    Ok(()) => match dry_run(r, "PatchOptions") {
                        Err(e) => Err(e),
                        Ok(_) => admission::update(
                            store,
                            served,
                            ns,
                            name,
                            sub,
                            admission::Change::Patch(kind, &r.body),
                            write_options(r, "PatchOptions"),
                            Origin::Http,
                        )
                        .await
                        .map(|(s, created)| {
                            out.object(if created { 201 } else { 200 }, &s.value, s.json)
                        }),
                    },
                },
            };
            ("patch", res)
        }
        (&Method::DELETE, Some(name), None) => {
            let res = match delete_options(r) {
                Ok(opts) => admission::delete(
                    store,
                    served,
                    ns,
                    name,
                    &opts,
                    delete_options_object(r),
                    Origin::Http,
                )
                .await
                .map(|d| deleted_response(served, d, out)),
                Err(e) => Err(e),
            };
            ("delete", res)
        }
        (&Method::DELETE, None, None) => {
            ("deletecollection", delete_collection(ctx, r, t, out).await)
        }
        _ => (
            "unknown",
            Err(ApiError::MethodNotAllowed(format!(
                "the server does not allow this method on the requested resource ({} {})",
                r.method,
                info.qualified_name()
            ))),
        ),
    }
}

/// What a request says of field ownership (`store/fields.rs`): its
/// `fieldManager`, `force`, and whether it is a server-side apply.
fn write_options_of(req: &Request) -> crate::store::WriteOptions {
    let mut w = crate::store::WriteOptions::default();
    for (k, v) in form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
        match &*k {
            "fieldManager" if !v.is_empty() => w.field_manager = Some(Arc::from(&*v)),
            "force" => w.force = v == "true",
            _ => {}
        }
    }
    w.apply = req.method() == Method::PATCH
        && req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(PatchKind::from_content_type)
            == Some(PatchKind::Apply);
    w
}

/// `PatchOptions` as kube-apiserver checks them: an apply names its field
/// manager, only an apply may force.
fn patch_options(r: &Req, kind: PatchKind) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    if kind == PatchKind::Apply && r.q("fieldManager").is_none_or(str::is_empty) {
        errs.push(FieldError::required(
            "fieldManager",
            "is required for apply patch",
        ));
    }
    if kind != PatchKind::Apply && r.q("force").is_some() {
        errs.push(FieldError::forbidden(
            "force",
            "may not be specified for non-apply patch",
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("meta.k8s.io", "PatchOptions", "", errs))
    }
}

/// `fieldValidation=Strict`: unknown fields are a 400 (a custom object's
/// would be pruned; a built-in object's, which Go's decoding of its type
/// would drop, are found against the kind's OpenAPI schema), and so are
/// fields given twice in a JSON body of a built-in kind.
fn strict_fields(r: &Req, served: &Served, body: &Value) -> Result<(), ApiError> {
    if r.q("fieldValidation") != Some("Strict") {
        return Ok(());
    }
    let info = served.info;
    let mut list: Vec<String> = match served.custom.as_ref() {
        Some(cv) => cv.def.schema.unknown_fields(body),
        None => crate::builtin_schema::schema(info.group, info.version, info.kind)
            .map(|s| s.unknown_typed_fields(body))
            .unwrap_or_default(),
    }
    .iter()
    .map(|f| format!("unknown field {f:?}"))
    .collect();
    let ct = r.header(header::CONTENT_TYPE);
    if served.custom.is_none() && (ct.is_empty() || ct.starts_with("application/json")) {
        list.extend(
            crate::strict::duplicate_fields(&r.body)
                .iter()
                .map(|f| format!("duplicate field {f:?}")),
        );
    }
    if list.is_empty() {
        return Ok(());
    }
    let kind = info.kind;
    let version = info.version;
    Err(ApiError::BadRequest(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        list.join(", ")
    )))
}

/// As [`strict_fields`], for the fields a merge patch sets; a
/// server-side apply as [`strict_apply`].
fn strict_patch(r: &Req, served: &Served, kind: PatchKind) -> Result<(), ApiError> {
    if r.q("fieldValidation") != Some("Strict") {
        return Ok(());
    }
    if kind == PatchKind::Apply {
        return strict_apply(r, served);
    }
    if served.custom.is_none() || kind != PatchKind::Merge {
        return Ok(());
    }
    match serde_json::from_slice::<Value>(&r.body) {
        Ok(b) => strict_fields(r, served, &b),
        Err(_) => Ok(()),
    }
}

/// What kube-apiserver's apply of a YAML configuration refuses under
/// `fieldValidation=Strict`, in its order and words: first its field
/// manager's typed reading of the configuration (for a custom resource,
/// a field its schema does not declare, metadata's and an embedded
/// object's included: structured-merge-diff's `.spec.x: field not
/// declared in schema`, an error that is not a `Status`, so a 500 with no
/// reason), then the strict YAML reading of the body (a key repeated in
/// one mapping: a 400 naming its line).
fn strict_apply(r: &Req, served: &Served) -> Result<(), ApiError> {
    if let Some(cv) = served.custom.as_ref() {
        // serde_yaml into JSON keeps the last of repeated keys, as the
        // field manager's non-strict reading does.
        if let Ok(config) = serde_yaml::from_slice::<Value>(&r.body) {
            let errs: Vec<String> = cv
                .def
                .schema
                .unknown_fields(&config)
                .iter()
                .map(|f| format!(".{f}: field not declared in schema"))
                .collect();
            if !errs.is_empty() {
                let text = |p: &str| config.pointer(p).and_then(Value::as_str).unwrap_or("");
                let (group, version) = match text("/apiVersion").rsplit_once('/') {
                    Some((g, v)) => (g, v),
                    None => ("", text("/apiVersion")),
                };
                let errs = if errs.len() == 1 {
                    errs[0].clone()
                } else {
                    format!("errors:\n  {}", errs.join("\n  "))
                };
                return Err(ApiError::Storage(format!(
                    "failed to create typed patch object ({}/{}; {group}/{version}, Kind={}): {errs}",
                    text("/metadata/namespace"),
                    text("/metadata/name"),
                    text("/kind"),
                )));
            }
        }
    }
    let dups = crate::strict::yaml_duplicate_keys(&r.body);
    if dups.is_empty() {
        return Ok(());
    }
    Err(ApiError::BadRequest(format!(
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {}",
        dups.join("\n  ")
    )))
}

/// The options object a webhook sees with a write (`CreateOptions`,
/// `UpdateOptions`, `PatchOptions`): `dryRun` and `fieldManager` from the
/// query.
fn write_options(r: &Req, kind: &str) -> Value {
    let mut o = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if let Some(d) = r.q("dryRun").filter(|d| !d.is_empty()) {
        o["dryRun"] = json!([d]);
    }
    if let Some(m) = r.q("fieldManager").filter(|m| !m.is_empty()) {
        o["fieldManager"] = json!(m);
    }
    o
}

/// A delete's `DeleteOptions` as a webhook sees them.
fn delete_options_object(r: &Req) -> Value {
    let mut o = if r.body.is_empty() {
        json!({})
    } else {
        r.body_json().unwrap_or_else(|_| json!({}))
    };
    if !o.is_object() {
        o = json!({});
    }
    o["kind"] = json!("DeleteOptions");
    o["apiVersion"] = json!("meta.k8s.io/v1");
    for k in ["propagationPolicy", "gracePeriodSeconds"] {
        if let Some(v) = r.q(k) {
            o[k] = v
                .parse::<i64>()
                .map(|n| json!(n))
                .unwrap_or_else(|_| json!(v));
        }
    }
    if let Some(d) = r.q("dryRun").filter(|d| !d.is_empty()) {
        o["dryRun"] = json!([d]);
    }
    o
}

async fn create_binding(
    ctx: &Ctx,
    r: &Req,
    ns: &str,
    pod: Option<&str>,
    out: Out,
) -> Result<Response, ApiError> {
    let body = r.body_json()?;
    let dry_run = dry_run(r, "CreateOptions")?;
    // Admission webhooks see the Binding before the storage checks it.
    let name = pod
        .or_else(|| body.pointer("/metadata/name").and_then(Value::as_str))
        .unwrap_or("")
        .to_string();
    let pods = ctx.store.served("", "v1", "pods").expect("pods are served");
    let body = admission::subresource_create(&ctx.store, &pods, ns, &name, "binding", body).await?;
    ctx.store.bind(
        BindRequest {
            namespace: ns,
            pod,
            body: &body,
            dry_run,
        },
        Origin::Http,
    )?;
    Ok(out.value(201, &success_status(201)))
}

/// What a DELETE answers: the object while it is only marked; once it
/// is gone, the object for the kinds whose storage returns it (pods,
/// services, namespaces, ...), else a `Status` naming what went.
fn deleted_response(served: &Served, d: crate::store::Deletion, out: Out) -> Response {
    if !d.gone || (served.custom.is_none() && crate::resources::returns_deleted_object(served.info))
    {
        return out.object(200, &d.object.value, d.object.json);
    }
    let info = served.info;
    let mut details = json!({"name": meta_name(&d.object.value), "kind": info.plural});
    if !info.group.is_empty() {
        details["group"] = json!(info.group);
    }
    if let Some(uid) = d.object.value.pointer("/metadata/uid") {
        details["uid"] = uid.clone();
    }
    out.value(
        200,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
    )
}

fn meta_name(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `dryRun`: `All` or nothing, as `ValidateCreateOptions` (and its
/// siblings for updates, patches and deletes) allows.
fn dry_run(r: &Req, options: &str) -> Result<bool, ApiError> {
    match r.q("dryRun") {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(v) => Err(ApiError::invalid(
            "meta.k8s.io",
            options,
            "",
            vec![FieldError::not_supported(
                "dryRun",
                &json!([v]),
                &["All".to_string()],
            )],
        )),
    }
}

fn delete_options(r: &Req) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        dry_run: dry_run(r, "DeleteOptions")?,
        ..Default::default()
    };
    // As kube-apiserver's handler: the body's options when there is a body,
    // else the query's.
    let (policy, orphan) = if !r.body.is_empty() {
        let body = r.body_json()?;
        opts.grace_period_seconds = body.get("gracePeriodSeconds").and_then(Value::as_i64);
        opts.precondition_uid = body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        opts.precondition_resource_version = body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        (
            body.get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string),
            body.get("orphanDependents").and_then(Value::as_bool),
        )
    } else {
        if let Some(g) = r.q("gracePeriodSeconds") {
            opts.grace_period_seconds = Some(g.parse().map_err(|_| {
                ApiError::BadRequest(format!("gracePeriodSeconds must be an integer, got {g:?}"))
            })?);
        }
        // Go's strconv.ParseBool, as the query's conversion reads it.
        let orphan = match r.q("orphanDependents") {
            None => None,
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Some(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Some(false),
            Some(o) => {
                return Err(ApiError::BadRequest(format!(
                    "strconv.ParseBool: parsing {o:?}: invalid syntax"
                )))
            }
        };
        (r.q("propagationPolicy").map(str::to_string), orphan)
    };
    if let Some(p) = &policy {
        if orphan.is_some() {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![FieldError::invalid(
                    "propagationPolicy",
                    &json!(p),
                    "orphanDependents and deletionPropagation cannot be both set",
                )],
            ));
        }
        opts.propagation = Some(Propagation::parse(p)?);
    }
    opts.orphan_dependents = orphan;
    Ok(opts)
}

fn selection(r: &Req, t: &Target, name: Option<&str>) -> Result<Selection, ApiError> {
    let mut fields = r.q("fieldSelector").unwrap_or("").to_string();
    if let Some(cv) = &t.served.custom {
        // A custom resource selects on its metadata and its CRD's
        // selectableFields only, as the real server.
        let sel = crate::selector::FieldSelector::parse(&fields)?;
        for f in sel.fields() {
            let known =
                f == "metadata.name" || f == "metadata.namespace" || cv.def.selectable.contains(&f);
            if !known {
                return Err(ApiError::BadRequest(format!(
                    "field label not supported: {f}"
                )));
            }
        }
    }
    if let Some(n) = name {
        if !fields.is_empty() {
            fields.push(',');
        }
        fields.push_str(&format!("metadata.name={n}"));
    }
    let mut sel = Selection::parse(t.ns, r.q("labelSelector"), Some(&fields))?;
    if t.served.custom.is_none() {
        let info = t.served.info;
        crate::selector::check_builtin_fields(info.group, info.kind, &mut sel.fields)?;
    }
    Ok(sel)
}

/// `ListOptions` of a list or a watch, as kube-apiserver checks them: a
/// 422 naming the fields, a 400 for a version that is not a number.
fn check_list_options(r: &Req, watching: bool) -> Result<(), ApiError> {
    let rv = r.q("resourceVersion").unwrap_or("");
    let matching = r.q("resourceVersionMatch").unwrap_or("");
    let cont = r.q("continue").unwrap_or("");
    let initial = r.q("sendInitialEvents").is_some();
    let forbidden = |field: &str, why: &str| FieldError::forbidden(field, why);
    let mut errs = Vec::new();
    if watching {
        if initial && matching != "NotOlderThan" {
            errs.push(forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !matching.is_empty() {
            if !initial {
                errs.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if matching != "NotOlderThan" {
                errs.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    &json!(matching),
                    &["NotOlderThan".to_string()],
                ));
            }
            if !cont.is_empty() {
                errs.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
    } else {
        if !matching.is_empty() {
            if rv.is_empty() {
                errs.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !cont.is_empty() {
                errs.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if matching != "Exact" && matching != "NotOlderThan" {
                errs.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    &json!(matching),
                    &[
                        "Exact".to_string(),
                        "NotOlderThan".to_string(),
                        String::new(),
                    ],
                ));
            }
            if matching == "Exact" && rv == "0" {
                errs.push(forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if initial {
            errs.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", errs));
    }
    if !watching && !cont.is_empty() {
        if !rv.is_empty() && rv != "0" {
            return Err(ApiError::BadRequest(
                "specifying resource version is not allowed when using continue".into(),
            ));
        }
        return Ok(());
    }
    if !rv.is_empty() && rv.parse::<u64>().is_err() {
        let why = if rv.bytes().all(|b| b.is_ascii_digit()) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        let q = crate::error::go_quote(rv);
        return Err(ApiError::BadRequest(format!(
            "invalid resource version: resourceVersion: Invalid value: {q}: strconv.ParseUint: parsing {q}: {why}"
        )));
    }
    Ok(())
}

fn list(ctx: &Ctx, r: &Req, t: &Target) -> Result<Response, ApiError> {
    check_list_options(r, false)?;
    let sel = selection(r, t, None)?;
    // A negative limit is no limit; with resourceVersion=0 the list comes
    // whole (kube-apiserver serves it from its watch cache, unpaged).
    let limit = match r.q("limit") {
        None | Some("") => None,
        Some(_) if r.q("resourceVersion") == Some("0") => None,
        Some(l) => match l.parse::<i64>() {
            Ok(n) if n <= 0 => None,
            Ok(n) => Some(n as usize),
            Err(_) => {
                return Err(ApiError::BadRequest(format!(
                    "limit must be an integer, got {l:?}"
                )))
            }
        },
    };
    // A list at exactly a version (`Exact`, or a paged list at a version
    // without a match, as kube-apiserver's storage reads it) cannot be
    // served once that version is compacted away.
    let at = r.q("resourceVersion").and_then(|v| v.parse::<u64>().ok());
    let exact = match r.q("resourceVersionMatch").unwrap_or("") {
        "Exact" => at,
        "" if limit.is_some() => at.filter(|&v| v > 0),
        _ => None,
    };
    if let Some(v) = exact.filter(|_| r.q("continue").unwrap_or("").is_empty()) {
        ctx.store.check_list_at(v)?;
    }
    let (form, media) = r.answer(Verb::List, &t.served)?;
    let page = ctx.store.list_in(&t.served, &sel, limit, r.q("continue"))?;
    let mut metadata = json!({"resourceVersion": page.rv.to_string()});
    match &page.continue_token {
        Some(c) => metadata["continue"] = json!(c),
        // A custom resource's list (unstructured) says so.
        None if t.served.custom.is_some() => metadata["continue"] = json!(""),
        None => {}
    }
    if let Some(n) = page.remaining {
        metadata["remainingItemCount"] = json!(n);
    }
    if form == Form::Table {
        let objs: Vec<_> = page.items.iter().map(|s| s.value.clone()).collect();
        let mut tbl = table::table(
            &t.served,
            &objs,
            ctx.store.now(),
            true,
            IncludeObject::parse(r.q("includeObject")),
        );
        if metadata["continue"] == "" {
            metadata.as_object_mut().map(|m| m.remove("continue"));
        }
        tbl["metadata"] = metadata;
        return Ok(value_response(200, &tbl));
    }
    if media == Media::Protobuf {
        let body = crate::protobuf::encode_list(
            &t.served.info.api_version(),
            &list_kind(&t.served),
            &metadata,
            page.items.iter().map(|s| &*s.value),
            form == Form::Metadata,
        )
        .ok_or_else(|| {
            ApiError::Internal(format!("{} has no protobuf message", list_kind(&t.served)))
        })?;
        return Ok(proto_response(200, body));
    }
    // Items are concatenated from their stored bytes: a list never
    // re-serializes an object.
    let (kind, api_version) = match form {
        Form::Metadata => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
        _ => (list_kind(&t.served), t.served.info.api_version()),
    };
    let head = json!({
        "kind": kind,
        "apiVersion": api_version,
        "metadata": metadata,
    })
    .to_string();
    let items: Vec<Bytes> = match form {
        Form::Metadata => page.items.iter().map(|s| partial_json(&s.json)).collect(),
        _ => page.items.iter().map(|s| s.json.clone()).collect(),
    };
    // A built-in kind's items go without their kind, as kube-apiserver's
    // (a custom resource's list is unstructured: its items keep it).
    let typed = form == Form::Object && t.served.custom.is_none();
    let total: usize = items.iter().map(|s| s.len() + 1).sum();
    let mut out = Vec::with_capacity(head.len() + total + 16);
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if typed {
            crate::negotiate::push_list_item(s, &mut out);
        } else {
            out.extend_from_slice(s);
        }
    }
    out.extend_from_slice(b"]}");
    Ok(json_response(200, out))
}

fn watch(ctx: &Ctx, r: &Req, t: &Target, name: Option<&str>) -> Result<Response, ApiError> {
    check_list_options(r, true)?;
    let sel = selection(r, t, name)?;
    let start = if r.flag("sendInitialEvents") {
        WatchStart::InitialEvents
    } else {
        match r.q("resourceVersion") {
            // kube-apiserver 1.35 serves a watch from "now" (no version)
            // from etcd, which ends the current objects with the
            // `k8s.io/initial-events-end` bookmark when bookmarks are allowed.
            None | Some("") if r.flag("allowWatchBookmarks") => WatchStart::InitialEvents,
            None | Some("") | Some("0") => WatchStart::Current,
            Some(v) => WatchStart::After(v.parse().expect("checked by check_list_options")),
        }
    };
    let timeout = match r.q("timeoutSeconds") {
        None | Some("") => None,
        Some(s) => Some(Duration::from_secs(s.parse().map_err(|_| {
            ApiError::BadRequest(format!("timeoutSeconds must be an integer, got {s:?}"))
        })?)),
    };
    let (form, media) = r.answer(Verb::Watch, &t.served)?;
    let render = match (form, media) {
        (Form::Table, _) => Render::Table { first: true },
        (Form::Metadata, Media::Json) => Render::Metadata,
        (Form::Object, Media::Json) => Render::Json,
        (Form::Metadata, Media::Protobuf) => Render::Protobuf { partial: true },
        (Form::Object, Media::Protobuf) => Render::Protobuf { partial: false },
    };
    let tally = WatchTally::new(
        ctx.store.activity(),
        r.conn.as_ref().map(|c| c.label).unwrap_or_default(),
    );
    // Instant markers go to a watch that asked for them and for bookmarks,
    // in JSON (a table watch is for people).
    let marks = match r
        .headers
        .get(crate::store::INSTANTS_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        Some(v) if r.flag("allowWatchBookmarks") && !matches!(render, Render::Table { .. }) => {
            crate::store::InstantMarks::from_header(v)
        }
        _ => crate::store::InstantMarks::None,
    };
    let reg = ctx.store.watch_in(&t.served, sel, start, tally, marks)?;
    let stream = WatchStream::new(
        ctx.store.clone(),
        t.served.clone(),
        reg,
        timeout,
        r.flag("allowWatchBookmarks"),
        render,
        r.conn.clone(),
    );
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(
            header::CONTENT_TYPE,
            match media {
                Media::Protobuf => crate::protobuf::WATCH_MEDIA_TYPE,
                Media::Json => "application/json",
            },
        )
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(stream))
        .expect("valid response"))
}

async fn delete_collection(
    ctx: &Ctx,
    r: &Req,
    t: &Target<'_>,
    out: Out,
) -> Result<Response, ApiError> {
    let sel = selection(r, t, None)?;
    let opts = delete_options(r)?;
    let page = ctx.store.list_in(&t.served, &sel, None, None)?;
    // The answer lists the objects as they were listed, before their
    // deletion (kube-apiserver's DeleteCollection).
    let mut deleted = Vec::new();
    for s in page.items {
        let ns = s
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = s
            .value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match admission::delete(
            &ctx.store,
            &t.served,
            &ns,
            &name,
            &opts,
            delete_options_object(r),
            Origin::Http,
        )
        .await
        {
            Ok(_) => {
                let mut item = (*s.value).clone();
                // As a list's items: a built-in kind's without its kind.
                if t.served.custom.is_none() {
                    if let Some(o) = item.as_object_mut() {
                        o.remove("apiVersion");
                        o.remove("kind");
                    }
                }
                deleted.push(item)
            }
            Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out.value(
        200,
        &json!({
            "kind": list_kind(&t.served),
            "apiVersion": t.served.info.api_version(),
            "metadata": {"resourceVersion": page.rv.to_string()},
            "items": deleted,
        }),
    ))
}

/// `PodList`, or a CRD's `listKind`.
fn list_kind(served: &Served) -> String {
    match &served.custom {
        Some(cv) => cv.list_kind.clone(),
        None => format!("{}List", served.info.kind),
    }
}

fn render_metrics(ctx: &Ctx) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    out.push_str("# HELP fakeapi_requests_total HTTP requests served, by verb, resource and code.\n# TYPE fakeapi_requests_total counter\n");
    for ((verb, resource, code), n) in ctx.metrics.requests.lock().iter() {
        let _ = writeln!(
            out,
            "fakeapi_requests_total{{verb=\"{verb}\",resource=\"{resource}\",code=\"{code}\"}} {n}"
        );
    }
    let a = ctx.store.activity().snapshot();
    let _ = writeln!(
        out,
        "# TYPE fakeapi_requests_in_flight gauge\nfakeapi_requests_in_flight {}",
        a.requests_in_flight
    );
    let _ = writeln!(
        out,
        "# TYPE fakeapi_watch_events_pending gauge\nfakeapi_watch_events_pending {}",
        a.watch_events_pending
    );
    let _ = writeln!(
        out,
        "# TYPE fakeapi_watch_events_written_total counter\nfakeapi_watch_events_written_total {}",
        a.watch_events_written
    );
    let _ = writeln!(
        out,
        "# TYPE fakeapi_resource_version gauge\nfakeapi_resource_version {}",
        ctx.store.resource_version()
    );
    // What kube-apiserver's priority-and-fairness controller publishes of
    // each level (the suite waits for a new level's nominal seats).
    let config = ctx.store.flow_config();
    let seats = config.seats();
    for (metric, help, stability, of) in [
        (
            "nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            "BETA",
            (|s: &crate::flowcontrol::Seats| s.nominal) as fn(&crate::flowcontrol::Seats) -> i64,
        ),
        (
            "lower_limit_seats",
            "Configured lower bound on number of execution seats available to each priority level",
            "ALPHA",
            |s| s.lower,
        ),
        (
            "upper_limit_seats",
            "Configured upper bound on number of execution seats available to each priority level",
            "ALPHA",
            |s| s.upper,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP apiserver_flowcontrol_{metric} [{stability}] {help}\n# TYPE apiserver_flowcontrol_{metric} gauge"
        );
        for (level, s) in &seats {
            let _ = writeln!(
                out,
                "apiserver_flowcontrol_{metric}{{priority_level=\"{level}\"}} {}",
                of(s)
            );
        }
    }
    let calls = ctx.store.webhook_calls();
    if !calls.is_empty() {
        out.push_str("# HELP fakeapi_webhook_calls_total Admission webhook calls, by configuration, webhook and outcome.\n# TYPE fakeapi_webhook_calls_total counter\n");
        for (configuration, webhook, c) in calls {
            for (outcome, n) in [
                ("allowed", c.allowed),
                ("patched", c.patched),
                ("denied", c.denied),
                ("failed_closed", c.failed_closed),
                ("failed_open", c.failed_open),
            ] {
                let _ = writeln!(
                    out,
                    "fakeapi_webhook_calls_total{{configuration=\"{configuration}\",webhook=\"{webhook}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "# TYPE fakeapi_webhook_calls_waiting gauge\nfakeapi_webhook_calls_waiting {}",
        ctx.store.activity().webhook_calls_waiting()
    );
    if let Some(extra) = ctx.metrics.extra.read().as_ref() {
        out.push_str(&extra());
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::go_duration;

    #[test]
    fn durations_read_as_go_reads_them() {
        assert_eq!(go_duration("0"), Ok(0));
        assert_eq!(go_duration("0s"), Ok(0));
        assert_eq!(go_duration("3m"), Ok(180_000_000_000));
        assert_eq!(go_duration("-1.5s"), Ok(-1_500_000_000));
        assert_eq!(go_duration("1h2m3.5s"), Ok(3_723_500_000_000));
        assert_eq!(go_duration(".5ms"), Ok(500_000));
        assert_eq!(go_duration("10µs"), Ok(10_000));
        assert_eq!(
            go_duration("invalid"),
            Err(r#"time: invalid duration "invalid""#.into())
        );
        assert_eq!(
            go_duration("10"),
            Err(r#"time: missing unit in duration "10""#.into())
        );
        assert_eq!(
            go_duration("10d"),
            Err(r#"time: unknown unit "d" in duration "10d""#.into())
        );
        assert_eq!(go_duration(""), Err(r#"time: invalid duration """#.into()));
        assert_eq!(
            go_duration("-"),
            Err(r#"time: invalid duration "-""#.into())
        );
        assert_eq!(
            go_duration("9999999999h"),
            Err(r#"time: invalid duration "9999999999h""#.into())
        );
    }
}
