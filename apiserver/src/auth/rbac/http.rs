//! The RBAC kinds over HTTP (`/apis/rbac.authorization.k8s.io/v1/...`): get, list,
//! create, update, patch, delete, with Kubernetes' escalation prevention on writes.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::kinds::{GROUP, Kind};
use super::{Rbac, rules};
use crate::api::{Api, bind_namespace, check_name, stamp_new};
use crate::auth::request_info::Attributes;
use crate::auth::status::forbidden_message;
use crate::auth::user::UserInfo;
use crate::decode::decode_typed;
use crate::error::ApiError;
use crate::http::extract::{ApiPath, Params, content_type, read_body};
use crate::http::respond::json_with_warnings;
use crate::patch::{self, PatchType};
use crate::store::{Precondition, WriteOp, object_rv};
use crate::validation::{Causes, check_metadata, check_subdomain_name};

/// What an RBAC object grants, checked against what its writer holds.
enum Grant {
    Rules(Vec<PolicyRule>),
    Binding(RoleRef),
}

/// What the four kinds share.
trait RbacObject: DeserializeOwned + Serialize + Send + 'static {
    const KIND: Kind;
    fn meta(&mut self) -> &mut ObjectMeta;
    fn grant(&self) -> Grant;
    fn check(&self, causes: &mut Causes);
}

fn check_rules(causes: &mut Causes, rules: Option<&[PolicyRule]>, cluster: bool) {
    for (i, r) in rules.unwrap_or(&[]).iter().enumerate() {
        let f = |s: &str| format!("rules[{i}].{s}");
        if r.verbs.is_empty() {
            causes.required(f("verbs"));
        }
        let urls = r.non_resource_urls.as_deref().unwrap_or(&[]);
        let resources = r.resources.as_deref().unwrap_or(&[]);
        if !urls.is_empty() {
            if !cluster {
                causes.invalid(
                    f("nonResourceURLs"),
                    &urls.join(","),
                    "namespaced rules cannot apply to non-resource URLs",
                );
            }
            if !resources.is_empty() {
                causes.invalid(
                    f("nonResourceURLs"),
                    &urls.join(","),
                    "rules cannot apply to both regular resources and non-resource URLs",
                );
            }
        } else {
            if r.api_groups.as_deref().unwrap_or(&[]).is_empty() {
                causes.required(f("apiGroups"));
            }
            if resources.is_empty() {
                causes.required(f("resources"));
            }
        }
    }
}

fn check_binding(
    causes: &mut Causes,
    role_ref: &RoleRef,
    subjects: Option<&[Subject]>,
    namespaced: bool,
) {
    if role_ref.api_group != GROUP {
        causes.unsupported("roleRef.apiGroup", &role_ref.api_group, &[GROUP]);
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&role_ref.kind.as_str()) {
        causes.unsupported("roleRef.kind", &role_ref.kind, kinds);
    }
    if role_ref.name.is_empty() {
        causes.required("roleRef.name");
    }
    for (i, s) in subjects.unwrap_or(&[]).iter().enumerate() {
        if !matches!(s.kind.as_str(), "User" | "Group" | "ServiceAccount") {
            causes.unsupported(
                format!("subjects[{i}].kind"),
                &s.kind,
                &["ServiceAccount", "User", "Group"],
            );
        }
        if s.name.is_empty() {
            causes.required(format!("subjects[{i}].name"));
        }
        if s.kind == "ServiceAccount"
            && !namespaced
            && s.namespace.as_deref().unwrap_or("").is_empty()
        {
            causes.required(format!("subjects[{i}].namespace"));
        }
    }
}

