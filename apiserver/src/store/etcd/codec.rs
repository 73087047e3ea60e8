//! Objects as etcd holds them: JSON without a resourceVersion (etcd's `mod_revision`
//! is the resourceVersion, as in kube-apiserver), sealed with the configured
//! encryption provider where one applies.

use std::sync::Arc;

use serde_json::Value;

use super::super::encryption::Encryption;
use super::super::engine::stamp;
use super::super::{StoreError, Stored};

/// The bytes to write under the object's etcd key.
pub(crate) fn encode(
    key: &str,
    object: &Value,
    encryption: Option<&Encryption>,
) -> Result<Vec<u8>, StoreError> {
    let mut object = object.clone();
    let meta = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| StoreError::Malformed(key.to_string()))?;
    meta.remove("resourceVersion");
    let json = serde_json::to_vec(&object).map_err(|e| StoreError::Storage(e.to_string()))?;
    match encryption {
        Some(enc) => enc
            .encrypt(key, &json)
            .map_err(|e| StoreError::Storage(e.to_string())),
        None => Ok(json),
    }
}

/// The object read back from etcd at revision `rv`, decoded and held encoded.
pub(crate) fn decode(
    key: &str,
    value: &[u8],
    rv: u64,
    encryption: Option<&Encryption>,
) -> Result<(Arc<Value>, Stored), StoreError> {
    let plain = match encryption {
        Some(enc) => std::borrow::Cow::Owned(
            enc.decrypt(key, value)
                .map_err(|e| StoreError::Storage(e.to_string()))?,
        ),
        None => std::borrow::Cow::Borrowed(value),
    };
    let mut object: Value = serde_json::from_slice(&plain)
        .map_err(|e| StoreError::Storage(format!("object {key}: {e}")))?;
    stamp(key, &mut object, rv)?;
    let stored = Stored::encode(&object, rv)?;
    let object = Arc::new(object);
    let stored = stored.with_hot(&object);
    Ok((object, stored))
}

/// `previous` stamped with the deletion's revision: what a DELETED event carries.
pub(crate) fn deleted(key: &str, previous: &Stored, rv: u64) -> Result<Arc<Value>, StoreError> {
    let mut last = previous.decode()?;
    stamp(key, &mut last, rv)?;
    Ok(Arc::new(last))
}
