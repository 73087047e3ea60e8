//! Kubernetes resource quantities (`500m`, `1Gi`, `2e3`): parse only as far as
//! validation needs, to tell valid from invalid and compare requests with limits.

/// The regular expression Kubernetes quotes when a quantity does not parse.
pub(crate) const QUANTITY_PATTERN: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// The quantity's value in base units, or `None` if it is not a valid quantity.
pub(crate) fn parse(s: &str) -> Option<f64> {
    let num_end = s
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && (c == '+' || c == '-'))))
        .map_or(s.len(), |(i, _)| i);
    let (number, suffix) = s.split_at(num_end);
    let digits = number.trim_start_matches(['+', '-']);
    if digits.is_empty() || digits == "." || digits.matches('.').count() > 1 {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..].parse().ok()?;
            if !(-30..=30).contains(&e) {
                return None;
            }
            10f64.powi(e)
        }
        _ => return None,
    };
    Some(value * scale)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn accepts_the_forms_kubernetes_accepts() {
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("1Gi"), Some(1073741824.0));
        assert_eq!(parse("2"), Some(2.0));
        assert_eq!(parse("1.5"), Some(1.5));
        assert_eq!(parse("2e3"), Some(2000.0));
        assert_eq!(parse("-1"), Some(-1.0));
        assert_eq!(parse("128974848"), Some(128974848.0));
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            "", "abc", "1.2.3", "1Xi", "m", ".", "1 Gi", "1gi", "1e", "--1",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
