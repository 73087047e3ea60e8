//! RBAC rule semantics, as Kubernetes' `rbac/validation` package defines them: whether a
//! rule allows a request, and whether one set of rules covers another (escalation).

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::auth::request_info::Attributes;

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or(&[])
}

fn has(items: &[String], s: &str) -> bool {
    items.iter().any(|i| i == s)
}

/// Whether `rule` allows the request `a`.
pub fn allows(rule: &PolicyRule, a: &Attributes) -> bool {
    let verbs = &rule.verbs;
    if !(has(verbs, "*") || has(verbs, &a.verb)) {
        return false;
    }
    if !a.resource_request {
        return list(&rule.non_resource_urls)
            .iter()
            .any(|u| url_matches(u, &a.path));
    }
    let groups = list(&rule.api_groups);
    if !(has(groups, "*") || has(groups, &a.api_group)) {
        return false;
    }
    let combined = a.combined_resource();
    let resource_ok = list(&rule.resources).iter().any(|r| {
        r == "*"
            || *r == combined
            || (!a.subresource.is_empty()
                && r.len() == a.subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(a.subresource.as_str()))
    });
    if !resource_ok {
        return false;
    }
    let names = list(&rule.resource_names);
    names.is_empty() || has(names, &a.name)
}

/// `*`, an exact path, or a prefix ending in `*`.
fn url_matches(rule: &str, path: &str) -> bool {
    rule == "*"
        || rule == path
        || rule
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

/// One rule per (group, resource, verb, name) or (url, verb), as `BreakdownRule` splits
/// a rule before checking coverage.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |f: &dyn Fn(&mut PolicyRule)| {
        let mut r = PolicyRule::default();
        f(&mut r);
        r
    };
    let mut out = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(one(&|r| {
                        r.api_groups = Some(vec![group.clone()]);
                        r.resources = Some(vec![resource.clone()]);
                        r.verbs = vec![verb.clone()];
                    }));
                }
                for name in names {
                    out.push(one(&|r| {
                        r.api_groups = Some(vec![group.clone()]);
                        r.resources = Some(vec![resource.clone()]);
                        r.verbs = vec![verb.clone()];
                        r.resource_names = Some(vec![name.clone()]);
                    }));
                }
            }
        }
    }
    for url in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            out.push(one(&|r| {
                r.non_resource_urls = Some(vec![url.clone()]);
                r.verbs = vec![verb.clone()];
            }));
        }
    }
    out
}

/// Whether `owner` grants at least what `servant` (one broken-down rule) asks.
fn rule_covers(owner: &PolicyRule, servant: &PolicyRule) -> bool {
    let covers_all = |o: &[String], s: &[String]| has(o, "*") || s.iter().all(|x| has(o, x));
    let verbs = covers_all(&owner.verbs, &servant.verbs);
    let groups = covers_all(list(&owner.api_groups), list(&servant.api_groups));
    let resources = has(list(&owner.resources), "*")
        || list(&servant.resources).iter().all(|r| {
            has(list(&owner.resources), r)
                || r.find('/')
                    .is_some_and(|ix| has(list(&owner.resources), &format!("*{}", &r[ix..])))
        });
    let urls = list(&servant.non_resource_urls).iter().all(|u| {
        list(&owner.non_resource_urls)
            .iter()
            .any(|o| url_matches(o, u))
    });
    let owner_names = list(&owner.resource_names);
    let servant_names = list(&servant.resource_names);
    let names = owner_names.is_empty()
        || (!servant_names.is_empty() && servant_names.iter().all(|n| has(owner_names, n)));
    verbs && groups && resources && urls && names
}

/// The parts of `servant` that no rule of `owner` covers (empty: `owner` covers it all).
pub fn uncovered(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|s| !owner.iter().any(|o| rule_covers(o, s)))
        .collect()
}

