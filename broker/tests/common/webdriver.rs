//! A WebDriver client for the tests that look at pages in a real browser:
//! Debian's chromium driven by its chromedriver over the W3C WebDriver
//! protocol (JSON over HTTP). Only what the tests use: open a page, run a
//! script, find and click an element, take screenshots.
#![allow(dead_code)]

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn find(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([
            PathBuf::from("/usr/bin"),
            PathBuf::from("/usr/lib/chromium"),
        ])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A headless chromium session; the driver is stopped when it is dropped.
pub struct Browser {
    rt: tokio::runtime::Runtime,
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    session: String,
    driver: Child,
}

impl Browser {
    /// Starts chromedriver and a headless chromium; panics with what to
    /// install when either is missing (a browser test never skips).
    pub fn start() -> Browser {
        let driver_bin = find("chromedriver").unwrap_or_else(|| {
            panic!(
                "chromedriver not found: the report's browser test needs Debian's chromium and \
                 chromium-driver (`.ci/run` installs them: apt-get install -y chromium chromium-driver)"
            )
        });
        let chromium = find("chromium").unwrap_or_else(|| {
            panic!(
                "chromium not found: the report's browser test needs Debian's chromium (`.ci/run` \
                 installs it: apt-get install -y chromium chromium-driver)"
            )
        });
        // A free port: chromedriver says when it listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", driver_bin.display()));
        let mut lines = std::io::BufReader::new(driver.stdout.take().unwrap()).lines();
        let mut seen = Vec::new();
        loop {
            match lines.next() {
                Some(Ok(l)) => {
                    let ready = l.contains("started successfully");
                    seen.push(l);
                    if ready {
                        break;
                    }
                }
                _ => panic!("chromedriver ended before it listened: {seen:?}"),
            }
        }
        // Its later output is not read: drain it so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = Client::builder(TokioExecutor::new()).build_http();
        let mut b = Browser {
            rt,
            client,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            driver,
        };
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--hide-scrollbars", "--window-size=1400,1000", "--force-device-scale-factor=1"]
            }
        }}});
        let v = b.call("POST", "/session", Some(caps));
        b.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        b
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            )))
            .unwrap();
        let (status, bytes) = self.rt.block_on(async {
            let resp = self
                .client
                .request(req)
                .await
                .expect("chromedriver answers");
            let status = resp.status();
            (status, resp.into_body().collect().await.unwrap().to_bytes())
        });
        let v: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {bytes:?}"));
        assert!(
            status.is_success(),
            "{method} {path}: {status}: {}",
            v["value"]
        );
        v["value"].clone()
    }

    fn s(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Opens `page` and returns once it has loaded.
    pub fn open(&self, page: &Path) {
        let url = format!("file://{}", page.canonicalize().unwrap().display());
        self.call("POST", &self.s("/url"), Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub fn run(&self, script: &str, args: Value) -> Value {
        self.call(
            "POST",
            &self.s("/execute/sync"),
            Some(json!({"script": script, "args": args})),
        )
    }

    /// The first element matching a CSS selector.
    pub fn element(&self, css: &str) -> String {
        let v = self.call(
            "POST",
            &self.s("/element"),
            Some(json!({"using": "css selector", "value": css})),
        );
        v[ELEMENT].as_str().unwrap().to_string()
    }

    /// A real click (the driver moves the pointer there and presses).
    pub fn click(&self, element: &str) {
        self.call(
            "POST",
            &self.s(&format!("/element/{element}/click")),
            Some(json!({})),
        );
    }

    /// A real click at a point of the viewport (CSS pixels).
    pub fn click_at(&self, x: f64, y: f64) {
        self.call(
            "POST",
            &self.s("/actions"),
            Some(json!({"actions": [{"type": "pointer", "id": "mouse",
                "parameters": {"pointerType": "mouse"},
                "actions": [{"type": "pointerMove", "x": x.round() as i64, "y": y.round() as i64,
                             "origin": "viewport"},
                            {"type": "pointerDown", "button": 0},
                            {"type": "pointerUp", "button": 0}]}]})),
        );
    }

    /// The viewport as PNG, written to `path`.
    pub fn screenshot(&self, path: &Path) {
        self.save(&self.s("/screenshot"), path);
    }

    /// One element as PNG, written to `path`.
    pub fn element_screenshot(&self, element: &str, path: &Path) {
        self.save(&self.s(&format!("/element/{element}/screenshot")), path);
    }

    fn save(&self, route: &str, path: &Path) {
        let v = self.call("GET", route, None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let req = hyper::Request::builder()
                .method("DELETE")
                .uri(format!("{}/session/{}", self.base, self.session))
                .body(Full::new(Bytes::new()))
                .unwrap();
            let _ = self.rt.block_on(self.client.request(req));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
