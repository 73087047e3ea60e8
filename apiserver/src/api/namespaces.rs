//! Namespaces: `default` and `kube-system` always exist; others can be created, and
//! deleted while empty.

use k8s_openapi::api::core::v1::{Namespace, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::objects::{stamp_new, to_value};
use super::pods::first_object;
use super::{Api, ObjectList, WriteOptions};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::store::{Precondition, WriteOp};
use crate::validation::{Causes, check_label_name, check_metadata};

const NAMESPACES: Resource = Resource::Namespaces;

/// Namespaces that exist from the start and can never be deleted.
pub const SYSTEM_NAMESPACES: [&str; 2] = ["default", "kube-system"];

impl Api {
    pub(crate) async fn ensure_system_namespaces(&self) -> Result<(), ApiError> {
        for name in SYSTEM_NAMESPACES {
            if self.get_value(&NAMESPACES.key("", name)).is_some() {
                continue;
            }
            let ns = Namespace {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match self.create_namespace(ns).await {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Creates a namespace (phase Active); 409 if it exists, 422 if the name is not a
    /// DNS-1123 label.
    pub async fn create_namespace(&self, ns: Namespace) -> Result<Namespace, ApiError> {
        self.create_namespace_with(ns, WriteOptions::default())
            .await
    }

    pub(crate) async fn create_namespace_with(
        &self,
        mut ns: Namespace,
        opts: WriteOptions,
    ) -> Result<Namespace, ApiError> {
        ns.metadata.namespace = None;
        stamp_new(&mut ns.metadata, self.now());
        ns.status = Some(NamespaceStatus {
            phase: Some("Active".into()),
            ..Default::default()
        });
        let mut causes = Causes::default();
        check_metadata(&mut causes, &ns.metadata, check_label_name);
        let name = ns.metadata.name.clone().unwrap_or_default();
        causes.into_result("Namespace", &name)?;
        if opts.dry_run {
            return Ok(ns);
        }
        let op = WriteOp::Put {
            key: NAMESPACES.key("", &name),
            object: to_value(&ns)?,
            precondition: Precondition::Absent,
        };
        first_object(&self.commit(vec![op]).await?)
    }

    /// The namespace `name`; 404 if missing.
    pub fn get_namespace(&self, name: &str) -> Result<Namespace, ApiError> {
        self.get_typed(NAMESPACES, "", name).map(|(n, _)| n)
    }

    /// Namespaces matching the selectors.
    pub fn list_namespaces(
        &self,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<ObjectList<Namespace>, ApiError> {
        self.list_typed(NAMESPACES, None, label_selector, field_selector)
    }

    /// Deletes an empty namespace at once. 403 for the system namespaces, 409 while pods
    /// or events remain in it (checked in the same transaction as the removal).
    pub async fn delete_namespace(&self, name: &str) -> Result<Namespace, ApiError> {
        if SYSTEM_NAMESPACES.contains(&name) {
            return Err(ApiError::Forbidden(format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            )));
        }
        let mut ops: Vec<WriteOp> = [Resource::Pods, Resource::Events]
            .into_iter()
            .map(|r| WriteOp::CheckEmpty {
                prefix: r.prefix(Some(name)),
            })
            .collect();
        ops.push(WriteOp::Delete {
            key: NAMESPACES.key("", name),
            precondition: Precondition::None,
        });
        match self.commit(ops).await {
            Ok(changes) => first_object(&changes),
            Err(ApiError::Conflict { .. }) => Err(ApiError::Conflict {
                resource: "namespaces".into(),
                name: name.into(),
                detail: "the namespace is not empty; delete its pods and events first".into(),
            }),
            Err(e) => Err(e),
        }
    }
}
