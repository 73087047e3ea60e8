//! Watches as streams of typed or raw events, with selector semantics: an object that
//! starts matching is ADDED, one that stops matching is DELETED, as in Kubernetes.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Api;
use super::objects::typed;
use crate::error::ApiError;
use crate::resource::Resource;
use crate::selectors::Selectors;
use crate::store::{Change, ChangeKind, StoreError, Watcher, object_rv};

/// What happened to an object, as a watcher sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Created, or started matching the watch's selectors.
    Added,
    /// Changed and still matches.
    Modified,
    /// Removed, or stopped matching.
    Deleted,
}

impl EventKind {
    /// The watch event type on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One typed watch event.
#[derive(Debug, Clone)]
pub struct ObjectEvent<T> {
    /// What happened.
    pub kind: EventKind,
    /// The object after the change (for deletions, the last state).
    pub object: T,
    /// The resourceVersion of the change; resume a watch from here.
    pub resource_version: u64,
}

/// A typed watch: events in resourceVersion order; an `Err` item ends it.
pub type ObjectStream<T> = BoxStream<'static, Result<ObjectEvent<T>, ApiError>>;

/// A raw watch: kind and the stored JSON object; an `Err` item ends it. For in-process
/// consumers that look at a few fields of many events and would waste their time
/// decoding whole objects.
pub type RawStream = BoxStream<'static, Result<(EventKind, Arc<Value>), ApiError>>;

/// Maps one store change to what a watcher with `sel` sees, if anything.
fn classify(change: &Change, sel: &Selectors) -> Option<(EventKind, Arc<Value>)> {
    let now = sel.matches(&change.object);
    // Without selectors every object matches, and the previous one need not be decoded.
    let before = match &change.previous {
        None => false,
        Some(_) if sel.is_everything() => true,
        Some(p) => p.decode().is_ok_and(|p| sel.matches(&p)),
    };
    let kind = match change.kind {
        ChangeKind::Added if now => EventKind::Added,
        ChangeKind::Modified if now && before => EventKind::Modified,
        ChangeKind::Modified if now => EventKind::Added,
        ChangeKind::Modified if before => EventKind::Deleted,
        ChangeKind::Deleted if before || now => EventKind::Deleted,
        _ => return None,
    };
    Some((kind, Arc::clone(&change.object)))
}

struct WatchState {
    initial: VecDeque<Arc<Value>>,
    watcher: Watcher,
    sel: Selectors,
    done: bool,
}

impl Api {
    /// Changes of `resource` after `from`; `None` first replays the current objects as
    /// ADDED (Kubernetes' "start at most recent" for a watch without resourceVersion).
    pub(crate) fn watch_raw(
        &self,
        resource: Resource,
        ns: Option<&str>,
        from: Option<u64>,
        sel: Selectors,
    ) -> Result<RawStream, ApiError> {
        let prefix = resource.prefix(ns);
        let (initial, from) = match from {
            Some(rv) => (VecDeque::new(), rv),
            None => {
                let (items, rv) = self.list_raw(resource, ns, &sel);
                (items.into(), rv)
            }
        };
        let watcher = self
            .store()
            .watch(&prefix, from)
            .map_err(ApiError::from_store)?;
        let state = WatchState {
            initial,
            watcher,
            sel,
            done: false,
        };
        Ok(futures::stream::unfold(state, |mut st| async move {
            if st.done {
                return None;
            }
            if let Some(obj) = st.initial.pop_front() {
                return Some((Ok((EventKind::Added, obj)), st));
            }
            loop {
                match st.watcher.next().await {
                    Ok(change) => {
                        if let Some(ev) = classify(&change, &st.sel) {
                            return Some((Ok(ev), st));
                        }
                    }
                    Err(StoreError::Closed) => return None,
                    Err(e) => {
                        st.done = true;
                        return Some((Err(ApiError::from_store(e)), st));
                    }
                }
            }
        })
        .boxed())
    }

    pub(crate) fn watch_typed<T: DeserializeOwned + Send + 'static>(
        &self,
        resource: Resource,
        ns: Option<&str>,
        from: u64,
    ) -> Result<ObjectStream<T>, ApiError> {
        let raw = self.watch_raw(resource, ns, Some(from), Selectors::default())?;
        Ok(raw
            .map(|item| {
                let (kind, v) = item?;
                Ok(ObjectEvent {
                    kind,
                    resource_version: object_rv(&v).unwrap_or(0),
                    object: typed(&v)?,
                })
            })
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn change(kind: ChangeKind, prev: Option<Value>, now: Value) -> Change {
        Change {
            rv: 2,
            kind,
            key: "pods/d/a".into(),
            object: Arc::new(now),
            previous: prev.map(|p| crate::store::Stored::encode(&p, 1).unwrap()),
        }
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let sel = Selectors::parse("app=web", "", Resource::Pods).unwrap();
        let web = json!({"metadata": {"labels": {"app": "web"}}});
        let db = json!({"metadata": {"labels": {"app": "db"}}});
        let k = |c: &Change| classify(c, &sel).map(|(k, _)| k);
        assert_eq!(
            k(&change(ChangeKind::Modified, Some(db.clone()), web.clone())),
            Some(EventKind::Added)
        );
        assert_eq!(
            k(&change(ChangeKind::Modified, Some(web.clone()), db.clone())),
            Some(EventKind::Deleted)
        );
        assert_eq!(
            k(&change(
                ChangeKind::Modified,
                Some(web.clone()),
                web.clone()
            )),
            Some(EventKind::Modified)
        );
        assert_eq!(
            k(&change(ChangeKind::Modified, Some(db.clone()), db.clone())),
            None
        );
        assert_eq!(
            k(&change(ChangeKind::Deleted, Some(web.clone()), web)),
            Some(EventKind::Deleted)
        );
        assert_eq!(k(&change(ChangeKind::Added, None, db)), None);
    }
}
