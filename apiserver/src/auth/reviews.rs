//! The self reviews (`kubectl auth can-i`, `kubectl auth can-i --list`,
//! `kubectl auth whoami`) and TokenRequest (`kubectl create token`).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::RequestUser;
use super::rbac::Rbac;
use super::request_info::Attributes;
use super::sa::{TokenAuthority, TokenSpec};
use super::user::UserInfo;
use crate::api::{Api, k8s_time};
use crate::error::ApiError;
use crate::http::extract::ApiPath;
use crate::http::respond::json;
use crate::validation::Causes;

type Checked = Option<Extension<(UserInfo, Arc<Rbac>)>>;

async fn body(headers: &HeaderMap, body: Body, kind: &str) -> Result<Value, ApiError> {
    let api_version = match kind {
        "TokenRequest" => "authentication.k8s.io/v1",
        _ => "authorization.k8s.io/v1",
    };
    super::read_object(headers, body, api_version, kind).await
}

fn who(user: &Option<Extension<RequestUser>>) -> UserInfo {
    user.as_ref()
        .map(|Extension(RequestUser(u))| u.clone())
        .unwrap_or_else(UserInfo::anonymous)
}

fn s(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or("").to_owned()
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`.
async fn access_review(
    checked: Checked,
    headers: HeaderMap,
    b: Body,
) -> Result<Response, ApiError> {
    let mut review = body(&headers, b, "SelfSubjectAccessReview").await?;
    let spec = &review["spec"];
    let attrs = if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
        let mut a = Attributes::resource(
            &s(r, "verb"),
            &s(r, "group"),
            &s(r, "resource"),
            &s(r, "namespace"),
            &s(r, "name"),
        );
        a.subresource = s(r, "subresource");
        a
    } else if let Some(n) = spec.get("nonResourceAttributes").filter(|n| n.is_object()) {
        Attributes::non_resource(&s(n, "verb"), &s(n, "path"))
    } else {
        return Err(ApiError::BadRequest(
            "spec.resourceAttributes or spec.nonResourceAttributes is required".into(),
        ));
    };
    let (allowed, reason) = match checked {
        Some(Extension((user, rbac))) => {
            let d = rbac.authorize(&user, &attrs);
            (d.allowed, d.reason)
        }
        None => (true, String::new()),
    };
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = reason.into();
    }
    review["status"] = status;
    review["metadata"]["creationTimestamp"] = Value::Null;
    Ok(json(StatusCode::CREATED, &review))
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews` (`kubectl auth can-i --list`).
async fn rules_review(
    checked: Checked,
    user: Option<Extension<RequestUser>>,
    headers: HeaderMap,
    b: Body,
) -> Result<Response, ApiError> {
    let mut review = body(&headers, b, "SelfSubjectRulesReview").await?;
    let ns = s(&review["spec"], "namespace");
    let rules = match &checked {
        Some(Extension((_, rbac))) => rbac.rules_for(&who(&user), &ns),
        None => vec![
            super::rbac::rules::rule(&["*"], &["*"], &["*"]),
            super::rbac::rules::url_rule(&["*"], &["*"]),
        ],
    };
    let (urls, res): (Vec<_>, Vec<_>) = rules
        .into_iter()
        .partition(|r| r.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty()));
    let res: Vec<Value> = res.iter().map(|r| json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources, "resourceNames": r.resource_names})).collect();
    let urls: Vec<Value> = urls
        .iter()
        .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}))
        .collect();
    review["status"] = json!({"resourceRules": res, "nonResourceRules": urls, "incomplete": false});
    Ok(json(StatusCode::CREATED, &review))
}

/// `POST /apis/authentication.k8s.io/{v1,v1beta1,v1alpha1}/selfsubjectreviews`.
async fn self_review(
    user: Option<Extension<RequestUser>>,
    ApiPath(version): ApiPath<String>,
) -> Response {
    json(
        StatusCode::CREATED,
        &json!({
            "kind": "SelfSubjectReview",
            "apiVersion": format!("authentication.k8s.io/{version}"),
            "metadata": {"creationTimestamp": null},
            "status": {"userInfo": who(&user).to_json()},
        }),
    )
}

/// The shortest and longest token lifetimes Kubernetes allows.
const MIN_EXPIRATION: u64 = 600;
const MAX_EXPIRATION: u64 = 1 << 32;

