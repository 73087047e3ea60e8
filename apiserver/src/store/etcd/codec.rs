//! Objects as etcd holds them: JSON without a resourceVersion (etcd's `mod_revision`
//! is the resourceVersion, as in kube-apiserver), sealed with the configured
//! encryption provider where one applies.
//!
//! An object this process writes is serialized once: [`Encoded`] keeps the JSON it
//! sends and where `metadata.resourceVersion` goes back in, so the stored form at the
//! revision etcd assigns is that text with the version spliced in, byte for byte what
//! serializing the stamped object would give (object keys are sorted: serde_json's
//! map is a `BTreeMap`).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::super::encryption::Encryption;
use super::super::engine::stamp;
use super::super::{StoreError, Stored};

const RESOURCE_VERSION: &str = "resourceVersion";

/// Where `"resourceVersion":"N"` goes back into an object's JSON.
#[derive(Debug, Clone, Copy)]
struct Splice {
    at: usize,
    form: Form,
}

#[derive(Debug, Clone, Copy)]
enum Form {
    /// Before another metadata key: `"resourceVersion":"N",`.
    Before,
    /// After the last metadata key: `,"resourceVersion":"N"`.
    After,
    /// The only metadata key: `"resourceVersion":"N"`.
    Alone,
}

/// An object encoded for etcd.
#[derive(Debug)]
pub(crate) struct Encoded {
    /// The object's JSON without its resourceVersion.
    json: Vec<u8>,
    splice: Splice,
    /// `json` sealed, where encryption applies: what etcd holds.
    sealed: Option<Vec<u8>>,
}

impl Encoded {
    /// The bytes etcd holds under the object's key.
    pub(crate) fn value(&self) -> &[u8] {
        self.sealed.as_deref().unwrap_or(&self.json)
    }

    /// The object parsed back from the text sent, stamped with resourceVersion `rv`.
    pub(crate) fn object(&self, key: &str, rv: u64) -> Result<Value, StoreError> {
        let mut object: Value = serde_json::from_slice(&self.json)
            .map_err(|e| StoreError::Storage(format!("object {key}: {e}")))?;
        stamp(key, &mut object, rv)?;
        Ok(object)
    }

    /// The object as the store keeps it at resourceVersion `rv`.
    pub(crate) fn stored(&self, rv: u64) -> Stored {
        let rv_text = rv.to_string();
        let field = format!("\"{RESOURCE_VERSION}\":\"{rv_text}\"");
        let mut json = Vec::with_capacity(self.json.len() + field.len() + 1);
        let (head, tail) = self.json.split_at(self.splice.at);
        json.extend_from_slice(head);
        match self.splice.form {
            Form::Before => {
                json.extend_from_slice(field.as_bytes());
                json.push(b',');
            }
            Form::After => {
                json.push(b',');
                json.extend_from_slice(field.as_bytes());
            }
            Form::Alone => json.extend_from_slice(field.as_bytes()),
        }
        json.extend_from_slice(tail);
        Stored::from_encoded(json, rv)
    }
}

/// `object` as etcd holds it under `key`.
pub(crate) fn encode(
    key: &str,
    object: &Value,
    encryption: Option<&Encryption>,
) -> Result<Encoded, StoreError> {
    let malformed = || StoreError::Malformed(key.to_string());
    let top = object.as_object().ok_or_else(malformed)?;
    if !top.get("metadata").is_some_and(Value::is_object) {
        return Err(malformed());
    }
    let mut json = Vec::with_capacity(1024);
    let mut splice = None;
    json.push(b'{');
    for (i, (k, v)) in top.iter().enumerate() {
        if i > 0 {
            json.push(b',');
        }
        write(&mut json, k)?;
        json.push(b':');
        match v {
            Value::Object(meta) if k == "metadata" => {
                splice = Some(write_metadata(&mut json, meta)?)
            }
            v => write(&mut json, v)?,
        }
    }
    json.push(b'}');
    let splice = splice.ok_or_else(malformed)?;
    let sealed = match encryption {
        Some(enc) => Some(
            enc.encrypt(key, &json)
                .map_err(|e| StoreError::Storage(e.to_string()))?,
        ),
        None => None,
    };
    Ok(Encoded {
        json,
        splice,
        sealed,
    })
}

/// `metadata` without its resourceVersion, noting where that goes in key order.
fn write_metadata(out: &mut Vec<u8>, meta: &Map<String, Value>) -> Result<Splice, StoreError> {
    out.push(b'{');
    let mut splice = None;
    let mut written = 0;
    for (k, v) in meta {
        if k == RESOURCE_VERSION {
            continue;
        }
        if written > 0 {
            out.push(b',');
        }
        if splice.is_none() && k.as_str() > RESOURCE_VERSION {
            splice = Some(Splice {
                at: out.len(),
                form: Form::Before,
            });
        }
        write(out, k)?;
        out.push(b':');
        write(out, v)?;
        written += 1;
    }
    let splice = splice.unwrap_or(Splice {
        at: out.len(),
        form: if written > 0 {
            Form::After
        } else {
            Form::Alone
        },
    });
    out.push(b'}');
    Ok(splice)
}

fn write<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), StoreError> {
    serde_json::to_writer(out, value).map_err(|e| StoreError::Storage(e.to_string()))
}

/// `object`, which this process wrote as `encoded`, as it is at revision `rv`: what
/// decoding etcd's copy would give, without parsing it.
pub(crate) fn written(
    key: &str,
    mut object: Value,
    encoded: &Encoded,
    rv: u64,
) -> Result<(Arc<Value>, Stored), StoreError> {
    stamp(key, &mut object, rv)?;
    let object = Arc::new(object);
    let stored = encoded.stored(rv).with_hot(&object);
    Ok((object, stored))
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    /// The spliced text is exactly the stamped object serialized, wherever the
    /// resourceVersion falls among the metadata keys.
    #[test]
    fn the_stored_text_is_the_stamped_object_serialized() {
        let objects = [
            json!({"metadata": {}}),
            json!({"metadata": {"resourceVersion": "7"}}),
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"uid": "u"}}),
            json!({"metadata": {"name": "a", "uid": "u", "resourceVersion": "3"}}),
            json!({"apiVersion": "v1", "data": {"metadata": "x", "k": "\"}"},
                   "kind": "ConfigMap", "metadata": {"name": "a\"b", "namespace": "n",
                   "labels": {"resourceVersion": "no"}}, "spec": [1, 2.5, null, true]}),
            json!({"metadata": {"a": 1, "resourceVersion": "9", "selfLink": "s", "z": [] }}),
        ];
        for object in objects {
            let encoded = encode("k", &object, None).unwrap();
            let mut plain: Value = serde_json::from_slice(encoded.value()).unwrap();
            assert_eq!(plain["metadata"].get("resourceVersion"), None, "{object}");
            let mut stamped = object.clone();
            stamp("k", &mut stamped, 12_345).unwrap();
            let stored = encoded.stored(12_345);
            assert_eq!(
                stored.json(),
                serde_json::to_vec(&stamped).unwrap(),
                "{object}"
            );
            assert_eq!(stored.rv(), 12_345);
            stamp("k", &mut plain, 12_345).unwrap();
            assert_eq!(plain, stamped);
        }
    }

    #[test]
    fn an_object_without_metadata_is_malformed() {
        for object in [json!([]), json!({}), json!({"metadata": 1}), json!("x")] {
            let err = encode("k", &object, None).unwrap_err();
            assert_eq!(err, StoreError::Malformed("k".into()), "{object}");
        }
    }
}
