//! What the controllers read: every Pod, ReplicaSet, Deployment, ReplicationController,
//! DaemonSet, Node, StatefulSet and ControllerRevision, kept current by a
//! list and then a watch per kind (a watch that expires is a relist), as client-go's
//! informers keep theirs. Reconciles read from here, never from the store, so a burst
//! of events costs one reconcile per key, not one read per event.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use apiserver::{Api, ApiError, EventKind, ObjectList};
use futures::StreamExt as _;
use k8s_openapi::Metadata;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use super::queue::Key;

/// A kind the cache keeps: how it is listed and watched. `all: false` lets a kind keep
/// only the objects that matter while no owner exists (pods: those with owners).
pub(crate) trait Watched: Metadata<Ty = ObjectMeta> + Clone + Send + Sync + 'static {
    fn list(api: &Api, all: bool) -> Result<ObjectList<Self>, ApiError>;
    fn watch(api: &Api, from: u64, all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError>;
}

/// Whether a pod names owners: the only pods kept while no ReplicaSet exists (their
/// owners' controllers read them; nothing could adopt the others).
fn owned(meta: &ObjectMeta) -> bool {
    meta.owner_references
        .as_ref()
        .is_some_and(|r| !r.is_empty())
}

impl Watched for Pod {
    fn list(api: &Api, all: bool) -> Result<ObjectList<Self>, ApiError> {
        let list = api.list_pods(None, "", "")?;
        Ok(ObjectList {
            items: list
                .items
                .into_iter()
                .filter(|p| all || owned(&p.metadata))
                .map(slim)
                .collect(),
            resource_version: list.resource_version,
        })
    }
    fn watch(api: &Api, from: u64, all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        // Pods change most and are the largest: each event decodes only what a
        // reconcile reads (metadata, the node, the phase, conditions and restarts),
        // not the containers' specs; and while no ReplicaSet exists, a pod without
        // owners is not decoded at all (a cluster of bare pods pays a lookup).
        let raw = api.watch_pods_raw(None, from)?;
        Ok(raw
            .map(move |item| {
                let (kind, value) = item?;
                let has_owners = matches!(
                    value.pointer("/metadata/ownerReferences"),
                    Some(serde_json::Value::Array(r)) if !r.is_empty()
                );
                if !all && !has_owners {
                    // Not kept (and not decoded): a pod that lost its owners leaves
                    // the cache; for the others this removes nothing.
                    let field = |f: &str| {
                        value
                            .pointer(&format!("/metadata/{f}"))
                            .and_then(serde_json::Value::as_str)
                            .map(str::to_owned)
                    };
                    let mut pod = Pod::default();
                    pod.metadata.name = field("name");
                    pod.metadata.namespace = field("namespace");
                    return Ok(apiserver::ObjectEvent {
                        kind: EventKind::Deleted,
                        object: pod,
                        resource_version: 0,
                    });
                }
                let view = PodView::deserialize(value.as_ref()).map_err(|e| {
                    ApiError::Internal(format!("a stored pod does not decode: {e}"))
                })?;
                let resource_version = view
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                Ok(apiserver::ObjectEvent {
                    kind,
                    object: view.into_pod(),
                    resource_version,
                })
            })
            .boxed())
    }
}

/// What the controllers read of a pod.
#[derive(Deserialize)]
struct PodView {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<NodeOnly>,
    #[serde(default)]
    status: Option<StatusView>,
}

