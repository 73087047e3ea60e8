#![allow(clippy::unwrap_used)]

use super::*;
use crate::proto::{Attribute, value};

fn r(spec: &str) -> Resources {
    Resources::parse(spec).unwrap()
}

#[test]
fn parses_the_mesos_flag_syntax() {
    let res = r("cpus:4;mem:8192;disk:20480;ports:[31000-32000];cpus(prod):2;gpus:1");
    assert_eq!(res.scalar("cpus"), 6.0);
    assert_eq!(res.scalar("mem"), 8192.0);
    assert_eq!(res.scalar("gpus"), 1.0);
    assert_eq!(res.ranges("ports"), vec![(31000, 32000)]);
    assert_eq!(res.roles(), vec!["*".to_owned(), "prod".to_owned()]);
    assert_eq!(res.filter_role("prod").scalar("cpus"), 2.0);
    assert_eq!(res.unreserved().scalar("cpus"), 4.0);
    assert_eq!(
        res.to_string(),
        "cpus:4;cpus(prod):2;disk:20480;gpus:1;mem:8192;ports:[31000-32000]"
    );
    assert_eq!(Resources::parse(&res.to_string()).unwrap(), res);
}

#[test]
fn repeated_names_add_up_and_ranges_coalesce() {
    let res = r("cpus:0.1;cpus:0.2; ports:[1-2, 5-6];ports:[3-4];disks:{a,b}");
    assert_eq!(res.scalar_milli("cpus"), 300);
    assert_eq!(res.ranges("ports"), vec![(1, 6)]);
    assert_eq!(res.set("disks").len(), 2);
    assert_eq!(res.len(), 3);
}

#[test]
fn parses_the_json_array_form() {
    let res = Resources::parse(
        r#"[{"name":"cpus","type":"SCALAR","scalar":{"value":1.5}},
            {"name":"ports","type":"RANGES","ranges":{"range":[{"begin":10,"end":20}]},"role":"web"}]"#,
    )
    .unwrap();
    assert_eq!(res.scalar("cpus"), 1.5);
    assert_eq!(res.filter_role("web").ranges("ports"), vec![(10, 20)]);
}

#[test]
fn malformed_specs_are_rejected_with_the_resource_named() {
    for (spec, needle) in [
        ("cpus", "name:value"),
        ("cpus:-1", "cpus"),
        ("cpus:abc", "cpus:abc"),
        ("ports:[5-1]", "ports"),
        ("ports:[1-2", "unclosed"),
        ("ports:[a-b]", "ports"),
        ("cpus(prod:1", "unclosed"),
        (":4", ":4"),
        ("cpus( ):1", "cpus"),
        ("cpus(-x):1", "cpus"),
        ("cpus(a b):1", "cpus"),
        ("d:{a,a}", "duplicate set item 'a'"),
        ("[{\"name\":1}]", "JSON"),
    ] {
        let err = Resources::parse(spec).unwrap_err().to_string();
        assert!(err.contains(needle), "{spec}: {err}");
    }
}

#[test]
fn from_protos_validates_type_and_value() {
    let mut text = scalar("x", 1.0, None);
    text.r#type = value::Type::Text as i32;
    assert!(matches!(
        Resources::from_protos([text]),
        Err(ResourceError::UnsupportedType { .. })
    ));
    let mut missing = scalar("cpus", 1.0, None);
    missing.scalar = None;
    assert!(matches!(
        Resources::from_protos([missing]),
        Err(ResourceError::MissingValue { kind: "SCALAR", .. })
    ));
    assert!(Resources::from_protos([scalar("cpus", f64::INFINITY, None)]).is_err());
    assert!(
        Resources::from_protos([scalar("cpus", 0.0, None)])
            .unwrap()
            .is_empty()
    );
}

