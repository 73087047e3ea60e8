//! Lists in pages: `limit` and `continue`, as kube-apiserver serves them.
//!
//! A page is cut from the list as it was at one resourceVersion. The first page is
//! the store's current state; later pages rebuild the state at the token's
//! resourceVersion by undoing the changes since (the store's bounded history). When
//! the history no longer reaches back that far, the answer is kube-apiserver's 410 for
//! a stale continue token, and the client starts a new list.
//!
//! The token is kube-apiserver's: unpadded base64url of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"<last key under the list's prefix>\u0000"}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use crate::api::Api;
use crate::error::ApiError;
use crate::resource::Resource;
use crate::selectors::Selectors;

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// kube-apiserver's words for a continue token older than the retained history.
const TOO_OLD: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";

#[derive(serde::Serialize, serde::Deserialize)]
struct Token {
    v: String,
    rv: u64,
    start: String,
}

/// One page of a list.
pub(crate) struct Page {
    pub(crate) items: Vec<Arc<Value>>,
    /// The resourceVersion every page of this list is read at.
    pub(crate) rv: u64,
    /// The token of the next page, if there is one.
    pub(crate) next: Option<String>,
    /// Items after this page, when no selector makes that unknowable without reading
    /// them (kube-apiserver reports it only then).
    pub(crate) remaining: Option<usize>,
}

fn bad_token(why: &str) -> ApiError {
    ApiError::BadRequest(format!("continue key is not valid: {why}"))
}

fn decode(token: &str) -> Result<Token, ApiError> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|e| bad_token(&e.to_string()))?;
    let token: Token = serde_json::from_slice(&raw).map_err(|e| bad_token(&e.to_string()))?;
    if token.v != TOKEN_VERSION {
        return Err(bad_token(&format!(
            "incorrect encoded start resourceVersion (version {})",
            token.v
        )));
    }
    Ok(token)
}

fn encode(rv: u64, last: &str) -> String {
    let token = Token {
        v: TOKEN_VERSION.into(),
        rv,
        start: format!("{last}\u{0}"),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// The key of `object` relative to the list's `prefix`.
fn relative_key(resource: Resource, prefix: &str, object: &Value) -> Option<String> {
    let meta = object.get("metadata")?;
    let name = meta.get("name")?.as_str()?;
    let ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
    resource
        .key(ns, name)
        .strip_prefix(prefix)
        .map(str::to_string)
}

/// Which part of a list a page is.
pub(crate) struct Window<'a> {
    /// At most this many items.
    pub(crate) limit: usize,
    /// After this continue token.
    pub(crate) cont: Option<&'a str>,
    /// The list as it was at this resourceVersion (`resourceVersionMatch=Exact`; a
    /// continue token carries its own).
    pub(crate) exact: Option<u64>,
}

/// kube-apiserver's words for a list at a resourceVersion older than the history.
const LIST_TOO_OLD: &str = "The resourceVersion for the provided list is too old.";

/// The page `window` asks for.
pub(crate) fn page(
    api: &Api,
    resource: Resource,
    ns: Option<&str>,
    sel: &Selectors,
    window: Window<'_>,
    selective: bool,
) -> Result<Page, ApiError> {
    let Window { limit, cont, exact } = window;
    let prefix = resource.prefix(ns);
    let (token, too_old) = match (cont.map(decode).transpose()?, exact) {
        (Some(t), _) => (Some(t), TOO_OLD),
        (None, Some(rv)) => (
            Some(Token {
                v: TOKEN_VERSION.into(),
                rv,
                start: String::new(),
            }),
            LIST_TOO_OLD,
        ),
        (None, None) => (None, TOO_OLD),
    };
    let (current, now) = api.store().list(&prefix);
    let mut state: BTreeMap<String, Arc<Value>> = current
        .into_iter()
        .filter_map(|o| Some((relative_key(resource, &prefix, &o)?, o)))
        .collect();
    let (rv, start) = match &token {
        None => (now, String::new()),
        Some(t) if t.rv >= now => (now, t.start.clone()),
        Some(t) => {
            let changes = api
                .store()
                .changes_since(&prefix, t.rv)
                .ok_or_else(|| ApiError::Expired(too_old.into()))?;
            // The earliest change of each key after the token holds its value then.
            let mut undone = std::collections::HashSet::new();
            for change in changes {
                let Some(key) = change.key.strip_prefix(&prefix) else {
                    continue;
                };
                if !undone.insert(key.to_string()) {
                    continue;
                }
                match change.previous.as_ref().and_then(|p| p.decode().ok()) {
                    Some(before) => state.insert(key.to_string(), Arc::new(before)),
                    None => state.remove(key),
                };
            }
            (t.rv, t.start.clone())
        }
    };
    let mut after = state
        .range(start..)
        .filter(|(_, o)| sel.matches(o))
        .map(|(k, o)| (k.clone(), Arc::clone(o)));
    let items: Vec<(String, Arc<Value>)> = after.by_ref().take(limit).collect();
    let rest = after.count();
    let next = match items.last() {
        Some((last, _)) if rest > 0 => Some(encode(rv, last)),
        _ => None,
    };
    Ok(Page {
        items: items.into_iter().map(|(_, o)| o).collect(),
        rv,
        remaining: (next.is_some() && !selective).then_some(rest),
        next,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tokens_are_kube_apiservers_and_bad_ones_are_400() {
        let t = encode(42, "default/web");
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&t)
            .unwrap();
        assert_eq!(
            String::from_utf8(raw).unwrap(),
            r#"{"v":"meta.k8s.io/v1","rv":42,"start":"default/web\u0000"}"#
        );
        let back = decode(&t).unwrap();
        assert_eq!((back.rv, back.start.as_str()), (42, "default/web\u{0}"));
        assert!(matches!(
            decode("not a token"),
            Err(ApiError::BadRequest(_))
        ));
    }
}
