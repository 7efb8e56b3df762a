//! Kubernetes resource quantities as workloads and platforms write them:
//! cpu as a number or milli-cpu string (`1`, `"0.5"`, `"500m"`), memory as
//! bytes or with a binary/decimal suffix (`"4Gi"`, `"512M"`).

use serde_json::Value;

/// Cpu in cores from a JSON value (number or Kubernetes quantity string).
pub fn cpu_from_value(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("cpu {n} is not a non-negative number")),
        Value::String(s) => parse_cpu(s),
        other => Err(format!(
            "cpu {other} is neither a number nor a quantity string"
        )),
    }
}

/// Cpu in cores from a quantity string: `2`, `0.25`, `250m`.
pub fn parse_cpu(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = match t.strip_suffix('m') {
        Some(n) => (n, 1e-3),
        None => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(|x| x * scale)
        .ok_or_else(|| format!("cpu {s:?} is not a quantity (examples: 2, 0.5, 500m)"))
}

/// Memory in bytes from a JSON value.
pub fn memory_from_value(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("memory {n} is not a non-negative number of bytes")),
        Value::String(s) => parse_memory(s),
        other => Err(format!(
            "memory {other} is neither a number of bytes nor a quantity string"
        )),
    }
}

/// Memory in bytes from a quantity string: `1073741824`, `4Gi`, `512M`, `1e9`.
pub fn parse_memory(s: &str) -> Result<f64, String> {
    const SUFFIXES: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("K", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let t = s.trim();
    let (num, scale) = SUFFIXES
        .iter()
        .find_map(|(suf, f)| t.strip_suffix(suf).map(|n| (n, *f)))
        .unwrap_or((t, 1.0));
    num.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(|x| x * scale)
        .ok_or_else(|| format!("memory {s:?} is not a quantity (examples: 4Gi, 512Mi, 1000000)"))
}

/// Writes cpu cores as the shortest exact quantity: `1`, `0.5`, `188m`.
pub fn format_cpu(cores: f64) -> String {
    let milli = (cores * 1000.0).round() as i64;
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

/// Writes bytes with the largest binary suffix that divides them exactly.
pub fn format_memory(bytes: f64) -> String {
    let b = bytes.round() as u64;
    for (suf, f) in [
        ("Ti", 1u64 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if b >= f && b.checked_rem(f) == Some(0) {
            return format!("{}{suf}", b / f);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_memory_quantities() {
        assert_eq!(parse_cpu("500m").unwrap(), 0.5);
        assert_eq!(parse_cpu("4000m").unwrap(), 4.0);
        assert_eq!(cpu_from_value(&serde_json::json!(1.172)).unwrap(), 1.172);
        assert!(parse_cpu("one").is_err());
        assert_eq!(parse_memory("4Gi").unwrap(), 4294967296.0);
        assert_eq!(parse_memory("512M").unwrap(), 512e6);
        assert!(parse_memory("-1").is_err());
        assert_eq!(format_cpu(0.188), "188m");
        assert_eq!(format_cpu(6.0), "6");
        assert_eq!(format_memory(4294967296.0), "4Gi");
        assert_eq!(format_memory(1000.0), "1000");
    }
}
