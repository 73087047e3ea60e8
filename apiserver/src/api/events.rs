//! Events: created by the framework (typed) or by clients (HTTP), listed by
//! `kubectl describe` with `involvedObject.*` field selectors.

use k8s_openapi::api::core::v1::{Event, EventSource};

use super::objects::{bind_namespace, k8s_time, stamp_new, to_value};
use super::pods::first_object;
use super::{Api, ObjectList, WriteOptions};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::store::{Precondition, WriteOp};
use crate::validation::{Causes, check_metadata, check_subdomain_name};

const EVENTS: Resource = Resource::Events;

impl Api {
    /// Records an event in `namespace`. Defaults: `count` 1, `firstTimestamp` and
    /// `lastTimestamp` now (by the injected clock), `type` Normal. A name or
    /// `generateName` is required.
    pub async fn create_event(&self, namespace: &str, event: Event) -> Result<Event, ApiError> {
        self.create_event_with(namespace, event, WriteOptions::default())
            .await
    }

    pub(crate) async fn create_event_with(
        &self,
        ns: &str,
        mut event: Event,
        opts: WriteOptions,
    ) -> Result<Event, ApiError> {
        bind_namespace(&mut event.metadata, ns)?;
        let now = self.now();
        stamp_new(&mut event.metadata, now);
        if event.event_time.is_none() {
            event.first_timestamp.get_or_insert_with(|| k8s_time(now));
            event.last_timestamp.get_or_insert_with(|| k8s_time(now));
        }
        event.count.get_or_insert(1);
        event.type_.get_or_insert_with(|| "Normal".into());
        if event.source.is_none() && event.reporting_component.is_none() {
            event.source = Some(EventSource::default());
        }
        let mut causes = Causes::default();
        check_metadata(&mut causes, &event.metadata, check_subdomain_name);
        if let Some(t) = event.type_.as_deref()
            && !matches!(t, "Normal" | "Warning")
        {
            causes.unsupported("type", t, &["Normal", "Warning"]);
        }
        if let Some(io_ns) = event.involved_object.namespace.as_deref()
            && !io_ns.is_empty()
            && io_ns != ns
        {
            causes.invalid(
                "involvedObject.namespace",
                io_ns,
                "does not match event.namespace",
            );
        }
        let name = event.metadata.name.clone().unwrap_or_default();
        causes.into_result("Event", &name)?;
        if opts.dry_run {
            return Ok(event);
        }
        let changes = self
            .commit(vec![
                WriteOp::Check {
                    key: Resource::Namespaces.key("", ns),
                    precondition: Precondition::Present,
                },
                WriteOp::Put {
                    key: EVENTS.key(ns, &name),
                    object: to_value(&event)?,
                    precondition: Precondition::Absent,
                },
            ])
            .await?;
        first_object(&changes)
    }

    /// Events in `namespace` (or all) matching the selectors, e.g. field selector
    /// `involvedObject.name=web,involvedObject.uid=...`.
    pub fn list_events(
        &self,
        namespace: Option<&str>,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<ObjectList<Event>, ApiError> {
        self.list_typed(EVENTS, namespace, label_selector, field_selector)
    }

    /// Removes an event; 404 if there is none.
    pub async fn delete_event(&self, namespace: &str, name: &str) -> Result<Event, ApiError> {
        let changes = self
            .commit(vec![WriteOp::Delete {
                key: EVENTS.key(namespace, name),
                precondition: Precondition::None,
            }])
            .await?;
        first_object(&changes)
    }
}
