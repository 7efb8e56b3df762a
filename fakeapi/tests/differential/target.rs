//! A server the harness talks to (fakeapi in this process, `batkube
//! serve`, or the real kube-apiserver of `apiserver/run.sh`), through
//! kube-rs's client: TLS and the token from a kubeconfig, raw requests,
//! raw answers.

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How long a request or a watch may take before the harness gives up on
/// it (a safety net: every wait ends on its event first).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A raw answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// The media type, without parameters.
    pub content_type: String,
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON (`None` if it is not).
    /// A protobuf answer (`k8s\0` + `runtime.Unknown`) is decoded with
    /// fakeapi's reader, the same for both servers (see [`from_protobuf`]).
    pub fn json(&self) -> Option<Value> {
        if self.content_type == fakeapi::protobuf::MEDIA_TYPE {
            return fakeapi::protobuf::decode_any(&self.body)
                .ok()
                .map(from_protobuf);
        }
        serde_json::from_slice(&self.body).ok()
    }
}

/// A decoded protobuf answer as it is compared: Go's marshallers write
/// every non-pointer field, zero or not, which the reader gives back
/// (`"nodeName": ""`) and fakeapi, writing from JSON, leaves out; both
/// decode in Go to the same zero value. So zero values (`""`, `0`,
/// `false`, `{}`, null: the reader's zero `metav1.Time`, which Go writes
/// where it is not a pointer, a condition's `lastProbeTime`, a bookmark's
/// `creationTimestamp`) are dropped from both servers' answers. Whether a
/// pointer field is absent or zero is what the JSON cases compare.
pub fn from_protobuf(v: Value) -> Value {
    fn zero(v: &Value) -> bool {
        match v {
            Value::String(s) => s.is_empty(),
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::Bool(b) => !b,
            Value::Object(m) => m.is_empty(),
            Value::Null => true,
            Value::Array(_) => false,
        }
    }
    fn walk(v: Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, x)| (k, walk(x)))
                    .filter(|(_, x)| !zero(x))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.into_iter().map(walk).collect()),
            other => other,
        }
    }
    walk(v)
}

/// The events of a watch, as they arrive.
#[derive(Default)]
pub struct WatchLog {
    pub status: Option<u16>,
    pub content_type: String,
    pub events: Vec<Value>,
    /// Lines that were not JSON.
    pub garbage: Vec<String>,
    pub ended: bool,
}

