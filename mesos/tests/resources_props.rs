//! The algebra of `Resources`, checked on random bags.
#![allow(clippy::unwrap_used, missing_docs)]

use mesos::proto::{Resource, value};
use mesos::resources::{self, Resources};
use proptest::prelude::*;

fn role() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![Just(None), Just(Some("prod")), Just(Some("dev/web"))]
}

fn item() -> impl Strategy<Value = Resource> {
    prop_oneof![
        (
            prop_oneof![Just("cpus"), Just("mem")],
            0.0f64..100_000.0,
            role()
        )
            .prop_map(|(n, v, r)| resources::scalar(n, v, r)),
        (prop::collection::vec((0u64..2_000, 0u64..50), 0..6), role()).prop_map(|(rs, r)| {
            let rs: Vec<(u64, u64)> = rs.into_iter().map(|(b, len)| (b, b + len)).collect();
            resources::ranges("ports", &rs, r)
        }),
        (prop::collection::btree_set("[a-f]", 0..5), role()).prop_map(|(items, r)| {
            let items: Vec<&str> = items.iter().map(String::as_str).collect();
            resources::set("disks", &items, r)
        }),
    ]
}

fn bag() -> impl Strategy<Value = Resources> {
    prop::collection::vec(item(), 0..8).prop_map(|items| Resources::from_protos(items).unwrap())
}

/// The ranges and sets of `r`: the parts where `+` is a union, not a sum.
fn non_scalars(r: &Resources) -> Resources {
    Resources::from_protos(
        r.iter()
            .filter(|p| p.r#type != value::Type::Scalar as i32)
            .cloned(),
    )
    .unwrap()
}

fn assert_normalised(r: &Resources) {
    for p in r.iter() {
        if let Some(s) = p.scalar {
            assert!(s.value > 0.0, "{p:?}");
            assert_eq!(
                (s.value * 1000.0).round() / 1000.0,
                s.value,
                "3 decimals: {p:?}"
            );
        }
        if let Some(rs) = &p.ranges {
            assert!(!rs.range.is_empty(), "{p:?}");
            for w in rs.range.windows(2) {
                // sorted, disjoint and not adjacent (else they would be one)
                assert!(w[0].end + 1 < w[1].begin, "{p:?}");
            }
            assert!(rs.range.iter().all(|x| x.begin <= x.end), "{p:?}");
        }
        if let Some(s) = &p.set {
            assert!(!s.item.is_empty(), "{p:?}");
        }
    }
}

proptest! {
    #[test]
    fn adding_then_subtracting_a_disjoint_bag_gives_back_the_original(a in bag(), b in bag()) {
        // Ranges and sets are sets: `+` unites them, so only a `b` disjoint
        // from `a` there can be taken back out. Offers from one agent are.
        let b = &b - &non_scalars(&a);
        let sum = &a + &b;
        prop_assert_eq!(&sum - &b, a.clone());
        prop_assert_eq!(sum.checked_sub(&b).unwrap(), a);
    }

    #[test]
    fn a_sum_contains_each_part(a in bag(), b in bag()) {
        let sum = &a + &b;
        prop_assert!(sum.contains(&a));
        prop_assert!(sum.contains(&b));
        prop_assert!(a.contains(&Resources::new()));
    }

    #[test]
    fn subtraction_never_goes_negative_and_stays_inside(a in bag(), c in bag()) {
        let left = &a - &c;
        assert_normalised(&left);
        prop_assert!(a.contains(&left));
        for name in ["cpus", "mem"] {
            prop_assert!(left.scalar_milli(name) >= 0);
            prop_assert!(left.scalar_milli(name) <= a.scalar_milli(name));
        }
        // checked_sub agrees with contains
        prop_assert_eq!(a.checked_sub(&c).is_ok(), a.contains(&c));
    }

    #[test]
    fn every_result_is_normalised(a in bag(), b in bag(), c in bag()) {
        assert_normalised(&a);
        let r = &(&a + &b) - &c;
        assert_normalised(&r);
        // the normalised form survives a trip through the wire form and text
        prop_assert_eq!(Resources::from_protos(r.to_protos()).unwrap(), r.clone());
        prop_assert_eq!(Resources::parse(&r.to_string()).unwrap(), r);
    }

    #[test]
    fn addition_is_commutative(a in bag(), b in bag()) {
        prop_assert_eq!(&a + &b, &b + &a);
    }
}

/// Flag-syntax items with odd characters in every position.
fn flag_text() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        "[0-9]{1,4}(\\.[0-9]{0,4})?",
        prop::collection::vec((0u64..99, 0u64..99), 0..3).prop_map(|rs| {
            let parts: Vec<String> = rs.iter().map(|(b, e)| format!("{b}-{e}")).collect();
            format!("[{}]", parts.join(","))
        }),
        "\\{[a-z}{ ]{0,3}(,[a-z}]{0,3})*\\}",
        "[a-z0-9.\\-]{0,4}",
    ];
    let item = (
        "[a-z() ]{0,5}",
        prop::option::of("[a-z/*()\\- ]{0,4}"),
        value,
    )
        .prop_map(|(name, role, value)| match role {
            Some(role) => format!("{name}({role}):{value}"),
            None => format!("{name}:{value}"),
        });
    prop::collection::vec(item, 0..5).prop_map(|items| items.join(";"))
}

proptest! {
    #[test]
    fn structured_flag_text_parses_or_errors_and_round_trips(text in flag_text()) {
        if let Ok(res) = Resources::parse(&text) {
            prop_assert_eq!(Resources::parse(&res.to_string()).unwrap(), res);
        }
        if let Ok(attrs) = resources::parse_attributes(&text) {
            let again: Vec<String> = attrs
                .iter()
                .map(|a| format!("{}:{}", a.name, resources::attribute_text(a)))
                .collect();
            let reparsed = resources::parse_attributes(&again.join(";")).unwrap();
            prop_assert_eq!(reparsed.len(), attrs.len());
        }
    }

    #[test]
    fn any_flag_text_parses_or_errors_and_its_text_form_parses_back(
        text in "[a-z0-9 :;()\\[\\]{}\\-,.*/]{0,40}",
    ) {
        if let Ok(res) = Resources::parse(&text) {
            prop_assert_eq!(Resources::parse(&res.to_string()).unwrap(), res);
        }
        if let Ok(attrs) = resources::parse_attributes(&text) {
            for a in &attrs {
                prop_assert!(!a.name.is_empty());
                let _ = resources::attribute_text(a);
            }
        }
    }
}
