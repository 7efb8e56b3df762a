//! One webhook call: an AdmissionReview POSTed over HTTPS (HTTP/1.1, a
//! connection per call), the server's certificate checked against the
//! webhook's `caBundle` for the host kube-apiserver would name
//! (`NAME.NAMESPACE.svc` for a service, the URL's host otherwise), the
//! whole exchange bounded by `timeoutSeconds` on the store's clock; and
//! the answer checked as `VerifyAdmissionResponse` checks it.

use super::config::{Hook, Target};
use super::{Answer, CallError};
use crate::activity::{ConnLabel, WatchTally};
use crate::timers::{SimTimer, WatchTimers};
use crate::Store;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use parking_lot::Mutex;
use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

/// Replies larger than this are refused (a webhook's answer is a small
/// AdmissionReview).
const MAX_REPLY: usize = 64 << 20;

/// The TLS client settings for a CA bundle: its certificates as the only
/// roots (none: nothing verifies), HTTP/1.1. Shared by every call with
/// the same bundle.
fn tls_config(ca_bundle: &[u8]) -> Arc<rustls::ClientConfig> {
    static CONFIGS: OnceLock<Mutex<HashMap<Vec<u8>, Arc<rustls::ClientConfig>>>> = OnceLock::new();
    let mut configs = CONFIGS.get_or_init(Default::default).lock();
    if let Some(c) = configs.get(ca_bundle) {
        return c.clone();
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_bundle).flatten() {
        // A certificate rustls cannot use as a root verifies nothing.
        let _ = roots.add(cert);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    if configs.len() > 256 {
        configs.clear();
    }
    configs.insert(ca_bundle.to_vec(), config.clone());
    config
}

/// Where a call goes: the URL kube-apiserver would post to (for messages
/// and the Host header), the address dialled, the name the certificate
/// must carry.
struct Destination {
    url: String,
    host_header: String,
    path: String,
    server_name: ServerName<'static>,
    dial: Dial,
}

enum Dial {
    Addr(SocketAddr),
    /// A host name to look up, with its port.
    Host(String, u16),
}

/// Where a call to `addr` goes: a webhook served on the loopback may
/// listen elsewhere than its program asked ([`crate::StoreConfig::loopback_ports`]).
fn on_loopback(store: &Store, mut addr: SocketAddr) -> SocketAddr {
    if let Some(real) = &store.config().loopback_ports {
        if addr.ip().is_loopback() {
            addr.set_port(real(addr.port()));
        }
    }
    addr
}

fn destination(store: &Store, hook: &Hook, secs: u64) -> Result<Destination, CallError> {
    match &hook.client.target {
        Target::Service {
            namespace,
            name,
            port,
            path,
        } => {
            let host = format!("{name}.{namespace}.svc");
            let path = if path.is_empty() { "/" } else { path };
            let url = format!("https://{host}:{port}{path}");
            let full = format!("{url}?timeout={secs}s");
            let server_name = ServerName::try_from(host.clone())
                .map_err(|e| CallError(format!("failed to call webhook: Post {full:?}: {e}")))?;
            let addr = super::resolve::endpoint(store, namespace, name, *port)
                .map_err(|e| CallError(format!("failed to call webhook: Post {full:?}: {e}")))?;
            let addr = on_loopback(store, addr);
            Ok(Destination {
                host_header: format!("{host}:{port}"),
                path: path.to_string(),
                url,
                server_name,
                dial: Dial::Addr(addr),
            })
        }
        Target::Url(u) => {
            let bad = |why: String| CallError(format!("Unparsable URL: {why}"));
            let uri: hyper::Uri = u.parse().map_err(|e| bad(format!("{e}")))?;
            let host = uri
                .host()
                .ok_or_else(|| bad(format!("{u:?} has no host")))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(443);
            let path = match uri.path() {
                "" => "/".to_string(),
                p => p.to_string(),
            };
            let server_name = ServerName::try_from(host.clone())
                .map_err(|e| bad(format!("{host:?} is not a valid server name: {e}")))?;
            let dial = match host.parse() {
                Ok(ip) => Dial::Addr(on_loopback(store, SocketAddr::new(ip, port))),
                Err(_) => Dial::Host(host.clone(), port),
            };
            Ok(Destination {
                url: u.clone(),
                host_header: uri
                    .authority()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| host.clone()),
                path,
                server_name,
                dial,
            })
        }
    }
}

/// Go's wording of a dial or TLS failure, for messages users compare with
/// kube-apiserver's.
fn io_reason(addr: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {addr}: connect: connection refused")
        }
        _ => {
            if let Some(tls) = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                return tls_reason(tls);
            }
            format!("dial tcp {addr}: {e}")
        }
    }
}

