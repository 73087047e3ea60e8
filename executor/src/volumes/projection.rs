//! The files of `configMap`, `secret`, `downwardAPI` and `projected`
//! volumes, computed from the objects and the pod, in kubelet's words when
//! something is missing. ServiceAccount tokens are cached and fetched again
//! once 80% of their lifetime has passed, as kubelet's token manager does.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Volume};

use super::atomic::{File, Payload};
use crate::objects::PodObjects;
use crate::pod::{Kind, PodContext, PodField, ResourceRef, fetch};

/// Kubernetes' default mode for these volumes' files.
pub const DEFAULT_MODE: i32 = 0o644;

/// Kubernetes' default `expirationSeconds` of a projected token.
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// Tokens already fetched, by volume and source index.
#[derive(Debug, Default)]
pub struct Tokens {
    held: BTreeMap<(String, usize), (String, SystemTime)>,
}

/// Where the objects come from, and the pod they are for.
pub struct Sources<'a> {
    /// The objects source.
    pub objects: &'a dyn PodObjects,
    /// The pod.
    pub cx: &'a PodContext<'a>,
    /// Now, for token refreshes.
    pub now: SystemTime,
}

/// The volume's files; `None` for a volume kind without a payload.
pub async fn payload(
    v: &Volume,
    src: &Sources<'_>,
    tokens: &mut Tokens,
) -> Result<Option<Payload>, String> {
    let mut out = Payload::new();
    if let Some(cm) = &v.config_map {
        let mode = cm.default_mode.unwrap_or(DEFAULT_MODE);
        let o = Object {
            kind: Kind::ConfigMap,
            name: &cm.name,
            items: cm.items.as_deref(),
            optional: cm.optional.unwrap_or(false),
        };
        object(o, mode, src, &mut out).await?;
    } else if let Some(s) = &v.secret {
        let mode = s.default_mode.unwrap_or(DEFAULT_MODE);
        let o = Object {
            kind: Kind::Secret,
            name: s.secret_name.as_deref().unwrap_or_default(),
            items: s.items.as_deref(),
            optional: s.optional.unwrap_or(false),
        };
        object(o, mode, src, &mut out).await?;
    } else if let Some(d) = &v.downward_api {
        let mode = d.default_mode.unwrap_or(DEFAULT_MODE);
        downward(d.items.as_deref().unwrap_or_default(), mode, src, &mut out)?;
    } else if let Some(p) = &v.projected {
        let mode = p.default_mode.unwrap_or(DEFAULT_MODE);
        for (i, s) in p.sources.iter().flatten().enumerate() {
            if let Some(cm) = &s.config_map {
                let o = Object {
                    kind: Kind::ConfigMap,
                    name: &cm.name,
                    items: cm.items.as_deref(),
                    optional: cm.optional.unwrap_or(false),
                };
                object(o, mode, src, &mut out).await?;
            }
            if let Some(sec) = &s.secret {
                let o = Object {
                    kind: Kind::Secret,
                    name: &sec.name,
                    items: sec.items.as_deref(),
                    optional: sec.optional.unwrap_or(false),
                };
                object(o, mode, src, &mut out).await?;
            }
            if let Some(d) = &s.downward_api {
                downward(d.items.as_deref().unwrap_or_default(), mode, src, &mut out)?;
            }
            if let Some(t) = &s.service_account_token {
                let token = token(
                    (v.name.clone(), i),
                    t.audience.as_deref().filter(|a| !a.is_empty()),
                    t.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS),
                    src,
                    tokens,
                )
                .await?;
                // kubelet: with an fsGroup the token is 0600, and the
                // group's read bit comes with the volume's ownership.
                let fs_group = (src.cx.pod.spec.as_ref())
                    .and_then(|s| s.security_context.as_ref())
                    .is_some_and(|c| c.fs_group.is_some());
                let mode = if fs_group { 0o600 } else { mode };
                insert(&mut out, &t.path, token.into_bytes(), mode)?;
            }
            if s.cluster_trust_bundle.is_some() {
                return Err(
                    "projected clusterTrustBundle sources are not supported by mesopod".into(),
                );
            }
        }
    } else {
        return Ok(None);
    }
    Ok(Some(out))
}

