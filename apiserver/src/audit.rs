//! The audit log (`--audit-log-path`): one `audit.k8s.io/v1` `Event` per
//! request as a JSON line, at level `Metadata` (who, what verb, which object,
//! the answer code, the annotations admission added (`crate::notes`); no
//! bodies).
//!
//! Stages, as kube-apiserver writes them at this level with the usual policy
//! (`omitStages: [RequestReceived]`): `ResponseComplete` for every request,
//! and `ResponseStarted` too for long-running ones (watches, followed logs),
//! whose completion comes only when they end. Lines are written by one
//! thread, in order; a write error is logged once and the request served
//! anyway.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::SystemTime;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::limits::requests::{Class, classify, peer_address};

/// Who made a request, as the audit log and the limits name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditUser {
    /// The user name.
    pub username: String,
    /// The user's UID, if any.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
}

/// The request's user. Authentication, when on, runs before the audit layer
/// and says who the user is; without it every request is `system:anonymous`.
pub type UserOf = Arc<dyn Fn(&Request) -> AuditUser + Send + Sync>;

/// The user authentication put in the request ([`crate::auth::RequestUser`]); a
/// request whose credentials were refused has no user (kube-apiserver's audit event
/// of a failed authentication has an empty one); without authentication,
/// [`anonymous`].
pub fn request_user(req: &Request) -> AuditUser {
    if let Some(crate::auth::RequestUser(user)) = req.extensions().get() {
        return AuditUser {
            username: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
        };
    }
    if req
        .extensions()
        .get::<crate::auth::Unauthenticated>()
        .is_some()
    {
        return AuditUser {
            username: String::new(),
            uid: String::new(),
            groups: Vec::new(),
        };
    }
    anonymous(req)
}

/// The user of a request when no authentication names one.
pub fn anonymous(_: &Request) -> AuditUser {
    AuditUser {
        username: "system:anonymous".into(),
        uid: String::new(),
        groups: vec!["system:unauthenticated".into()],
    }
}

/// Why the audit log cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the audit log {path}: {source}")]
pub struct AuditError {
    path: PathBuf,
    source: std::io::Error,
}

/// Where audit events go; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    lines: mpsc::Sender<String>,
    clock: Arc<dyn Clock>,
    user_of: UserOf,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog").finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Appends to `path` (`-` is standard output), creating it with mode 0600.
    ///
    /// # Errors
    /// [`AuditError`] when the file cannot be opened.
    pub fn open(path: &Path, clock: Arc<dyn Clock>, user_of: UserOf) -> Result<Self, AuditError> {
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(std::io::stdout())
        } else {
            use std::os::unix::fs::OpenOptionsExt as _;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .map_err(|source| AuditError {
                    path: path.to_owned(),
                    source,
                })?;
            Box::new(file)
        };
        let (lines, rx) = mpsc::channel::<String>();
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_lines(out, &rx, &shown))
            .map_err(|source| AuditError {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            lines,
            clock,
            user_of,
        })
    }

    /// `router` with every request audited.
    pub fn layer(&self, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(self.clone(), audit))
    }

    fn write(&self, event: &Value) {
        let _ = self.lines.send(event.to_string());
    }
}

fn write_lines(mut out: Box<dyn Write + Send>, rx: &mpsc::Receiver<String>, path: &str) {
    let mut failed = false;
    while let Ok(line) = rx.recv() {
        let result = out
            .write_all(line.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(e) = result
            && !failed
        {
            failed = true;
            tracing::error!(path, error = %e, "cannot write the audit log");
        }
    }
}

/// RFC 3339 with microseconds, as audit timestamps are written.
fn micro_time(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(d.as_secs()).unwrap_or(0);
    let ts = k8s_openapi::jiff::Timestamp::new(secs, 0).unwrap_or_default();
    let whole = k8s_openapi::jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%S", ts)
        .unwrap_or_else(|_| "1970-01-01T00:00:00".into());
    format!("{whole}.{:06}Z", d.subsec_micros())
}

/// The object a request's path names, and its verb, as kube-apiserver's
/// request info resolves them. `None` for non-resource paths.
fn object_ref(method: &Method, path: &str, watch: bool) -> (String, Option<Value>) {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return (method.as_str().to_lowercase(), None),
    };
    let rest = match rest {
        ["watch", r @ ..] => r,
        r => r,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, r @ ..] if !r.is_empty() => (Some(*ns), r),
        r => (None, r),
    };
    let (resource, name, sub) = match rest {
        [] => return (method.as_str().to_lowercase(), None),
        [r] => (*r, None, None),
        [r, n] => (*r, Some(*n), None),
        [r, n, s, ..] => (*r, Some(*n), Some(*s)),
    };
    let watch = watch || segs.contains(&"watch");
    let verb = match *method {
        Method::GET | Method::HEAD if watch => "watch",
        Method::GET | Method::HEAD if name.is_none() => "list",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_none() => "deletecollection",
        Method::DELETE => "delete",
        _ => return (method.as_str().to_lowercase(), None),
    };
    let mut obj = json!({"resource": resource, "apiVersion": version});
    if !group.is_empty() {
        obj["apiGroup"] = json!(group);
    }
    if let Some(ns) = namespace {
        obj["namespace"] = json!(ns);
    } else if resource == "namespaces"
        && let Some(n) = name
    {
        // kube-apiserver puts a namespace's own name in objectRef.namespace too.
        obj["namespace"] = json!(n);
    }
    if let Some(n) = name {
        obj["name"] = json!(n);
    }
    if let Some(s) = sub {
        obj["subresource"] = json!(s);
    }
    (verb.to_owned(), Some(obj))
}

