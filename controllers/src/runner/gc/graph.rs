//! The collector's view of ownership (kube-controller-manager's `GraphBuilder`): for
//! every kind of [`Resource::COLLECTED`], a list and then a watch of the stored
//! objects, keeping only what owns or is owned: the objects that name owners, and
//! the owners being deleted with the `orphan` or `foregroundDeletion` finalizer. Each
//! change says which objects the collector must look at again; the collector decides
//! on live reads, never on this view alone, which may lag behind.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use apiserver::resource::Resource;
use apiserver::{Api, EventKind, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::Deserialize;
use serde_json::Value;

/// An object, by resource, namespace (`""` when cluster-scoped) and name.
pub(crate) type ObjKey = (Resource, String, String);

/// What the collector keeps of an object.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Node {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) namespace: String,
    #[serde(default)]
    pub(crate) uid: String,
    #[serde(default)]
    pub(crate) owner_references: Vec<OwnerReference>,
    #[serde(default)]
    pub(crate) finalizers: Vec<String>,
    #[serde(default)]
    pub(crate) deletion_timestamp: Option<String>,
    /// The stored JSON of [`KEPT_FIELDS`], which a later change is compared with
    /// before anything is decoded.
    #[serde(skip)]
    raw: Vec<Value>,
}

/// What the collector reads of an object's metadata (fields of `metadata`).
const KEPT_FIELDS: [&str; 4] = ["uid", "ownerReferences", "finalizers", "deletionTimestamp"];

/// The field `f` of `v`'s metadata. (`Value::pointer` would allocate to unescape the
/// path, on every change of every object.)
fn meta_field<'v>(v: &'v Value, f: &str) -> Option<&'v Value> {
    v.get("metadata")?.get(f)
}

/// The stored JSON of [`KEPT_FIELDS`] of `v` is `raw`.
fn same_fields(raw: &[Value], v: &Value) -> bool {
    raw.len() == KEPT_FIELDS.len()
        && KEPT_FIELDS
            .iter()
            .zip(raw)
            .all(|(f, r)| meta_field(v, f).unwrap_or(&Value::Null) == r)
}

impl Node {
    /// Whether it waits for its dependents (a Foreground delete).
    pub(crate) fn deleting_dependents(&self) -> bool {
        self.deletion_timestamp.is_some()
            && self.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER)
    }

    fn orphaning(&self) -> bool {
        self.deletion_timestamp.is_some() && self.finalizers.iter().any(|f| f == ORPHAN_FINALIZER)
    }

    fn kept(&self) -> bool {
        !self.owner_references.is_empty() || self.deleting_dependents() || self.orphaning()
    }

    /// Its reference to the owner `uid`, if any.
    pub(crate) fn reference_to(&self, uid: &str) -> Option<&OwnerReference> {
        self.owner_references.iter().find(|r| r.uid == uid)
    }
}

/// Whether a stored object is worth decoding: it names owners or carries finalizers.
fn interesting(v: &Value) -> bool {
    let non_empty = |f: &str| matches!(meta_field(v, f), Some(Value::Array(a)) if !a.is_empty());
    non_empty("ownerReferences") || non_empty("finalizers")
}

fn node_of(v: &Value) -> Option<Node> {
    let mut node = v
        .get("metadata")
        .and_then(|m| Node::deserialize(m).ok())
        .filter(Node::kept)?;
    node.raw = KEPT_FIELDS
        .iter()
        .map(|f| meta_field(v, f).cloned().unwrap_or(Value::Null))
        .collect();
    Some(node)
}

