//! Kubernetes' wire schemas, as descriptors: compiled from `proto/` by `build.rs`,
//! embedded, and loaded once. Also which message a kind is, and which fields are Go
//! structs embedded with `json:",inline"`.

use std::collections::HashSet;
use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

/// The encoded `FileDescriptorSet` of every `generated.proto` under `proto/`.
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kubernetes.fds"));

/// The fields whose message's fields are the parent's in JSON (Go embeds the struct
/// `json:",inline"`; protobuf keeps it a field), by full name, one a line. Written by
/// `proto/generate.py` beside the schemas.
const INLINE: &str = include_str!("../../proto/inline.txt");

/// The kinds every group version has besides its own (Go's `metav1.AddToGroupVersion`):
/// they are messages of `meta/v1`.
const META_KINDS: &[&str] = &[
    "CreateOptions",
    "DeleteOptions",
    "GetOptions",
    "ListOptions",
    "PatchOptions",
    "UpdateOptions",
    "WatchEvent",
];

struct Schema {
    pool: DescriptorPool,
    inline: HashSet<&'static str>,
}

fn schema() -> Option<&'static Schema> {
    static SCHEMA: OnceLock<Option<Schema>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| match DescriptorPool::decode(DESCRIPTORS) {
            Ok(pool) => Some(Schema {
                pool,
                inline: INLINE.lines().filter(|l| !l.is_empty()).collect(),
            }),
            Err(e) => {
                // Built from checked-in files by build.rs, so this is a build defect; the
                // server goes on without protobuf (every such body is then a 415).
                tracing::error!(error = %e, "the embedded Kubernetes protobuf schemas do not load");
                None
            }
        })
        .as_ref()
}

/// A message of the schemas by full name (`k8s.io.api.core.v1.Pod`).
pub(super) fn by_name(name: &str) -> Option<MessageDescriptor> {
    schema()?.pool.get_message_by_name(name)
}

/// The message of `kind` in `api_version`: the core group's `v1` is
/// `k8s.io.api.core.v1`, any other group the Go package named by its first label
/// (`rbac.authorization.k8s.io/v1` is `k8s.io.api.rbac.v1`, `apps/v1`
/// `k8s.io.api.apps.v1`), as `k8s.io/api` lays its packages out.
pub(super) fn message(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let simple = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
    if !simple(kind) || !simple(version) {
        return None;
    }
    let package = match group {
        "" => "core",
        "internal.apiserver.k8s.io" => "apiserverinternal",
        "meta.k8s.io" => return meta_kind(version, kind),
        group => group.split('.').next().filter(|p| simple(p))?,
    };
    by_name(&format!("k8s.io.api.{package}.{version}.{kind}")).or_else(|| meta_kind(version, kind))
}

fn meta_kind(version: &str, kind: &str) -> Option<MessageDescriptor> {
    if version != "v1" || !META_KINDS.contains(&kind) {
        return None;
    }
    by_name(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"))
}

/// Whether field `full_name` (`k8s.io.api.core.v1.Volume.volumeSource`) is inlined.
pub(super) fn is_inline(full_name: &str) -> bool {
    schema().is_some_and(|s| s.inline.contains(full_name))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn kinds_map_to_their_packages_messages() {
        for (api_version, kind, full_name) in [
            ("v1", "Pod", "k8s.io.api.core.v1.Pod"),
            ("apps/v1", "Deployment", "k8s.io.api.apps.v1.Deployment"),
            ("batch/v1", "Job", "k8s.io.api.batch.v1.Job"),
            (
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "k8s.io.api.autoscaling.v2.HorizontalPodAutoscaler",
            ),
            (
                "autoscaling/v1",
                "HorizontalPodAutoscaler",
                "k8s.io.api.autoscaling.v1.HorizontalPodAutoscaler",
            ),
            (
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "k8s.io.api.rbac.v1.ClusterRole",
            ),
            (
                "coordination.k8s.io/v1",
                "Lease",
                "k8s.io.api.coordination.v1.Lease",
            ),
            (
                "authorization.k8s.io/v1",
                "SelfSubjectAccessReview",
                "k8s.io.api.authorization.v1.SelfSubjectAccessReview",
            ),
            (
                "v1",
                "DeleteOptions",
                "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            ),
            (
                "meta.k8s.io/v1",
                "DeleteOptions",
                "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            ),
        ] {
            assert_eq!(
                message(api_version, kind).unwrap().full_name(),
                full_name,
                "{api_version} {kind}"
            );
        }
        for (api_version, kind) in [
            ("v1", "NoSuchKind"),
            ("apps/v1beta1", "Deployment"),
            ("v1", "ConfigMap.DataEntry"),
            ("example.com/v1", "Widget"),
            ("v1", ""),
            ("meta.k8s.io/v1", "ObjectMeta"),
        ] {
            assert!(message(api_version, kind).is_none(), "{api_version} {kind}");
        }
    }

    #[test]
    fn every_inline_field_is_a_message_field_of_the_schemas() {
        let s = schema().unwrap();
        assert!(!s.inline.is_empty());
        for full in &s.inline {
            let (message, field) = full.rsplit_once('.').unwrap();
            let f = by_name(message).unwrap().get_field_by_name(field).unwrap();
            assert!(f.kind().as_message().is_some(), "{full}");
        }
    }
}
