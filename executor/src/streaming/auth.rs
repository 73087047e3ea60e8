//! The shim's credential on the executor's streaming endpoint: a short-lived ES256 JWT
//! (`Authorization: Bearer …`) whose audience is this executor's node, signed by the
//! scheduler's stream key, whose public half arrived in the registration answer
//! ([`crate::apiclient::protocol::Registered::stream_key`]). Only a public key travels
//! through Mesos; the private one never leaves the scheduler.
//!
//! Claims: `iss` [`STREAM_ISSUER`], `aud` the node name, `exp` at most
//! [`MAX_LIFETIME`] after `iat`. Anything else, or no token at all, is refused (401).

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

/// The `iss` of stream credentials.
pub const STREAM_ISSUER: &str = "mesopod:streams";
/// The longest validity a credential may claim.
pub const MAX_LIFETIME: Duration = Duration::from_secs(600);
/// How far clocks may disagree.
const LEEWAY: u64 = 30;

/// Why a credential was refused (said in the 401's body; no token is ever quoted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization: Bearer` header.
    #[error("no credential")]
    Missing,
    /// The executor has no registration (no stream key) yet.
    #[error("this executor is not registered with the scheduler yet")]
    NotRegistered,
    /// Malformed, badly signed, for another node, or expired.
    #[error("invalid credential: {0}")]
    Invalid(&'static str),
}

/// Checks `authorization` (the header's value) against `key` (the stream key, base64url)
/// for node `node` at `now`.
///
/// # Errors
/// [`AuthError`] saying why it is refused.
pub fn check(
    authorization: Option<&str>,
    key: &str,
    node: &str,
    now: SystemTime,
) -> Result<(), AuthError> {
    let token = authorization
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or(AuthError::Missing)?;
    if key.is_empty() {
        return Err(AuthError::NotRegistered);
    }
    let key = B64
        .decode(key)
        .map_err(|_| AuthError::Invalid("bad stream key"))?;
    let mut parts = token.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Invalid("not a JWT"));
    };
    let header: serde_json::Value = decode_json(h)?;
    if header["alg"] != "ES256" {
        return Err(AuthError::Invalid("algorithm"));
    }
    let sig = B64
        .decode(s)
        .map_err(|_| AuthError::Invalid("signature encoding"))?;
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &key)
        .verify(format!("{h}.{c}").as_bytes(), &sig)
        .map_err(|_| AuthError::Invalid("signature"))?;
    let claims: serde_json::Value = decode_json(c)?;
    if claims["iss"] != STREAM_ISSUER {
        return Err(AuthError::Invalid("issuer"));
    }
    if claims["aud"] != node {
        return Err(AuthError::Invalid("audience"));
    }
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| AuthError::Invalid("clock"))?
        .as_secs();
    let (Some(iat), Some(exp)) = (claims["iat"].as_u64(), claims["exp"].as_u64()) else {
        return Err(AuthError::Invalid("times"));
    };
    if exp + LEEWAY < now || iat > now + LEEWAY || exp.saturating_sub(iat) > MAX_LIFETIME.as_secs()
    {
        return Err(AuthError::Invalid("expired or not yet valid"));
    }
    Ok(())
}

fn decode_json(part: &str) -> Result<serde_json::Value, AuthError> {
    let bytes = B64
        .decode(part)
        .map_err(|_| AuthError::Invalid("encoding"))?;
    serde_json::from_slice(&bytes).map_err(|_| AuthError::Invalid("JSON"))
}

/// Signs stream credentials (the scheduler's side; here so both sides share one format).
pub struct StreamSigner {
    pair: ring::signature::EcdsaKeyPair,
    rng: ring::rand::SystemRandom,
}

impl std::fmt::Debug for StreamSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSigner").finish_non_exhaustive()
    }
}

impl StreamSigner {
    /// A signer over the P-256 key in `pkcs8`.
    ///
    /// # Errors
    /// The key does not parse.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, String> {
        let rng = ring::rand::SystemRandom::new();
        let pair = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8,
            &rng,
        )
        .map_err(|e| e.to_string())?;
        Ok(Self { pair, rng })
    }

    /// A fresh P-256 key in PKCS#8.
    ///
    /// # Errors
    /// The random source failed.
    pub fn generate_pkcs8() -> Result<Vec<u8>, String> {
        let rng = ring::rand::SystemRandom::new();
        ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .map(|d| d.as_ref().to_vec())
        .map_err(|e| e.to_string())
    }

    /// The public key as executors learn it (base64url of the uncompressed point).
    pub fn public_key(&self) -> String {
        use ring::signature::KeyPair as _;
        B64.encode(self.pair.public_key().as_ref())
    }

    /// A credential for node `node`, valid `lifetime` (at most [`MAX_LIFETIME`]) from `now`.
    ///
    /// # Errors
    /// Signing failed.
    pub fn token(&self, node: &str, now: SystemTime, lifetime: Duration) -> Result<String, String> {
        let iat = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_secs();
        let header = serde_json::json!({"alg": "ES256", "typ": "JWT"});
        let claims = serde_json::json!({
            "iss": STREAM_ISSUER, "aud": node, "iat": iat,
            "exp": iat + lifetime.min(MAX_LIFETIME).as_secs(),
        });
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(format!("{input}.{}", B64.encode(sig.as_ref())))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn signer() -> StreamSigner {
        StreamSigner::from_pkcs8(&StreamSigner::generate_pkcs8().unwrap()).unwrap()
    }

    #[test]
    fn a_credential_for_this_node_passes_and_anything_else_is_refused() {
        let s = signer();
        let now = SystemTime::now();
        let t = s.token("node-a", now, Duration::from_secs(60)).unwrap();
        let key = s.public_key();
        let bearer = format!("Bearer {t}");
        assert_eq!(check(Some(&bearer), &key, "node-a", now), Ok(()));
        assert_eq!(check(None, &key, "node-a", now), Err(AuthError::Missing));
        assert_eq!(
            check(Some(&bearer), &key, "node-b", now),
            Err(AuthError::Invalid("audience"))
        );
        assert_eq!(
            check(
                Some(&bearer),
                &key,
                "node-a",
                now + Duration::from_secs(600)
            ),
            Err(AuthError::Invalid("expired or not yet valid"))
        );
        assert_eq!(
            check(Some(&bearer), &signer().public_key(), "node-a", now),
            Err(AuthError::Invalid("signature"))
        );
        assert_eq!(
            check(Some(&bearer), "", "node-a", now),
            Err(AuthError::NotRegistered)
        );
        assert_eq!(
            check(Some("Bearer a.b"), &key, "node-a", now),
            Err(AuthError::Invalid("not a JWT"))
        );
    }
}
