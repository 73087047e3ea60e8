#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

fn value(s: &str) -> Option<f64> {
    Quantity::parse(s).ok().map(|q| q.to_f64())
}

#[test]
fn accepts_the_forms_kubernetes_accepts() {
    assert_eq!(value("500m"), Some(0.5));
    assert_eq!(value("1Gi"), Some(1073741824.0));
    assert_eq!(value("2"), Some(2.0));
    assert_eq!(value("1.5"), Some(1.5));
    assert_eq!(value("2e3"), Some(2000.0));
    assert_eq!(value("-1"), Some(-1.0));
    assert_eq!(value("128974848"), Some(128974848.0));
    assert_eq!(value("1E"), Some(1e18));
    assert_eq!(value("1E3"), Some(1000.0));
    assert_eq!(value(".5k"), Some(500.0));
    assert_eq!(value("+2."), Some(2.0));
}

#[test]
fn refuses_garbage() {
    for bad in [
        "", "abc", "1.2.3", "1Xi", "m", ".", "1 Gi", "1gi", "1e", "--1", "5x", "1Zi", " 1", "1 ",
    ] {
        assert_eq!(Quantity::parse(bad), Err(ParseError::Syntax), "{bad}");
    }
}

#[test]
fn exponents_past_thirty_are_out_of_range() {
    for far in ["1e31", "1e99", "1E-31"] {
        assert_eq!(
            Quantity::parse(far),
            Err(ParseError::ExponentOutOfRange),
            "{far}"
        );
    }
    assert!(Quantity::parse("1e30").is_ok());
    assert!(Quantity::parse("1E-30").is_ok());
}

#[test]
fn the_syntax_error_quotes_kubernetes_regular_expression() {
    assert_eq!(
        ParseError::Syntax.to_string(),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
}

#[test]
fn a_quantity_keeps_its_digits_and_its_suffix_powers() {
    let q = Quantity::parse("-012.50m").unwrap();
    assert_eq!(q.integer_digits(), "012");
    assert_eq!(q.fraction_digits(), "50");
    assert_eq!((q.exp10(), q.exp2()), (-3, 0));
    assert!(q.is_negative());
    let ki = Quantity::parse("3Ki").unwrap();
    assert_eq!((ki.exp10(), ki.exp2()), (0, 10));
}

#[test]
fn minus_zero_is_zero_not_negative() {
    let q = Quantity::parse("-0.00").unwrap();
    assert!(q.is_zero());
    assert!(!q.is_negative());
}

#[test]
fn si_scales_are_the_nearest_floats_of_their_powers() {
    let cases: [(&str, f64); 9] = [
        ("1n", 1e-9),
        ("1u", 1e-6),
        ("1m", 1e-3),
        ("1k", 1e3),
        ("1M", 1e6),
        ("1G", 1e9),
        ("1T", 1e12),
        ("1P", 1e15),
        ("1E", 1e18),
    ];
    for (s, want) in cases {
        assert_eq!(value(s).map(f64::to_bits), Some(want.to_bits()), "{s}");
    }
}

/// A suffix Kubernetes accepts, with its powers of ten and two.
fn suffix() -> impl Strategy<Value = (String, i32, u32)> {
    let fixed = prop::sample::select(vec![
        ("", 0, 0),
        ("n", -9, 0),
        ("u", -6, 0),
        ("m", -3, 0),
        ("k", 3, 0),
        ("M", 6, 0),
        ("G", 9, 0),
        ("T", 12, 0),
        ("P", 15, 0),
        ("E", 18, 0),
        ("Ki", 0, 10),
        ("Mi", 0, 20),
        ("Gi", 0, 30),
        ("Ti", 0, 40),
        ("Pi", 0, 50),
        ("Ei", 0, 60),
    ])
    .prop_map(|(s, e10, e2)| (s.to_owned(), e10, e2));
    let exponent = (prop::bool::ANY, -30i32..=30)
        .prop_map(|(upper, e)| (format!("{}{e}", if upper { 'E' } else { 'e' }), e, 0));
    prop_oneof![fixed, exponent]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn every_well_formed_quantity_parses_to_its_parts(
        sign in prop::sample::select(vec!["", "+", "-"]),
        integer in "[0-9]{0,30}",
        point in prop::bool::ANY,
        fraction in "[0-9]{0,30}",
        (suffix, e10, e2) in suffix(),
    ) {
        let fraction = if point { fraction } else { String::new() };
        prop_assume!(!integer.is_empty() || !fraction.is_empty());
        let number = format!("{sign}{integer}{}{fraction}", if point { "." } else { "" });
        let text = format!("{number}{suffix}");
        let q = Quantity::parse(&text).unwrap();
        prop_assert_eq!(q.integer_digits(), integer.as_str());
        prop_assert_eq!(q.fraction_digits(), fraction.as_str());
        prop_assert_eq!((q.exp10(), q.exp2()), (e10, e2));
        let zero = integer.bytes().chain(fraction.bytes()).all(|d| d == b'0');
        prop_assert_eq!(q.is_negative(), sign == "-" && !zero);
        let want = number.parse::<f64>().unwrap() * 10f64.powi(e10) * 2f64.powi(e2 as i32);
        prop_assert_eq!(q.to_f64().to_bits(), want.to_bits());
    }

    #[test]
    fn nothing_outside_the_pattern_is_accepted(text in "[-+0-9.eEinumkKMGTPZx ]{0,12}") {
        if let Ok(q) = Quantity::parse(&text) {
            prop_assert!(text.chars().all(|c| "+-0123456789.eEinumkKMGTP".contains(c)), "{text}");
            prop_assert!(!(q.integer_digits().is_empty() && q.fraction_digits().is_empty()));
        }
        if text.contains(['Z', 'x', ' ']) {
            prop_assert_eq!(Quantity::parse(&text), Err(ParseError::Syntax));
        }
    }
}
