//! Kubernetes resource quantities (`500m`, `1Gi`, `2e3`), held exactly and
//! formatted as `k8s.io/apimachinery`'s `resource.Quantity` formats them.
//!
//! A quantity is an integer count of nano-units (`i128`: `1Ei` is 1.15e27
//! nano-units, far below the type's limit), so sums and comparisons are
//! exact, as Kubernetes' own are. A value finer than a nano-unit is rounded
//! up to one, as Kubernetes rounds a quantity's precision up. Each value
//! keeps the format it was written in (binary `Ki`…`Ei`, decimal `n`…`E`,
//! or an exponent `e3`), which decides how a sum prints.

use std::cmp::Ordering;
use std::fmt;

const NANO: i128 = 1_000_000_000;

/// How a quantity prints (Kubernetes' `resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `Ki`, `Mi`, …: powers of 1024.
    BinarySI,
    /// `n`, `u`, `m`, ``, `k`, `M`, …: powers of 1000.
    DecimalSI,
    /// `e3`, `e-6`: a power of ten.
    DecimalExponent,
}

/// An exact quantity: nano-units and a format.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Quantity {
    /// Zero, printed `0`.
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        format: Format::DecimalSI,
    };

    /// A whole number (an object count), in the decimal format.
    pub fn count(n: i64) -> Quantity {
        Quantity {
            nanos: n as i128 * NANO,
            format: Format::DecimalSI,
        }
    }

    /// Reads a quantity as Kubernetes writes them: an optionally signed
    /// decimal number and a suffix. `None` for anything else.
    pub fn parse(s: &str) -> Option<Quantity> {
        let s = s.trim();
        let (neg, body) = match s.as_bytes().first()? {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (num, suffix) = body.split_at(num_end);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return None;
        }
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        // The number as digits and a power of ten.
        let digits = format!("{int_part}{frac_part}");
        let mut exp10: i32 = -(frac_part.len() as i32);
        let mut mul: i128 = 1; // a binary factor
        let format = match suffix {
            "" => Format::DecimalSI,
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
                let k = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                    .iter()
                    .position(|x| *x == suffix)
                    .expect("listed")
                    + 1;
                mul = 1i128 << (10 * k);
                Format::BinarySI
            }
            "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => {
                exp10 += match suffix {
                    "n" => -9,
                    "u" => -6,
                    "m" => -3,
                    "k" => 3,
                    "M" => 6,
                    "G" => 9,
                    "T" => 12,
                    "P" => 15,
                    _ => 18,
                };
                Format::DecimalSI
            }
            _ => {
                let e = suffix
                    .strip_prefix('e')
                    .or_else(|| suffix.strip_prefix('E'))?;
                let (sign, ds) = match e.as_bytes().first()? {
                    b'-' => (-1, &e[1..]),
                    b'+' => (1, &e[1..]),
                    _ => (1, e),
                };
                if ds.is_empty() || !ds.bytes().all(|b| b.is_ascii_digit()) || ds.len() > 3 {
                    return None;
                }
                exp10 += sign * ds.parse::<i32>().ok()?;
                Format::DecimalExponent
            }
        };
        // nanos = digits * 10^(exp10 + 9) * mul, rounded up past nano.
        let digits = digits.trim_start_matches('0');
        let mut value: i128 = 0;
        for (i, b) in digits.bytes().enumerate() {
            // Digits beyond what i128 holds only matter for absurd values.
            if i >= 36 {
                return None;
            }
            value = value * 10 + i128::from(b - b'0');
        }
        let shift = exp10 + 9;
        let nanos = if shift >= 0 {
            let f = 10i128.checked_pow(shift as u32)?;
            value.checked_mul(f)?.checked_mul(mul)?
        } else {
            let f = 10i128.checked_pow((-shift) as u32)?;
            let v = value.checked_mul(mul)?;
            // Round up (away from zero, as Kubernetes rounds a quantity's
            // precision up).
            v / f + i128::from(v % f != 0)
        };
        Some(Quantity {
            nanos: if neg { -nanos } else { nanos },
            format,
        })
    }

    /// Reads a JSON value: a quantity string, or a number.
    pub fn from_json(v: &serde_json::Value) -> Option<Quantity> {
        match v {
            serde_json::Value::String(s) => Quantity::parse(s),
            serde_json::Value::Number(n) => Quantity::parse(&n.to_string()),
            _ => None,
        }
    }

    /// The value as a float (CEL's `asApproximateFloat`).
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// `self + other`, in `self`'s format (in `other`'s when `self` is
    /// zero), as `Quantity.Add` keeps them.
    pub fn add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos + other.nanos,
            format: if self.nanos == 0 {
                other.format
            } else {
                self.format
            },
        }
    }

    /// `self - other`, in `self`'s format (in `other`'s when `self` is zero).
    pub fn sub(self, other: Quantity) -> Quantity {
        self.add(Quantity {
            nanos: -other.nanos,
            format: other.format,
        })
    }

    /// The larger of two, in its own format.
    pub fn max(self, other: Quantity) -> Quantity {
        if other.nanos > self.nanos {
            other
        } else {
            self
        }
    }

    /// Rounded up to a whole unit (a PVC's storage is counted in whole
    /// bytes).
    pub fn round_up_to_units(self) -> Quantity {
        let r = self.nanos.rem_euclid(NANO);
        Quantity {
            nanos: if r == 0 {
                self.nanos
            } else {
                self.nanos + NANO - r
            },
            format: self.format,
        }
    }
}

