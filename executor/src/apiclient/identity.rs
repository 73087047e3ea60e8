//! The executor's own key pair and the short-lived node tokens it signs with it.
//!
//! The token format is the API shim's (`apiserver::auth::node_keys`): ES256, `kid` the
//! first 16 bytes of the public key's SHA-256 (base64url), `iss` [`NODE_ISSUER`], `sub`
//! `system:node:<node>`, valid [`TOKEN_LIFETIME`]. The private key never leaves memory.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::json;

use super::protocol::NodeKey;

/// The `iss` of node tokens.
pub const NODE_ISSUER: &str = "mesopod:executor";
/// How long a token is valid; the shim accepts at most ten minutes.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(300);

/// Why the key pair could not be made.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot make the executor's key pair: {0}")]
pub struct IdentityError(String);

/// A P-256 key pair made at start.
pub struct Identity {
    pair: EcdsaKeyPair,
    /// The key in PKCS#8, for the streaming endpoint's TLS certificate.
    pkcs8: Vec<u8>,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The private key is never shown.
        f.debug_struct("Identity")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A fresh key pair.
    ///
    /// # Errors
    /// The system's random source failed.
    pub fn generate() -> Result<Self, IdentityError> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|e| IdentityError(e.to_string()))?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref(), &rng)
            .map_err(|e| IdentityError(e.to_string()))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, pair.public_key().as_ref());
        let kid = B64.encode(&digest.as_ref()[..16]);
        Ok(Self {
            pair,
            pkcs8: doc.as_ref().to_vec(),
            kid,
            rng,
        })
    }

    /// The key id the shim will know this key by.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public half, for the registration message.
    pub fn public_key(&self) -> NodeKey {
        NodeKey {
            alg: "ES256".into(),
            public_key: B64.encode(self.pair.public_key().as_ref()),
            streaming: None,
        }
    }

    /// The key pair in PKCS#8 (the streaming endpoint serves TLS with it).
    pub(crate) fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// A token naming `node`, valid from `now` for [`TOKEN_LIFETIME`].
    ///
    /// # Errors
    /// Signing failed (the random source).
    pub fn token(&self, node: &str, now: SystemTime) -> Result<String, IdentityError> {
        let iat = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_err(|e| IdentityError(e.to_string()))?
            .as_secs();
        let header = json!({"alg": "ES256", "typ": "JWT", "kid": self.kid});
        let claims = json!({
            "iss": NODE_ISSUER, "sub": format!("system:node:{node}"),
            "iat": iat, "nbf": iat, "exp": iat + TOKEN_LIFETIME.as_secs(),
        });
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|e| IdentityError(e.to_string()))?;
        Ok(format!("{input}.{}", B64.encode(sig.as_ref())))
    }
}
