//! The typed, in-process face of ControllerRevisions, for the controllers that record
//! their templates in them (StatefulSet; DaemonSet can use the same): list, get,
//! watch, create, replace (its revision number; `data` is immutable) and delete. Writes
//! go through this handle's fence, as every write of the handle.

use k8s_openapi::api::apps::v1::ControllerRevision;

use super::{Api, ObjectList, WriteOptions};
use crate::error::ApiError;
use crate::resource::Resource;

impl Api {
    /// The ControllerRevisions in `namespace` (or all) that `label_selector` selects.
    ///
    /// # Errors
    /// A selector that does not parse.
    pub fn list_controller_revisions(
        &self,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<ObjectList<ControllerRevision>, ApiError> {
        self.list_typed(Resource::ControllerRevisions, namespace, label_selector, "")
    }

    /// One ControllerRevision.
    ///
    /// # Errors
    /// 404 if there is none of that name.
    pub fn get_controller_revision(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ControllerRevision, ApiError> {
        self.get_typed::<ControllerRevision>(Resource::ControllerRevisions, namespace, name)
            .map(|(obj, _)| obj)
    }

    /// Changes to the ControllerRevisions after `from`, as [`Api::watch_pods`] (relist
    /// on `Expired`).
    ///
    /// # Errors
    /// `Expired` when `from` is older than the store's history.
    pub fn watch_controller_revisions(
        &self,
        namespace: Option<&str>,
        from: u64,
    ) -> Result<super::watch::ObjectStream<ControllerRevision>, ApiError> {
        self.watch_typed(Resource::ControllerRevisions, namespace, from)
    }

    /// Creates a ControllerRevision.
    ///
    /// # Errors
    /// 409 if the name is taken, 404/403 for a missing or terminating namespace, 422 if
    /// invalid, a fence refusal.
    pub async fn create_controller_revision(
        &self,
        namespace: &str,
        obj: ControllerRevision,
    ) -> Result<ControllerRevision, ApiError> {
        self.create_object(namespace, obj, WriteOptions::default(), None)
            .await
    }

    /// Replaces a ControllerRevision (under the resourceVersion it carries).
    ///
    /// # Errors
    /// 409 if it changed since, 404, 422 (a changed `data`).
    pub async fn replace_controller_revision(
        &self,
        namespace: &str,
        name: &str,
        obj: ControllerRevision,
    ) -> Result<ControllerRevision, ApiError> {
        self.replace_object(namespace, name, obj, WriteOptions::default(), None)
            .await
    }

    /// Deletes a ControllerRevision at once.
    ///
    /// # Errors
    /// 404 if there is none of that name.
    pub async fn delete_controller_revision(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        self.delete_object(
            Resource::ControllerRevisions,
            namespace,
            name,
            &k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions::default(),
        )
        .await
        .map(|_| ())
    }
}
