//! What handling a request tells besides its answer: warnings for the client
//! (`Warning: 299 - "..."` headers, which kubectl prints) and annotations for the
//! request's audit event. kube-apiserver carries both in the request's context
//! (`warning.AddWarning`, `audit.AddAuditAnnotations`) so admission can add them from
//! deep inside a write; here a task-local scope per HTTP request does the same, opened
//! by [`layer`], which also names the requesting user for admission's exemptions.
//!
//! Outside a scope (the embedder's in-process writes) notes are dropped: nobody is
//! there to read them.

use std::cell::RefCell;

use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

#[derive(Debug, Default)]
struct Notes {
    user: Option<String>,
    warnings: Vec<String>,
    annotations: Vec<(String, String)>,
}

tokio::task_local! {
    static NOTES: RefCell<Notes>;
}

/// The audit annotations of a request, put in its response's extensions for the
/// audit log ([`crate::audit`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditAnnotations(pub Vec<(String, String)>);

/// Whether a request's scope is open: outside one (the embedder's in-process writes,
/// such as the controllers' pod creates) warnings are dropped, so they need not be
/// worked out at all.
pub(crate) fn listening() -> bool {
    NOTES.try_with(|_| ()).is_ok()
}

/// Adds a warning to the current request's answer.
pub(crate) fn warn(text: String) {
    let _ = NOTES.try_with(|n| n.borrow_mut().warnings.push(text));
}

/// Adds an annotation to the current request's audit event.
pub(crate) fn annotate(key: String, value: String) {
    let _ = NOTES.try_with(|n| n.borrow_mut().annotations.push((key, value)));
}

/// The authenticated name of the current request's user, if any.
pub(crate) fn user() -> Option<String> {
    NOTES.try_with(|n| n.borrow().user.clone()).ok().flatten()
}

/// A `Warning` header value: code 299, agent `-`, the text quoted (kube-apiserver's
/// `warning` package).
pub(crate) fn warning_header(text: &str) -> Option<HeaderValue> {
    let quoted = format!(
        "299 - \"{}\"",
        text.replace('\\', "\\\\").replace('"', "\\\"")
    );
    HeaderValue::from_str(&quoted).ok()
}

/// The middleware that opens a request's scope, then writes its warnings into the
/// response's headers (after any the handler wrote) and its annotations into the
/// response's extensions.
pub(crate) async fn layer(req: Request, next: Next) -> Response {
    // The user as the audit log names it: `system:anonymous` without authentication.
    let user = Some(crate::audit::request_user(&req).username).filter(|u| !u.is_empty());
    let cell = RefCell::new(Notes {
        user,
        ..Notes::default()
    });
    let (mut resp, notes) = NOTES
        .scope(cell, async move {
            let resp = next.run(req).await;
            let notes = NOTES.with(|n| std::mem::take(&mut *n.borrow_mut()));
            (resp, notes)
        })
        .await;
    for w in &notes.warnings {
        if let Some(v) = warning_header(w) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    if !notes.annotations.is_empty() {
        resp.extensions_mut()
            .insert(AuditAnnotations(notes.annotations));
    }
    resp
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn notes_outside_a_request_are_dropped() {
        warn("nobody hears this".into());
        annotate("k".into(), "v".into());
        assert_eq!(user(), None);
    }

    #[test]
    fn warning_headers_quote_their_text() {
        let v = warning_header(r#"would violate PodSecurity "restricted:latest": x\y"#).unwrap();
        assert_eq!(
            v.to_str().unwrap(),
            r#"299 - "would violate PodSecurity \"restricted:latest\": x\\y""#
        );
    }
}