/// The trait for a role kind (it grants its rules) or a binding kind (its roleRef).
macro_rules! rbac_object {
    (role $t:ty, $kind:expr, $cluster:expr) => {
        impl RbacObject for $t {
            const KIND: Kind = $kind;
            fn meta(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn grant(&self) -> Grant {
                Grant::Rules(self.rules.clone().unwrap_or_default())
            }
            fn check(&self, causes: &mut Causes) {
                check_rules(causes, self.rules.as_deref(), $cluster);
            }
        }
    };
    (binding $t:ty, $kind:expr, $namespaced:expr) => {
        impl RbacObject for $t {
            const KIND: Kind = $kind;
            fn meta(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn grant(&self) -> Grant {
                Grant::Binding(self.role_ref.clone())
            }
            fn check(&self, causes: &mut Causes) {
                check_binding(
                    causes,
                    &self.role_ref,
                    self.subjects.as_deref(),
                    $namespaced,
                );
            }
        }
    };
}

rbac_object!(role Role, Kind::Role, false);
rbac_object!(role ClusterRole, Kind::ClusterRole, true);
rbac_object!(binding RoleBinding, Kind::RoleBinding, true);
rbac_object!(binding ClusterRoleBinding, Kind::ClusterRoleBinding, false);

/// The caller, when authentication and RBAC are on (else writes are not checked).
type Caller = Option<Extension<(UserInfo, Arc<Rbac>)>>;

type Answer = Result<Response, ApiError>;

fn path_parts(p: &HashMap<String, String>) -> (String, String) {
    (
        p.get("ns").cloned().unwrap_or_default(),
        p.get("name").cloned().unwrap_or_default(),
    )
}

/// Refuses a write that grants more than the writer holds, unless the writer may
/// `escalate` (roles) or `bind` (bindings), as Kubernetes' RBAC storage does.
fn confirm_no_escalation(
    caller: &Caller,
    kind: Kind,
    ns: &str,
    name: &str,
    grant: &Grant,
) -> Result<(), ApiError> {
    let Some(Extension((user, rbac))) = caller else {
        return Ok(());
    };
    let (wanted, bypass) = match grant {
        Grant::Rules(rules) => (
            rules.clone(),
            Attributes::resource("escalate", GROUP, kind.plural(), ns, name),
        ),
        Grant::Binding(r) => {
            let role_kind = if r.kind == "Role" {
                Kind::Role
            } else {
                Kind::ClusterRole
            };
            let bypass = Attributes::resource("bind", GROUP, role_kind.plural(), ns, &r.name);
            if rbac.authorize(user, &bypass).allowed {
                return Ok(());
            }
            let rules =
                rbac.role_rules(ns, &r.kind, &r.name)
                    .ok_or_else(|| ApiError::NotFound {
                        resource: format!("{}.{GROUP}", role_kind.plural()),
                        name: r.name.clone(),
                    })?;
            (rules, bypass)
        }
    };
    if rbac.authorize(user, &bypass).allowed {
        return Ok(());
    }
    let missing = rules::uncovered(&rbac.rules_for(user, ns), &wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = missing.iter().map(rules::compact).collect();
    let msg = format!(
        "user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        user.groups,
        lines.join("\n")
    );
    Err(ApiError::Forbidden(forbidden_message(
        GROUP,
        kind.plural(),
        name,
        &msg,
    )))
}

async fn decode<T: RbacObject>(
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Result<(T, Vec<String>, bool), ApiError> {
    let opts = params.write_options()?;
    let value = crate::auth::read_object(headers, body, &[T::KIND.kind()]).await?;
    let (obj, warnings) = decode_typed::<T>(&value, opts.field_validation)?;
    Ok((obj, warnings, opts.dry_run))
}

fn validate<T: RbacObject>(obj: &mut T) -> Result<String, ApiError> {
    let mut causes = Causes::default();
    check_metadata(&mut causes, obj.meta(), check_subdomain_name);
    obj.check(&mut causes);
    let name = obj.meta().name.clone().unwrap_or_default();
    causes.into_result(T::KIND.kind(), &name)?;
    Ok(name)
}

fn typed_value<T: RbacObject>(obj: &T) -> Result<Value, ApiError> {
    let mut v = serde_json::to_value(obj).map_err(|e| ApiError::Internal(e.to_string()))?;
    v["apiVersion"] = format!("{GROUP}/v1").into();
    v["kind"] = T::KIND.kind().into();
    Ok(v)
}

async fn store<T: RbacObject>(api: &Api, ops: Vec<WriteOp>) -> Result<Value, ApiError> {
    let changes = api.commit(ops).await.map_err(|e| qualify(e, T::KIND))?;
    changes
        .first()
        .map(|c| (*c.object).clone())
        .ok_or_else(|| ApiError::Internal("the store reported no change".into()))
}

/// Store errors name the resource by its key (`roles`); Kubernetes names it with its
/// group (`roles.rbac.authorization.k8s.io`).
fn qualify(e: ApiError, kind: Kind) -> ApiError {
    let q = format!("{}.{GROUP}", kind.plural());
    match e {
        ApiError::NotFound { name, .. } => ApiError::NotFound { resource: q, name },
        ApiError::AlreadyExists { name, .. } => ApiError::AlreadyExists { resource: q, name },
        ApiError::Conflict { name, detail, .. } => ApiError::Conflict {
            resource: q,
            name,
            detail,
        },
        other => other,
    }
}

async fn create<T: RbacObject>(
    State(api): State<Api>,
    caller: Caller,
    ApiPath(p): ApiPath<HashMap<String, String>>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let (ns, _) = path_parts(&p);
    let (mut obj, warnings, dry_run) = decode::<T>(&params, &headers, body).await?;
    stamp_new(obj.meta(), api.now());
    if T::KIND.namespaced() {
        bind_namespace(obj.meta(), &ns)?;
    } else {
        obj.meta().namespace = None;
    }
    let name = validate(&mut obj)?;
    confirm_no_escalation(&caller, T::KIND, &ns, &name, &obj.grant())?;
    let value = typed_value(&obj)?;
    if dry_run {
        return Ok(json_with_warnings(StatusCode::CREATED, &value, &warnings));
    }
    let mut ops = Vec::new();
    if T::KIND.namespaced() {
        ops.push(WriteOp::Check {
            key: format!("namespaces/{ns}"),
            precondition: Precondition::Present,
        });
    }
    ops.push(WriteOp::Put {
        key: T::KIND.key(&ns, &name),
        object: value,
        precondition: Precondition::Absent,
    });
    let stored = match store::<T>(&api, ops).await {
        Err(_)
            if T::KIND.namespaced() && api.store().get(&format!("namespaces/{ns}")).is_none() =>
        {
            return Err(ApiError::NotFound {
                resource: "namespaces".into(),
                name: ns,
            });
        }
        other => other?,
    };
    Ok(json_with_warnings(StatusCode::CREATED, &stored, &warnings))
}

/// Writes `obj` over `live`: metadata the server owns is kept, a binding's roleRef may
/// not change, and the write is refused if `live` changed meanwhile.
/// Where an update writes: the object, its namespace and name.
struct Target<'a> {
    ns: &'a str,
    name: &'a str,
    live: &'a Value,
}

async fn write_over<T: RbacObject>(
    api: &Api,
    caller: &Caller,
    at: Target<'_>,
    mut obj: T,
    expected_rv: Option<u64>,
    dry_run: bool,
) -> Answer {
    let Target { ns, name, live } = at;
    let live_rv = object_rv(live).unwrap_or(0);
    let mut old: T = crate::decode::decode_typed(live, crate::decode::FieldValidation::Ignore)?.0;
    check_name(obj.meta(), name)?;
    let old_meta = old.meta().clone();
    let meta = obj.meta();
    meta.uid = old_meta.uid;
    meta.creation_timestamp = old_meta.creation_timestamp;
    meta.namespace = old_meta.namespace;
    meta.resource_version = None;
    validate(&mut obj)?;
    if let (Grant::Binding(new), Grant::Binding(was)) = (obj.grant(), old.grant())
        && new != was
    {
        let mut causes = Causes::default();
        causes.invalid("roleRef", &new.name, "cannot change roleRef");
        causes.into_result(T::KIND.kind(), name)?;
    }
    confirm_no_escalation(caller, T::KIND, ns, name, &obj.grant())?;
    let value = typed_value(&obj)?;
    if dry_run {
        return Ok(json_with_warnings(StatusCode::OK, &value, &[]));
    }
    let rv = expected_rv.unwrap_or(live_rv);
    let op = WriteOp::Put {
        key: T::KIND.key(ns, name),
        object: value,
        precondition: Precondition::ResourceVersion(rv),
    };
    let stored = store::<T>(api, vec![op]).await?;
    Ok(json_with_warnings(StatusCode::OK, &stored, &[]))
}

fn live(api: &Api, kind: Kind, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
    api.store()
        .get(&kind.key(ns, name))
        .ok_or_else(|| ApiError::NotFound {
            resource: format!("{}.{GROUP}", kind.plural()),
            name: name.into(),
        })
}

async fn replace<T: RbacObject>(
    State(api): State<Api>,
    caller: Caller,
    ApiPath(p): ApiPath<HashMap<String, String>>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let (ns, name) = path_parts(&p);
    let (mut obj, _, dry_run) = decode::<T>(&params, &headers, body).await?;
    let expected = match obj.meta().resource_version.as_deref() {
        None | Some("") => None,
        Some(s) => Some(
            s.parse()
                .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {s:?}")))?,
        ),
    };
    let live = live(&api, T::KIND, &ns, &name)?;
    write_over(
        &api,
        &caller,
        Target {
            ns: &ns,
            name: &name,
            live: &live,
        },
        obj,
        expected,
        dry_run,
    )
    .await
}

async fn patch<T: RbacObject>(
    State(api): State<Api>,
    caller: Caller,
    ApiPath(p): ApiPath<HashMap<String, String>>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let (ns, name) = path_parts(&p);
    let ty = PatchType::from_content_type(content_type(&headers))?;
    let opts = params.write_options()?;
    let bytes = read_body(&headers, body).await?;
    let patch = patch::parse_patch(ty, &bytes)?;
    let live = live(&api, T::KIND, &ns, &name)?;
    let patched = patch::apply(ty, &live, &patch, T::KIND.kind(), &name)?;
    let (obj, _) = decode_typed::<T>(&patched, opts.field_validation)?;
    write_over(
        &api,
        &caller,
        Target {
            ns: &ns,
            name: &name,
            live: &live,
        },
        obj,
        None,
        opts.dry_run,
    )
    .await
}

async fn delete<T: RbacObject>(
    State(api): State<Api>,
    ApiPath(p): ApiPath<HashMap<String, String>>,
) -> Answer {
    let (ns, name) = path_parts(&p);
    let op = WriteOp::Delete {
        key: T::KIND.key(&ns, &name),
        precondition: Precondition::None,
    };
    store::<T>(&api, vec![op]).await?;
    Ok(crate::http::respond::json(
        StatusCode::OK,
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": GROUP, "kind": T::KIND.plural()},
        }),
    ))
}

async fn get_one<T: RbacObject>(
    State(api): State<Api>,
    ApiPath(p): ApiPath<HashMap<String, String>>,
) -> Answer {
    let (ns, name) = path_parts(&p);
    Ok(crate::http::respond::json(
        StatusCode::OK,
        &*live(&api, T::KIND, &ns, &name)?,
    ))
}

async fn list<T: RbacObject>(
    State(api): State<Api>,
    ApiPath(p): ApiPath<HashMap<String, String>>,
    params: Params,
) -> Answer {
    if params.flag("watch") {
        return Err(ApiError::MethodNotAllowed(format!(
            "watch is not supported on {}.{GROUP}",
            T::KIND.plural()
        )));
    }
    let ns = p.get("ns").map(String::as_str);
    let (items, rv) = api.store().list(&T::KIND.prefix(ns));
    let items: Vec<&Value> = items.iter().map(|v| &**v).collect();
    Ok(crate::http::respond::json(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", T::KIND.kind()),
            "apiVersion": format!("{GROUP}/v1"),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }),
    ))
}

fn kind_routes<T: RbacObject>(router: Router<Api>) -> Router<Api> {
    let base = format!("/apis/{GROUP}/v1");
    let plural = T::KIND.plural();
    let collection = get(list::<T>).post(create::<T>);
    let one = get(get_one::<T>)
        .put(replace::<T>)
        .patch(patch::<T>)
        .delete(delete::<T>);
    if T::KIND.namespaced() {
        router
            .route(&format!("{base}/{plural}"), get(list::<T>))
            .route(&format!("{base}/namespaces/{{ns}}/{plural}"), collection)
            .route(&format!("{base}/namespaces/{{ns}}/{plural}/{{name}}"), one)
    } else {
        router
            .route(&format!("{base}/{plural}"), collection)
            .route(&format!("{base}/{plural}/{{name}}"), one)
    }
}

/// The routes of the four RBAC kinds.
pub(crate) fn routes() -> Router<Api> {
    let r = Router::new();
    let r = kind_routes::<Role>(r);
    let r = kind_routes::<ClusterRole>(r);
    let r = kind_routes::<RoleBinding>(r);
    kind_routes::<ClusterRoleBinding>(r)
}
