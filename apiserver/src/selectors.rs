//! Label and field selectors, parsed as Kubernetes parses them and matched against JSON
//! objects.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::resource::Resource;
use crate::validation::{is_label_value, is_qualified_name};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector: all requirements must hold. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<(String, Op)>);

/// A parsed field selector: all terms must hold. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Splits on commas outside parentheses.
fn terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn bad(msg: String) -> ApiError {
    ApiError::BadRequest(msg)
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k,l>3`.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in terms(s) {
            reqs.push(parse_requirement(term)?);
        }
        Ok(Self(reqs))
    }

    /// Whether `labels` (a JSON object of strings, or absent) satisfy every requirement.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.0.iter().all(|(key, op)| {
            let value = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            match op {
                Op::Eq(v) => value == Some(v.as_str()),
                Op::NotEq(v) => value != Some(v.as_str()),
                Op::In(vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
                Op::NotIn(vs) => !value.is_some_and(|x| vs.iter().any(|v| v == x)),
                Op::Exists => value.is_some(),
                Op::NotExists => value.is_none(),
                Op::Gt(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                Op::Lt(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// An object's selector (`matchLabels` and `matchExpressions`), requirements sorted
    /// by key as apimachinery's `LabelSelectorAsSelector` sorts them. Errors name what
    /// validation refuses (an unknown operator, values with `Exists`).
    pub fn from_api(
        sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    ) -> Result<Self, String> {
        let mut reqs: Vec<(String, Op)> = sel
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), Op::In(vec![v.clone()])))
            .collect();
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let op = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(format!(
                        "for '{}', '{}' operator, values set can't be empty",
                        e.operator, e.key
                    ));
                }
                "In" => Op::In(values),
                "NotIn" => Op::NotIn(values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(format!(
                        "values set must be empty for exists and does not exist, got {values:?}"
                    ));
                }
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::NotExists,
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            reqs.push((e.key.clone(), op));
        }
        reqs.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Self(reqs))
    }
}

/// The selector as a string, as apimachinery prints it (`app=web,tier in (a,b),!x`):
/// the Scale subresource's `status.selector`.
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let terms: Vec<String> = self
            .0
            .iter()
            .map(|(k, op)| match op {
                Op::Eq(v) => format!("{k}={v}"),
                Op::In(vs) if vs.len() == 1 => format!("{k}={}", vs[0]),
                Op::NotEq(v) => format!("{k}!={v}"),
                Op::In(vs) => format!("{k} in ({})", sorted(vs)),
                Op::NotIn(vs) => format!("{k} notin ({})", sorted(vs)),
                Op::Exists => k.clone(),
                Op::NotExists => format!("!{k}"),
                Op::Gt(n) => format!("{k}>{n}"),
                Op::Lt(n) => format!("{k}<{n}"),
            })
            .collect();
        f.write_str(&terms.join(","))
    }
}

fn sorted(values: &[String]) -> String {
    let mut v = values.to_vec();
    v.sort();
    v.dedup();
    v.join(",")
}

fn parse_requirement(term: &str) -> Result<(String, Op), ApiError> {
    let invalid = || {
        bad(format!(
            "unable to parse requirement: found '{term}', expected: valid label selector"
        ))
    };
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        check_key(key)?;
        return Ok((key.to_string(), Op::NotExists));
    }
    let key_end = term
        .find(|c: char| c.is_whitespace() || matches!(c, '=' | '!' | '<' | '>' | '('))
        .unwrap_or(term.len());
    let key = &term[..key_end];
    check_key(key)?;
    let rest = term[key_end..].trim_start();
    let (op, value) = if rest.is_empty() {
        return Ok((key.to_string(), Op::Exists));
    } else if let Some(v) = rest.strip_prefix("==") {
        ("=", v)
    } else if let Some(v) = rest.strip_prefix("!=") {
        ("!=", v)
    } else if let Some(v) = rest.strip_prefix('=') {
        ("=", v)
    } else if let Some(v) = rest.strip_prefix('>') {
        (">", v)
    } else if let Some(v) = rest.strip_prefix('<') {
        ("<", v)
    } else if let Some(v) = rest.strip_prefix("notin") {
        ("notin", v)
    } else if let Some(v) = rest.strip_prefix("in") {
        ("in", v)
    } else {
        return Err(invalid());
    };
    let value = value.trim();
    let op = match op {
        "=" | "!=" => {
            check_value(value)?;
            if op == "=" {
                Op::Eq(value.into())
            } else {
                Op::NotEq(value.into())
            }
        }
        ">" | "<" => {
            let n = value.parse::<i64>().map_err(|_| invalid())?;
            if op == ">" { Op::Gt(n) } else { Op::Lt(n) }
        }
        _ => {
            let inner = value
                .strip_prefix('(')
                .and_then(|v| v.strip_suffix(')'))
                .ok_or_else(invalid)?;
            let mut values = Vec::new();
            for v in inner.split(',').map(str::trim) {
                check_value(v)?;
                values.push(v.to_string());
            }
            if op == "in" {
                Op::In(values)
            } else {
                Op::NotIn(values)
            }
        }
    };
    Ok((key.to_string(), op))
}

fn check_key(key: &str) -> Result<(), ApiError> {
    if is_qualified_name(key) {
        Ok(())
    } else {
        Err(bad(format!(
            "unable to parse requirement: invalid label key \"{key}\""
        )))
    }
}

fn check_value(value: &str) -> Result<(), ApiError> {
    if is_label_value(value) {
        Ok(())
    } else {
        Err(bad(format!(
            "unable to parse requirement: invalid label value: \"{value}\""
        )))
    }
}

impl FieldSelector {
    /// Parses `f=v,g!=w` (also `==`) as apimachinery's `fields.ParseSelector` does (terms
    /// split on unescaped commas, nothing trimmed, `\,` `\=` `\\` escapes in values), then
    /// converts each field as kube-apiserver's field label conversion for `resource` does.
    /// Either failure is its 400 message.
    pub fn parse(s: &str, resource: Resource) -> Result<Self, ApiError> {
        let mut parts = split_terms(s);
        // Kubernetes sorts the terms first, so the first bad term it names is the least.
        parts.sort_unstable();
        let mut out = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, eq, value)) = split_term(part) else {
                return Err(bad(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            out.push((field.to_owned(), eq, unescape_value(value)?));
        }
        for (field, _, _) in &mut out {
            *field = resource.convert_field_label(field).map_err(bad)?;
        }
        Ok(Self(out))
    }

    /// Whether `object` satisfies every term (a missing field reads as the empty string).
    pub fn matches(&self, object: &Value) -> bool {
        self.0
            .iter()
            .all(|(field, eq, want)| (field_value(object, field) == *want) == *eq)
    }
}

/// Splits on commas not escaped by a backslash (kept in the term).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start, mut in_slash) = (0, false);
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// The field, whether the operator is `=`/`==` (true) or `!=`, and the raw value: split
/// at the first operator found, `!=` and `==` tried before `=` at each position.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, eq) in [("!=", false), ("==", true), ("=", true)] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], eq, value));
            }
        }
    }
    None
}

/// `fields.UnescapeValue`: `\\`, `\,` and `\=` stand for themselves; any other escape,
/// a trailing backslash, or a bare `,` or `=` is refused with apimachinery's message
/// (which prints the bare character as its code point, as Go's `%v` of a rune does).
fn unescape_value(s: &str) -> Result<String, ApiError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(bad(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                return Err(bad(format!(
                    "invalid field selector: unescaped character in value: {}",
                    u32::from(c)
                )));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err(bad(
            "invalid field selector: invalid escape sequence: \\".to_owned()
        ));
    }
    Ok(out)
}

/// The value of a selectable field as a string, as Kubernetes' field sets render it.
pub(crate) fn field_value(object: &Value, field: &str) -> String {
    let path = if field == "source" {
        "source.component"
    } else {
        field
    };
    let mut cur = object;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            // Kubernetes' pod field set defaults it.
            None if field == "spec.hostNetwork" => return "false".to_owned(),
            // A Job's field set renders its count, 0 before the first success.
            None if field == "status.succeeded" => return "0".to_owned(),
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// A label and a field selector together.
#[derive(Debug, Clone, Default)]
pub struct Selectors {
    /// Labels.
    pub labels: LabelSelector,
    /// Fields.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Whether these select every object (no terms at all).
    pub fn is_everything(&self) -> bool {
        self.labels.0.is_empty() && self.fields.0.is_empty()
    }

    /// Parses both (empty strings select everything).
    pub fn parse(label: &str, field: &str, resource: Resource) -> Result<Self, ApiError> {
        Ok(Self {
            labels: LabelSelector::parse(label)?,
            fields: FieldSelector::parse(field, resource)?,
        })
    }

    /// Whether the object is selected.
    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(
            object
                .pointer("/metadata/labels")
                .and_then(Value::as_object),
        ) && self.fields.matches(object)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn pod(labels: Value, node: &str, phase: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "d", "labels": labels},
            "spec": {"nodeName": node}, "status": {"phase": phase}})
    }

    fn selects(label: &str, field: &str, obj: &Value) -> bool {
        Selectors::parse(label, field, Resource::Pods)
            .unwrap()
            .matches(obj)
    }

    #[test]
    fn label_operators_follow_kubernetes_semantics() {
        let p = pod(
            json!({"app": "web", "tier": "front", "n": "5"}),
            "",
            "Pending",
        );
        assert!(selects("app=web", "", &p));
        assert!(selects("app==web,tier", "", &p));
        assert!(!selects("app!=web", "", &p));
        assert!(
            selects("missing!=x", "", &p),
            "!= matches objects without the label"
        );
        assert!(selects("app in (db, web)", "", &p));
        assert!(!selects("app notin (db,web)", "", &p));
        assert!(selects("missing notin (x)", "", &p));
        assert!(selects("!missing", "", &p));
        assert!(!selects("!app", "", &p));
        assert!(selects("n>4,n<6", "", &p));
        assert!(selects("", "", &p), "empty selects everything");
    }

    #[test]
    fn field_selectors_read_missing_fields_as_empty() {
        let unbound = pod(json!({}), "", "Pending");
        assert!(selects("", "spec.nodeName=", &unbound));
        assert!(selects(
            "",
            "metadata.name=p,metadata.namespace=d",
            &unbound
        ));
        let done = pod(json!({}), "n1", "Succeeded");
        assert!(!selects(
            "",
            "spec.nodeName=n1,status.phase!=Succeeded",
            &done
        ));
        assert!(selects("", "spec.nodeName==n1", &done));
        let ev = json!({"involvedObject": {"name": "p", "uid": "u"}, "source": {"component": "c"}});
        let sel = Selectors::parse(
            "",
            "involvedObject.name=p,involvedObject.uid=u,source=c",
            Resource::Events,
        )
        .unwrap();
        assert!(sel.matches(&ev));
    }

    #[test]
    fn malformed_selectors_and_unsupported_fields_are_bad_requests() {
        for bad in [
            "app in (web",
            "a b",
            "=x",
            "app=web=x x",
            "Inv@lid=x",
            "app>x",
        ] {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert_eq!(err.code_and_reason().0, 400, "{bad}");
        }
        let err = FieldSelector::parse("spec.containers=x", Resource::Pods).unwrap_err();
        assert!(err.to_string().contains("field label not supported"));
        assert!(FieldSelector::parse("involvedObject.kind=Pod", Resource::Pods).is_err());
        assert!(FieldSelector::parse("nonsense", Resource::Pods).is_err());
    }

    fn field_error(selector: &str, resource: Resource) -> String {
        let err = FieldSelector::parse(selector, resource).unwrap_err();
        assert_eq!(err.code_and_reason().0, 400, "{selector}");
        err.to_string()
    }

    #[test]
    fn field_selectors_fail_with_apimachinery_messages() {
        assert_eq!(
            field_error("bad selector", Resource::Pods),
            "invalid selector: 'bad selector'; can't understand 'bad selector'"
        );
        // Terms are sorted before they are read: the least bad one is named.
        assert_eq!(
            field_error("status.phase=Running,b,a", Resource::Pods),
            "invalid selector: 'status.phase=Running,b,a'; can't understand 'a'"
        );
        assert_eq!(
            field_error("status.phase=Running=x", Resource::Pods),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            field_error(r"metadata.name=a\b", Resource::Pods),
            r"invalid field selector: invalid escape sequence: \b"
        );
        assert_eq!(
            field_error(r"metadata.name=a\", Resource::Pods),
            r"invalid field selector: invalid escape sequence: \"
        );
        // Nothing is trimmed: the label is `status.phase `.
        assert_eq!(
            field_error("status.phase = Running", Resource::Pods),
            "field label not supported: status.phase "
        );
        assert_eq!(
            field_error("metadata.namespace=x", Resource::Nodes),
            "field label not supported: metadata.namespace"
        );
        assert_eq!(
            field_error("data.k=v", Resource::ConfigMaps),
            r#""data.k" is not a known field selector: only "metadata.name", "metadata.namespace""#
        );
        // A parse error wins over an unsupported label, wherever it is.
        assert_eq!(
            field_error("zzz=1,nope", Resource::Pods),
            "invalid selector: 'zzz=1,nope'; can't understand 'nope'"
        );
    }

    #[test]
    fn field_selector_values_unescape_and_old_names_convert() {
        let p = json!({"metadata": {"name": "a,b=c\\d"}, "spec": {"nodeName": "n1"}});
        assert!(selects("", r"metadata.name=a\,b\=c\\d", &p));
        assert!(
            selects("", "spec.host=n1", &p),
            "spec.host is spec.nodeName"
        );
        assert!(selects("", "spec.hostNetwork=false", &p), "defaulted");
        assert!(
            selects("", "metadata.name=a\\,b\\=c\\\\d,", &p),
            "empty terms are skipped"
        );
        assert!(
            selects("", "status.podIPs=", &p),
            "selectable, never set in the field set"
        );
    }
}
