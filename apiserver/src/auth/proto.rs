//! Protobuf bodies of the kinds this module serves: kubectl's typed clients (`kubectl
//! create rolebinding`, `auth can-i`, `auth whoami`, `create token`) send
//! `application/vnd.kubernetes.protobuf`. Each message is decoded into the JSON the
//! handlers take, by a table of its fields (numbers as in Kubernetes' `generated.proto`).

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::protobuf::{Field, MAGIC, bad, fields, object_meta, string};

/// How one field decodes.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Strs,
    Int,
    Meta,
    Msg(&'static [(u32, &'static str, Ty)]),
    Msgs(&'static [(u32, &'static str, Ty)]),
}

type Schema = &'static [(u32, &'static str, Ty)];

const RULE: Schema = &[
    (1, "verbs", Ty::Strs),
    (2, "apiGroups", Ty::Strs),
    (3, "resources", Ty::Strs),
    (4, "resourceNames", Ty::Strs),
    (5, "nonResourceURLs", Ty::Strs),
];
const ROLE: Schema = &[(1, "metadata", Ty::Meta), (2, "rules", Ty::Msgs(RULE))];
const SUBJECT: Schema = &[
    (1, "kind", Ty::Str),
    (2, "apiGroup", Ty::Str),
    (3, "name", Ty::Str),
    (4, "namespace", Ty::Str),
];
const ROLE_REF: Schema = &[
    (1, "apiGroup", Ty::Str),
    (2, "kind", Ty::Str),
    (3, "name", Ty::Str),
];
const BINDING: Schema = &[
    (1, "metadata", Ty::Meta),
    (2, "subjects", Ty::Msgs(SUBJECT)),
    (3, "roleRef", Ty::Msg(ROLE_REF)),
];
const RESOURCE_ATTRS: Schema = &[
    (1, "namespace", Ty::Str),
    (2, "verb", Ty::Str),
    (3, "group", Ty::Str),
    (4, "version", Ty::Str),
    (5, "resource", Ty::Str),
    (6, "subresource", Ty::Str),
    (7, "name", Ty::Str),
];
const NON_RESOURCE_ATTRS: Schema = &[(1, "path", Ty::Str), (2, "verb", Ty::Str)];
const SSAR_SPEC: Schema = &[
    (1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRS)),
    (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRS)),
];
const SSAR: Schema = &[(1, "metadata", Ty::Meta), (2, "spec", Ty::Msg(SSAR_SPEC))];
const SSRR: Schema = &[
    (1, "metadata", Ty::Meta),
    (2, "spec", Ty::Msg(&[(1, "namespace", Ty::Str)])),
];
const SSR: Schema = &[(1, "metadata", Ty::Meta)];
const BOUND_REF: Schema = &[
    (1, "kind", Ty::Str),
    (2, "apiVersion", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
];
const TOKEN_SPEC: Schema = &[
    (1, "audiences", Ty::Strs),
    (3, "boundObjectRef", Ty::Msg(BOUND_REF)),
    (4, "expirationSeconds", Ty::Int),
];
const TOKEN_REQUEST: Schema = &[(1, "metadata", Ty::Meta), (2, "spec", Ty::Msg(TOKEN_SPEC))];

fn schema(kind: &str) -> Option<Schema> {
    Some(match kind {
        "Role" | "ClusterRole" => ROLE,
        "RoleBinding" | "ClusterRoleBinding" => BINDING,
        "SelfSubjectAccessReview" => SSAR,
        "SelfSubjectRulesReview" => SSRR,
        "SelfSubjectReview" => SSR,
        "TokenRequest" => TOKEN_REQUEST,
        _ => return None,
    })
}

fn message(bytes: &[u8], schema: Schema) -> Result<Value, ApiError> {
    let mut out = Map::new();
    for f in fields(bytes)? {
        let (number, payload) = match f {
            Field::Bytes(n, b) => (n, Ok(b)),
            Field::Varint(n, v) => (n, Err(v)),
            Field::Other => continue,
        };
        let Some(&(_, name, ty)) = schema.iter().find(|(n, _, _)| *n == number) else {
            continue;
        };
        match (ty, payload) {
            (Ty::Str, Ok(b)) => {
                out.insert(name.into(), json!(string(b)?));
            }
            (Ty::Strs, Ok(b)) => push(&mut out, name, json!(string(b)?)),
            (Ty::Int, Err(v)) => {
                out.insert(name.into(), json!(v));
            }
            (Ty::Meta, Ok(b)) => {
                out.insert(name.into(), object_meta(b)?);
            }
            (Ty::Msg(s), Ok(b)) => {
                out.insert(name.into(), message(b, s)?);
            }
            (Ty::Msgs(s), Ok(b)) => push(&mut out, name, message(b, s)?),
            _ => return Err(bad(&format!("field {name} has the wrong wire type"))),
        }
    }
    Ok(Value::Object(out))
}

fn push(out: &mut Map<String, Value>, name: &str, v: Value) {
    match out.entry(name).or_insert_with(|| json!([])) {
        Value::Array(a) => a.push(v),
        other => *other = json!([v]),
    }
}

/// Decodes a protobuf body that must hold one of `kinds`, as JSON with its
/// `apiVersion` and `kind`.
///
/// # Errors
/// 400 on a malformed body or another kind.
pub(crate) fn decode(body: &[u8], kinds: &[&str]) -> Result<Value, ApiError> {
    let body = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing k8s protobuf prefix"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    for f in fields(body)? {
        match f {
            Field::Bytes(1, type_meta) => {
                for tf in fields(type_meta)? {
                    match tf {
                        Field::Bytes(1, v) => api_version = string(v)?,
                        Field::Bytes(2, k) => kind = string(k)?,
                        _ => {}
                    }
                }
            }
            Field::Bytes(2, r) => raw = Some(r),
            _ => {}
        }
    }
    let schema = schema(&kind)
        .filter(|_| kinds.contains(&kind.as_str()))
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "expected a {} in the protobuf body, got {kind:?}",
                kinds.join(" or ")
            ))
        })?;
    let mut v = message(raw.unwrap_or(&[]), schema)?;
    v["apiVersion"] = api_version.into();
    v["kind"] = kind.into();
    Ok(v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ld(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![(number << 3) | 2, u8::try_from(bytes.len()).unwrap()];
        v.extend_from_slice(bytes);
        v
    }

    #[test]
    fn a_rolebinding_and_a_token_request_decode_with_their_fields() {
        let subject = [ld(1, b"User"), ld(3, b"alice")].concat();
        let role_ref = [
            ld(1, b"rbac.authorization.k8s.io"),
            ld(2, b"ClusterRole"),
            ld(3, b"edit"),
        ]
        .concat();
        let rb = [ld(1, &ld(1, b"x")), ld(2, &subject), ld(3, &role_ref)].concat();
        let tm = [
            ld(1, b"rbac.authorization.k8s.io/v1"),
            ld(2, b"RoleBinding"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), ld(1, &tm), ld(2, &rb)].concat();
        let v = decode(&body, &["RoleBinding"]).unwrap();
        assert_eq!(v["subjects"], json!([{"kind": "User", "name": "alice"}]));
        assert_eq!(v["roleRef"]["name"], "edit");
        assert_eq!(v["metadata"]["name"], "x");
        assert!(decode(&body, &["Role"]).is_err(), "another kind is refused");
        let spec = [ld(1, b"api"), vec![4 << 3, 0x90, 0x1c]].concat();
        let tm = [ld(1, b"authentication.k8s.io/v1"), ld(2, b"TokenRequest")].concat();
        let body = [MAGIC.to_vec(), ld(1, &tm), ld(2, &ld(2, &spec))].concat();
        let v = decode(&body, &["TokenRequest"]).unwrap();
        assert_eq!(
            v["spec"],
            json!({"audiences": ["api"], "expirationSeconds": 3600})
        );
        assert!(decode(b"k8s\0\x0a\x05ab", &["Role"]).is_err());
    }
}
