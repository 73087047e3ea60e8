//! The authenticator chain, in kube-apiserver's order: x509 client certificates, static
//! bearer tokens, service account tokens, then anonymous. A credential that is presented
//! but not accepted is a 401, never anonymous.

use std::collections::HashMap;
use std::sync::Arc;

use http::HeaderMap;

use super::sa::TokenAuthority;
use super::user::UserInfo;
use crate::api::Api;
use crate::tls::PeerCertificates;

/// Who may authenticate, and how.
#[derive(Default)]
pub struct Authenticator {
    /// `--token-auth-file`'s users by token.
    pub tokens: HashMap<String, UserInfo>,
    /// Service account tokens, when a verifying key is configured.
    pub service_accounts: Option<Arc<TokenAuthority>>,
    /// `--anonymous-auth`.
    pub anonymous: bool,
    /// Executors' node keys, registered through Mesos ([`super::node_keys`]).
    pub nodes: Option<Arc<super::node_keys::NodeKeys>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Tokens are secrets: only their number is shown.
        f.debug_struct("Authenticator")
            .field("tokens", &self.tokens.len())
            .field("service_accounts", &self.service_accounts.is_some())
            .field("anonymous", &self.anonymous)
            .field("nodes", &self.nodes.as_ref().map(|n| n.len()))
            .finish()
    }
}

impl Authenticator {
    /// The user of a request, or `None` (401). Client certificates were verified against
    /// `--client-ca-file` in the TLS handshake; here only their subject is read.
    pub fn authenticate(
        &self,
        api: &Api,
        headers: &HeaderMap,
        peer: Option<&PeerCertificates>,
    ) -> Option<UserInfo> {
        if let Some(cert) = peer.and_then(|p| p.0.first()) {
            let (cn, orgs) = super::der::subject_names(cert)?;
            if cn.is_empty() {
                return None;
            }
            return Some(UserInfo::authenticated(cn, "", orgs));
        }
        if let Some(value) = headers.get(http::header::AUTHORIZATION) {
            let token = value.to_str().ok()?.strip_prefix("Bearer ")?.trim();
            if token.is_empty() {
                return None;
            }
            if let Some(user) = self.tokens.get(token) {
                return Some(user.clone());
            }
            if let Some(user) = self
                .nodes
                .as_ref()
                .and_then(|n| n.authenticate(token, api.now()))
            {
                return Some(user);
            }
            return self.service_accounts.as_ref()?.authenticate(api, token);
        }
        self.anonymous.then(UserInfo::anonymous)
    }
}