/// Suffixes of the decimal format by power of 1000, from nano to exa.
const DECIMAL: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
const BINARY: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

impl fmt::Display for Quantity {
    /// The canonical form (`Quantity.String()`): the largest suffix that
    /// keeps the number whole; a binary quantity that is not a whole
    /// number of units, or smaller than 1024, prints in decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let nano = NANO as u128;
        if self.format == Format::BinarySI && abs % nano == 0 && abs / nano >= 1024 {
            let mut units = abs / nano;
            let mut k = 0;
            while k + 1 < BINARY.len() && units % 1024 == 0 {
                units /= 1024;
                k += 1;
            }
            return write!(f, "{sign}{units}{}", BINARY[k]);
        }
        // The largest power of 1000 (from nano) that divides the value.
        let mut mantissa = abs;
        let mut k = 0; // power of 1000 above nano
        while k + 1 < DECIMAL.len() && mantissa % 1000 == 0 {
            mantissa /= 1000;
            k += 1;
        }
        if self.format == Format::DecimalExponent {
            let e = 3 * (k as i32) - 9;
            return if e == 0 {
                write!(f, "{sign}{mantissa}")
            } else {
                write!(f, "{sign}{mantissa}e{e}")
            };
        }
        write!(f, "{sign}{mantissa}{}", DECIMAL[k])
    }
}

#[cfg(test)]
mod tests {
    use super::Quantity;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s} parses"))
    }

    #[test]
    fn quantities_print_in_their_canonical_form() {
        for (input, out) in [
            ("0", "0"),
            ("1", "1"),
            ("500m", "500m"),
            ("1.5", "1500m"),
            ("0.5", "500m"),
            ("1000m", "1"),
            ("2000", "2k"),
            ("1500", "1500"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("100", "100"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("1M", "1M"),
            ("1G", "1G"),
            ("-2", "-2"),
            ("1n", "1n"),
            ("0.1n", "1n"),
            ("512", "512"),
            ("1Ki", "1Ki"),
        ] {
            assert_eq!(q(input).to_string(), out, "{input}");
        }
    }

    #[test]
    fn sums_are_exact_and_keep_the_first_format() {
        let sum = q("100m").add(q("200m")).add(q("700m"));
        assert_eq!(sum.to_string(), "1");
        assert_eq!(q("1Gi").add(q("512Mi")).to_string(), "1536Mi");
        assert_eq!(Quantity::ZERO.add(q("1Gi")).to_string(), "1Gi");
        assert_eq!(q("1Gi").sub(q("1Gi")).to_string(), "0");
        assert!(q("1Gi") > q("1G"));
        assert_eq!(q("1k"), q("1000"));
        assert_eq!(q("1.5").round_up_to_units().to_string(), "2");
    }

    #[test]
    fn what_is_not_a_quantity_is_refused() {
        for bad in ["", "m", "1x", "1.2.3", "abc", "1e", "--1", "1 Gi"] {
            assert!(Quantity::parse(bad).is_none(), "{bad}");
        }
    }
}
