//! What all resources share: typed conversion, metadata stamping on create, generic get
//! and list.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Api, ObjectList};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::selectors::Selectors;
use crate::store::object_rv;

/// Converts a stored object to its type. Stored objects were validated on the way in, so a
/// failure means a corrupt store: 500, never a panic.
pub(crate) fn typed<T: DeserializeOwned>(v: &Value) -> Result<T, ApiError> {
    T::deserialize(v).map_err(|e| ApiError::Internal(format!("stored object unreadable: {e}")))
}

/// Converts a typed object to the JSON the store keeps.
pub(crate) fn to_value<T: Serialize>(t: &T) -> Result<Value, ApiError> {
    serde_json::to_value(t).map_err(|e| ApiError::Internal(format!("cannot encode object: {e}")))
}

/// A Kubernetes `Time` for `t` (whole seconds, as on the wire).
pub fn k8s_time(t: SystemTime) -> Time {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Time(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// The `SystemTime` of a Kubernetes `Time`.
pub fn system_time(t: &Time) -> SystemTime {
    let secs = t.0.as_second();
    if secs <= 0 {
        SystemTime::UNIX_EPOCH
    } else {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
    }
}

/// The resourceVersion of an object's metadata, parsed.
pub(crate) fn meta_rv(meta: &ObjectMeta) -> Result<Option<u64>, ApiError> {
    match meta.resource_version.as_deref() {
        None | Some("") => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {s:?}"))),
    }
}

/// The characters Kubernetes draws generated name suffixes from (no vowels, no
/// look-alikes, so generated names spell nothing).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// How many times a create whose name is generated is tried, each time with a new
/// name, before a taken name is the answer: kube-apiserver's
/// `maxNameGenerationCreateAttempts` (RetryGenerateName). Five random characters
/// collide about four times in 10,000 names, so a ReplicaSet's 10,000th pod must not
/// fail on one.
const NAME_GENERATION_ATTEMPTS: usize = 8;

/// Whether a new object's name comes from its `generateName` (no name was given).
pub(crate) fn name_is_generated(meta: &ObjectMeta) -> bool {
    meta.name.as_deref().is_none_or(str::is_empty)
        && meta.generate_name.as_deref().is_some_and(|p| !p.is_empty())
}

/// Runs the commit that `create` makes of `obj` under its current name and, while the
/// name was generated and is taken, draws a new one and commits again, up to
/// [`NAME_GENERATION_ATTEMPTS`] in all (kube-apiserver's `createWithGenerateNameRetry`).
/// `generated` is [`name_is_generated`] of the object as the client sent it.
pub(crate) async fn create_with_name_retries<O, T, F>(
    obj: &mut O,
    generated: bool,
    mut create: impl FnMut(&O) -> Result<F, ApiError>,
) -> Result<T, ApiError>
where
    O: k8s_openapi::Metadata<Ty = ObjectMeta>,
    F: Future<Output = Result<T, ApiError>>,
{
    let mut attempt = 1;
    loop {
        match create(obj)?.await {
            Err(ApiError::AlreadyExists { .. })
                if generated && attempt < NAME_GENERATION_ATTEMPTS =>
            {
                attempt += 1;
                regenerate_name(obj.metadata_mut());
            }
            done => return done,
        }
    }
}

/// Draws a new name for an object created with `generateName`: the prefix and five
/// random characters.
fn regenerate_name(meta: &mut ObjectMeta) {
    let prefix = meta.generate_name.as_deref().unwrap_or_default();
    let random = uuid::Uuid::new_v4();
    let suffix: String = random
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| NAME_ALPHABET[*b as usize % NAME_ALPHABET.len()] as char)
        .collect();
    meta.name = Some(format!("{prefix}{suffix}"));
}

/// Resolves `generateName`, then stamps what a new object gets: uid, creation time; and
/// clears what a client may not set on create.
pub(crate) fn stamp_new(meta: &mut ObjectMeta, now: SystemTime) {
    if name_is_generated(meta) {
        regenerate_name(meta);
    }
    meta.uid = Some(uuid::Uuid::new_v4().to_string());
    meta.creation_timestamp = Some(k8s_time(now));
    meta.resource_version = None;
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.managed_fields = None;
    meta.self_link = None;
}

/// Checks the namespace in a body against the one in the URL and fills it in.
pub(crate) fn bind_namespace(meta: &mut ObjectMeta, ns: &str) -> Result<(), ApiError> {
    match meta.namespace.as_deref() {
        Some(given) if !given.is_empty() && given != ns => Err(ApiError::BadRequest(format!(
            "the namespace of the provided object does not match the namespace sent on the request ({given} != {ns})"
        ))),
        _ => {
            meta.namespace = Some(ns.to_string());
            Ok(())
        }
    }
}

/// Checks the name in a body against the one in the URL.
pub(crate) fn check_name(meta: &mut ObjectMeta, name: &str) -> Result<(), ApiError> {
    match meta.name.as_deref() {
        Some(given) if !given.is_empty() && given != name => Err(ApiError::BadRequest(format!(
            "the name of the object ({given}) does not match the name on the URL ({name})"
        ))),
        _ => {
            meta.name = Some(name.to_string());
            Ok(())
        }
    }
}

impl Api {
    /// One stored object as JSON; 404 if missing.
    pub(crate) fn get_raw(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        self.get_value(&resource.key(ns, name))
            .ok_or_else(|| ApiError::NotFound {
                resource: resource.qualified(),
                name: name.into(),
            })
    }

    /// Stored objects of `resource` (in `ns`, or all) that `sel` selects, and the
    /// resourceVersion of the read.
    pub(crate) fn list_raw(
        &self,
        resource: Resource,
        ns: Option<&str>,
        sel: &Selectors,
    ) -> (Vec<Arc<Value>>, u64) {
        let (items, rv) = self.store().list(&resource.prefix(ns));
        (items.into_iter().filter(|v| sel.matches(v)).collect(), rv)
    }

    /// Typed get with its resourceVersion.
    pub(crate) fn get_typed<T: DeserializeOwned>(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
    ) -> Result<(T, u64), ApiError> {
        let v = self.get_raw(resource, ns, name)?;
        Ok((typed(&v)?, object_rv(&v).unwrap_or(0)))
    }

    /// Typed list with selectors given as strings (empty selects all); 400 on a bad selector.
    pub(crate) fn list_typed<T: DeserializeOwned>(
        &self,
        resource: Resource,
        ns: Option<&str>,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<ObjectList<T>, ApiError> {
        let sel = Selectors::parse(label_selector, field_selector, resource)?;
        let (items, resource_version) = self.list_raw(resource, ns, &sel);
        let items = items.iter().map(|v| typed(v)).collect::<Result<_, _>>()?;
        Ok(ObjectList {
            items,
            resource_version,
        })
    }
}
