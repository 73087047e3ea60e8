//! # What mesopod does with each pod field
//!
//! Every field of the pod types below is **honoured** (works as in Kubernetes),
//! **ignored** (accepted and without effect, with the reason that is harmless), or
//! **refused** at create (and in `--dry-run=server`) with a 422 `Invalid` Status that
//! names the field. [`FIELDS`] is the one table: pod validation refuses from it
//! ([`super::support`]), this page is rendered from it, and a test walks k8s-openapi's
//! schemas so that a field k8s-openapi adds fails the build's tests until it is
//! classified here.
//!
//! "Not yet" fields are refused today because the work that makes them work is
//! still open (lifecycle hooks and ephemeral containers: issue #19).
//!
#![doc = include_str!("../fields.md")]

/// What mesopod does with one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Works as in Kubernetes.
    Honoured,
    /// Honoured; its own fields are classified under the named type.
    Nested(&'static str),
    /// Accepted and without effect.
    Ignored,
    /// Refused at create, whatever its value.
    Refused,
    /// Refused at create because the work that makes it work is still open.
    NotYet,
    /// Only these values are accepted (scalars rendered as JSON text without quotes).
    Only(&'static [&'static str]),
    /// A map whose keys may only be these.
    Keys(&'static [&'static str]),
}

/// One classified field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The k8s-openapi type (`PodSpec`, `Container`, ...).
    pub ty: &'static str,
    /// The field's JSON name.
    pub name: &'static str,
    /// What mesopod does with it.
    pub rule: Rule,
    /// Why, in a few words (part of the refusal message when refused).
    pub why: &'static str,
}

const fn f(ty: &'static str, name: &'static str, rule: Rule, why: &'static str) -> Field {
    Field {
        ty,
        name,
        rule,
        why,
    }
}

mod table;

use Rule::{Honoured, Ignored, Keys, Nested, NotYet, Only, Refused};
pub use table::FIELDS;

/// The entry for `ty`'s field `name`.
pub fn lookup(ty: &str, name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.ty == ty && f.name == name)
}

/// The list as Markdown, one section per type (what `fields.md` holds).
pub fn render() -> String {
    let mut out = String::new();
    let mut current = "";
    for f in FIELDS {
        if f.ty != current {
            current = f.ty;
            out.push_str(&format!(
                "\n## `{current}`\n\n| field | mesopod | why |\n|---|---|---|\n"
            ));
        }
        let what = match f.rule {
            Honoured => "honoured".to_owned(),
            Nested(t) => format!("honoured, see `{t}`"),
            Ignored => "ignored".to_owned(),
            Refused => "refused".to_owned(),
            NotYet => "refused (not yet)".to_owned(),
            Only(v) => format!("only {}", quoted(v)),
            Keys(k) => format!("keys {} only", quoted(k)),
        };
        out.push_str(&format!("| `{}` | {what} | {} |\n", f.name, f.why));
    }
    out
}

fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
