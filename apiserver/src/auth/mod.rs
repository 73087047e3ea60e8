//! Authentication and authorization of API requests, as kube-apiserver does them.
//!
//! - [`authn::Authenticator`]: x509 client certificates (verified in the TLS handshake
//!   against `--client-ca-file`; CN is the user, each O a group), `--token-auth-file`
//!   bearer tokens, service account JWTs ([`sa::TokenAuthority`]), then anonymous if
//!   `--anonymous-auth`. No accepted credential: 401 with Kubernetes' Status.
//! - [`rbac::Rbac`]: `--authorization-mode=RBAC` over the Role, ClusterRole,
//!   RoleBinding and ClusterRoleBinding objects in the store, with the bootstrap roles
//!   and `system:masters`. A denial is a 403 worded as kube-apiserver words it.
//! - [`Auth::layer`] puts both in front of a router: every request, the framework's
//!   debug pages included, is authenticated and then authorized on the attributes its
//!   path gives ([`request_info::Attributes`]). An embedder with layers of its own
//!   between the two (audit, in-flight limits: kube-apiserver's order is
//!   authentication, audit, limits, authorization) uses [`Auth::authenticate_layer`]
//!   outside them and [`Auth::authorize_layer`] inside; those layers then find the
//!   [`RequestUser`] (or [`Unauthenticated`]) in the request's extensions. Lists and watches are authorized as a
//!   whole, as in Kubernetes: a namespaced list needs `list` in that namespace, a list
//!   across namespaces needs it cluster-wide; no object is filtered out of an answer.
//! - The reviews (`kubectl auth can-i`, `kubectl auth whoami`) and TokenRequest
//!   (`kubectl create token`) are in [`reviews`].

pub mod authn;
pub mod der;
mod discovery;
mod in_process;
pub mod node_authz;
pub mod node_keys;
pub mod rbac;
pub mod request_info;
mod reviews;
pub mod sa;
pub mod status;
pub mod tokenfile;
pub mod user;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

pub use authn::Authenticator;
pub use in_process::InProcess;
pub use rbac::Rbac;
pub use request_info::Attributes;
pub use user::UserInfo;

use crate::api::Api;
use crate::tls::PeerCertificates;

/// Why the security configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// `--token-auth-file` is unreadable or malformed.
    #[error("token file '{path}' {detail}")]
    TokenFile {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// A key file is unreadable or holds no usable key.
    #[error("cannot use key file {path}: {detail}")]
    Key {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// A certificate or key for TLS serving cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
}

/// The authenticated user of a request, in its extensions once [`Auth::layer`] let it
/// through.
#[derive(Debug, Clone)]
pub struct RequestUser(pub UserInfo);

/// In a request's extensions when authentication ran and accepted no credential; the
/// authorization layer answers it 401.
#[derive(Debug, Clone, Copy)]
pub struct Unauthenticated;

/// Authentication with an authorizer (`None`: `AlwaysAllow`).
pub struct Auth {
    api: Api,
    authn: Authenticator,
    rbac: Option<Arc<Rbac>>,
    /// The Node authorizer before RBAC (`--authorization-mode=Node,RBAC`).
    node: bool,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("authn", &self.authn)
            .field("rbac", &self.rbac.is_some())
            .field("node", &self.node)
            .finish()
    }
}

impl Auth {
    /// Authentication by `authn`, authorization by RBAC when `rbac` is true (its bootstrap
    /// roles are created first) or else everything allowed to whoever authenticated.
    ///
    /// # Errors
    /// The bootstrap roles cannot be written.
    pub async fn new(
        api: Api,
        authn: Authenticator,
        rbac: bool,
    ) -> Result<Arc<Self>, crate::ApiError> {
        let rbac = if rbac {
            let r = Arc::new(Rbac::new(api.clone()));
            r.bootstrap().await?;
            api.authorize_in_process(r.clone(), UserInfo::scheduler());
            Some(r)
        } else {
            None
        };
        Ok(Arc::new(Self {
            api,
            authn,
            rbac,
            node: false,
        }))
    }

    /// As [`Auth::new`] with RBAC, and with the Node authorizer in front of it when
    /// `node` (`--authorization-mode=Node,RBAC`).
    ///
    /// # Errors
    /// The bootstrap roles cannot be written.
    pub async fn with_node(
        api: Api,
        authn: Authenticator,
        node: bool,
    ) -> Result<Arc<Self>, crate::ApiError> {
        let auth = Self::new(api, authn, true).await?;
        let mut auth = Arc::try_unwrap(auth)
            .map_err(|_| crate::ApiError::Internal("the authorizer is already shared".into()))?;
        auth.node = node;
        Ok(Arc::new(auth))
    }

    /// The RBAC authorizer, if authorization is RBAC.
    pub fn rbac(&self) -> Option<&Arc<Rbac>> {
        self.rbac.as_ref()
    }

    /// Whether `user` may do `a` (always, without an authorizer). The framework asks this
    /// for its own in-process writes, as [`UserInfo::scheduler`].
    pub fn authorize(&self, user: &UserInfo, a: &Attributes) -> bool {
        self.rbac
            .as_ref()
            .is_none_or(|r| r.authorize(user, a).allowed)
    }

