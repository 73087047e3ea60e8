//! `IntOrString` values scaled against a total (Go's
//! `intstr.GetScaledValueFromIntOrPercent`): `3` is 3, `"25%"` of 10 is 2.5,
//! rounded up or down as the caller says.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// An int-or-percent the controller cannot use. Validation refuses these
/// at create, but a controller must still not panic on what is stored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IntOrPercentError {
    /// A string without a trailing `%`.
    #[error("invalid value for IntOrString: invalid type: string is not a percentage: {0:?}")]
    NotAPercentage(String),
    /// A `%` string whose number does not parse.
    #[error("invalid value for IntOrString: invalid value {0:?}")]
    InvalidPercent(String),
    /// A negative value (surge or unavailability cannot be negative).
    #[error("invalid value for IntOrString: {0:?} must not be negative")]
    Negative(String),
}

/// Scale `value` against `total`: an int as is, a percentage of `total`
/// rounded up (`round_up`) or down. Results past `i32::MAX` saturate.
///
/// # Errors
/// See [`IntOrPercentError`].
pub fn scaled_value(
    value: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    match value {
        IntOrString::Int(n) if *n < 0 => Err(IntOrPercentError::Negative(n.to_string())),
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err(IntOrPercentError::NotAPercentage(s.clone()));
            };
            let percent: i64 = number
                .parse()
                .map_err(|_| IntOrPercentError::InvalidPercent(s.clone()))?;
            if percent < 0 {
                return Err(IntOrPercentError::Negative(s.clone()));
            }
            // Exact integer arithmetic: Go computes ceil/floor(v*total/100)
            // in float64, which is exact for every value that fits here.
            let product = i128::from(percent) * i128::from(total.max(0));
            let scaled = if round_up {
                (product + 99) / 100
            } else {
                product / 100
            };
            Ok(i32::try_from(scaled).unwrap_or(i32::MAX))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn percentages_round_as_asked() {
        assert_eq!(scaled_value(&s("25%"), 10, true), Ok(3));
        assert_eq!(scaled_value(&s("25%"), 10, false), Ok(2));
        assert_eq!(scaled_value(&s("25%"), 1, true), Ok(1));
        assert_eq!(scaled_value(&s("25%"), 1, false), Ok(0));
        assert_eq!(scaled_value(&s("100%"), 7, false), Ok(7));
        assert_eq!(scaled_value(&s("0%"), 7, true), Ok(0));
        assert_eq!(scaled_value(&s("30%"), 0, true), Ok(0));
    }

    #[test]
    fn ints_are_taken_as_is() {
        assert_eq!(scaled_value(&IntOrString::Int(4), 10, true), Ok(4));
        assert_eq!(scaled_value(&IntOrString::Int(0), 10, false), Ok(0));
    }

    #[test]
    fn malformed_values_are_errors_not_panics() {
        assert_eq!(
            scaled_value(&s("abc%"), 10, true),
            Err(IntOrPercentError::InvalidPercent("abc%".into()))
        );
        assert_eq!(
            scaled_value(&s("abc%"), 10, true)
                .expect_err("malformed")
                .to_string(),
            "invalid value for IntOrString: invalid value \"abc%\""
        );
        assert_eq!(
            scaled_value(&s("25"), 10, true),
            Err(IntOrPercentError::NotAPercentage("25".into()))
        );
        assert_eq!(
            scaled_value(&s("-5%"), 10, true),
            Err(IntOrPercentError::Negative("-5%".into()))
        );
        assert_eq!(
            scaled_value(&IntOrString::Int(-1), 10, true),
            Err(IntOrPercentError::Negative("-1".into()))
        );
        assert!(scaled_value(&s("%"), 10, true).is_err());
    }

    #[test]
    fn huge_percentages_saturate() {
        assert_eq!(
            scaled_value(&s("9223372036854775807%"), i32::MAX, true),
            Ok(i32::MAX)
        );
    }
}
