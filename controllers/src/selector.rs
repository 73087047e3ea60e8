//! Label selectors: matching, and the string form the Scale subresource
//! reports in `status.selector` (`labels.Selector.String()` in Go).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// A selector that cannot be evaluated. Validation refuses these at create,
/// but the controllers still get whatever is stored; like KCM they then
/// select nothing and say why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// An operator other than In, NotIn, Exists, DoesNotExist.
    #[error("\"{0}\" is not a valid label selector operator")]
    InvalidOperator(String),
    /// In or NotIn without values.
    #[error("key {0}: for 'in', 'notin' operators, values set can't be empty")]
    EmptyValues(String),
    /// No selector at all (an owner without a spec).
    #[error("no selector")]
    Missing,
    /// Exists or DoesNotExist with values.
    #[error("key {0}: values set must be empty for exists and does not exist")]
    UnexpectedValues(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let value = labels.and_then(|l| l.get(&self.key));
        match self.op {
            Op::Equals | Op::In => value.is_some_and(|v| self.values.contains(v)),
            Op::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
        }
    }
}

/// A parsed selector: all requirements must hold. An empty selector
/// selects everything (as `metav1.LabelSelectorAsSelector` of `{}`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Parse a `LabelSelector` (matchLabels and matchExpressions).
    ///
    /// # Errors
    /// An unknown operator, In/NotIn without values, Exists/DoesNotExist
    /// with values. Label key and value syntax is not checked here (the API
    /// validates it; a bad key simply matches nothing).
    pub fn new(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in selector.match_labels.iter().flatten() {
            requirements.push(Requirement {
                key: k.clone(),
                op: Op::Equals,
                values: vec![v.clone()],
            });
        }
        for e in selector.match_expressions.iter().flatten() {
            let op = match e.operator.as_str() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => return Err(SelectorError::InvalidOperator(other.to_owned())),
            };
            let values = e.values.clone().unwrap_or_default();
            match op {
                Op::In | Op::NotIn if values.is_empty() => {
                    return Err(SelectorError::EmptyValues(e.key.clone()));
                }
                Op::Exists | Op::DoesNotExist if !values.is_empty() => {
                    return Err(SelectorError::UnexpectedValues(e.key.clone()));
                }
                _ => {}
            }
            requirements.push(Requirement {
                key: e.key.clone(),
                op,
                values,
            });
        }
        // Go's selector keeps requirements sorted by key; its String() shows
        // them in that order. A stable sort keeps matchLabels first on ties.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Selector { requirements })
    }

    /// An equality selector from a plain map (a ReplicationController's
    /// `spec.selector`, a pod template's labels).
    pub fn from_map(labels: &BTreeMap<String, String>) -> Self {
        Selector {
            requirements: labels
                .iter()
                .map(|(k, v)| Requirement {
                    key: k.clone(),
                    op: Op::Equals,
                    values: vec![v.clone()],
                })
                .collect(),
        }
    }

    /// True when it selects everything (no requirements).
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// `app=web,env in (prod,staging),!legacy`: the form of a Scale's
/// `status.selector` and of `kubectl get -l`. Values of In/NotIn are sorted.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let mut values = r.values.clone();
            values.sort();
            let joined = values.join(",");
            match r.op {
                Op::Equals => write!(f, "{}={joined}", r.key)?,
                Op::In => write!(f, "{} in ({joined})", r.key)?,
                Op::NotIn => write!(f, "{} notin ({joined})", r.key)?,
                Op::Exists => write!(f, "{}", r.key)?,
                Op::DoesNotExist => write!(f, "!{}", r.key)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: if values.is_empty() {
                None
            } else {
                Some(values.iter().map(|v| (*v).to_owned()).collect())
            },
        }
    }

    fn selector(ml: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> Selector {
        Selector::new(&LabelSelector {
            match_labels: Some(labels(ml)),
            match_expressions: Some(exprs),
        })
        .expect("valid selector")
    }

    #[test]
    fn match_labels_need_every_pair() {
        let s = selector(&[("app", "web"), ("tier", "fe")], vec![]);
        assert!(s.matches(Some(&labels(&[("app", "web"), ("tier", "fe"), ("x", "y")]))));
        assert!(!s.matches(Some(&labels(&[("app", "web")]))));
        assert!(!s.matches(None));
    }

    #[test]
    fn expressions_follow_set_semantics() {
        let s = selector(
            &[],
            vec![
                expr("env", "In", &["prod", "staging"]),
                expr("track", "NotIn", &["canary"]),
                expr("app", "Exists", &[]),
                expr("legacy", "DoesNotExist", &[]),
            ],
        );
        assert!(s.matches(Some(&labels(&[("env", "prod"), ("app", "x")]))));
        assert!(s.matches(Some(&labels(&[
            ("env", "staging"),
            ("app", "x"),
            ("track", "stable")
        ]))));
        assert!(!s.matches(Some(&labels(&[("env", "dev"), ("app", "x")]))));
        assert!(!s.matches(Some(&labels(&[
            ("env", "prod"),
            ("app", "x"),
            ("track", "canary")
        ]))));
        assert!(!s.matches(Some(&labels(&[("env", "prod")]))));
        assert!(!s.matches(Some(&labels(&[
            ("env", "prod"),
            ("app", "x"),
            ("legacy", "")
        ]))));
    }

    #[test]
    fn empty_selector_selects_everything() {
        let s = Selector::new(&LabelSelector::default()).expect("valid");
        assert!(s.is_everything());
        assert!(s.matches(None));
        assert_eq!(s.to_string(), "");
    }

    #[test]
    fn string_form_sorts_by_key_and_values() {
        let s = selector(
            &[("tier", "x"), ("app", "web")],
            vec![
                expr("env", "In", &["staging", "prod"]),
                expr("zone", "NotIn", &["b", "a"]),
                expr("gpu", "Exists", &[]),
                expr("legacy", "DoesNotExist", &[]),
            ],
        );
        assert_eq!(
            s.to_string(),
            "app=web,env in (prod,staging),gpu,!legacy,tier=x,zone notin (a,b)"
        );
        assert_eq!(selector(&[("app", "web")], vec![]).to_string(), "app=web");
    }

    #[test]
    fn malformed_selectors_are_errors_not_panics() {
        let bad = |e| {
            Selector::new(&LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![e]),
            })
        };
        assert_eq!(
            bad(expr("a", "Gt", &["1"])).map_err(|e| e.to_string()),
            Err("\"Gt\" is not a valid label selector operator".to_owned())
        );
        assert_eq!(
            bad(expr("a", "In", &[])),
            Err(SelectorError::EmptyValues("a".into()))
        );
        assert_eq!(
            bad(expr("a", "Exists", &["x"])),
            Err(SelectorError::UnexpectedValues("a".into()))
        );
    }

    #[test]
    fn from_map_is_an_equality_selector() {
        let s = Selector::from_map(&labels(&[("app", "web")]));
        assert!(s.matches(Some(&labels(&[
            ("app", "web"),
            ("pod-template-hash", "abc")
        ]))));
        assert!(!s.matches(Some(&labels(&[("app", "db")]))));
        assert_eq!(s.to_string(), "app=web");
    }
}