    /// `router` with every request authenticated and authorized first.
    pub fn layer(self: &Arc<Self>, router: Router) -> Router {
        self.authenticate_layer(self.authorize_layer(router))
    }

    /// `router` (which must be under [`Auth::authorize_layer`]) with every request's
    /// credentials checked first: the user goes into its extensions as [`RequestUser`],
    /// or [`Unauthenticated`] when no credential was accepted.
    pub fn authenticate_layer(self: &Arc<Self>, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(
            self.clone(),
            authenticate,
        ))
    }

    /// `router` with every request authorized: 401 for an [`Unauthenticated`] one (or one
    /// that [`Auth::authenticate_layer`] never saw), 403 for a denied one.
    pub fn authorize_layer(self: &Arc<Self>, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(
            self.clone(),
            authorize,
        ))
    }
}

async fn authenticate(State(auth): State<Arc<Auth>>, mut req: Request, next: Next) -> Response {
    match auth.authn.authenticate(
        &auth.api,
        req.headers(),
        req.extensions().get::<PeerCertificates>(),
    ) {
        Some(user) => {
            if let Some(sa) = &auth.authn.service_accounts {
                req.extensions_mut().insert(sa.clone());
            }
            req.extensions_mut().insert(RequestUser(user));
        }
        None => {
            req.extensions_mut().insert(Unauthenticated);
        }
    }
    next.run(req).await
}

async fn authorize(State(auth): State<Arc<Auth>>, mut req: Request, next: Next) -> Response {
    let Some(RequestUser(user)) = req.extensions().get::<RequestUser>().cloned() else {
        tracing::debug!(path = req.uri().path(), "unauthenticated request refused");
        return status::unauthorized();
    };
    if let Some(rbac) = &auth.rbac {
        let attrs = Attributes::from_request(req.method(), req.uri().path(), req.uri().query());
        let by_node = match auth.node {
            true => node_authz::authorize(&auth.api, &user, &attrs),
            false => node_authz::NodeDecision::NoOpinion(String::new()),
        };
        if let node_authz::NodeDecision::NoOpinion(reason) = by_node
            && !rbac.authorize(&user, &attrs).allowed
        {
            tracing::debug!(
                user = user.name,
                verb = attrs.verb,
                resource = attrs.resource,
                namespace = attrs.namespace,
                "request denied"
            );
            return node_authz::denied(&user, &attrs, &reason);
        }
        req.extensions_mut().insert((user, rbac.clone()));
    }
    next.run(req).await
}

/// The routes of the reviews and TokenRequest, and the discovery of their groups and
/// RBAC's (the RBAC kinds themselves take the plain kinds' path, `crate::kinds`).
pub(crate) fn routes() -> Router<Api> {
    reviews::routes().merge(discovery::routes())
}

/// The API groups this module serves, for `/apis`.
pub(crate) fn api_groups() -> Vec<serde_json::Value> {
    discovery::groups()
}

/// A request body as JSON: protobuf (what kubectl's typed clients send), which must
/// hold a `kind` of `api_version`, or JSON or YAML.
pub(crate) async fn read_object(
    headers: &axum::http::HeaderMap,
    body: axum::body::Body,
    api_version: &str,
    kind: &str,
) -> Result<serde_json::Value, crate::ApiError> {
    use crate::http::extract::{object_content_type, read_body};
    let ct = object_content_type(headers)?.to_string();
    let bytes = read_body(headers, body).await?;
    if crate::protobuf::is_protobuf(&ct) {
        return crate::protobuf::decode_object(&bytes, api_version, kind);
    }
    crate::decode::parse_object(&bytes, &ct)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;

    async fn get(router: &Router, path: &str) -> (u16, String) {
        let req = Request::builder().uri(path).body(Body::empty()).unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (code, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn anonymous_requests_are_401_unless_allowed_and_then_only_public_info() {
        for anonymous in [false, true] {
            let api = Api::in_memory().await.unwrap();
            let authn = Authenticator {
                anonymous,
                ..Authenticator::default()
            };
            let router = Auth::new(api.clone(), authn, true)
                .await
                .unwrap()
                .layer(crate::router(api));
            let (code, body) = get(&router, "/api/v1/namespaces/default/pods").await;
            if anonymous {
                assert_eq!(code, 403);
                assert!(
                    body.contains(r#"User \"system:anonymous\" cannot list resource \"pods\""#),
                    "{body}"
                );
                assert_eq!(
                    get(&router, "/version").await.0,
                    200,
                    "system:public-info-viewer"
                );
                assert_eq!(
                    get(&router, "/api").await.0,
                    403,
                    "discovery is for authenticated users"
                );
            } else {
                assert_eq!(
                    (code, body.contains(r#""reason":"Unauthorized""#)),
                    (401, true),
                    "{body}"
                );
                assert_eq!(get(&router, "/version").await.0, 401);
            }
        }
    }
}