/// A rule as Kubernetes prints it in an escalation error (`CompactString`):
/// `{APIGroups:[""], Resources:["pods"], Verbs:["create"]}`.
pub fn compact(rule: &PolicyRule) -> String {
    let quoted = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut parts = Vec::new();
    for (label, v) in [
        ("APIGroups", list(&rule.api_groups)),
        ("Resources", list(&rule.resources)),
        ("ResourceNames", list(&rule.resource_names)),
        ("NonResourceURLs", list(&rule.non_resource_urls)),
        ("Verbs", rule.verbs.as_slice()),
    ] {
        if !v.is_empty() {
            parts.push(format!("{label}:[{}]", quoted(v)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// A rule from string slices, for bootstrap roles and tests.
pub fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(owned(groups)),
        resources: Some(owned(resources)),
        verbs: owned(verbs),
        ..PolicyRule::default()
    }
}

/// A non-resource URL rule.
pub fn url_rule(urls: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        non_resource_urls: Some(owned(urls)),
        verbs: owned(verbs),
        ..PolicyRule::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(verb: &str, group: &str, resource: &str, name: &str) -> Attributes {
        Attributes::resource(verb, group, resource, "a", name)
    }

    #[test]
    fn verbs_groups_resources_and_names_match_as_in_kubernetes() {
        let pods = rule(&[""], &["pods"], &["get", "list"]);
        assert!(allows(&pods, &res("get", "", "pods", "x")));
        assert!(!allows(&pods, &res("create", "", "pods", "")));
        assert!(
            !allows(&pods, &res("get", "apps", "pods", "x")),
            "the group must match"
        );
        assert!(
            !allows(&pods, &res("get", "", "pods/status", "x")),
            "pods does not cover pods/status"
        );
        let star = rule(&["*"], &["*"], &["*"]);
        assert!(
            allows(&star, &res("update", "", "pods/status", "x")),
            "* covers subresources"
        );
        let any_status = rule(&[""], &["*/status"], &["update"]);
        assert!(allows(&any_status, &res("update", "", "pods/status", "x")));
        assert!(!allows(&any_status, &res("update", "", "pods", "x")));
        let mut named = rule(&[""], &["pods"], &["get", "create"]);
        named.resource_names = Some(vec!["x".into()]);
        assert!(allows(&named, &res("get", "", "pods", "x")));
        assert!(!allows(&named, &res("get", "", "pods", "y")));
        assert!(
            !allows(&named, &res("create", "", "pods", "")),
            "create has no name"
        );
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_star_prefix() {
        let r = url_rule(&["/healthz", "/apis/*"], &["get"]);
        assert!(allows(&r, &Attributes::non_resource("get", "/healthz")));
        assert!(!allows(&r, &Attributes::non_resource("get", "/healthz/x")));
        assert!(allows(&r, &Attributes::non_resource("get", "/apis/x/y")));
        assert!(!allows(&r, &Attributes::non_resource("post", "/healthz")));
        assert!(
            !allows(&r, &res("get", "", "pods", "")),
            "a URL rule allows no resource"
        );
        assert!(!allows(
            &rule(&["*"], &["*"], &["*"]),
            &Attributes::non_resource("get", "/metrics")
        ));
    }

    #[test]
    fn escalation_finds_what_the_owner_does_not_hold() {
        let owner = vec![rule(&[""], &["pods", "*/status"], &["get", "list"])];
        assert!(uncovered(&owner, &[rule(&[""], &["pods"], &["get"])]).is_empty());
        assert!(uncovered(&owner, &[rule(&[""], &["pods/status"], &["list"])]).is_empty());
        let missing = uncovered(
            &owner,
            &[rule(&[""], &["pods", "secrets"], &["get", "create"])],
        );
        let text: Vec<String> = missing.iter().map(compact).collect();
        assert_eq!(
            text,
            [
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["create"]}"#,
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}"#,
                r#"{APIGroups:[""], Resources:["secrets"], Verbs:["create"]}"#,
            ]
        );
        let mut named_owner = rule(&[""], &["pods"], &["get"]);
        named_owner.resource_names = Some(vec!["x".into()]);
        assert_eq!(
            uncovered(&[named_owner.clone()], &[rule(&[""], &["pods"], &["get"])]).len(),
            1,
            "a named grant does not cover all names"
        );
        let mut named = rule(&[""], &["pods"], &["get"]);
        named.resource_names = Some(vec!["x".into()]);
        assert!(uncovered(&[named_owner], &[named]).is_empty());
        let admin = vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])];
        assert!(
            uncovered(
                &admin,
                &[
                    url_rule(&["/metrics"], &["get"]),
                    rule(&["x"], &["y/z"], &["bind"])
                ]
            )
            .is_empty()
        );
        assert_eq!(
            uncovered(
                &[rule(&["*"], &["*"], &["*"])],
                &[url_rule(&["/metrics"], &["get"])]
            )
            .len(),
            1
        );
        assert!(
            uncovered(
                &[url_rule(&["/api/*"], &["get"])],
                &[url_rule(&["/api/v1"], &["get"])]
            )
            .is_empty()
        );
    }
}