fn key_of(resource: Resource, v: &Value) -> ObjKey {
    let field = |f: &str| {
        meta_field(v, f)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    (resource, field("namespace"), field("name"))
}

#[derive(Default)]
struct Inner {
    nodes: HashMap<ObjKey, Node>,
    /// Owner uid → the kept objects that name it.
    dependents: HashMap<String, HashSet<ObjKey>>,
    /// Uid → key, of the kept objects.
    by_uid: HashMap<String, ObjKey>,
}

impl Inner {
    fn insert(&mut self, key: ObjKey, node: Node) -> Option<Node> {
        let old = self.remove(&key);
        for r in &node.owner_references {
            self.dependents
                .entry(r.uid.clone())
                .or_default()
                .insert(key.clone());
        }
        self.by_uid.insert(node.uid.clone(), key.clone());
        self.nodes.insert(key, node);
        old
    }

    fn remove(&mut self, key: &ObjKey) -> Option<Node> {
        let old = self.nodes.remove(key)?;
        for r in &old.owner_references {
            if let Some(set) = self.dependents.get_mut(&r.uid) {
                set.remove(key);
                if set.is_empty() {
                    self.dependents.remove(&r.uid);
                }
            }
        }
        if self.by_uid.get(&old.uid) == Some(key) {
            self.by_uid.remove(&old.uid);
        }
        Some(old)
    }

    /// The keys to look at again after `key` went from `old` to `new`, whose uid
    /// (when it is gone) is `gone_uid`.
    fn affected(
        &self,
        key: &ObjKey,
        old: Option<&Node>,
        new: Option<&Node>,
        gone_uid: Option<&str>,
    ) -> Vec<ObjKey> {
        let mut out = Vec::new();
        if let Some(n) = new {
            // kube-controller-manager's virtual nodes: an owner the graph has not seen
            // is looked up; one it has seen needs no look, for its deletion (or a relist
            // that misses it) queues its dependents. So a ReplicaSet's 10,000 new pods
            // cost the collector no reads.
            let refs_changed = old.is_none_or(|o| o.owner_references != n.owner_references)
                && n.owner_references
                    .iter()
                    .any(|r| !self.by_uid.contains_key(&r.uid));
            let finalizing = (n.orphaning() || n.deleting_dependents())
                && old.is_none_or(|o| {
                    o.finalizers != n.finalizers || o.deletion_timestamp != n.deletion_timestamp
                });
            if refs_changed || finalizing {
                out.push(key.clone());
            }
        }
        // An owner gone: its dependents' references dangle.
        if let Some(uid) = gone_uid {
            out.extend(self.dependents.get(uid).into_iter().flatten().cloned());
        }
        // A dependent that changed or went: owners waiting for it may be done.
        for r in old
            .iter()
            .chain(new.iter())
            .flat_map(|n| &n.owner_references)
        {
            if let Some(owner) = self.by_uid.get(&r.uid)
                && self.nodes.get(owner).is_some_and(Node::deleting_dependents)
            {
                out.push(owner.clone());
            }
        }
        out
    }
}

/// The collector's graph, shared by its reflectors and workers.
#[derive(Default)]
pub(crate) struct Graph {
    inner: RwLock<Inner>,
}

impl Graph {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The kept objects that name `uid` as an owner, with what is kept of them.
    pub(crate) fn dependents(&self, uid: &str) -> Vec<(ObjKey, Node)> {
        let inner = self.read();
        inner
            .dependents
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|k| inner.nodes.get(k).map(|n| (k.clone(), n.clone())))
            .collect()
    }

    /// Applies one watch event of `resource`; returns the keys to look at again.
    pub(crate) fn apply(&self, resource: Resource, kind: EventKind, v: &Value) -> Vec<ObjKey> {
        let key = key_of(resource, v);
        let deleted = kind == EventKind::Deleted;
        // Most changes (a pod's status) leave what is kept as it was: a read lock and
        // a comparison of the stored JSON, nothing decoded.
        if !deleted
            && self
                .read()
                .nodes
                .get(&key)
                .is_some_and(|n| same_fields(&n.raw, v))
        {
            return Vec::new();
        }
        let new = match kind {
            EventKind::Deleted => None,
            _ if interesting(v) => node_of(v),
            _ => None,
        };
        let gone_uid = deleted
            .then(|| meta_field(v, "uid").and_then(Value::as_str))
            .flatten();
        let mut inner = self.write();
        let old = match &new {
            Some(n) => inner.insert(key.clone(), n.clone()),
            None => inner.remove(&key),
        };
        if old.is_none() && new.is_none() && gone_uid.is_none() {
            return Vec::new();
        }
        inner.affected(&key, old.as_ref(), new.as_ref(), gone_uid)
    }

    /// Replaces what is kept of `resource` with a fresh list; returns every kept
    /// object of it and every dependent of an owner of its kind, since a watch that
    /// expired may have missed deletions.
    pub(crate) fn relist(&self, resource: Resource, items: &[Arc<Value>]) -> Vec<ObjKey> {
        let mut inner = self.write();
        let stale: Vec<ObjKey> = inner
            .nodes
            .keys()
            .filter(|k| k.0 == resource)
            .cloned()
            .collect();
        for k in &stale {
            inner.remove(k);
        }
        for v in items.iter().filter(|v| interesting(v)) {
            if let Some(n) = node_of(v) {
                inner.insert(key_of(resource, v), n);
            }
        }
        inner
            .nodes
            .iter()
            .filter(|(k, n)| {
                k.0 == resource
                    || n.owner_references
                        .iter()
                        .any(|r| Resource::of_kind(&r.api_version, &r.kind) == Some(resource))
            })
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// Keeps `graph` current for `resource` for as long as it runs, handing `queue` the
/// keys each change affects.
pub(crate) async fn reflect(
    api: Api,
    graph: Arc<Graph>,
    resource: Resource,
    queue: impl Fn(ObjKey) + Send + Sync,
    observe: impl Fn(EventKind, &Value) + Send + Sync,
) {
    loop {
        let list = api.list_stored(resource);
        for k in graph.relist(resource, &list.items) {
            queue(k);
        }
        let mut events = match api.watch_stored(resource, list.resource_version) {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!(resource = resource.plural(), error = %e, "collector watch failed; relisting");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
        };
        while let Some(Ok((kind, v))) = events.next().await {
            // Every change, also for who else counts objects (the quota controller).
            observe(kind, &v);
            for k in graph.apply(resource, kind, &v) {
                queue(k);
            }
        }
        // The watch expired or failed: relist.
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn rs(name: &str, uid: &str, owner: Option<&str>) -> Value {
        let refs: Vec<Value> = owner
            .map(|o| json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": o, "blockOwnerDeletion": true}))
            .into_iter()
            .collect();
        json!({"metadata": {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": refs}})
    }

    #[test]
    fn an_owner_gone_queues_its_dependents() {
        let g = Graph::default();
        let rs_key = (Resource::ReplicaSets, "ns".to_owned(), "a".to_owned());
        assert_eq!(
            g.apply(
                Resource::ReplicaSets,
                EventKind::Added,
                &rs("a", "rs-1", Some("d-1"))
            ),
            std::slice::from_ref(&rs_key)
        );
        // A change that leaves the references alone queues nothing.
        assert!(
            g.apply(
                Resource::ReplicaSets,
                EventKind::Modified,
                &rs("a", "rs-1", Some("d-1"))
            )
            .is_empty()
        );
        let d = json!({"metadata": {"name": "d", "namespace": "ns", "uid": "d-1"}});
        assert_eq!(
            g.apply(Resource::Deployments, EventKind::Deleted, &d),
            [rs_key]
        );
        // A bare object costs nothing.
        assert!(
            g.apply(
                Resource::ReplicaSets,
                EventKind::Added,
                &rs("b", "rs-2", None)
            )
            .is_empty()
        );
    }

    #[test]
    fn a_foreground_owner_is_queued_when_a_dependent_goes() {
        let g = Graph::default();
        g.apply(
            Resource::ReplicaSets,
            EventKind::Added,
            &rs("a", "rs-1", Some("d-1")),
        );
        let d = json!({"metadata": {"name": "d", "namespace": "ns", "uid": "d-1",
            "deletionTimestamp": "2024-01-01T00:00:00Z", "finalizers": ["foregroundDeletion"]}});
        let d_key = (Resource::Deployments, "ns".to_owned(), "d".to_owned());
        assert_eq!(
            g.apply(Resource::Deployments, EventKind::Modified, &d),
            std::slice::from_ref(&d_key)
        );
        assert_eq!(g.dependents("d-1").len(), 1);
        let gone = g.apply(
            Resource::ReplicaSets,
            EventKind::Deleted,
            &rs("a", "rs-1", Some("d-1")),
        );
        assert_eq!(gone, [d_key]);
        assert!(g.dependents("d-1").is_empty());
    }

    #[test]
    fn a_dependent_of_an_owner_the_graph_knows_is_not_looked_up() {
        let g = Graph::default();
        // The ReplicaSet names a Deployment the graph has not seen: it is looked up.
        let rs_key = (Resource::ReplicaSets, "ns".to_owned(), "a".to_owned());
        assert_eq!(
            g.apply(
                Resource::ReplicaSets,
                EventKind::Added,
                &rs("a", "rs-1", Some("d-1"))
            ),
            std::slice::from_ref(&rs_key)
        );
        // Its pods name the ReplicaSet, which the graph holds: nothing to look up.
        let pod = json!({"metadata": {"name": "p", "namespace": "ns", "uid": "p-1",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "rs-1"}]}});
        assert!(g.apply(Resource::Pods, EventKind::Added, &pod).is_empty());
        // Once the ReplicaSet goes, the pod is looked at.
        let pod_key = (Resource::Pods, "ns".to_owned(), "p".to_owned());
        assert_eq!(
            g.apply(
                Resource::ReplicaSets,
                EventKind::Deleted,
                &rs("a", "rs-1", Some("d-1"))
            ),
            [pod_key]
        );
    }
}
