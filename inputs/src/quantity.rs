//! Kubernetes resource quantities as workloads and platforms write them:
//! cpu as a number or milli-cpu string (`1`, `"0.5"`, `"500m"`), memory as
//! bytes or with a binary/decimal suffix (`"4Gi"`, `"512M"`).

use serde_json::Value;

use batkube_translate as translate;

/// Cpu in cores from a JSON value (number or Kubernetes quantity string),
/// read exactly as the broker reads requests (`translate::parse_quantity`).
pub fn cpu_from_value(v: &Value) -> Result<f64, String> {
    translate::parse_quantity("cpu", v)
        .map(|m| m as f64 / 1000.0)
        .map_err(|e| format!("cpu {v}: {e} (examples: 2, 0.5, 500m)"))
}

/// Cpu in cores from a quantity string: `2`, `0.25`, `250m`.
pub fn parse_cpu(s: &str) -> Result<f64, String> {
    cpu_from_value(&Value::String(s.to_string()))
}

/// Memory in bytes from a JSON value.
pub fn memory_from_value(v: &Value) -> Result<f64, String> {
    translate::parse_quantity("memory", v)
        .map(|b| b as f64)
        .map_err(|e| format!("memory {v}: {e} (examples: 4Gi, 512Mi, 1000000)"))
}

/// Memory in bytes from a quantity string: `1073741824`, `4Gi`, `512M`, `1e9`.
pub fn parse_memory(s: &str) -> Result<f64, String> {
    memory_from_value(&Value::String(s.to_string()))
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