/// Where a pod is, or (a DaemonSet's, unbound) where its required node affinity
/// pins it; a pod without affinity decodes no more than its node.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeOnly {
    node_name: Option<String>,
    #[serde(default)]
    affinity: Option<k8s_openapi::api::core::v1::Affinity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusView {
    phase: Option<String>,
    conditions: Option<Vec<k8s_openapi::api::core::v1::PodCondition>>,
    container_statuses: Option<Vec<RestartsOnly>>,
    init_container_statuses: Option<Vec<RestartsOnly>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RestartsOnly {
    name: String,
    restart_count: i32,
    /// How a finished container ended: a Job's podFailurePolicy matches exit codes,
    /// and its re-create backoff counts from when the pod finished.
    #[serde(default)]
    state: Option<StateView>,
}

#[derive(Deserialize)]
struct StateView {
    terminated: Option<EndOnly>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndOnly {
    exit_code: i32,
    finished_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

impl PodView {
    fn into_pod(self) -> Pod {
        let statuses = |list: Option<Vec<RestartsOnly>>| {
            list.map(|l| {
                l.into_iter()
                    .map(|c| k8s_openapi::api::core::v1::ContainerStatus {
                        name: c.name,
                        restart_count: c.restart_count,
                        state: c.state.and_then(|s| s.terminated).map(|t| {
                            k8s_openapi::api::core::v1::ContainerState {
                                terminated: Some(
                                    k8s_openapi::api::core::v1::ContainerStateTerminated {
                                        exit_code: t.exit_code,
                                        finished_at: t.finished_at,
                                        ..Default::default()
                                    },
                                ),
                                ..Default::default()
                            }
                        }),
                        ..Default::default()
                    })
                    .collect()
            })
        };
        Pod {
            metadata: self.metadata,
            spec: self.spec.map(|s| k8s_openapi::api::core::v1::PodSpec {
                node_name: s.node_name,
                affinity: s.affinity,
                ..Default::default()
            }),
            status: self.status.map(|s| k8s_openapi::api::core::v1::PodStatus {
                phase: s.phase,
                conditions: s.conditions,
                container_statuses: statuses(s.container_statuses),
                init_container_statuses: statuses(s.init_container_statuses),
                ..Default::default()
            }),
        }
    }
}

/// A listed pod cut to what [`PodView`] keeps, so that cached pods look alike
/// whether they came from the list or a watch.
fn slim(pod: Pod) -> Pod {
    let value = serde_json::to_value(&pod).unwrap_or_default();
    PodView::deserialize(&value).map_or(pod, PodView::into_pod)
}

impl Watched for ReplicaSet {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_replicasets(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_replicasets(None, from)
    }
}

impl Watched for ReplicationController {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_replicationcontrollers(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_replicationcontrollers(None, from)
    }
}

impl Watched for DaemonSet {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_daemonsets(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_daemonsets(None, from)
    }
}

impl Watched for k8s_openapi::api::batch::v1::Job {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_jobs(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_jobs(None, from)
    }
}

impl Watched for k8s_openapi::api::batch::v1::CronJob {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_cronjobs(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_cronjobs(None, from)
    }
}

/// Nodes are cluster-scoped: they are kept under the namespace `""`.
impl Watched for Node {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_nodes("", "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_nodes(from)
    }
}

impl Watched for k8s_openapi::api::policy::v1::PodDisruptionBudget {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_poddisruptionbudgets(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_poddisruptionbudgets(None, from)
    }
}

impl Watched for Deployment {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_deployments(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_deployments(None, from)
    }
}

/// `(namespace, controller uid)` → the objects it controls, by name.
type ByController<K> = HashMap<(String, String), BTreeMap<String, Arc<K>>>;

/// The objects of one kind, by namespace then name, and by namespace and controller.
pub(crate) struct Objects<K> {
    by_ns: RwLock<HashMap<String, BTreeMap<String, Arc<K>>>>,
    /// `(namespace, controller uid)` → the objects it controls by name; `""` holds
    /// those without a controller. Written under `by_ns`'s write lock, so the two
    /// agree: a ReplicaSet's sync reads its own pods and the orphans, not the whole
    /// namespace (a rollout's other ReplicaSet).
    by_controller: RwLock<ByController<K>>,
}

impl<K> Default for Objects<K> {
    fn default() -> Self {
        Self {
            by_ns: RwLock::default(),
            by_controller: RwLock::default(),
        }
    }
}

/// Where an object goes in [`Objects::by_controller`].
fn controller_key(meta: &ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        crate::controller_of(meta)
            .map(|r| r.uid.clone())
            .unwrap_or_default(),
    )
}

/// A change the cache applied: the object before and after (`None` when absent).
pub(crate) struct Change<K> {
    pub(crate) old: Option<Arc<K>>,
    pub(crate) new: Option<Arc<K>>,
}

impl<K: Watched> Objects<K> {
    /// One object.
    pub(crate) fn get(&self, key: &Key) -> Option<Arc<K>> {
        self.read().get(&key.0).and_then(|m| m.get(&key.1)).cloned()
    }

    /// Every object, by namespace then name.
    pub(crate) fn all(&self) -> Vec<Arc<K>> {
        let all = self.read();
        let mut namespaces: Vec<&String> = all.keys().collect();
        namespaces.sort();
        namespaces
            .into_iter()
            .flat_map(|ns| all[ns].values().cloned())
            .collect()
    }

    /// The objects of namespace `ns`, in name order.
    pub(crate) fn in_namespace(&self, ns: &str) -> Vec<Arc<K>> {
        self.read()
            .get(ns)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The objects of namespace `ns` that the object `uid` controls, then those that
    /// no object controls, each in name order.
    pub(crate) fn controlled_or_orphans(&self, ns: &str, uid: &str) -> Vec<Arc<K>> {
        let index = self.index();
        let of = |owner: &str| {
            index
                .get(&(ns.to_owned(), owner.to_owned()))
                .into_iter()
                .flat_map(|m| m.values().cloned())
        };
        let mut out: Vec<Arc<K>> = of(uid).collect();
        if !uid.is_empty() {
            out.extend(of(""));
        }
        out
    }

    fn put(&self, obj: K) -> Change<K> {
        let (ns, name) = key_of(obj.metadata());
        let new = Arc::new(obj);
        let mut all = self.write();
        let old = all
            .entry(ns)
            .or_default()
            .insert(name.clone(), Arc::clone(&new));
        let mut index = self.index_mut();
        if let Some(o) = &old {
            unindex(&mut index, o.metadata(), &name);
        }
        index
            .entry(controller_key(new.metadata()))
            .or_default()
            .insert(name, Arc::clone(&new));
        Change {
            old,
            new: Some(new),
        }
    }

    fn remove(&self, obj: &K) -> Change<K> {
        let (ns, name) = key_of(obj.metadata());
        let mut all = self.write();
        let old = all.get_mut(&ns).and_then(|m| m.remove(&name));
        if all.get(&ns).is_some_and(BTreeMap::is_empty) {
            all.remove(&ns);
        }
        if let Some(o) = &old {
            unindex(&mut self.index_mut(), o.metadata(), &name);
        }
        Change { old, new: None }
    }

    /// Replaces everything with a fresh list; returns what changed, deletions included.
    fn replace(&self, items: Vec<K>) -> Vec<Change<K>> {
        let mut fresh: HashMap<String, BTreeMap<String, Arc<K>>> = HashMap::new();
        for obj in items {
            let (ns, name) = key_of(obj.metadata());
            fresh.entry(ns).or_default().insert(name, Arc::new(obj));
        }
        let mut all = self.write();
        let mut changes = Vec::new();
        for (ns, objs) in all.iter() {
            for (name, old) in objs {
                if !fresh.get(ns).is_some_and(|m| m.contains_key(name)) {
                    changes.push(Change {
                        old: Some(Arc::clone(old)),
                        new: None,
                    });
                }
            }
        }
        for (ns, objs) in &fresh {
            for (name, new) in objs {
                let old = all.get(ns).and_then(|m| m.get(name)).cloned();
                let same = old.as_ref().is_some_and(|o| {
                    o.metadata().resource_version == new.metadata().resource_version
                });
                if !same {
                    changes.push(Change {
                        old,
                        new: Some(Arc::clone(new)),
                    });
                }
            }
        }
        let mut index: ByController<K> = HashMap::new();
        for (name, obj) in fresh.values().flat_map(|m| m.iter()) {
            index
                .entry(controller_key(obj.metadata()))
                .or_default()
                .insert(name.clone(), Arc::clone(obj));
        }
        *all = fresh;
        *self.index_mut() = index;
        changes
    }

    fn index(&self) -> std::sync::RwLockReadGuard<'_, ByController<K>> {
        self.by_controller
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn index_mut(&self) -> std::sync::RwLockWriteGuard<'_, ByController<K>> {
        self.by_controller
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, BTreeMap<String, Arc<K>>>> {
        self.by_ns
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, BTreeMap<String, Arc<K>>>> {
        self.by_ns
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Takes the object `name`, as `meta` last described it, out of the controller index.
fn unindex<K>(index: &mut ByController<K>, meta: &ObjectMeta, name: &str) {
    let key = controller_key(meta);
    if let Some(m) = index.get_mut(&key) {
        m.remove(name);
        if m.is_empty() {
            index.remove(&key);
        }
    }
}

/// An object's key.
pub(crate) fn key_of(meta: &ObjectMeta) -> Key {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// Keeps `objects` current for as long as it runs, calling `changed` for each change
/// once the cache holds it (a relist reports what it found different). While `all`
/// says false the kind keeps only what [`Watched`] keeps then; once it turns true, a
/// relist brings in the rest.
pub(crate) async fn reflect<K: Watched>(
    api: Api,
    objects: Arc<Objects<K>>,
    mut all: tokio::sync::watch::Receiver<bool>,
    changed: impl Fn(&Change<K>) + Send + Sync,
) {
    loop {
        let everything = *all.borrow_and_update();
        let list = match K::list(&api, everything) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list for the controllers; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        for c in objects.replace(list.items) {
            changed(&c);
        }
        let mut events = match K::watch(&api, list.resource_version, everything) {
            Ok(w) => w,
            Err(_) => continue,
        };
        loop {
            let ev = tokio::select! {
                ev = events.next() => ev,
                _ = all.changed(), if !everything => break,
            };
            let Some(Ok(ev)) = ev else { break };
            let c = match ev.kind {
                EventKind::Deleted => objects.remove(&ev.object),
                _ => objects.put(ev.object),
            };
            if c.old.is_some() || c.new.is_some() {
                changed(&c);
            }
        }
        // The watch expired or failed, or everything is wanted now: relist.
    }
}

impl Watched for k8s_openapi::api::apps::v1::StatefulSet {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_statefulsets(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_statefulsets(None, from)
    }
}

impl Watched for k8s_openapi::api::apps::v1::ControllerRevision {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_controller_revisions(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_controller_revisions(None, from)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn pod(name: &str, controller: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.owner_references = controller.map(|uid| {
            vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: format!("rs-{uid}"),
                uid: uid.into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]
        });
        p
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or_default())
            .collect()
    }

    #[test]
    fn an_owner_reads_its_own_objects_and_the_orphans_as_they_change() {
        let objects = Objects::<Pod>::default();
        objects.replace(vec![pod("b", Some("a-uid")), pod("o", None)]);
        objects.put(pod("a", Some("a-uid")));
        objects.put(pod("x", Some("x-uid")));
        assert_eq!(
            names(&objects.controlled_or_orphans("ns", "a-uid")),
            ["a", "b", "o"]
        );
        assert_eq!(
            names(&objects.controlled_or_orphans("ns", "x-uid")),
            ["x", "o"]
        );
        // Released: the pod moves to the orphans; deleted: it leaves.
        objects.put(pod("b", None));
        objects.remove(&pod("x", Some("x-uid")));
        assert_eq!(
            names(&objects.controlled_or_orphans("ns", "a-uid")),
            ["a", "b", "o"]
        );
        assert_eq!(
            names(&objects.controlled_or_orphans("ns", "x-uid")),
            ["b", "o"]
        );
        assert!(objects.controlled_or_orphans("other", "a-uid").is_empty());
        // A relist rebuilds the index with the objects.
        objects.replace(vec![pod("c", Some("x-uid"))]);
        assert_eq!(names(&objects.controlled_or_orphans("ns", "x-uid")), ["c"]);
        assert!(objects.controlled_or_orphans("ns", "a-uid").is_empty());
    }
}
