//! Executors' node credentials: public keys registered through Mesos, and the short-lived
//! JWTs executors sign with them.
//!
//! An executor makes a P-256 key pair when it starts and sends only the public key to
//! the scheduler in an executor `MESSAGE` (the Mesos master stamps the agent and executor
//! ids on it, so the key is tied to the agent it came from). The scheduler registers it
//! here as `(agent id, executor id) → key, node name`. The executor then authenticates to
//! the API with JWTs it signs itself:
//!
//! - header `{"alg":"ES256","typ":"JWT","kid":KID}`, `KID` = [`key_id`] of the public key;
//! - claims `iss` [`NODE_ISSUER`], `sub` `system:node:<node>`, `iat`, `nbf`, `exp`, with
//!   `exp - iat` at most [`MAX_LIFETIME_SECS`].
//!
//! A valid token is the user `system:node:<node>` in `system:nodes`, as kubelet's
//! credential is. A token whose key is not registered, whose signature or times are
//! wrong, or whose `sub` names another node is refused (401). Nothing secret ever
//! travels through Mesos: the private key stays in the executor's memory.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use serde_json::Value;

use super::user::UserInfo;

/// The `iss` of an executor's node token.
pub const NODE_ISSUER: &str = "mesopod:executor";
/// The group every node is in.
pub const NODES_GROUP: &str = "system:nodes";
/// The prefix of a node's user name.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The longest lifetime a node token may claim: they are short-lived by design.
pub const MAX_LIFETIME_SECS: u64 = 600;
/// Clock skew allowed on `nbf` and `exp`, as for service account tokens.
const LEEWAY_SECS: u64 = 60;

/// The key id of an uncompressed P-256 public key: the first 16 bytes of its SHA-256,
/// base64url. The scheduler computes it from the key itself, never trusting a sent id.
pub fn key_id(public_key: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, public_key);
    B64.encode(&digest.as_ref()[..16])
}

/// One executor's registered key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeKey {
    /// The node (the agent's hostname) its tokens may name.
    pub node: String,
    /// The Mesos agent id the key came from.
    pub agent_id: String,
    /// The executor id the key came from.
    pub executor_id: String,
    /// The uncompressed P-256 public key (65 bytes).
    pub public_key: Vec<u8>,
}

/// The registered keys, by key id. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct NodeKeys {
    keys: RwLock<HashMap<String, NodeKey>>,
}

/// Why a key cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeKeyError {
    /// Not an uncompressed P-256 point.
    #[error("not an uncompressed P-256 public key ({0} bytes)")]
    BadKey(usize),
    /// The agent has no known node name.
    #[error("the agent has no node name")]
    NoNode,
}

impl NodeKeys {
    /// Registers `key` and returns its key id. An executor registers one key at a time:
    /// a new key from the same agent and executor replaces the old one.
    ///
    /// # Errors
    /// The key is not an uncompressed P-256 point, or the node name is empty.
    pub fn register(&self, key: NodeKey) -> Result<String, NodeKeyError> {
        if key.public_key.len() != 65 || key.public_key.first() != Some(&4) {
            return Err(NodeKeyError::BadKey(key.public_key.len()));
        }
        if key.node.is_empty() {
            return Err(NodeKeyError::NoNode);
        }
        let kid = key_id(&key.public_key);
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        keys.retain(|_, k| !(k.agent_id == key.agent_id && k.executor_id == key.executor_id));
        keys.insert(kid.clone(), key);
        Ok(kid)
    }

    /// Forgets every key registered from `agent_id`.
    pub fn forget_agent(&self, agent_id: &str) {
        let mut keys = self.keys.write().unwrap_or_else(|p| p.into_inner());
        keys.retain(|_, k| k.agent_id != agent_id);
    }

