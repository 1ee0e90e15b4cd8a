//! JSON numbers compared and divided exactly, as the decimals they were written as.
//!
//! serde_json gives an integer as `u64`/`i64` (exact) and anything else as the `f64` nearest
//! to the text. A fixed tolerance on `f64` arithmetic gets `multipleOf` wrong both ways
//! (`{"multipleOf": 1}` took `1e-10`; `0.3` is not `3 × 0.1` in binary), so:
//! - an integer stays an integer (`i128`);
//! - a float is read back as the shortest decimal that parses to the same `f64` (Rust's
//!   `{:e}` formatting is exactly that). For a number written with at most 15 significant
//!   digits that decimal is the number as written, so `multipleOf`, the bounds, `enum` and
//!   `const` see the value the sender meant. A number written with more digits than an
//!   `f64` holds (`0.1000000000000000055`) is that shortest decimal of its nearest `f64`.
//!
//! Comparisons need no decimal expansion: two floats compare as floats (rounding to nearest
//! is monotonic, so the order of the floats is the order of their decimals), two integers
//! as integers, and an integer against a float through the float's integral part.

use std::cmp::Ordering;
use std::io::Write;

use serde_json::Number;

/// A JSON number, exactly as the validator compares it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub(super) fn of(n: &Number) -> Num {
        if let Some(i) = n.as_i64() {
            Num::Int(i128::from(i))
        } else if let Some(u) = n.as_u64() {
            Num::Int(i128::from(u))
        } else {
            // Without serde_json's arbitrary_precision every number is one of the three.
            let f = n.as_f64().unwrap_or(f64::NAN);
            Num::Float(f)
        }
    }

    /// Whether the number has no fractional part (JSON Schema's `integer`: `1.0` is one).
    pub(super) fn is_integer(self) -> bool {
        match self {
            Num::Int(_) => true,
            Num::Float(f) => f.is_finite() && f.fract() == 0.0,
        }
    }

    /// The exact order of two numbers (`None` only for a NaN, which JSON cannot carry).
    pub(super) fn cmp(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b),
            (Num::Int(a), Num::Float(b)) => int_cmp_float(a, b),
            (Num::Float(a), Num::Int(b)) => int_cmp_float(b, a).map(Ordering::reverse),
        }
    }

    pub(super) fn eq(self, other: Num) -> bool {
        self.cmp(other) == Some(Ordering::Equal)
    }

    /// Whether `self` is an integer multiple of `divisor` (which is positive), exactly.
    pub(super) fn is_multiple_of(self, divisor: &Decimal) -> bool {
        if let (Num::Int(x), Some(m)) = (self, divisor.as_int) {
            return x % m == 0;
        }
        Decimal::of(self).is_some_and(|x| x.is_multiple_of(divisor))
    }
}

/// `a` against `b`, exactly. Every integral `f64` below 2^127 in magnitude is an `i128`.
fn int_cmp_float(a: i128, b: f64) -> Option<Ordering> {
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0; // 2^127
    if b.is_nan() {
        return None;
    }
    if b >= LIMIT {
        return Some(Ordering::Less);
    }
    if b < -LIMIT {
        return Some(Ordering::Greater);
    }
    let whole = b.trunc();
    // `whole` is integral and in range, so the cast is exact.
    match a.cmp(&(whole as i128)) {
        Ordering::Equal => 0.0f64.partial_cmp(&(b - whole)),
        other => Some(other),
    }
}

/// A nonzero magnitude `digits × 10^exp` with no trailing zeros in `digits`, or zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Decimal {
    digits: u128,
    exp: i32,
    /// The value as an integer, when it is one that fits (the fast path of `multipleOf`).
    as_int: Option<i128>,
}

impl Decimal {
    /// The magnitude of a number as a decimal; `None` for a non-finite float.
    pub(super) fn of(n: Num) -> Option<Decimal> {
        match n {
            Num::Int(i) => Some(Decimal::from_parts(i.unsigned_abs(), 0)),
            Num::Float(f) if f.is_finite() => {
                // Shortest round-trip digits, as `d.ddde±x` (at most 17 digits and a 4-digit
                // exponent), written on the stack: this runs for every checked float.
                let mut buf = [0u8; 40];
                let mut w = &mut buf[..];
                write!(w, "{:e}", f.abs()).ok()?;
                let len = 40 - w.len();
                let text = std::str::from_utf8(&buf[..len]).ok()?;
                let (mantissa, exp) = text.split_once('e')?;
                let exp: i32 = exp.parse().ok()?;
                let mut digits: u128 = 0;
                let mut fraction_digits = 0i32;
                let mut after_point = false;
                for b in mantissa.bytes() {
                    match b {
                        b'.' => after_point = true,
                        b'0'..=b'9' => {
                            digits = digits * 10 + u128::from(b - b'0');
                            fraction_digits += i32::from(after_point);
                        }
                        _ => return None,
                    }
                }
                Some(Decimal::from_parts(digits, exp - fraction_digits))
            }
            Num::Float(_) => None,
        }
    }

