//! Kubernetes resource quantities (`500m`, `1.5`, `128Mi`, `2e3`), parsed exactly.
//!
//! # Contract
//!
//! - [`Quantity::parse`] accepts what Kubernetes writes in `resources.requests`
//!   and `limits`: an optional sign, decimal digits with at most one `.` (and
//!   at least one digit), then one suffix: none, an SI prefix (`n u m k M G T
//!   P E`), a binary one (`Ki Mi Gi Ti Pi Ei`) or a decimal exponent (`e3`,
//!   `E-2`). Anything else is a [`ParseError`]; nothing is trimmed.
//! - **Exact.** Parsing rounds nothing: a [`Quantity`] is its sign, its digits
//!   as written, and the powers of ten and two its suffix stands for. Each
//!   caller chooses how to round: the API shim compares in `f64`
//!   ([`Quantity::to_f64`]), procurement converts into Mesos' fixed-point
//!   thousandths, rounding up.
//! - [`Quantity::amount`] is the exact value as kube keeps it (rounded to a
//!   nano-unit), with the arithmetic and the canonical text (`1536Mi` for
//!   `1.5Gi`) that quota and limit checks need: see [`Amount`].
//! - Exponents outside ±30 are refused ([`ParseError::ExponentOutOfRange`]):
//!   no resource amount lies there, and the bound keeps every caller's
//!   arithmetic small.
//!
//! This crate depends on nothing of mesopod, so both the API shim (which
//! knows nothing of Mesos) and procurement (which stays pure and light) can
//! use it.
//!
//! # Use
//! ```
//! use quantity::Quantity;
//! let q = Quantity::parse("1.5Gi")?;
//! assert_eq!((q.integer_digits(), q.fraction_digits()), ("1", "5"));
//! assert_eq!((q.exp10(), q.exp2()), (0, 30));
//! assert_eq!(q.to_f64(), 1.5 * 1024.0 * 1024.0 * 1024.0);
//! # Ok::<(), quantity::ParseError>(())
//! ```

mod amount;

pub use amount::{Amount, Format};

/// The regular expression Kubernetes quotes when a quantity does not parse.
pub const PATTERN: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// The largest decimal exponent (`e30`) a quantity may carry, and the
/// negation of the smallest.
const MAX_EXPONENT: i32 = 30;

/// Why a text is not a Kubernetes quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not the quantity syntax: no digits, two points, an unknown suffix.
    #[error("quantities must match the regular expression '{PATTERN}'")]
    Syntax,
    /// A decimal exponent (`e31`, `E-40`) outside ±30.
    #[error("the exponent of a quantity must lie between -30 and 30")]
    ExponentOutOfRange,
}

/// A parsed quantity: `sign × integer.fraction × 10^exp10 × 2^exp2`, exactly
/// as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity<'a> {
    /// The number with its sign, as written (`-1.5` of `-1.5Gi`).
    number: &'a str,
    /// Whether the sign is `-`.
    minus: bool,
    /// Digits before the point (may be empty, as in `.5`).
    integer: &'a str,
    /// Digits after the point (may be empty).
    fraction: &'a str,
    /// The suffix's power of ten.
    exp10: i32,
    /// The suffix's power of two.
    exp2: u32,
    /// Whether the suffix is a decimal exponent (`e3`), not an SI prefix.
    suffix_is_exponent: bool,
}

impl<'a> Quantity<'a> {
    /// Parses `text`, which must be a quantity and nothing else.
    ///
    /// # Errors
    /// [`ParseError::Syntax`] for anything [`PATTERN`]'s grammar does not
    /// describe, [`ParseError::ExponentOutOfRange`] for an exponent past ±30.
    pub fn parse(text: &'a str) -> Result<Self, ParseError> {
        let num_end = text
            .char_indices()
            .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '+' || c == '-'))))
            .map_or(text.len(), |(i, _)| i);
        let (number, suffix) = text.split_at(num_end);
        let minus = number.starts_with('-');
        let digits = number.strip_prefix(['+', '-']).unwrap_or(number);
        let (integer, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if integer.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(ParseError::Syntax);
        }
        let (exp10, exp2) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            // `E` alone is exa (above); `E` or `e` with a number is an exponent.
            exp if exp.starts_with(['e', 'E']) => {
                let e: i32 = exp[1..].parse().map_err(|_| ParseError::Syntax)?;
                if !(-MAX_EXPONENT..=MAX_EXPONENT).contains(&e) {
                    return Err(ParseError::ExponentOutOfRange);
                }
                (e, 0)
            }
            _ => return Err(ParseError::Syntax),
        };
        Ok(Quantity {
            number,
            minus,
            integer,
            fraction,
            exp10,
            exp2,
            suffix_is_exponent: suffix.len() > 1 && suffix.starts_with(['e', 'E']),
        })
    }

    /// Whether the quantity is below zero: a `-` sign and a digit other than 0
    /// (so `-0` is not negative).
    pub fn is_negative(&self) -> bool {
        self.minus && !self.is_zero()
    }

    /// Whether every digit is 0.
    pub fn is_zero(&self) -> bool {
        self.integer
            .bytes()
            .chain(self.fraction.bytes())
            .all(|d| d == b'0')
    }

    /// The ASCII digits before the point, as written (`"12"` of `12.50m`; may be empty).
    pub fn integer_digits(&self) -> &'a str {
        self.integer
    }

    /// The ASCII digits after the point, as written (`"50"` of `12.50m`; may be empty).
    pub fn fraction_digits(&self) -> &'a str {
        self.fraction
    }

    /// The power of ten the suffix multiplies by (`-3` for `m`, `3` for `e3`).
    pub fn exp10(&self) -> i32 {
        self.exp10
    }

    /// The power of two the suffix multiplies by (`10` for `Ki`, `60` for `Ei`).
    pub fn exp2(&self) -> u32 {
        self.exp2
    }

    /// The value in base units as the nearest `f64`-ish: the number as `f64`
    /// times the suffix's scale (very long or very large numbers lose
    /// precision or become infinite; good for comparing, not for accounting).
    pub fn to_f64(&self) -> f64 {
        // The number was checked above: digits with at most one point,
        // which `f64`'s parser accepts (`1.`, `.5` included).
        let value: f64 = self.number.parse().unwrap_or(f64::NAN);
        // At most one factor differs from 1. Powers of two are exact, and so
        // are the SI prefixes' powers of ten (the nearest float, as a literal
        // `1e-9` is); only far exponents (`e25`) carry `powi`'s rounding.
        let scale = 10f64.powi(self.exp10) * 2f64.powi(self.exp2 as i32);
        value * scale
    }
}

#[cfg(test)]
mod tests;