async fn audit(State(log): State<AuditLog>, mut req: Request, next: Next) -> Response {
    let received = log.clock.now();
    let audit_id = uuid::Uuid::new_v4().to_string();
    let user = (log.user_of)(&req);
    let long_running =
        classify(req.method(), req.uri().path(), req.uri().query()) == Class::LongRunning;
    let watch = long_running && !req.uri().path().ends_with("/log");
    let (verb, object) = object_ref(req.method(), req.uri().path(), watch);
    let uri = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned());
    let user_agent = req
        .headers()
        .get(axum::http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Ok(v) = HeaderValue::from_str(&audit_id) {
        req.headers_mut().insert("audit-id", v);
    }
    let mut event = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": audit_id,
        "requestURI": uri,
        "verb": verb,
        "user": {},
        "sourceIPs": [peer_address(&req)],
        "requestReceivedTimestamp": micro_time(received),
    });
    if !user.username.is_empty() {
        event["user"]["username"] = json!(user.username);
    }
    if !user.uid.is_empty() {
        event["user"]["uid"] = json!(user.uid);
    }
    if !user.groups.is_empty() {
        event["user"]["groups"] = json!(user.groups);
    }
    if let Some(ua) = user_agent {
        event["userAgent"] = json!(ua);
    }
    if let Some(obj) = object {
        event["objectRef"] = obj;
    }
    let mut resp = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&audit_id) {
        resp.headers_mut().insert("audit-id", v);
    }
    event["responseStatus"] = json!({"metadata": {}, "code": resp.status().as_u16()});
    if let Some(crate::notes::AuditAnnotations(notes)) = resp.extensions().get() {
        let annotations: serde_json::Map<String, Value> = notes
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        event["annotations"] = Value::Object(annotations);
    }
    if !long_running {
        event["stage"] = json!("ResponseComplete");
        event["stageTimestamp"] = json!(micro_time(log.clock.now()));
        log.write(&event);
        return resp;
    }
    event["stage"] = json!("ResponseStarted");
    event["stageTimestamp"] = json!(micro_time(log.clock.now()));
    log.write(&event);
    let done = Completion { log, event };
    resp.map(|body| Body::new(connlimits::GuardedBody::new(body, done)))
}

/// A long-running request's `ResponseComplete`, written when its body ends.
struct Completion {
    log: AuditLog,
    event: Value,
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.event["stage"] = json!("ResponseComplete");
        self.event["stageTimestamp"] = json!(micro_time(self.log.clock.now()));
        self.log.write(&self.event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_to_kubernetes_verbs_and_object_refs() {
        let (verb, obj) = object_ref(&Method::POST, "/api/v1/namespaces/a/pods", false);
        assert_eq!(verb, "create");
        assert_eq!(
            obj,
            Some(json!({"resource": "pods", "namespace": "a", "apiVersion": "v1"}))
        );
        let (verb, obj) = object_ref(&Method::PUT, "/api/v1/namespaces/a/pods/p/status", false);
        assert_eq!(verb, "update");
        assert_eq!(
            obj,
            Some(
                json!({"resource": "pods", "namespace": "a", "name": "p", "subresource": "status", "apiVersion": "v1"})
            )
        );
        let (verb, obj) = object_ref(&Method::GET, "/api/v1/pods", true);
        assert_eq!(verb, "watch");
        assert_eq!(obj, Some(json!({"resource": "pods", "apiVersion": "v1"})));
        let (verb, obj) = object_ref(
            &Method::GET,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/view",
            false,
        );
        assert_eq!(verb, "get");
        assert_eq!(
            obj,
            Some(
                json!({"resource": "clusterroles", "name": "view", "apiGroup": "rbac.authorization.k8s.io", "apiVersion": "v1"})
            )
        );
        assert_eq!(
            object_ref(&Method::GET, "/healthz", false),
            ("get".into(), None)
        );
        assert_eq!(
            object_ref(&Method::DELETE, "/api/v1/namespaces/a/pods", false).0,
            "deletecollection"
        );
    }

    #[test]
    fn timestamps_have_microseconds() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_123_456);
        assert_eq!(micro_time(t), "2023-11-14T22:13:20.123456Z");
    }
}