    fn from_parts(mut digits: u128, mut exp: i32) -> Decimal {
        if digits == 0 {
            return Decimal {
                digits: 0,
                exp: 0,
                as_int: Some(0),
            };
        }
        while digits % 10 == 0 {
            digits /= 10;
            exp += 1;
        }
        let as_int = match exp {
            0..=38 => 10u128
                .checked_pow(exp as u32)
                .and_then(|p| p.checked_mul(digits))
                .and_then(|v| i128::try_from(v).ok()),
            _ => None,
        };
        Decimal {
            digits,
            exp,
            as_int,
        }
    }

    pub(super) fn is_zero(&self) -> bool {
        self.digits == 0
    }

    /// `self = a·10^p` is a multiple of `m = b·10^q` (b > 0) iff `a·10^(p-q) / b` is an
    /// integer. With `d = p - q < 0` it never is (for a ≠ 0): `a` has no factor 10, so it
    /// has no factor `b·10^-d`. With `d ≥ 0`, the part of `b` that `a` does not cancel must
    /// divide `10^d`, so be `2^i·5^j` with `i, j ≤ d`.
    fn is_multiple_of(&self, m: &Decimal) -> bool {
        if self.digits == 0 {
            return true;
        }
        if m.digits == 0 {
            return false;
        }
        let d = i64::from(self.exp) - i64::from(m.exp);
        if d < 0 {
            return false;
        }
        let mut rest = m.digits / gcd(self.digits, m.digits);
        for prime in [2u128, 5] {
            let mut count = 0i64;
            while rest % prime == 0 {
                rest /= prime;
                count += 1;
            }
            if count > d {
                return false;
            }
        }
        rest == 1
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(clippy::needless_pass_by_value)] // json! literals read best passed by value
    fn num(v: serde_json::Value) -> Num {
        Num::of(v.as_number().unwrap())
    }

    #[allow(clippy::needless_pass_by_value)]
    fn multiple(x: serde_json::Value, m: serde_json::Value) -> bool {
        num(x).is_multiple_of(&Decimal::of(num(m)).unwrap())
    }

    #[test]
    fn multiple_of_is_exact_for_decimals() {
        assert!(!multiple(json!(1e-10), json!(1)));
        assert!(multiple(json!(0.3), json!(0.1)));
        assert!(multiple(json!(4.02), json!(0.01)));
        assert!(!multiple(json!(4.021), json!(0.01)));
        assert!(multiple(json!(1e300), json!(1e-300)));
        assert!(!multiple(json!(1e-300), json!(1e300)));
        assert!(!multiple(json!(1e20), json!(3))); // 10^20 ≡ 1 (mod 3)
        assert!(multiple(json!(1e20), json!(5)));
        assert!(multiple(json!(7.5), json!(2.5)));
        assert!(!multiple(json!(7), json!(3)));
        assert!(multiple(json!(-9), json!(3)));
        assert!(multiple(json!(0), json!(0.7)));
        assert!(multiple(json!(u64::MAX), json!(5)));
        assert!(!multiple(json!(u64::MAX), json!(2)));
        assert!(multiple(json!(12.0), json!(4)));
    }

    #[test]
    fn comparisons_are_exact_across_integers_and_floats() {
        let big = num(json!(9_007_199_254_740_993u64)); // 2^53 + 1: not an f64
        let f = num(json!(9_007_199_254_740_992.0));
        assert_eq!(big.cmp(f), Some(Ordering::Greater));
        assert_eq!(f.cmp(big), Some(Ordering::Less));
        assert!(num(json!(1)).eq(num(json!(1.0))));
        assert_eq!(num(json!(-1)).cmp(num(json!(-0.5))), Some(Ordering::Less));
        assert_eq!(num(json!(2)).cmp(num(json!(1e300))), Some(Ordering::Less));
        assert!(num(json!(3.0)).is_integer());
        assert!(!num(json!(3.5)).is_integer());
    }
}
