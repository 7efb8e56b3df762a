//! Shared helpers: a server on 127.0.0.1:0, a kube-rs client, and a tiny
//! raw HTTP/1.1 client for checking exact status codes and bodies.
#![allow(dead_code)]

use fakeapi::{RunningServer, Store, StoreConfig};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A safety net only: tests wait on events, this bounds a hung test.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub async fn start(config: StoreConfig) -> (Store, RunningServer, kube::Client) {
    let store = Store::with_config(config);
    let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("bind 127.0.0.1:0");
    let client = client_for(server.addr());
    (store, server, client)
}

pub fn client_for(addr: SocketAddr) -> kube::Client {
    let cfg = kube::Config::new(format!("http://{addr}").parse().unwrap());
    kube::Client::try_from(cfg).expect("kube client")
}

pub fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "batch"}},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap()
}

pub fn node(name: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"capacity": {"cpu": "4", "pods": "110"}, "allocatable": {"cpu": "4", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

pub struct RawResponse {
    pub status: u16,
    pub headers: String,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The body as JSON, read from protobuf when it is protobuf.
    pub fn object(&self) -> Value {
        if self
            .headers
            .to_ascii_lowercase()
            .contains("content-type: application/vnd.kubernetes.protobuf")
        {
            return fakeapi::protobuf::decode_any(&self.body)
                .unwrap_or_else(|e| panic!("not Kubernetes protobuf ({e}): {:?}", self.body));
        }
        self.json()
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn lines(&self) -> Vec<Value> {
        self.body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(pos) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_str = std::str::from_utf8(&data[..pos]).unwrap();
        let size = usize::from_str_radix(size_str.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[pos + 2..pos + 2 + size]);
        data = &data[pos + 2 + size + 2..];
    }
}

/// Opens a connection and sends one request (`Connection: close`).
pub async fn send_raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    if let Some(b) = body {
        s.write_all(b).await.unwrap();
    }
    s
}

/// Reads a whole response (the server closes after it).
pub async fn read_raw(mut s: TcpStream) -> RawResponse {
    let mut buf = Vec::new();
    tokio::time::timeout(PATIENCE, s.read_to_end(&mut buf))
        .await
        .expect("response within the safety timeout")
        .unwrap();
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("headers");
    let headers = String::from_utf8_lossy(&buf[..split]).to_string();
    let status = headers.split(' ').nth(1).unwrap().parse().unwrap();
    let raw_body = &buf[split + 4..];
    let body = if headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(raw_body)
    } else {
        raw_body.to_vec()
    };
    RawResponse {
        status,
        headers,
        body,
    }
}

pub async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> RawResponse {
    read_raw(send_raw(addr, method, path, headers, body).await).await
}