/// `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`.
async fn token_request(
    State(api): State<Api>,
    authority: Option<Extension<Arc<TokenAuthority>>>,
    user: Option<Extension<RequestUser>>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    headers: HeaderMap,
    b: Body,
) -> Result<Response, ApiError> {
    let Some(Extension(authority)) = authority.filter(|a| a.0.can_issue()) else {
        return Err(ApiError::NoRoute);
    };
    let mut req = body(&headers, b, "TokenRequest").await?;
    let sa = api
        .store()
        .get(&format!("serviceaccounts/{ns}/{name}"))
        .ok_or_else(|| ApiError::NotFound {
            resource: "serviceaccounts".into(),
            name: name.clone(),
        })?;
    let spec = &req["spec"];
    let seconds = spec["expirationSeconds"].as_u64().unwrap_or(3600);
    let mut causes = Causes::default();
    if seconds < MIN_EXPIRATION {
        causes.invalid(
            "spec.expirationSeconds",
            &seconds.to_string(),
            "may not specify a duration less than 10 minutes",
        );
    }
    if seconds > MAX_EXPIRATION {
        causes.invalid(
            "spec.expirationSeconds",
            &seconds.to_string(),
            "may not specify a duration larger than 2^32 seconds",
        );
    }
    let mut pod = None;
    let mut bound_pod = None;
    if let Some(bound) = spec.get("boundObjectRef").filter(|b| b.is_object()) {
        match bound["kind"].as_str() {
            Some("Pod") => {
                let pod_name = s(bound, "name");
                let live = api
                    .store()
                    .get(&format!("pods/{ns}/{pod_name}"))
                    .ok_or_else(|| ApiError::NotFound {
                        resource: "pods".into(),
                        name: pod_name.clone(),
                    })?;
                let uid = s(&live["metadata"], "uid");
                let want = s(bound, "uid");
                if !want.is_empty() && want != uid {
                    return Err(ApiError::Conflict {
                        resource: "pods".into(),
                        name: pod_name,
                        detail: format!(
                            "the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                        ),
                    });
                }
                pod = Some((pod_name, uid));
                bound_pod = Some(live);
            }
            other => causes.unsupported("spec.boundObjectRef.kind", other.unwrap_or(""), &["Pod"]),
        }
    }
    causes.into_result("TokenRequest", &name)?;
    if let Some(node) = super::node_keys::node_of(&who(&user)) {
        api.node_may_request_token(node, &ns, &name, bound_pod.as_deref())?;
    }
    let token_spec = TokenSpec {
        namespace: ns,
        name: name.clone(),
        uid: s(&sa["metadata"], "uid"),
        audiences: spec["audiences"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        expiration: Duration::from_secs(seconds),
        pod,
    };
    let (token, expires) = authority
        .issue(&token_spec, api.now())
        .ok_or_else(|| ApiError::Internal("cannot sign the token".into()))?;
    req["kind"] = "TokenRequest".into();
    req["apiVersion"] = "authentication.k8s.io/v1".into();
    req["metadata"]["name"] = name.into();
    req["spec"]["expirationSeconds"] = seconds.into();
    req["status"] = json!({"token": token, "expirationTimestamp": k8s_time(expires)});
    Ok(json(StatusCode::CREATED, &req).into_response())
}

pub(super) fn routes() -> Router<Api> {
    Router::new()
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            post(access_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            post(rules_review),
        )
        .route(
            "/apis/authentication.k8s.io/{version}/selfsubjectreviews",
            post(self_review),
        )
        .route(
            "/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
            post(token_request),
        )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use axum::body::Body;
    use axum::http::Request;
    use base64::Engine as _;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    use tower::ServiceExt as _;

    use super::*;
    use crate::auth::{Auth, Authenticator};
    use crate::store::{Precondition, WriteOp};

    async fn call(
        router: &Router,
        method: &str,
        path: &str,
        token: &str,
        body: Value,
    ) -> (u16, Value) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    #[tokio::test]
    async fn a_token_request_gives_a_token_that_authenticates_as_the_service_account() {
        let dir = tempfile::tempdir().unwrap();
        let doc =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let key = dir.path().join("sa.key");
        let b64 = base64::engine::general_purpose::STANDARD.encode(doc.as_ref());
        std::fs::write(
            &key,
            format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n"),
        )
        .unwrap();
        let issuer = "https://kubernetes.default.svc.cluster.local".to_owned();
        let authority = TokenAuthority::load(Some(&key), &[], vec![issuer], Vec::new()).unwrap();
        let api = Api::in_memory().await.unwrap();
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "default", "uid": "sa-uid"}});
        api.commit(vec![WriteOp::Put {
            key: "serviceaccounts/default/default".into(),
            object: sa,
            precondition: Precondition::None,
        }])
        .await
        .unwrap();
        let admin = UserInfo::authenticated("admin", "", vec!["system:masters".into()]);
        let authn = Authenticator {
            tokens: [("admin-token".to_owned(), admin)].into(),
            service_accounts: Some(Arc::new(authority)),
            anonymous: false,
            nodes: None,
        };
        let auth = Auth::new(api.clone(), authn, true).await.unwrap();
        let router = auth.layer(crate::router(api));

        let ask = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}});
        let (code, answer) = call(
            &router,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            "admin-token",
            ask.clone(),
        )
        .await;
        assert_eq!(code, 201, "{answer}");
        let token = answer["status"]["token"].as_str().unwrap().to_owned();
        let (code, me) = call(
            &router,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &token,
            json!({}),
        )
        .await;
        assert_eq!(code, 201, "{me}");
        assert_eq!(
            me["status"]["userInfo"]["username"],
            "system:serviceaccount:default:default"
        );
        assert_eq!(me["status"]["userInfo"]["uid"], "sa-uid");
        // The service account may do nothing it was not granted.
        let (code, denied) = call(
            &router,
            "GET",
            "/api/v1/namespaces/default/pods",
            &token,
            Value::Null,
        )
        .await;
        assert_eq!(code, 403);
        assert_eq!(
            denied["message"],
            r#"pods is forbidden: User "system:serviceaccount:default:default" cannot list resource "pods" in API group "" in the namespace "default""#
        );

        let (code, _) = call(
            &router,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/nobody/token",
            "admin-token",
            ask,
        )
        .await;
        assert_eq!(code, 404);
        let short = json!({"spec": {"expirationSeconds": 599}});
        let (code, invalid) = call(
            &router,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            "admin-token",
            short,
        )
        .await;
        assert_eq!(code, 422, "{invalid}");
        assert!(
            invalid["message"]
                .as_str()
                .unwrap()
                .contains("may not specify a duration less than 10 minutes")
        );
    }
}
