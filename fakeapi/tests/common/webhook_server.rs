//! A small admission webhook server for tests: HTTPS on 127.0.0.1 with a
//! certificate from its own CA (rcgen), serving the names a webhook
//! configuration reaches it by (`NAME.NAMESPACE.svc` and `127.0.0.1`);
//! each AdmissionReview it receives is recorded and answered by the test's
//! function.
#![allow(dead_code)]

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use parking_lot::Mutex;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What the server answers to one review.
pub enum Reply {
    /// An AdmissionReview with this `response` (its `uid` filled in).
    Response(Value),
    /// The same, after this long.
    Late(Duration, Value),
    /// A bare HTTP answer.
    Http(u16, String),
}

/// Allowed, nothing changed.
pub fn allow() -> Reply {
    Reply::Response(json!({"allowed": true}))
}

/// Allowed with a JSON patch.
pub fn patch(ops: Value) -> Reply {
    let b64 = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
    Reply::Response(json!({"allowed": true, "patchType": "JSONPatch", "patch": b64}))
}

/// Refused with a status.
pub fn deny(code: u16, message: &str) -> Reply {
    Reply::Response(json!({"allowed": false,
        "status": {"code": code, "message": message, "reason": "Forbidden"}}))
}

/// A received review: the path it came to, and its `request`.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub query: String,
    pub review: Value,
}

pub struct WebhookServer {
    pub addr: SocketAddr,
    /// The PEM of the CA that signed its certificate (a `caBundle`).
    pub ca_pem: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    /// Notified at each review received (before it is answered).
    pub arrived: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebhookServer {
    /// The caBundle field (base64 of the PEM).
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// The reviews received on `path`.
    pub fn on(&self, path: &str) -> Vec<Value> {
        self.received
            .lock()
            .iter()
            .filter(|r| r.path == path)
            .map(|r| r.review.clone())
            .collect()
    }
}

/// A CA, and a serving certificate for `names` it signed: (CA PEM, cert
/// PEM, key PEM).
pub fn certificates(names: &[&str]) -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Each CA its own name, as two clusters' CAs would have.
    static SERIAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SERIAL.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, format!("webhook test CA {n}"));
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// Serves `answer` on 127.0.0.1 (any port) with a certificate for `names`.
pub async fn serve(
    names: &[&str],
    answer: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
) -> WebhookServer {
    let (ca_pem, cert_pem, key_pem) = certificates(names);
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received: Arc<Mutex<Vec<Received>>> = Arc::default();
    let arrived: Arc<tokio::sync::Notify> = Arc::default();
    let answer = Arc::new(answer);
    let rec = received.clone();
    let arr = arrived.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let answer = answer.clone();
            let rec = rec.clone();
            let arr = arr.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let answer = answer.clone();
                    let rec = rec.clone();
                    let arr = arr.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let query = req.uri().query().unwrap_or("").to_string();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let review: Value = serde_json::from_slice(&body).unwrap();
                        rec.lock().push(Received {
                            path: path.clone(),
                            query,
                            review: review.clone(),
                        });
                        arr.notify_one();
                        let reply = answer(&path, &review["request"]);
                        let (late, reply) = match reply {
                            Reply::Late(d, r) => (Some(d), Reply::Response(r)),
                            other => (None, other),
                        };
                        if let Some(d) = late {
                            tokio::time::sleep(d).await;
                        }
                        let (status, body) = match reply {
                            Reply::Http(code, text) => (code, text),
                            Reply::Response(mut r) | Reply::Late(_, mut r) => {
                                r["uid"] = review["request"]["uid"].clone();
                                let out = json!({"apiVersion": review["apiVersion"],
                                    "kind": "AdmissionReview", "response": r});
                                (200, out.to_string())
                            }
                        };
                        Ok::<_, std::convert::Infallible>(
                            hyper::Response::builder()
                                .status(status)
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    WebhookServer {
        addr,
        ca_pem,
        received,
        arrived,
        task,
    }
}
