//! Names, labels and annotations, as Kubernetes' apimachinery validates them.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Causes;
use crate::error::CauseKind;

pub(crate) const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub(crate) const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Kubernetes' limit on all annotations of one object together.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

fn is_alnum_lower(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// RFC 1123 label: at most 63 of `[a-z0-9-]`, alphanumeric at both ends.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && is_alnum_lower(b[0])
        && is_alnum_lower(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum_lower(c) || c == b'-')
}

/// RFC 1123 subdomain: at most 253 chars of dot-separated labels.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && is_alnum_lower(b[0])
                && is_alnum_lower(b[b.len() - 1])
                && b.iter().all(|&c| is_alnum_lower(c) || c == b'-')
        })
}

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A label or annotation key: `[prefix/]name` with a DNS-1123 subdomain prefix.
pub fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_name_part(name),
        None => is_name_part(s),
    }
}

/// A label value: empty, or a name part.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name_part(s)
}

/// Checks an object name against the DNS-1123 subdomain rule.
pub(crate) fn check_subdomain_name(causes: &mut Causes, field: &str, name: &str) {
    if !is_dns1123_subdomain(name) {
        causes.invalid(field, name, DNS1123_SUBDOMAIN_MSG);
    }
}

/// Checks a name against the DNS-1123 label rule.
pub(crate) fn check_label_name(causes: &mut Causes, field: &str, name: &str) {
    if !is_dns1123_label(name) {
        causes.invalid(field, name, DNS1123_LABEL_MSG);
    }
}

pub(super) fn check_labels(
    causes: &mut Causes,
    field: &str,
    labels: Option<&BTreeMap<String, String>>,
) {
    for (k, v) in labels.into_iter().flatten() {
        if !is_qualified_name(k) {
            causes.invalid(field, k, QUALIFIED_NAME_MSG);
        }
        if !is_label_value(v) {
            causes.invalid(field.to_string(), v, LABEL_VALUE_MSG);
        }
    }
}

/// Validates the metadata every object has; `name_rule` checks the name itself.
pub(crate) fn check_metadata(
    causes: &mut Causes,
    meta: &ObjectMeta,
    name_rule: fn(&mut Causes, &str, &str),
) {
    match meta.name.as_deref() {
        Some(name) if !name.is_empty() => name_rule(causes, "metadata.name", name),
        _ => causes.push(
            CauseKind::Required,
            "metadata.name",
            "Required value: name or generateName is required",
        ),
    }
    check_labels(causes, "metadata.labels", meta.labels.as_ref());
    let mut size = 0;
    for (k, v) in meta.annotations.iter().flatten() {
        if !is_qualified_name(k) {
            causes.invalid("metadata.annotations", k, QUALIFIED_NAME_MSG);
        }
        size += k.len() + v.len();
    }
    if size > ANNOTATIONS_MAX_BYTES {
        causes.push(
            CauseKind::TooLong,
            "metadata.annotations",
            format!("Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rfc_1123() {
        assert!(is_dns1123_subdomain("web-1.example"));
        assert!(!is_dns1123_subdomain("Web"));
        assert!(!is_dns1123_subdomain("-web"));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        assert!(is_dns1123_label("a-1"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_qualified_name("mesopod.io/task-id"));
        assert!(is_qualified_name("app"));
        assert!(!is_qualified_name("a/b/c"));
        assert!(!is_qualified_name("Bad_Prefix/x"));
        assert!(is_label_value(""));
        assert!(!is_label_value("a b"));
    }
}
