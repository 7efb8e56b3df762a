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

/// Builds (if needed) and returns a workspace artifact.
pub fn artifact(name: &str, package: &str) -> PathBuf {
    let dir = profile_dir();
    let path = dir.join(name);
    if !path.exists() {
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
