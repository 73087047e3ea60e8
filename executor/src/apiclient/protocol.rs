//! The messages an executor and the scheduler exchange over Mesos to set up the
//! executor's node credential. None of them carries a secret: the executor sends its
//! *public* key, the scheduler answers with the node name it registered the key under
//! and where the API shim is (its URL and CA certificate).
//!
//! - executor → scheduler (executor `MESSAGE`; the master stamps agent and executor id):
//!   [`NODE_KEY_MESSAGE`] followed by a [`NodeKey`] as JSON.
//! - scheduler → executor (scheduler `MESSAGE`): [`NODE_REGISTERED_MESSAGE`] followed by
//!   a [`Registered`] as JSON.
//! - scheduler → executor: [`REGISTER_AGAIN_MESSAGE`] alone, when a scheduler (a restarted
//!   one, or a new leader) subscribes and knows the executor from its tasks: its API and
//!   stream key are new, so the executor sends its key again.

use serde::{Deserialize, Serialize};

/// Prefix of the executor's key registration.
pub const NODE_KEY_MESSAGE: &[u8] = b"mesopod.io/node-key ";
/// Prefix of the scheduler's answer.
pub const NODE_REGISTERED_MESSAGE: &[u8] = b"mesopod.io/node-registered ";
/// The scheduler's request to send the key again.
pub const REGISTER_AGAIN_MESSAGE: &[u8] = b"mesopod.io/register-node-key";

/// An executor's public key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeKey {
    /// The JWT algorithm its tokens use (`ES256`).
    pub alg: String,
    /// The uncompressed P-256 point, base64url without padding.
    pub public_key: String,
    /// Where the executor serves container streams (exec, attach, port-forward), over
    /// TLS with a certificate for this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<StreamingEndpoint>,
}

/// The executor's streaming endpoint, as kubelet's `daemonEndpoints` and address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamingEndpoint {
    /// The agent's address the endpoint listens on.
    pub host: String,
    /// Its port (procured from the offer with the executor's resources).
    pub port: u16,
}

/// What the scheduler registered, and where the API is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    /// The key id tokens must name (`kid`).
    pub kid: String,
    /// The node name tokens must name (`sub: system:node:<node>`).
    pub node: String,
    /// The API shim's base URL (`https://host:port` or, on loopback, `http://`).
    pub server: String,
    /// The CA certificate(s) that sign the API's serving certificate, PEM; empty
    /// for plain HTTP.
    #[serde(default)]
    pub ca_pem: String,
    /// The public key (uncompressed P-256, base64url) that signs the scheduler's
    /// credentials on the executor's streaming endpoint; empty: no streams.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stream_key: String,
}

/// `prefix` followed by `value` as JSON.
pub fn encode<T: Serialize>(prefix: &[u8], value: &T) -> Vec<u8> {
    let mut out = prefix.to_vec();
    // Serializing these plain structs cannot fail.
    out.extend(serde_json::to_vec(value).unwrap_or_default());
    out
}

/// The value after `prefix`, if `data` starts with it and parses.
pub fn decode<T: for<'de> Deserialize<'de>>(prefix: &[u8], data: &[u8]) -> Option<T> {
    serde_json::from_slice(data.strip_prefix(prefix)?).ok()
}
