//! Exact amounts, and the text Kubernetes writes for them.
//!
//! An [`Amount`] is what `resource.Quantity` keeps once it has parsed: a value
//! counted in nano-units (rounded away from zero to the nearest nano, as
//! kube rounds up what it cannot hold), and the *format* its suffix named.
//! The format decides how the value is written back: kube's canonical form,
//! which is what every error message and every stored object of
//! kube-apiserver shows (`1.5Gi` is written `1536Mi`, `0.5` is `500m`).
//!
//! # Guarantees
//! - Adding, subtracting and comparing are exact (`i128` nanos: ±1.7 × 10²⁹
//!   units, far past any resource amount); a result that would not fit is
//!   `None`, never a wrapped value.
//! - [`Amount`]'s `Display` is kube's `Quantity.String()`: the largest
//!   suffix that loses no precision and leaves no fraction, in the format of
//!   the suffix the amount was written with.
//!
//! # Caveat
//! kube caps binary-suffixed quantities at 2⁶³−1; an amount here is not
//! capped, so past `8Ei` the two differ. No resource is that large.

use std::cmp::Ordering;
use std::fmt;

use crate::Quantity;

/// Nanos in one unit.
const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// How kube writes a quantity back: in the family of the suffix it was parsed
/// with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// An SI prefix or none (`500m`, `2`, `3k`): powers of 1000.
    DecimalSi,
    /// A binary prefix (`128Mi`): powers of 1024, for whole numbers of 1024 or more.
    BinarySi,
    /// A decimal exponent (`12e6`).
    DecimalExponent,
}

/// An exact amount and the format it is written in; see the module doc.
///
/// Equality and order compare the values only, as kube's `Quantity.Cmp`
/// does: `1Ki` equals `1024`.
#[derive(Debug, Clone, Copy)]
pub struct Amount {
    nanos: i128,
    format: Format,
}

impl PartialEq for Amount {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Amount {}

impl PartialOrd for Amount {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Amount {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Amount {
    /// Zero, written `0`.
    pub const ZERO: Amount = Amount {
        nanos: 0,
        format: Format::DecimalSi,
    };

    /// `units` whole units in `format` (kube's `NewQuantity`).
    pub fn from_units(units: i64, format: Format) -> Amount {
        Amount {
            nanos: i128::from(units) * NANOS_PER_UNIT,
            format,
        }
    }

    /// `millis` thousandths, written as a decimal SI quantity (kube's `NewMilliQuantity`).
    pub fn from_millis(millis: i64) -> Amount {
        Amount {
            nanos: i128::from(millis) * 1_000_000,
            format: Format::DecimalSi,
        }
    }

    /// The value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The value in thousandths, rounded away from zero (kube's `MilliValue`).
    pub fn millis(&self) -> i128 {
        div_away_from_zero(self.nanos, 1_000_000)
    }

    /// The value in units, rounded away from zero (kube's `Value`).
    pub fn units(&self) -> i128 {
        div_away_from_zero(self.nanos, NANOS_PER_UNIT)
    }

    /// The format it is written in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the value is 0.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// `self + other`, in `self`'s format unless `self` is zero (kube's `Add`, whose
    /// zero receiver takes the other's format); `None` past `i128`.
    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        let format = if self.nanos == 0 {
            other.format
        } else {
            self.format
        };
        Some(Amount {
            nanos: self.nanos.checked_add(other.nanos)?,
            format,
        })
    }

    /// `self - other`, with [`Amount::checked_add`]'s format rule.
    pub fn checked_sub(self, other: Amount) -> Option<Amount> {
        self.checked_add(Amount {
            nanos: other.nanos.checked_neg()?,
            format: other.format,
        })
    }
}

impl<'a> Quantity<'a> {
    /// The exact amount, rounded away from zero to a nano-unit as kube rounds;
    /// `None` for one too large for an [`Amount`] (past about 1.7 × 10²⁹ units).
    pub fn amount(&self) -> Option<Amount> {
        let format = match (self.exp2, self.suffix_is_exponent) {
            (0, true) => Format::DecimalExponent,
            (0, false) => Format::DecimalSi,
            _ => Format::BinarySi,
        };
        let digits = format!("{}{}", self.integer, self.fraction);
        let digits = digits.trim_start_matches('0');
        let mut nanos: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        nanos = nanos.checked_mul(1i128.checked_shl(self.exp2)?)?;
        let fraction_len = i32::try_from(self.fraction.len()).ok()?;
        let shift = self.exp10.checked_add(9)?.checked_sub(fraction_len)?;
        let power = 10i128.checked_pow(shift.unsigned_abs())?;
        nanos = if shift >= 0 {
            nanos.checked_mul(power)?
        } else {
            div_away_from_zero(nanos, power)
        };
        if self.minus {
            nanos = -nanos;
        }
        // kube writes a binary quantity below one unit in decimal SI.
        let format = if format == Format::BinarySi && nanos.abs() < NANOS_PER_UNIT && nanos != 0 {
            Format::DecimalSi
        } else {
            format
        };
        Some(Amount { nanos, format })
    }
}

/// `n / d` rounded away from zero (`d > 0`).
fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let q = n / d;
    match n % d {
        0 => q,
        _ if n > 0 => q + 1,
        _ => q - 1,
    }
}

impl fmt::Display for Amount {
    /// kube's canonical form (`Quantity.String()`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let binary = self.format == Format::BinarySi
            && self.nanos.abs() >= 1024 * NANOS_PER_UNIT
            && self.nanos % NANOS_PER_UNIT == 0;
        if binary {
            let mut units = self.nanos / NANOS_PER_UNIT;
            let mut power = 0;
            while power < BINARY_SUFFIXES.len() - 1 && units % 1024 == 0 {
                units /= 1024;
                power += 1;
            }
            return write!(f, "{units}{}", BINARY_SUFFIXES[power]);
        }
        // Decimal: the digits without trailing zeros, the exponent then lowered to a
        // multiple of three.
        let mut mantissa = self.nanos;
        let mut exponent: i32 = -9;
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            mantissa *= 10;
            exponent -= 1;
        }
        let si = DECIMAL_SUFFIXES
            .iter()
            .find(|(e, _)| *e == exponent)
            .map(|(_, s)| *s);
        match (self.format, si) {
            (Format::DecimalExponent, _) | (_, None) if exponent != 0 => {
                write!(f, "{mantissa}e{exponent}")
            }
            (_, si) => write!(f, "{mantissa}{}", si.unwrap_or("")),
        }
    }
}

/// The binary suffixes by power of 1024.
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The SI suffixes by power of ten.
const DECIMAL_SUFFIXES: [(i32, &str); 10] = [
    (-9, "n"),
    (-6, "u"),
    (-3, "m"),
    (0, ""),
    (3, "k"),
    (6, "M"),
    (9, "G"),
    (12, "T"),
    (15, "P"),
    (18, "E"),
];
