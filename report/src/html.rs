//! The page's text: escaping, numbers as people read them, and the page
//! around the content.
//!
//! Pages are written as HTML that is also well-formed XML (every element
//! closed, attributes quoted, numeric character references only, scripts
//! in commented CDATA): a browser reads them as HTML, and the tests parse
//! them with an XML parser to check their structure.

use std::fmt::Write;

/// Text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    esc_into(&mut out, s);
    out
}

pub fn esc_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Characters XML 1.0 forbids (a reason string could carry one).
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
}

/// A string as a JSON literal that is safe inside a `<script>` element
/// and in XML (`<`, `>` and `&` as escapes).
pub fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `x` with at most `decimals` decimals, trailing zeros dropped (`-0` as `0`).
pub fn num(x: f64, decimals: usize) -> String {
    let mut s = String::new();
    num_into(&mut s, x, decimals);
    s
}

pub fn num_into(out: &mut String, x: f64, decimals: usize) {
    if !x.is_finite() {
        out.push('0');
        return;
    }
    let start = out.len();
    let _ = write!(out, "{x:.decimals$}");
    if decimals > 0 {
        while out.ends_with('0') {
            out.pop();
        }
        if out.ends_with('.') {
            out.pop();
        }
    }
    if &out[start..] == "-0" {
        out.truncate(start);
        out.push('0');
    }
}

/// A JSON number or `null`.
pub fn json_opt(out: &mut String, x: Option<f64>) {
    match x {
        Some(v) if v.is_finite() => num_into(out, v, 6),
        _ => out.push_str("null"),
    }
}

/// Seconds for reading: `979.2 s`, `2.3 h` beyond three hours.
pub fn secs(x: f64) -> String {
    if x.abs() >= 3.0 * 3600.0 {
        format!("{} s ({} h)", thousands(x.round()), num(x / 3600.0, 1))
    } else if x.abs() >= 100.0 {
        format!("{} s", thousands(x.round()))
    } else {
        format!("{} s", num(x, 3))
    }
}

/// A whole number with thin spaces between thousands (`12 345`).
pub fn thousands(x: f64) -> String {
    let neg = x < 0.0;
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('\u{2009}');
        }
        out.push(c);
    }
    if neg {
        format!("-{out}")
    } else {
        out
    }
}

pub fn percent(x: f64) -> String {
    format!("{}%", num(x * 100.0, 1))
}

/// "1 job", "2 jobs".
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!(
        "{} {}",
        thousands(n as f64),
        if n == 1 { one } else { many }
    )
}

/// Ticks for an axis over `[a, b]`: about `want` round values (1, 2, 5 × 10^k).
pub fn ticks(a: f64, b: f64, want: usize) -> Vec<f64> {
    if b.partial_cmp(&a) != Some(std::cmp::Ordering::Greater) || !a.is_finite() || !b.is_finite() {
        return vec![a];
    }
    let raw = (b - a) / want.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (a / step).ceil() * step;
    let mut out = Vec::new();
    while t <= b + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// The page around `body`: styles and our script inline, no external
/// resource of any kind.
pub fn page(title: &str, body: &str, data_json: &str) -> String {
    let mut out = String::with_capacity(body.len() + data_json.len() + 40_000);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>");
    let _ = write!(out, "<title>{}</title>", esc(title));
    out.push_str("<style>");
    out.push_str(super::CSS);
    out.push_str("</style></head>\n<body>\n");
    out.push_str(body);
    out.push_str("\n<script type=\"application/json\" id=\"data\">");
    out.push_str(data_json);
    out.push_str("</script>\n<script>//<![CDATA[\n");
    out.push_str(super::JS);
    out.push_str("\n//]]></script>\n</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_written() {
        assert_eq!(num(170.0032, 6), "170.0032");
        assert_eq!(num(2.0, 2), "2");
        assert_eq!(num(-0.0001, 2), "0");
        assert_eq!(thousands(1234567.0), "1\u{2009}234\u{2009}567");
        assert_eq!(secs(979.218), "979 s");
        assert_eq!(ticks(0.0, 2210.0, 8), [0.0, 500.0, 1000.0, 1500.0, 2000.0]);
    }

    #[test]
    fn json_strings_cannot_close_the_script_element() {
        let mut s = String::new();
        json_str(&mut s, "</script><b>&\"\u{1}");
        assert_eq!(s, r#""\u003c/script\u003e\u003cb\u003e\u0026\"\u0001""#);
        assert_eq!(
            serde_json::from_str::<String>(&s).unwrap(),
            "</script><b>&\"\u{1}"
        );
    }
}
