//! The commit `batkube --version` names, as string literals made when the
//! code that asks for them is compiled: `commit!()` is `"<hash> <date>"`
//! (12 digits of the hash, the commit's date), `version!()` is
//! `"<package version> (<hash> <date>)"`.
//!
//! The text is `$BATKUBE_COMMIT` when a packager sets it, else git's in a
//! checkout of this repository, else "commit unknown" (a build from a
//! tarball, or one unpacked inside another project's checkout).
//!
//! Why a macro: the expansion includes git's HEAD, the branch's ref and the
//! reflog with `include_bytes!` (unused constants, nothing lands in the
//! binary), so rustc lists them among the inputs of the crate that expands
//! it and cargo recompiles that crate alone when HEAD moves: the
//! `batkube` binary, not its library.

use proc_macro::TokenStream;

mod commit;

/// `"<hash> <date>"`, or "commit unknown".
#[proc_macro]
pub fn commit(_input: TokenStream) -> TokenStream {
    expand(|text| text)
}

/// `"<CARGO_PKG_VERSION> (<hash> <date>)"` of the package being compiled.
#[proc_macro]
pub fn version(_input: TokenStream) -> TokenStream {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    expand(|text| format!("{version} ({text})"))
}

fn expand(shape: impl Fn(String) -> String) -> TokenStream {
    // `option_env!` makes rustc record the variable as an input, so a
    // change of it recompiles as a change of HEAD does.
    let mut code = String::from("{ const _: Option<&str> = option_env!(\"BATKUBE_COMMIT\");\n");
    let text = match std::env::var("BATKUBE_COMMIT") {
        Ok(given) if !given.trim().is_empty() => given,
        _ => {
            let dir = std::env::var_os("CARGO_MANIFEST_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_default();
            match commit::commit(&dir) {
                Some((text, watch)) => {
                    for path in watch.iter().filter_map(|p| p.to_str()) {
                        code += &format!("const _: &[u8] = include_bytes!({path:?});\n");
                    }
                    text
                }
                None => "commit unknown".into(),
            }
        }
    };
    code += &format!("{:?} }}", shape(text));
    code.parse()
        .expect("a block of constants and a string literal")
}