fn insert(out: &mut Payload, path: &str, data: Vec<u8>, mode: i32) -> Result<(), String> {
    super::plan::check_relative(path)?;
    let mode = u32::try_from(mode).map_err(|_| format!("mode {mode} is out of range"))?;
    out.insert(path.to_owned(), File { data, mode });
    Ok(())
}

/// `items` (key → path, each with its mode) or every key.
fn project(
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    optional: bool,
    mode: i32,
    missing_key: impl Fn(&str) -> String,
    out: &mut Payload,
) -> Result<(), String> {
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, v) in data {
                insert(out, &k, v, mode)?;
            }
        }
        Some(items) => {
            for item in items {
                match data.get(&item.key) {
                    Some(v) => insert(out, &item.path, v.clone(), item.mode.unwrap_or(mode))?,
                    None if optional => {}
                    None => return Err(missing_key(&item.key)),
                }
            }
        }
    }
    Ok(())
}

/// One ConfigMap or Secret source's files.
struct Object<'a> {
    kind: Kind,
    name: &'a str,
    items: Option<&'a [KeyToPath]>,
    optional: bool,
}

async fn object(
    o: Object<'_>,
    mode: i32,
    src: &Sources<'_>,
    out: &mut Payload,
) -> Result<(), String> {
    let ns = src.cx.key.namespace.as_str();
    let missing_key = |k: &str| match o.kind {
        Kind::ConfigMap => format!("configmap references non-existent config key: {k}"),
        Kind::Secret => format!("secret references non-existent secret key: {k}"),
    };
    match fetch(src.objects, o.kind, ns, o.name).await? {
        None if o.optional => Ok(()),
        None => Err(format!("{} {:?} not found", o.kind.lower(), o.name)),
        Some(data) => project(data, o.items, o.optional, mode, missing_key, out),
    }
}

fn downward(
    items: &[DownwardAPIVolumeFile],
    mode: i32,
    src: &Sources<'_>,
    out: &mut Payload,
) -> Result<(), String> {
    for item in items {
        let value = match (&item.field_ref, &item.resource_field_ref) {
            (Some(f), None) => {
                let field = PodField::parse(&f.field_path, true).ok_or_else(|| {
                    format!(
                        "downwardAPI {:?}: fieldPath {:?} is not supported",
                        item.path, f.field_path
                    )
                })?;
                src.cx.field(&field)
            }
            (None, Some(r)) => {
                let r = ResourceRef::from_selector(r);
                if r.container.is_empty() {
                    return Err(format!(
                        "downwardAPI {:?}: resourceFieldRef needs containerName",
                        item.path
                    ));
                }
                src.cx.resource(&r, "")?
            }
            _ => {
                return Err(format!(
                    "downwardAPI {:?}: exactly one of fieldRef and resourceFieldRef must be set",
                    item.path
                ));
            }
        };
        insert(
            out,
            &item.path,
            value.into_bytes(),
            item.mode.unwrap_or(mode),
        )?;
    }
    Ok(())
}

async fn token(
    key: (String, usize),
    audience: Option<&str>,
    expiration_seconds: i64,
    src: &Sources<'_>,
    tokens: &mut Tokens,
) -> Result<String, String> {
    if let Some((token, refresh_at)) = tokens.held.get(&key)
        && src.now < *refresh_at
    {
        return Ok(token.clone());
    }
    let t = src
        .objects
        .service_account_token(src.cx.pod, audience, expiration_seconds)
        .await
        .map_err(|e| e.to_string())?;
    let lifetime = Duration::from_secs(expiration_seconds.max(0).unsigned_abs());
    tokens
        .held
        .insert(key, (t.token.clone(), src.now + refresh_after(lifetime)));
    Ok(t.token)
}

/// Kubelet refreshes a token past 80% of its lifetime, or after 24 h.
pub fn refresh_after(lifetime: Duration) -> Duration {
    (lifetime * 4 / 5).min(Duration::from_secs(24 * 3600))
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