fn tls_reason(e: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(C::UnknownIssuer) => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
                .into()
        }
        // An authority of the same name whose key did not sign it.
        rustls::Error::InvalidCertificate(C::BadSignature) => {
            "tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly because of a signature verification failure while trying to verify candidate authority certificate)".into()
        }
        rustls::Error::InvalidCertificate(C::NotValidForName)
        | rustls::Error::InvalidCertificate(C::NotValidForNameContext { .. }) => {
            format!("tls: failed to verify certificate: x509: certificate is not valid for the host ({e})")
        }
        rustls::Error::InvalidCertificate(C::Expired)
        | rustls::Error::InvalidCertificate(C::ExpiredContext { .. }) => {
            "tls: failed to verify certificate: x509: certificate has expired or is not yet valid"
                .into()
        }
        other => format!("tls: {other}"),
    }
}

/// Resolves when `timeout` has passed on the store's clock.
fn deadline(store: &Store, timeout: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    match &store.config().watch_timers {
        WatchTimers::Simulated(timers) => {
            let tally = WatchTally::new(store.activity(), ConnLabel::default());
            let at =
                store.now() + chrono::Duration::from_std(timeout).unwrap_or(chrono::TimeDelta::MAX);
            Box::pin(SimSleep(timers.arm(at, &tally)))
        }
        // A plain server, or one whose watches have no timers: the wall
        // clock (a webhook call always has a deadline).
        WatchTimers::Wall | WatchTimers::Off => Box::pin(tokio::time::sleep(timeout)),
    }
}

/// A timer on simulated time as a future.
struct SimSleep(SimTimer);

impl Future for SimSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.0.poll_fired(cx.waker()) {
            // Its count is released here: the caller acts on it at once.
            Some(fired) => {
                drop(fired);
                Poll::Ready(())
            }
            None => Poll::Pending,
        }
    }
}

/// POSTs `review` to `hook`: the decoded reply, or why there is none.
pub(super) async fn post(store: &Store, hook: &Hook, review: &Value) -> Result<Value, CallError> {
    // `?timeout=` tells the webhook how long it has (whole seconds,
    // rounded up), as client-go writes it.
    let secs = hook.timeout.as_secs() + u64::from(hook.timeout.subsec_nanos() > 0);
    let dest = destination(store, hook, secs)?;
    let url = format!("{}?timeout={secs}s", dest.url);
    let post_err = |why: String| CallError(format!("failed to call webhook: Post {url:?}: {why}"));
    let body = serde_json::to_vec(review).expect("json");
    let _waiting = store.activity().webhook_call();
    let exchange = exchange(hook, &dest, secs, body);
    let reply = tokio::select! {
        r = exchange => r.map_err(post_err)?,
        () = deadline(store, hook.timeout) => {
            return Err(post_err("context deadline exceeded".into()));
        }
    };
    let (status, bytes) = reply;
    if !(200..300).contains(&status) {
        // client-go turns a failed answer into its Status, or says what it was.
        let why = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .filter(|v| v.get("kind").and_then(Value::as_str) == Some("Status"))
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| {
                format!(
                    "an error on the server ({:?}) has prevented the request from succeeding (status {status})",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
                )
            });
        return Err(CallError(format!("failed to call webhook: {why}")));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        CallError(format!(
            "failed to call webhook: the answer is not JSON: {e}"
        ))
    })
}

