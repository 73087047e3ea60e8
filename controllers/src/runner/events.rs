//! Events about a controller's objects, recorded as client-go's recorder records them
//! (core/v1, `source.component` the controller's name), through the API's correlator
//! (repeats counted, a flood combined, then rate-limited).

use apiserver::Api;
use k8s_openapi::Metadata;
use k8s_openapi::api::core::v1::{Event as KubeEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::Event;

/// Records `event` about `object` as `component` (`replicaset-controller`). A failure
/// is logged: an event is never worth failing a sync for.
pub(crate) async fn record<K>(api: &Api, component: &str, object: &K, event: &Event)
where
    K: k8s_openapi::Resource + Metadata<Ty = ObjectMeta>,
{
    let m = object.metadata();
    let ns = m.namespace.clone().unwrap_or_default();
    let now: Time = apiserver::k8s_time(api.now());
    let e = KubeEvent {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}.", m.name.as_deref().unwrap_or(""))),
            namespace: Some(ns.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some(K::API_VERSION.to_owned()),
            kind: Some(K::KIND.to_owned()),
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..ObjectReference::default()
        },
        reason: Some(event.reason.clone()),
        message: Some(event.message.clone()),
        type_: Some(event.type_.as_str().to_owned()),
        source: Some(EventSource {
            component: Some(component.to_owned()),
            host: None,
        }),
        reporting_component: Some(component.to_owned()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..KubeEvent::default()
    };
    if let Err(e) = api.record_event(&ns, e).await {
        tracing::debug!(error = %e, reason = %event.reason, "cannot record an event");
    }
}