    /// How many keys are registered.
    pub fn len(&self) -> usize {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no key is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `token` looks like a node token (its header names a `kid` we issue for):
    /// lets the chain try this authenticator only where it may apply.
    fn key_of(&self, token: &str) -> Option<NodeKey> {
        let header: Value =
            serde_json::from_slice(&B64.decode(token.split('.').next()?).ok()?).ok()?;
        let kid = header["kid"].as_str()?;
        (header["alg"].as_str() == Some("ES256"))
            .then(|| {
                self.keys
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(kid)
                    .cloned()
            })
            .flatten()
    }

    /// The node user of a valid node token at `now`, or `None`.
    pub fn authenticate(&self, token: &str, now: SystemTime) -> Option<UserInfo> {
        let key = self.key_of(token)?;
        let mut parts = token.split('.');
        let (h, c, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let sig = B64.decode(s).ok()?;
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &key.public_key)
            .verify(format!("{h}.{c}").as_bytes(), &sig)
            .ok()?;
        let claims: Value = serde_json::from_slice(&B64.decode(c).ok()?).ok()?;
        let now = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
        let (iat, exp) = (claims["iat"].as_u64()?, claims["exp"].as_u64()?);
        let sub = format!("{NODE_USER_PREFIX}{}", key.node);
        let ok = claims["iss"].as_str() == Some(NODE_ISSUER)
            && claims["sub"].as_str() == Some(sub.as_str())
            && exp > iat
            && exp - iat <= MAX_LIFETIME_SECS
            && now < exp + LEEWAY_SECS
            && claims["nbf"].as_u64().unwrap_or(iat) <= now + LEEWAY_SECS;
        ok.then(|| UserInfo::authenticated(sub, "", vec![NODES_GROUP.to_owned()]))
    }
}

/// The node a user is, if it is a node (`system:node:<name>` in `system:nodes`).
pub fn node_of(user: &UserInfo) -> Option<&str> {
    user.name
        .strip_prefix(NODE_USER_PREFIX)
        .filter(|n| !n.is_empty() && user.in_group(NODES_GROUP))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
    use serde_json::json;

    use super::*;

    fn pair() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, doc.as_ref(), &rng).unwrap()
    }

    fn sign(k: &EcdsaKeyPair, claims: &Value) -> String {
        let kid = key_id(k.public_key().as_ref());
        let header = json!({"alg": "ES256", "typ": "JWT", "kid": kid});
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let sig = k.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
        format!("{input}.{}", B64.encode(sig.as_ref()))
    }

    fn claims(node: &str, iat: u64, life: u64) -> Value {
        json!({"iss": NODE_ISSUER, "sub": format!("system:node:{node}"), "iat": iat, "nbf": iat, "exp": iat + life})
    }

    #[test]
    fn a_registered_key_authenticates_its_node_and_nothing_else_does() {
        let keys = NodeKeys::default();
        let k = pair();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let t = 1_000_000;
        let token = sign(&k, &claims("n1", t, 300));
        assert!(
            keys.authenticate(&token, now).is_none(),
            "not registered yet"
        );
        let reg = |exec: &str, key: &EcdsaKeyPair| NodeKey {
            node: "n1".into(),
            agent_id: "a1".into(),
            executor_id: exec.into(),
            public_key: key.public_key().as_ref().to_vec(),
        };
        keys.register(reg("e1", &k)).unwrap();
        let user = keys.authenticate(&token, now).unwrap();
        assert_eq!(user.name, "system:node:n1");
        assert_eq!(node_of(&user), Some("n1"));
        assert!(user.in_group("system:nodes") && user.in_group("system:authenticated"));

        let other_node = sign(&k, &claims("n2", t, 300));
        assert!(
            keys.authenticate(&other_node, now).is_none(),
            "sub must be the key's node"
        );
        let long = sign(&k, &claims("n1", t, 3600));
        assert!(keys.authenticate(&long, now).is_none(), "too long-lived");
        let old = sign(&k, &claims("n1", t - 1000, 300));
        assert!(keys.authenticate(&old, now).is_none(), "expired");
        let forged = sign(&pair(), &claims("n1", t, 300));
        assert!(keys.authenticate(&forged, now).is_none(), "unknown key");
        let mut tampered = token.clone();
        tampered.truncate(tampered.len() - 4);
        tampered.push_str("AAAA");
        assert!(keys.authenticate(&tampered, now).is_none());

        // A restarted executor's new key replaces the old one.
        let k2 = pair();
        keys.register(reg("e1", &k2)).unwrap();
        assert_eq!(keys.len(), 1);
        assert!(keys.authenticate(&token, now).is_none());
        assert!(
            keys.authenticate(&sign(&k2, &claims("n1", t, 300)), now)
                .is_some()
        );
        assert_eq!(
            keys.register(NodeKey {
                public_key: vec![1, 2],
                ..reg("e1", &k2)
            }),
            Err(NodeKeyError::BadKey(2))
        );
    }
}
