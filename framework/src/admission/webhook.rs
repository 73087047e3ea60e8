//! An external admission webhook: the request is POSTed as JSON, the answer
//! is JSON carrying the decision.
//!
//! ```text
//! → {"tenant","namespace","pod","uid","taskId","attempt","resources":{"requests","limits"},
//!    "execution":{"nodeSelector","tolerations","priorityClassName","serviceAccount","labels","annotations"},
//!    "serviceAccountChosen"}
//! ← {"decision":"admit"|"admitWith"|"hold"|"refuse","reason":"…","changes":{…}}
//! ```
//!
//! Anything else is a hook error: a status other than 200, a body that is
//! not that JSON, an unknown decision or key, a hold or refusal without a
//! reason, or an `admitWith` without changes.

use std::time::Duration;

use serde::Deserialize;

use super::decision::{Changes, Decision};
use super::hook::{Hook, HookError, HookFuture};
use super::request::Request;

/// Longest timeout an operator may configure (Kubernetes' own bound).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from a webhook.
const MAX_ANSWER: usize = 1024 * 1024;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Answer {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    changes: Option<Changes>,
}

/// A webhook hook.
#[derive(Debug, Clone)]
pub struct WebhookHook {
    url: String,
    http: reqwest::Client,
    /// How an https URL is reached (`--admission-webhook-cafile`).
    tls: Option<reqwest::Client>,
}

impl WebhookHook {
    /// A hook POSTing to `url`. The deadline is enforced by the caller.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            http: reqwest::Client::new(),
            tls: None,
        }
    }

    /// A hook POSTing to an https `url` whose certificate `tls` verifies
    /// (trusting only `--admission-webhook-cafile`).
    pub fn with_tls(url: impl Into<String>, tls: reqwest::Client) -> Self {
        Self {
            tls: Some(tls),
            ..Self::new(url)
        }
    }

    async fn post(&self, req: &Request) -> Result<reqwest::Response, HookError> {
        let unreachable = |e: String| HookError::Unreachable(e);
        if !self.url.starts_with("https://") {
            return self
                .http
                .post(&self.url)
                .json(req)
                .send()
                .await
                .map_err(|e| unreachable(e.to_string()));
        }
        let Some(tls) = &self.tls else {
            return Err(unreachable(
                "an https webhook needs --admission-webhook-cafile".into(),
            ));
        };
        tls.post(&self.url)
            .json(req)
            .send()
            .await
            .map_err(|e| unreachable(e.to_string()))
    }
}

fn parse_answer(body: &[u8]) -> Result<Decision, HookError> {
    let answer: Answer =
        serde_json::from_slice(body).map_err(|e| HookError::BadAnswer(e.to_string()))?;
    let reason = answer.reason.filter(|r| !r.trim().is_empty());
    match answer.decision.as_str() {
        "admit" => Ok(Decision::Admit),
        "admitWith" => answer
            .changes
            .map(Decision::AdmitWith)
            .ok_or_else(|| HookError::BadAnswer("admitWith without changes".into())),
        "hold" => reason
            .map(Decision::Hold)
            .ok_or_else(|| HookError::BadAnswer("hold without a reason".into())),
        "refuse" => reason
            .map(Decision::Refuse)
            .ok_or_else(|| HookError::BadAnswer("refuse without a reason".into())),
        other => Err(HookError::BadAnswer(format!("unknown decision {other:?}"))),
    }
}

impl Hook for WebhookHook {
    fn name(&self) -> &str {
        &self.url
    }

    fn admit<'a>(&'a self, req: &'a Request) -> HookFuture<'a> {
        Box::pin(async move {
            let resp = self.post(req).await?;
            let status = resp.status();
            let body = resp
                .bytes()
                .await
                .map_err(|e| HookError::Unreachable(e.to_string()))?;
            if status != reqwest::StatusCode::OK {
                return Err(HookError::BadAnswer(format!("status {status}")));
            }
            if body.len() > MAX_ANSWER {
                return Err(HookError::BadAnswer(format!(
                    "answer of {} bytes is too large",
                    body.len()
                )));
            }
            parse_answer(&body)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn answers_parse_into_decisions() {
        assert_eq!(
            parse_answer(br#"{"decision":"admit"}"#),
            Ok(Decision::Admit)
        );
        assert_eq!(
            parse_answer(br#"{"decision":"hold","reason":"freeze"}"#),
            Ok(Decision::Hold("freeze".into()))
        );
        let d =
            parse_answer(br#"{"decision":"admitWith","changes":{"nodeSelector":{"tenant":"a"}}}"#);
        assert!(matches!(d, Ok(Decision::AdmitWith(c)) if c.node_selector["tenant"] == "a"));
    }

    #[test]
    fn anything_else_is_a_hook_error() {
        for bad in [
            &b"not json"[..],
            br#"{"decision":"maybe"}"#,
            br#"{"decision":"hold"}"#,
            br#"{"decision":"refuse","reason":"  "}"#,
            br#"{"decision":"admitWith"}"#,
            br#"{"decision":"admit","extra":1}"#,
            br#"{"decision":"admitWith","changes":{"image":"evil"}}"#,
        ] {
            assert!(
                matches!(parse_answer(bad), Err(HookError::BadAnswer(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
