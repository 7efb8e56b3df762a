//! Shared helpers for the batsim crate's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;

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

/// One line of a transcript.
pub struct Line {
    pub from_batsim: bool,
    pub raw: String,
}

pub fn transcript(name: &str) -> Vec<Line> {
    let path = shared().join("reference/batsim/transcripts").join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Line {
                from_batsim: v["dir"] == "batsim->scheduler",
                raw: v["raw"].as_str().unwrap().to_string(),
            }
        })
        .collect()
}

/// JSON equality where numbers may differ by `tol` (absolute).
pub fn equivalent_within(a: &Value, b: &Value, tol: f64) -> Result<(), String> {
    fn walk(a: &Value, b: &Value, tol: f64, path: &str) -> Result<(), String> {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                if (x - y).abs() <= tol {
                    Ok(())
                } else {
                    Err(format!("{path}: {x} != {y}"))
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return Err(format!("{path}: {} items != {} items", x.len(), y.len()));
                }
                for (i, (a, b)) in x.iter().zip(y).enumerate() {
                    walk(a, b, tol, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            (Value::Object(x), Value::Object(y)) => {
                for k in x.keys().chain(y.keys()) {
                    match (x.get(k), y.get(k)) {
                        (Some(a), Some(b)) => walk(a, b, tol, &format!("{path}.{k}"))?,
                        _ => return Err(format!("{path}.{k}: present on one side only")),
                    }
                }
                Ok(())
            }
            _ if a == b => Ok(()),
            _ => Err(format!("{path}: {a} != {b}")),
        }
    }
    walk(a, b, tol, "$")
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
