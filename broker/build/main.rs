//! The build script: `batkube --version` names the commit the binary was
//! built from (`BATKUBE_COMMIT`): the environment variable of that name
//! when a packager sets it, else git's in a checkout, else
//! "commit unknown" (a build from a tarball).

use std::path::PathBuf;

mod commit;

fn main() {
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-env-changed=BATKUBE_COMMIT");
    let text = match std::env::var("BATKUBE_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given,
        _ => {
            let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
            match commit::commit(&dir) {
                Some((text, watch)) => {
                    for path in watch {
                        println!("cargo:rerun-if-changed={}", path.display());
                    }
                    text
                }
                None => "commit unknown".into(),
            }
        }
    };
    println!("cargo:rustc-env=BATKUBE_COMMIT={text}");
}
