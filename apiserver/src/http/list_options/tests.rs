#![allow(clippy::unwrap_used)]
use super::*;

fn params(query: &[(&str, &str)]) -> Params {
    Params(
        query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

fn refusal(query: &[(&str, &str)]) -> Vec<String> {
    let Err(ApiError::Invalid { kind, name, causes }) = check(&params(query)) else {
        panic!("accepted: {query:?}");
    };
    assert_eq!(
        (kind.as_str(), name.as_str()),
        ("ListOptions.meta.k8s.io", "")
    );
    causes
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

#[test]
fn lists_are_read_now_or_exactly_at_a_resource_version() {
    assert_eq!(check(&params(&[])).unwrap(), ListAt::Current);
    assert_eq!(
        check(&params(&[("resourceVersion", "7")])).unwrap(),
        ListAt::Current
    );
    assert_eq!(
        check(&params(&[
            ("resourceVersion", "7"),
            ("resourceVersionMatch", "NotOlderThan")
        ]))
        .unwrap(),
        ListAt::Current
    );
    assert_eq!(
        check(&params(&[
            ("resourceVersion", "7"),
            ("resourceVersionMatch", "Exact")
        ]))
        .unwrap(),
        ListAt::Exact(7)
    );
}

#[test]
fn a_list_is_refused_as_validate_list_options_refuses_it() {
    assert_eq!(
        refusal(&[("resourceVersionMatch", "Exact")]),
        [
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        ]
    );
    assert_eq!(
        refusal(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]),
        [
            "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
        ]
    );
    assert_eq!(
        refusal(&[
            ("resourceVersion", "3"),
            ("resourceVersionMatch", "Newest"),
            ("continue", "abc")
        ]),
        [
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
            "resourceVersionMatch: Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
        ]
    );
    assert_eq!(
        refusal(&[("sendInitialEvents", "true")]),
        ["sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"]
    );
}

#[test]
fn a_watch_is_refused_as_validate_watch_options_refuses_it() {
    assert_eq!(
        refusal(&[("watch", "true"), ("sendInitialEvents", "true")]),
        [
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        ]
    );
    assert_eq!(
        refusal(&[("watch", "true"), ("resourceVersionMatch", "Exact")]),
        [
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            "resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"",
        ]
    );
    assert_eq!(
        check(&params(&[
            ("watch", "true"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan")
        ]))
        .unwrap(),
        ListAt::Current
    );
}

#[test]
fn a_watch_begins_with_the_state_when_asked_or_when_it_names_no_version() {
    assert!(send_initial_events(&params(&[])));
    assert!(send_initial_events(&params(&[("resourceVersion", "0")])));
    assert!(!send_initial_events(&params(&[("resourceVersion", "9")])));
    assert!(send_initial_events(&params(&[
        ("resourceVersion", "9"),
        ("sendInitialEvents", "true")
    ])));
    // The streaming list's other form: from now on, nothing before.
    assert!(!send_initial_events(&params(&[(
        "sendInitialEvents",
        "false"
    )])));
}
