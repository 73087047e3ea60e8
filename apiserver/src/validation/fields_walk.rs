//! The field list is complete: every property of every classified k8s-openapi type has
//! an entry, no entry names a property that is gone, and `fields.md` is the table rendered.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvVar, EnvVarSource, NodeAffinity, PodAffinity, PodAntiAffinity, PodOS,
    PodSecurityContext, PodSpec, Probe, ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::schemars::JsonSchema;
use k8s_openapi::schemars::generate::SchemaSettings;
use serde_json::Value;

use super::fields::{FIELDS, Rule, render};

/// The properties of `T` in its published schema.
fn properties<T: JsonSchema>() -> BTreeSet<String> {
    let mut generator = SchemaSettings::draft07().into_generator();
    generator.subschema_for::<T>();
    let defs = generator.take_definitions(true);
    let schema = defs
        .get(T::schema_name().as_ref())
        .unwrap_or_else(|| panic!("no schema for {}", T::schema_name()));
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// Every type the table classifies, by the name the table uses.
fn walked() -> Vec<(&'static str, BTreeSet<String>)> {
    vec![
        ("PodSpec", properties::<PodSpec>()),
        ("Affinity", properties::<Affinity>()),
        ("NodeAffinity", properties::<NodeAffinity>()),
        ("PodAffinity", properties::<PodAffinity>()),
        ("PodAntiAffinity", properties::<PodAntiAffinity>()),
        ("PodOS", properties::<PodOS>()),
        ("Container", properties::<Container>()),
        ("ResourceRequirements", properties::<ResourceRequirements>()),
        ("EnvVar", properties::<EnvVar>()),
        ("EnvVarSource", properties::<EnvVarSource>()),
        ("PodSecurityContext", properties::<PodSecurityContext>()),
        ("SecurityContext", properties::<SecurityContext>()),
        ("VolumeMount", properties::<VolumeMount>()),
        ("Volume", properties::<Volume>()),
        ("Probe", properties::<Probe>()),
    ]
}

#[test]
fn every_field_of_the_pod_types_is_classified_and_no_entry_is_stale() {
    let walked = walked();
    let mut problems = Vec::new();
    for (ty, props) in &walked {
        assert!(!props.is_empty(), "{ty}: the schema lists no properties");
        let listed: BTreeSet<String> = FIELDS
            .iter()
            .filter(|f| f.ty == *ty)
            .map(|f| f.name.to_owned())
            .collect();
        for missing in props.difference(&listed) {
            problems.push(format!("{ty}.{missing}: not classified in fields::FIELDS"));
        }
        for stale in listed.difference(props) {
            problems.push(format!("{ty}.{stale}: listed but not in k8s-openapi"));
        }
    }
    let types: BTreeSet<&str> = walked.iter().map(|(t, _)| *t).collect();
    for f in FIELDS {
        if !types.contains(f.ty) {
            problems.push(format!("{}: a type the walk does not check", f.ty));
        }
        if let Rule::Nested(inner) = f.rule
            && !types.contains(inner)
        {
            problems.push(format!(
                "{}.{}: nested type {inner} is not walked",
                f.ty, f.name
            ));
        }
        let refuses = !matches!(f.rule, Rule::Honoured | Rule::Nested(_));
        if refuses && f.why.is_empty() {
            problems.push(format!("{}.{}: says no reason", f.ty, f.name));
        }
    }
    let mut seen = BTreeSet::new();
    for f in FIELDS {
        if !seen.insert((f.ty, f.name)) {
            problems.push(format!("{}.{}: listed twice", f.ty, f.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `MESOPOD_BLESS=1 cargo test -p apiserver fields_md` rewrites the page.
#[test]
fn fields_md_is_the_table_rendered() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/validation/fields.md");
    let want = render();
    if std::env::var_os("MESOPOD_BLESS").is_some() {
        std::fs::write(path, &want).unwrap();
    }
    let got = std::fs::read_to_string(path).unwrap();
    assert!(
        got == want,
        "fields.md is stale: run MESOPOD_BLESS=1 cargo test -p apiserver fields_md"
    );
}
