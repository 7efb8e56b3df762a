//! Volcano's admission webhook server (`vc-webhook-manager`), unmodified,
//! called by the API as kube-apiserver calls it: its webhook
//! configurations (from Volcano's installer manifest) installed with its
//! CRDs, its Service reached through an EndpointSlice on 127.0.0.1, its
//! certificates made for the test (as Volcano's installer makes them with
//! a job). It fills in the configurations' caBundle itself; then a vcjob
//! created over HTTP comes back with Volcano's defaults, and a bad one is
//! refused with Volcano's message.

mod common;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PATIENCE: Duration = Duration::from_secs(120);
const SERVICE: &str = "volcano-admission-service";
const NAMESPACE: &str = "volcano-system";

struct Killed(Child, std::path::PathBuf);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Killed {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

/// A CA and a serving certificate for the Service, as PEM files in `dir`.
fn certificates(dir: &Path) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "volcano admission CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = CertificateParams::new(vec![format!("{SERVICE}.{NAMESPACE}.svc")]).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("ca.crt"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
}

/// One HTTP/1.1 request to the API: (status, JSON body).
async fn http(addr: SocketAddr, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let b = body.to_string();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut r = rest;
        while let Some((size, tail)) = r.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            r = &tail[n + 2..];
        }
        out
    } else {
        rest.to_string()
    };
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn vcjob(name: &str, min_available: u32) -> Value {
    json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "tasks": [{"replicas": 2, "name": "main",
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcanos_webhooks_default_and_validate_jobs() {
    let bin = common::go::go_program("vc-webhook-manager", false);
    let go = common::go::go_dir();
    let store = fakeapi::Store::new();
    let mut changes = store.subscribe();
    store
        .install_manifests(&fakeapi::load_manifests(&go.join("crds/volcano")).unwrap())
        .unwrap();
    store
        .create("namespaces", None, json!({"metadata": {"name": NAMESPACE}}))
        .unwrap();
    let hooks = fakeapi::load_manifests(&go.join("webhooks/volcano")).unwrap();
    assert_eq!(
        hooks.len(),
        7,
        "Volcano 1.10 ships 4 mutating and 3 validating configurations"
    );
    store.install_manifests(&hooks).unwrap();
    // The queue Volcano's controllers would make, open.
    store
        .create(
            "queues.scheduling.volcano.sh",
            None,
            json!({"metadata": {"name": "default"}, "spec": {"weight": 1}, "status": {"state": "Open", "allocated": {}}}),
        )
        .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    store
        .create(
            "services",
            Some(NAMESPACE),
            json!({"metadata": {"name": SERVICE}, "spec": {"ports": [{"port": 443, "targetPort": port}]}}),
        )
        .unwrap();
    store
        .create(
            "endpointslices.discovery.k8s.io",
            Some(NAMESPACE),
            json!({"metadata": {"name": SERVICE, "labels": {"kubernetes.io/service-name": SERVICE}},
                "addressType": "IPv4", "ports": [{"port": port}],
                "endpoints": [{"addresses": ["127.0.0.1"]}]}),
        )
        .unwrap();
    let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let kubeconfig = dir.path().join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, fakeapi::kubeconfig_yaml(server.addr())).unwrap();
    let log = dir.path().join("webhook-manager.log");
    let child = Command::new(&bin)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--tls-cert-file")
        .arg(dir.path().join("tls.crt"))
        .arg("--tls-private-key-file")
        .arg(dir.path().join("tls.key"))
        .arg("--ca-cert-file")
        .arg(dir.path().join("ca.crt"))
        .args(["--listen-address", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--webhook-namespace",
            NAMESPACE,
            "--webhook-service-name",
            SERVICE,
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let manager = Killed(child, log);

    // It writes its CA into every configuration, then serves.
    let ca = std::fs::read_to_string(dir.path().join("ca.crt")).unwrap();
    let ca_b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &ca);
    let patched = |s: &fakeapi::Store| {
        [
            "mutatingwebhookconfigurations.admissionregistration.k8s.io",
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
        ]
        .iter()
        .flat_map(|r| s.list(r, None, None, None).unwrap())
        .all(|c| {
            c["webhooks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|h| h["clientConfig"]["caBundle"] == ca_b64)
        })
    };
    let wait = async {
        while !patched(&store) {
            changes.recv().await.unwrap();
        }
        // Listening comes after the last update: a connection says when.
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(PATIENCE, wait).await.is_err() {
        panic!("vc-webhook-manager never served:\n{}", manager.log());
    }

    let addr = server.addr();
    let jobs = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs";
    let (code, job) = http(addr, "POST", jobs, &vcjob("ok", 2)).await;
    assert_eq!(code, 201, "{job}\n{}", manager.log());
    assert_eq!(job["spec"]["queue"], "default", "{job}");
    assert_eq!(job["spec"]["schedulerName"], "volcano");
    assert_eq!(job["spec"]["maxRetry"], 3);
    assert_eq!(job["spec"]["tasks"][0]["maxRetry"], 3);

    let (code, denied) = http(addr, "POST", jobs, &vcjob("too-many", 5)).await;
    assert_eq!(code, 400, "{denied}");
    let m = denied["message"].as_str().unwrap();
    assert!(
        m.starts_with(r#"admission webhook "validatejob.volcano.sh" denied the request:"#)
            && m.contains("'minAvailable' should not be greater than total replicas"),
        "{m}"
    );
    let mut lost = vcjob("lost", 2);
    lost["spec"]["queue"] = json!("nowhere");
    let (code, denied) = http(addr, "POST", jobs, &lost).await;
    assert_eq!(code, 400, "{denied}");
    assert!(
        denied["message"]
            .as_str()
            .unwrap()
            .contains("unable to find job queue"),
        "{denied}"
    );
    let calls = store.webhook_calls();
    let by = |name: &str| {
        calls
            .iter()
            .find(|c| c.1 == name)
            .map(|c| c.2.clone())
            .unwrap_or_default()
    };
    assert_eq!(by("mutatejob.volcano.sh").patched, 3, "{calls:?}");
    assert_eq!(by("validatejob.volcano.sh").denied, 2, "{calls:?}");
    drop(manager);
    server.shutdown().await;
}
