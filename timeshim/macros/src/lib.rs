//! `#[timeshim::main]`: puts `::timeshim::install();` at the top of the
//! function it decorates. Works above or below `#[tokio::main]`. Used through
//! the `timeshim` crate, which re-exports it; no dependencies on purpose.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

/// Makes `fn main` call `timeshim::install()` first.
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    if !args.is_empty() {
        return compile_error("#[timeshim::main] takes no arguments");
    }
    let mut tokens: Vec<TokenTree> = item.into_iter().collect();
    // The body is the last brace-delimited group at the top level of the item.
    let Some(pos) = tokens
        .iter()
        .rposition(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace))
    else {
        return compile_error("#[timeshim::main] goes on a function with a body");
    };
    let TokenTree::Group(body) = &tokens[pos] else {
        unreachable!("matched above")
    };
    let mut inner: TokenStream = "::timeshim::install();".parse().expect("valid tokens");
    inner.extend(body.stream());
    let mut group = Group::new(Delimiter::Brace, inner);
    group.set_span(body.span());
    tokens[pos] = TokenTree::Group(group);
    tokens.into_iter().collect()
}

fn compile_error(msg: &str) -> TokenStream {
    format!("::core::compile_error!({msg:?});")
        .parse()
        .expect("valid tokens")
}
