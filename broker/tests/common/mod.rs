//! Shared helpers for the broker's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub mod go;

/// `../shared` beside the repository.
pub fn shared() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    assert!(
        p.join("reference").is_dir(),
        "../shared/reference must be beside the repository: {}",
        p.display()
    );
    p
}

/// The 2020 16-node platform without the `<config>` block SimGrid 3.32 rejects.
pub fn graphene16() -> String {
    let text = std::fs::read_to_string(
        shared().join("reference/batkube/platforms/platform_graphene_16nodes.xml"),
    )
    .unwrap();
    let start = text.find("<config").unwrap();
    let end = text.find("</config>").unwrap() + "</config>".len();
    format!("{}{}", &text[..start], &text[end..])
}

/// The workspace's target directory for the profile this test was built in.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The newest modification time of the files under `dir`.
fn newest(dir: &Path) -> Option<std::time::SystemTime> {
    let mut best = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let m = if e.file_type().ok()?.is_dir() {
            newest(&e.path())
        } else {
            e.metadata().ok()?.modified().ok()
        };
        best = best.max(m);
    }
    best
}

/// Builds (if missing, or older than its sources or the shim's) and
/// returns a workspace artifact: `cargo test -p batkube` alone never runs
/// a scheduler built before the last change to its crate. (Not rebuilt
/// when fresh: `cargo build -p X` may resolve features apart from the
/// workspace's test build and recompile shared crates.)
pub fn artifact(name: &str, package: &str) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = profile_dir();
    let path = dir.join(name);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sources = [
        root.join("schedulers").join(package),
        root.join(package),
        root.join("timeshim"),
    ];
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
    let stale = built.is_none_or(|b| sources.iter().filter_map(|d| newest(d)).any(|s| s > b));
    if stale {
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "-p", package]);
        if dir.file_name().unwrap() == "release" {
            c.arg("--release");
        }
        c.env("CARGO_TARGET_DIR", dir.parent().unwrap());
        let st = c.status().unwrap();
        assert!(st.success(), "building {package}");
    }
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// The project's scheduler (built if needed), which links the shim.
pub fn batkube_scheduler() -> PathBuf {
    artifact("batkube-scheduler", "batkube-scheduler")
}

/// `n` one-cpu nodes `node-0`… (resources 0…) plus a master.
pub fn platform(dir: &Path, n: usize) -> PathBuf {
    let mut x = String::from(
        "<?xml version='1.0'?>\n<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">\n\
         <host id=\"master\" speed=\"1Gf\"><prop id=\"role\" value=\"master\"/></host>\n\
         <link id=\"lm\" bandwidth=\"1GBps\" latency=\"50us\"/>\n",
    );
    for i in 0..n {
        x += &format!(
            "<host id=\"node-{i}\" speed=\"1Gf\"><prop id=\"cpu\" value=\"1\"/><prop id=\"memory\" value=\"4Gi\"/></host>\n\
             <link id=\"l{i}\" bandwidth=\"1GBps\" latency=\"50us\"/>\n\
             <route src=\"master\" dst=\"node-{i}\"><link_ctn id=\"lm\"/><link_ctn id=\"l{i}\"/></route>\n"
        );
    }
    x += "</zone></platform>\n";
    let path = dir.join("p.xml");
    std::fs::write(&path, x).unwrap();
    path
}

/// Threads that spin until dropped: the load of other runs on the machine.
pub struct Hogs {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hogs {
    pub fn start(n: usize) -> Hogs {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
