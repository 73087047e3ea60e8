//! The executor's credential and its registration with the scheduler: what the
//! executor loop sends ([`Credential::key_message`]), what it hands back from the
//! scheduler ([`Credential::on_message`]), and what the API client waits on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::sync::{Notify, watch};

use super::identity::{Identity, IdentityError};
use super::protocol::{self, NODE_KEY_MESSAGE, NODE_REGISTERED_MESSAGE, Registered};

/// The key pair and, once the scheduler answered, what it registered.
#[derive(Debug)]
pub struct Credential {
    identity: Identity,
    registered: watch::Sender<Option<Registered>>,
    /// Set when the key should be sent again (the API forgot it: a restarted scheduler).
    wanted: Notify,
    /// The streaming endpoint the registration announces, once it listens.
    streaming: std::sync::Mutex<Option<protocol::StreamingEndpoint>>,
    /// How many answers for this key came: the executor sends its key until one more
    /// came than when it sent (Mesos messages are best effort).
    answers: AtomicU64,
}

impl Credential {
    /// A credential with a fresh key pair, not registered yet.
    ///
    /// # Errors
    /// The key pair could not be made.
    pub fn generate() -> Result<Self, IdentityError> {
        Ok(Self {
            identity: Identity::generate()?,
            registered: watch::Sender::new(None),
            wanted: Notify::new(),
            streaming: std::sync::Mutex::new(None),
            answers: AtomicU64::new(0),
        })
    }

    /// The executor `MESSAGE` data that registers the public key.
    pub fn key_message(&self) -> Vec<u8> {
        let mut key = self.identity.public_key();
        key.streaming = self.streaming.lock().map(|s| s.clone()).unwrap_or_default();
        protocol::encode(NODE_KEY_MESSAGE, &key)
    }

    /// Announces `endpoint` in every later key registration.
    pub fn set_streaming(&self, endpoint: protocol::StreamingEndpoint) {
        if let Ok(mut s) = self.streaming.lock() {
            *s = Some(endpoint);
        }
    }

    /// The key pair, for the streaming endpoint's TLS.
    pub(crate) fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Takes a scheduler `MESSAGE`: true if it was the answer to this key's registration.
    pub fn on_message(&self, data: &[u8]) -> bool {
        let Some(reg) = protocol::decode::<Registered>(NODE_REGISTERED_MESSAGE, data) else {
            return false;
        };
        if reg.kid != self.identity.kid() {
            tracing::warn!(kid = reg.kid, "registration of another key ignored");
            return true;
        }
        tracing::info!(
            node = reg.node,
            server = reg.server,
            "node credential registered"
        );
        self.registered.send_replace(Some(reg));
        self.answers.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// How many registrations of this key the scheduler answered so far.
    pub fn answers(&self) -> u64 {
        self.answers.load(Ordering::Relaxed)
    }

    /// Completes when the key should be sent to the scheduler again.
    pub async fn reregister_wanted(&self) {
        self.wanted.notified().await;
    }

    /// The API refused the key (401): it is sent again, and the registration waited for anew.
    pub fn forget(&self) {
        self.registered.send_replace(None);
        self.wanted.notify_one();
    }

    /// The registration, waiting up to `timeout` for it.
    pub async fn registration(&self, timeout: Duration) -> Option<Registered> {
        let mut rx = self.registered.subscribe();
        let got = tokio::time::timeout(timeout, rx.wait_for(Option::is_some)).await;
        got.ok()?.ok()?.clone()
    }

    /// The registration, if the scheduler answered.
    pub fn current(&self) -> Option<Registered> {
        self.registered.borrow().clone()
    }

    /// A fresh token for `node`.
    ///
    /// # Errors
    /// Signing failed.
    pub fn token(&self, node: &str) -> Result<String, IdentityError> {
        self.identity.token(node, SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::apiclient::protocol::NodeKey;

    #[tokio::test]
    async fn only_the_answer_for_this_key_registers_it() {
        let c = Credential::generate().unwrap();
        let key: NodeKey = protocol::decode(NODE_KEY_MESSAGE, &c.key_message()).unwrap();
        assert_eq!(key.alg, "ES256");
        assert!(!c.on_message(b"mesopod.io/resend-status"));
        let reg = |kid: &str| Registered {
            stream_key: String::new(),
            kid: kid.into(),
            node: "n1".into(),
            server: "http://127.0.0.1:1".into(),
            ca_pem: String::new(),
        };
        assert!(c.on_message(&protocol::encode(NODE_REGISTERED_MESSAGE, &reg("other"))));
        assert!(c.registration(Duration::from_millis(10)).await.is_none());
        assert_eq!(c.answers(), 0, "another key's answer is no answer");
        let kid = c.identity.kid().to_owned();
        assert!(c.on_message(&protocol::encode(NODE_REGISTERED_MESSAGE, &reg(&kid))));
        assert_eq!(c.answers(), 1);
        assert_eq!(c.registration(Duration::ZERO).await.unwrap().node, "n1");
        c.forget();
        assert!(c.registration(Duration::from_millis(10)).await.is_none());
        tokio::time::timeout(Duration::from_secs(1), c.reregister_wanted())
            .await
            .expect("a forgotten key asks to be sent again");
    }
}