#[test]
fn unreserved_role_spelt_either_way_is_one_resource() {
    let explicit = scalar("cpus", 1.0, None);
    let mut star = explicit.clone();
    star.role = Some("*".into());
    let res = Resources::from_protos([explicit, star]).unwrap();
    assert_eq!(res.len(), 1);
    assert_eq!(res.scalar("cpus"), 2.0);
}

#[test]
fn reservation_refinement_role_wins_over_the_role_field() {
    let mut res = scalar("cpus", 1.0, Some("old"));
    res.reservations = vec![
        resource::ReservationInfo {
            role: Some("a".into()),
            ..Default::default()
        },
        resource::ReservationInfo {
            role: Some("a/b".into()),
            ..Default::default()
        },
    ];
    assert_eq!(resource_role(&res), "a/b");
    assert_eq!(resource_role(&scalar("cpus", 1.0, None)), "*");
    let bag = Resources::from_protos([res]).unwrap();
    assert_eq!(bag.roles(), vec!["a/b".to_owned()]);
}

#[test]
fn different_roles_never_merge_and_contains_respects_them() {
    let offer = r("cpus:4;cpus(prod):2");
    assert!(offer.contains(&r("cpus(prod):2")));
    assert!(!offer.contains(&r("cpus(prod):3")));
    assert!(!offer.contains(&r("cpus(dev):1")));
    let err = offer.checked_sub(&r("cpus(prod):3")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "resource 'cpus' (role 'prod'): 3 is not contained in 2"
    );
    let err = offer.checked_sub(&r("mem:1")).unwrap_err();
    assert!(
        err.to_string().contains("not contained in nothing"),
        "{err}"
    );
    assert_eq!(
        offer.checked_sub(&r("cpus:1.5")).unwrap(),
        r("cpus:2.5;cpus(prod):2")
    );
}

#[test]
fn subtraction_saturates_and_drops_what_reaches_zero() {
    let left = r("cpus:1;mem:100;ports:[1-10]") - r("cpus:2;mem:40;ports:[1-10]");
    assert_eq!(left, r("mem:60"));
    assert_eq!(left.to_protos().len(), 1);
    let mut bag = r("ports:[1-10]");
    bag -= r("ports:[3-4]");
    assert_eq!(bag.ranges("ports"), vec![(1, 2), (5, 10)]);
    let proto = &bag.to_protos()[0];
    assert_eq!(proto.ranges.as_ref().unwrap().range.len(), 2);
}

#[test]
fn fixed_point_addition_has_no_float_drift() {
    let mut bag = Resources::new();
    for _ in 0..10 {
        bag += r("cpus:0.1");
    }
    assert_eq!(bag, r("cpus:1"));
    assert_eq!(bag.to_protos()[0].scalar.unwrap().value, 1.0);
}

#[test]
fn allocate_marks_every_item_and_changes_identity() {
    let bag = r("cpus:1;mem:10");
    let allocated = bag.allocate("web");
    assert!(
        allocated
            .iter()
            .all(|r| { r.allocation_info.as_ref().and_then(|a| a.role.as_deref()) == Some("web") })
    );
    assert!(!bag.contains(&allocated));
    assert_eq!(allocated.unallocated(), bag);
}

#[test]
fn parses_attributes_of_every_kind() {
    let attrs = parse_attributes("rack:r1;level:3;ports:[1-2];set:{a,b};w:2.5").unwrap();
    let texts: Vec<(String, String)> = attrs
        .iter()
        .map(|a| (a.name.clone(), attribute_text(a)))
        .collect();
    assert_eq!(
        texts,
        [
            ("rack", "r1"),
            ("level", "3"),
            ("ports", "[1-2]"),
            ("set", "{a,b}"),
            ("w", "2.5")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let kinds: Vec<i32> = attrs.iter().map(|a| a.r#type).collect();
    assert_eq!(kinds, vec![3, 0, 1, 2, 0]);
    assert!(parse_attributes("rack").is_err());
    assert!(parse_attributes(":x").is_err());
    assert!(parse_attributes("rack:").is_err());
    assert_eq!(attribute_text(&Attribute::default()), "");
}
