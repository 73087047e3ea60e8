//! Events: created by the framework (typed) or by clients (HTTP), listed by
//! `kubectl describe` with `involvedObject.*` field selectors.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Event, EventSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::objects::{
    bind_namespace, create_with_name_retries, k8s_time, meta_rv, name_is_generated, stamp_new,
    system_time, to_value,
};
use super::pods::first_object;
use super::{Api, ObjectList, RETRIES, WriteOptions};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::store::{Precondition, WriteOp};
use crate::validation::{Causes, check_metadata, check_subdomain_name};

const EVENTS: Resource = Resource::Events;

/// How long an event is kept after it last happened: Kubernetes' default event TTL, so
/// `describe` shows recent history while the store does not grow without bound.
pub const EVENT_TTL: Duration = Duration::from_secs(3600);

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
        let generated = name_is_generated(&event.metadata);
        self.prepare_event(ns, &mut event)?;
        if opts.dry_run {
            return Ok(event);
        }
        let changes = create_with_name_retries(&mut event, generated, |event: &Event| {
            let name = event.metadata.name.clone().unwrap_or_default();
            let ops = vec![
                WriteOp::Check {
                    key: Resource::Namespaces.key("", ns),
                    precondition: Precondition::Present,
                },
                new_event_op(ns, &name, event)?,
            ];
            Ok(self.commit(ops))
        })
        .await?;
        first_object(&changes)
    }

    /// Stamps and validates an event to be created in `ns`, filling in what
    /// [`Api::create_event`] defaults; returns its name.
    pub(crate) fn prepare_event(&self, ns: &str, event: &mut Event) -> Result<String, ApiError> {
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
        Ok(name)
    }

    /// Records an event as client-go's `EventCorrelator` does: an event
    /// identical to one recorded before (same source, involved object with
    /// its field path, type, reason and message) bumps that one's `count`
    /// (by the new one's, 1 if unset) and `lastTimestamp`; from the tenth
    /// distinct message of events otherwise alike within 10 minutes, they
    /// bump one event whose message is `(combined from similar events):`
    /// and the latest (`event_aggregate`); and a source
    /// that recorded too many about one object lately is refused (a token
    /// bucket, burst 25 then one per 5 minutes). `Ok(None)`: rate-limited.
    pub async fn record_event(
        &self,
        namespace: &str,
        event: Event,
    ) -> Result<Option<Event>, ApiError> {
        let now = self.now();
        // client-go's order: aggregate, then filter what would be recorded.
        let (mut event, combined) = self.inner.event_aggregator.aggregate(event, now);
        if !self.inner.event_spam.allow(&event, now) {
            return Ok(None);
        }
        let object = event.involved_object.name.clone().unwrap_or_default();
        // A combined event is one per group, whatever its latest message.
        let key = match combined {
            true => fnv1a(&[Some(super::event_aggregate::aggregate_key(&event).as_str())]),
            false => aggregate_key(&event),
        };
        let name = format!("{object}.{key:016x}");
        event.metadata.name = Some(name.clone());
        event.metadata.generate_name = None;
        let times = event.count.filter(|n| *n > 0).unwrap_or(1);
        let last = event
            .last_timestamp
            .clone()
            .unwrap_or_else(|| k8s_time(now));
        for _ in 0..RETRIES {
            match self.get_typed::<Event>(EVENTS, namespace, &name) {
                Ok((mut old, rv)) => {
                    old.count = Some(old.count.unwrap_or(1).saturating_add(times));
                    old.last_timestamp = Some(last.clone());
                    old.message.clone_from(&event.message);
                    let op = WriteOp::Put {
                        key: EVENTS.key(namespace, &name),
                        object: to_value(&old)?,
                        precondition: Precondition::ResourceVersion(rv),
                    };
                    match self.commit(vec![op]).await {
                        Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => continue,
                        other => return first_object(&other?).map(Some),
                    }
                }
                Err(ApiError::NotFound { .. }) => {
                    event.count = Some(times);
                    match self.create_event(namespace, event.clone()).await {
                        Err(ApiError::AlreadyExists { .. }) => continue,
                        other => return other.map(Some),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::stale("events", &name))
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

    /// Replaces an event (e.g. to bump `count` and `lastTimestamp` of a repeated one).
    /// With `metadata.resourceVersion` set, 409 unless it is the stored one. Identity
    /// (uid, creation time) is kept; 404 if the event does not exist.
    pub async fn update_event(&self, namespace: &str, mut event: Event) -> Result<Event, ApiError> {
        bind_namespace(&mut event.metadata, namespace)?;
        let name = event.metadata.name.clone().unwrap_or_default();
        let explicit = meta_rv(&event.metadata)?;
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<Event>(EVENTS, namespace, &name)?;
            if explicit.is_some_and(|rv| rv != old_rv) {
                return Err(ApiError::stale("events", &name));
            }
            let mut new = event.clone();
            new.metadata.uid.clone_from(&old.metadata.uid);
            new.metadata
                .creation_timestamp
                .clone_from(&old.metadata.creation_timestamp);
            let mut causes = Causes::default();
            check_metadata(&mut causes, &new.metadata, check_subdomain_name);
            causes.into_result("Event", &name)?;
            let op = WriteOp::Put {
                key: EVENTS.key(namespace, &name),
                object: to_value(&new)?,
                precondition: Precondition::ResourceVersion(old_rv),
            };
            match self.commit(vec![op]).await {
                Err(ApiError::Conflict { .. }) if explicit.is_none() => continue,
                other => return first_object(&other?),
            }
        }
        Err(ApiError::stale("events", &name))
    }

    /// Removes events that last happened more than [`EVENT_TTL`] before `now`; returns
    /// how many. Reads only each event's name and times from its stored text: decoding
    /// every event of a large cluster whole, once a minute, cost a second of CPU and
    /// more memory than any other moment of the scheduler's life.
    pub async fn expire_events(&self, now: SystemTime) -> Result<usize, ApiError> {
        let Some(cutoff) = now.checked_sub(EVENT_TTL) else {
            return Ok(0);
        };
        let (stored, _) = self.store().list_stored(&EVENTS.prefix(None));
        let expired: Vec<(String, String, u64)> = stored
            .iter()
            .filter_map(|s| {
                let head: EventHead = serde_json::from_slice(s.json()).ok()?;
                let last = head
                    .last_timestamp
                    .as_ref()
                    .or(head.first_timestamp.as_ref())
                    .or(head.metadata.creation_timestamp.as_ref())
                    .map(system_time)?;
                (last < cutoff).then(|| (head.metadata.namespace, head.metadata.name, s.rv()))
            })
            .collect();
        drop(stored);
        let mut removed = 0;
        for (ns, name, rv) in expired {
            let op = WriteOp::Delete {
                key: EVENTS.key(&ns, &name),
                precondition: Precondition::ResourceVersion(rv),
            };
            match self.commit(vec![op]).await {
                Ok(_) => removed += 1,
                Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
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

/// FNV-1a over what makes two events the same one (client-go's
/// `getEventKey`): stable across restarts, so it names the event.
fn aggregate_key(e: &Event) -> u64 {
    let spam = super::event_spam::spam_key(e);
    let parts = [
        Some(spam.as_str()),
        e.involved_object.field_path.as_deref(),
        e.type_.as_deref(),
        e.reason.as_deref(),
        e.message.as_deref(),
        e.reporting_component.as_deref(),
        e.reporting_instance.as_deref(),
    ];
    fnv1a(&parts)
}

/// FNV-1a over `parts`, each ended by a NUL.
fn fnv1a(parts: &[Option<&str>]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.unwrap_or("").bytes().chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// What the event sweep reads of a stored event.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventHead {
    metadata: EventMeta,
    last_timestamp: Option<Time>,
    first_timestamp: Option<Time>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventMeta {
    namespace: String,
    name: String,
    creation_timestamp: Option<Time>,
}

/// The write that creates a prepared event ([`Api::prepare_event`]).
pub(crate) fn new_event_op(ns: &str, name: &str, event: &Event) -> Result<WriteOp, ApiError> {
    Ok(WriteOp::Put {
        key: EVENTS.key(ns, name),
        object: to_value(event)?,
        precondition: Precondition::Absent,
    })
}