pub struct Watch {
    pub log: Arc<Mutex<WatchLog>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    /// Waits until the server ends the stream.
    pub async fn until_end(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let notified = self.changed.notified();
            if self.log.lock().unwrap().ended {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Waits until `n` events other than progress bookmarks have arrived,
    /// or for `grace` after the last one arrived (a watch a client closed
    /// itself: more may never come).
    pub async fn until_count(&self, n: usize, grace: Duration) {
        loop {
            let notified = self.changed.notified();
            {
                let l = self.log.lock().unwrap();
                let counted = l.events.iter().filter(|e| !is_progress_bookmark(e)).count();
                if counted >= n || l.ended {
                    return;
                }
            }
            if tokio::time::timeout(grace, notified).await.is_err() {
                return;
            }
        }
    }

    pub fn close(self) -> WatchLog {
        self.task.abort();
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

#[derive(Clone)]
pub struct Target {
    pub name: &'static str,
    client: kube::Client,
}

impl Target {
    pub fn new(name: &'static str, client: kube::Client) -> Target {
        Target { name, client }
    }

    pub async fn from_kubeconfig(name: &'static str, path: &Path) -> Target {
        let kc = kube::config::Kubeconfig::read_from(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Target::new(name, kube::Client::try_from(cfg).expect("a client"))
    }

    fn build(
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> http::Request<kube::client::Body> {
        let mut b = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::ACCEPT, accept.unwrap_or("application/json"));
        if body.is_some() {
            b = b.header(
                http::header::CONTENT_TYPE,
                content_type.unwrap_or("application/json"),
            );
        }
        b.body(kube::client::Body::from(body.unwrap_or_default()))
            .expect("a request")
    }

    pub async fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Answer {
        let req = Self::build(method, path, content_type, accept, body);
        let resp = tokio::time::timeout(PATIENCE, self.client.send(req))
            .await
            .unwrap_or_else(|_| panic!("{}: {method} {path} took too long", self.name))
            .unwrap_or_else(|e| panic!("{}: {method} {path}: {e}", self.name));
        let status = resp.status().as_u16();
        let content_type = media_type(resp.headers());
        let body = tokio::time::timeout(PATIENCE, resp.into_body().collect())
            .await
            .unwrap_or_else(|_| panic!("{}: the body of {method} {path} took too long", self.name))
            .unwrap_or_else(|e| panic!("{}: reading {method} {path}: {e}", self.name))
            .to_bytes();
        Answer {
            status,
            content_type,
            body,
        }
    }

    /// A request passed on as a client made it (its `User-Agent` too), the
    /// answer's body left to stream: what the recording proxy sends.
    pub async fn send_raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        user_agent: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> http::Response<kube::client::Body> {
        let mut req = Self::build(method, path, content_type, accept, body);
        if let Some(ua) = user_agent.and_then(|u| http::HeaderValue::from_str(u).ok()) {
            req.headers_mut().insert(http::header::USER_AGENT, ua);
        }
        tokio::time::timeout(PATIENCE, self.client.send(req))
            .await
            .unwrap_or_else(|_| panic!("{}: {method} {path} took too long", self.name))
            .unwrap_or_else(|e| panic!("{}: {method} {path}: {e}", self.name))
    }

    /// Starts a watch; its events gather in the returned log.
    pub async fn watch(&self, path: &str, accept: Option<&str>) -> Watch {
        let log = Arc::new(Mutex::new(WatchLog::default()));
        let changed = Arc::new(Notify::new());
        let req = Self::build("GET", path, None, accept, None);
        let resp = tokio::time::timeout(PATIENCE, self.client.send(req))
            .await
            .unwrap_or_else(|_| panic!("{}: watch {path} took too long", self.name))
            .unwrap_or_else(|e| panic!("{}: watch {path}: {e}", self.name));
        let protobuf = {
            let mut l = log.lock().unwrap();
            l.status = Some(resp.status().as_u16());
            l.content_type = media_type(resp.headers());
            l.content_type == fakeapi::protobuf::MEDIA_TYPE
        };
        let (l2, c2) = (log.clone(), changed.clone());
        if protobuf {
            let task = tokio::spawn(protobuf_watch(resp, l2, c2));
            return Watch { log, changed, task };
        }
        let task = tokio::spawn(async move {
            let mut body = resp.into_body();
            let mut buf: Vec<u8> = Vec::new();
            let push = |line: &[u8]| {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if line.iter().all(u8::is_ascii_whitespace) {
                    return;
                }
                let mut l = l2.lock().unwrap();
                match serde_json::from_slice::<Value>(line) {
                    Ok(v) => l.events.push(v),
                    Err(_) => l.garbage.push(String::from_utf8_lossy(line).into_owned()),
                }
            };
            while let Some(frame) = body.frame().await {
                let Ok(frame) = frame else { break };
                if let Ok(data) = frame.into_data() {
                    buf.extend_from_slice(&data);
                    while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=pos).collect();
                        push(&line[..line.len() - 1]);
                    }
                    c2.notify_waiters();
                }
            }
            // A non-watch answer (an error Status) has no final newline.
            if !buf.is_empty() {
                push(&buf);
            }
            l2.lock().unwrap().ended = true;
            c2.notify_waiters();
        });
        Watch { log, changed, task }
    }
}

/// A protobuf watch stream (length-prefixed `WatchEvent` frames), each
/// event decoded as [`Answer::json`] decodes an answer; an answer that is
/// not a stream (an error `Status`) is one event, as on a JSON watch.
async fn protobuf_watch(
    resp: http::Response<kube::client::Body>,
    log: Arc<Mutex<WatchLog>>,
    changed: Arc<Notify>,
) {
    let mut body = resp.into_body();
    let mut buf: Vec<u8> = Vec::new();
    let mut stream = true;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        buf.extend_from_slice(&data);
        if buf.starts_with(fakeapi::protobuf::MAGIC) {
            // A Status, not a stream: read at the end.
            stream = false;
            continue;
        }
        match fakeapi::protobuf::decode_watch(&buf) {
            Ok((events, rest)) => {
                let rest = rest.to_vec();
                let mut l = log.lock().unwrap();
                l.events.extend(events.into_iter().map(from_protobuf));
                buf = rest;
            }
            Err(e) => {
                log.lock()
                    .unwrap()
                    .garbage
                    .push(format!("a frame fakeapi's reader refuses: {e}"));
                buf.clear();
            }
        }
        changed.notify_waiters();
    }
    if !buf.is_empty() {
        let mut l = log.lock().unwrap();
        match fakeapi::protobuf::decode_any(&buf) {
            Ok(v) if !stream => l.events.push(from_protobuf(v)),
            _ => l
                .garbage
                .push(format!("{} bytes after the last whole frame", buf.len())),
        }
    }
    log.lock().unwrap().ended = true;
    changed.notify_waiters();
}

/// A bookmark that only says how far the server got (not the end of the
/// initial events): when a real server sends one depends on its watch
/// cache's ticker, so on a watch the client closed itself after so many
/// events, which of them came first is an accident of timing.
pub fn is_progress_bookmark(e: &Value) -> bool {
    e["type"] == "BOOKMARK"
        && e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] != "true"
}

fn media_type(h: &http::HeaderMap) -> String {
    h.get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The real kube-apiserver and etcd (`apiserver/run.sh`), stopped when dropped.
pub struct RealServer {
    child: Child,
    pub kubeconfig: PathBuf,
    _dir: TempDir,
}

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Where `schedulers/build-go.sh` puts the Go programs for this build:
/// `<target>/go`, beside the test's own `<target>/<profile>/deps/<test>`.
pub fn go_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("go")
}

impl RealServer {
    /// Builds kube-apiserver and etcd (`schedulers/build-go.sh`, quick when
    /// up to date) into `<target>/go` and starts them.
    pub fn start() -> RealServer {
        let root = repo_root();
        let go_dir = go_dir();
        let st = Command::new("bash")
            .arg(root.join("schedulers/build-go.sh"))
            .arg(&go_dir)
            .args(["kube-apiserver", "etcd"])
            .status()
            .expect("running schedulers/build-go.sh (needs bash and Go)");
        assert!(
            st.success(),
            "schedulers/build-go.sh kube-apiserver etcd failed: its output is above"
        );
        let dir = std::env::temp_dir().join(format!("batkube-apidiff-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("bash");
        cmd.arg(root.join("apiserver/run.sh"))
            .arg("--bin")
            .arg(&go_dir)
            .arg(&dir);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("starting apiserver/run.sh");
        // run.sh says "run.sh: ready" once the kubeconfig is written, or
        // why it gave up; its other lines go on to ours.
        let stderr = child.stderr.take().unwrap();
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
        let mut ready = false;
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            eprintln!("{line}");
            if line.starts_with("run.sh: ready") {
                ready = true;
                break;
            }
        }
        assert!(
            ready,
            "apiserver/run.sh gave up before the API server was ready: its output is above"
        );
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("{line}");
            }
        });
        let kubeconfig = dir.join("kubeconfig.yaml");
        RealServer {
            child,
            kubeconfig,
            _dir: TempDir(dir),
        }
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        // run.sh stops kube-apiserver, then etcd, on SIGTERM; a shutdown
        // that hangs for 20 s is ended with SIGKILL to the whole group.
        let pid = self.child.id() as i32;
        // SAFETY: kill(2) on the process this harness started.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: kill(2) on the process group this harness
                // started (run.sh leads it: `process_group(0)`).
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
