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

fn canonical(s: &str) -> String {
    Quantity::parse(s).unwrap().amount().unwrap().to_string()
}

#[test]
fn amounts_are_written_in_kubes_canonical_form() {
    // Each pair: what was written, what kube-apiserver gives back (`Quantity.String()`).
    for (written, kube) in [
        ("0", "0"),
        ("0Mi", "0"),
        ("1", "1"),
        ("1.5", "1500m"),
        ("0.5", "500m"),
        ("1000m", "1"),
        ("100m", "100m"),
        ("0.1m", "100u"),
        ("0.0001n", "1n"),
        ("1Gi", "1Gi"),
        ("1.5Gi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("1024Ki", "1Mi"),
        ("1000Ki", "1000Ki"),
        ("0.5Ki", "512"),
        ("1.5Ki", "1536"),
        ("1.1Ki", "1126400m"),
        ("1024", "1024"),
        ("128974848", "128974848"),
        ("129e6", "129e6"),
        ("1000e3", "1e6"),
        ("12e2", "1200"),
        ("2e-3", "2e-3"),
        ("1E", "1E"),
        ("1000P", "1E"),
        ("3000", "3k"),
        ("1500k", "1500k"),
        ("-1", "-1"),
        ("-0.5", "-500m"),
        ("-1.5Gi", "-1536Mi"),
        ("+2.", "2"),
        ("007", "7"),
    ] {
        assert_eq!(canonical(written), kube, "{written}");
    }
}

#[test]
fn amounts_compare_by_value_whatever_their_format() {
    let a = |s: &str| Quantity::parse(s).unwrap().amount().unwrap();
    assert_eq!(a("1Ki"), a("1024"));
    assert_eq!(a("1"), a("1000m"));
    assert!(a("500m") < a("1"));
    assert!(a("1Gi") > a("1G"));
    assert_eq!(a("1.5").millis(), 1500);
    assert_eq!(a("0.1m").millis(), 1, "kube's MilliValue rounds up");
    assert_eq!(a("1.2").units(), 2, "kube's Value rounds up");
    assert_eq!(a("-1.2").units(), -2, "away from zero");
}

#[test]
fn sums_keep_the_format_of_the_first_amount_that_is_not_zero() {
    let a = |s: &str| Quantity::parse(s).unwrap().amount().unwrap();
    let sum = Amount::ZERO.checked_add(a("1Gi")).unwrap();
    assert_eq!(
        sum.to_string(),
        "1Gi",
        "a zero sum takes the first term's format"
    );
    let sum = sum.checked_add(a("512Mi")).unwrap();
    assert_eq!(sum.to_string(), "1536Mi");
    let sum = a("1G").checked_add(a("1Gi")).unwrap();
    assert_eq!(sum.to_string(), "2073741824");
    assert_eq!(a("1").checked_sub(a("250m")).unwrap().to_string(), "750m");
    assert_eq!(Amount::from_millis(2500).to_string(), "2500m");
    assert_eq!(Amount::from_units(3, Format::DecimalSi).to_string(), "3");
}

#[test]
fn amounts_too_large_for_exact_arithmetic_are_none() {
    assert!(Quantity::parse("1e29").unwrap().amount().is_some());
    assert!(Quantity::parse("1e30").unwrap().amount().is_none());
    assert!(
        Quantity::parse("999999999999999999999999999999999999999")
            .unwrap()
            .amount()
            .is_none()
    );
    let big = Quantity::parse("1e29").unwrap().amount().unwrap();
    let bigger = (0..20).try_fold(big, |acc, _| acc.checked_add(acc));
    assert!(bigger.is_none());
}

proptest! {
    #[test]
    fn the_canonical_text_parses_back_to_the_same_amount(
        units in -1_000_000_000i64..1_000_000_000,
        suffix in prop::sample::select(vec!["", "m", "k", "Ki", "Mi", "Gi", "e3", "n"]),
    ) {
        let text = format!("{units}{suffix}");
        let amount = Quantity::parse(&text).unwrap().amount().unwrap();
        let written = amount.to_string();
        let again = Quantity::parse(&written).unwrap().amount().unwrap();
        prop_assert_eq!(amount, again, "{} written {}", text, written);
    }
}