/// Connect, handshake, send, read: (HTTP status, body).
async fn exchange(
    hook: &Hook,
    dest: &Destination,
    secs: u64,
    body: Vec<u8>,
) -> Result<(u16, Bytes), String> {
    let (addr_text, tcp) = match &dest.dial {
        Dial::Addr(a) => (a.to_string(), tokio::net::TcpStream::connect(a).await),
        Dial::Host(h, p) => (
            format!("{h}:{p}"),
            tokio::net::TcpStream::connect((h.as_str(), *p)).await,
        ),
    };
    let tcp = tcp.map_err(|e| io_reason(&addr_text, &e))?;
    let _ = tcp.set_nodelay(true);
    let connector = tokio_rustls::TlsConnector::from(tls_config(&hook.client.ca_bundle));
    let tls = connector
        .connect(dest.server_name.clone(), tcp)
        .await
        .map_err(|e| io_reason(&addr_text, &e))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| format!("{e}"))?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let request = hyper::Request::post(format!("{}?timeout={secs}s", dest.path))
        .header(hyper::header::HOST, &dest.host_header)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json, */*")
        .header(hyper::header::USER_AGENT, "kube-apiserver-admission")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("{e}"))?;
    let result = async {
        let resp = sender
            .send_request(request)
            .await
            .map_err(|e| format!("{e}"))?;
        let status = resp.status().as_u16();
        let bytes = http_body_util::Limited::new(resp.into_body(), MAX_REPLY)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok((status, bytes))
    }
    .await;
    driver.abort();
    result
}

/// `VerifyAdmissionResponse`, then the patch decoded.
pub(super) fn verify(reply: &Value, uid: &str, hook: &Hook) -> Result<Answer, CallError> {
    let invalid = |why: String| CallError(format!("received invalid webhook response: {why}"));
    let response = reply
        .get("response")
        .filter(|r| r.is_object())
        .ok_or_else(|| invalid("webhook response was absent".into()))?;
    let api_version = reply
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = reply.get("kind").and_then(Value::as_str).unwrap_or("");
    let v1 = api_version == "admission.k8s.io/v1";
    if hook.review_v1 {
        let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
        if got_uid != uid {
            return Err(invalid(format!(
                "expected response.uid={uid:?}, got {got_uid:?}"
            )));
        }
        if !(v1 && kind == "AdmissionReview") {
            let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
            return Err(invalid(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {g}/{v}, Kind={kind}"
            )));
        }
    }
    let patch_b64 = response
        .get("patch")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty());
    let patch_type = response.get("patchType").filter(|t| !t.is_null());
    if !hook.mutating {
        if patch_b64.is_some() {
            return Err(invalid(
                "validating webhook may not return response.patch".into(),
            ));
        }
        if patch_type.is_some() {
            return Err(invalid(
                "validating webhook may not return response.patchType".into(),
            ));
        }
    } else if hook.review_v1 {
        match (patch_b64, patch_type) {
            (Some(_), None) => {
                return Err(invalid(
                    "webhook returned response.patch but not response.patchType".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "webhook returned response.patchType but not response.patch".into(),
                ))
            }
            (_, Some(t)) if t.as_str().is_none_or(str::is_empty) => {
                return Err(invalid(format!(
                    "webhook returned invalid response.patchType of {:?}",
                    t.as_str().unwrap_or("")
                )))
            }
            _ => {}
        }
    }
    let allowed = response
        .get("allowed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let status = response.get("status").filter(|s| !s.is_null()).cloned();
    let (warnings, audit_annotations) = notes(response)?;
    let answer = |patch: Option<Value>| Answer {
        allowed,
        status: status.clone(),
        patch,
        warnings: warnings.clone(),
        audit_annotations: audit_annotations.clone(),
    };
    if !allowed {
        return Ok(answer(None));
    }
    let Some(b64) = patch_b64.filter(|_| hook.mutating) else {
        return Ok(answer(None));
    };
    let undecodable = |why: String| {
        CallError(format!(
            "received undecodable patch in webhook response: {why}"
        ))
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| undecodable(e.to_string()))?;
    let patch: Value = serde_json::from_slice(&raw).map_err(|e| undecodable(e.to_string()))?;
    if !patch.is_array() {
        return Err(undecodable("a JSON patch is a list of operations".into()));
    }
    if patch.as_array().is_some_and(Vec::is_empty) {
        return Ok(answer(None));
    }
    let ty = patch_type.and_then(Value::as_str).unwrap_or("JSONPatch");
    if ty != "JSONPatch" {
        return Err(CallError(format!("unsupported patch type {ty:?}")));
    }
    Ok(answer(Some(patch)))
}

/// A response's `warnings` and `auditAnnotations`; a value of another
/// type fails the call as client-go's decoding of the review fails it.
#[allow(clippy::type_complexity)]
fn notes(response: &Value) -> Result<(Vec<String>, Vec<(String, String)>), CallError> {
    let mistyped = |field: &str, v: &Value, want: &str| {
        let got = match v {
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::Null => "null",
        };
        CallError(format!(
            "failed to call webhook: json: cannot unmarshal {got} into Go struct field AdmissionResponse.response.{field} of type {want}"
        ))
    };
    let mut warnings = Vec::new();
    match response.get("warnings") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ws)) => {
            for w in ws {
                match w {
                    Value::String(w) => warnings.push(w.clone()),
                    Value::Null => warnings.push(String::new()),
                    other => return Err(mistyped("warnings", other, "string")),
                }
            }
        }
        Some(other) => return Err(mistyped("warnings", other, "[]string")),
    }
    let mut audit = Vec::new();
    match response.get("auditAnnotations") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                match v {
                    Value::String(v) => audit.push((k.clone(), v.clone())),
                    Value::Null => audit.push((k.clone(), String::new())),
                    other => return Err(mistyped("auditAnnotations", other, "string")),
                }
            }
        }
        Some(other) => return Err(mistyped("auditAnnotations", other, "map[string]string")),
    }
    Ok((warnings, audit))
}
