//! Running the configured hooks for one attempt.

use std::sync::Arc;
use std::time::Duration;

use super::decision::{Changes, Decision, is_reserved_key};
use super::hook::{Hook, HookError};
use super::request::Request;

/// Operator settings of admission.
#[derive(Debug, Clone)]
pub struct AdmissionConfig {
    /// Deadline of each hook call.
    pub timeout: Duration,
    /// Let attempts through unchanged when a hook errs or is late.
    pub fail_open: bool,
    /// Priority classes a hook may set; empty allows any.
    pub allowed_priority_classes: Vec<String>,
    /// Service accounts a hook may set; empty allows any.
    pub allowed_service_accounts: Vec<String>,
    /// How long a pod may stay held before it fails with the hold's reason.
    pub hold_window: Duration,
}

/// Kubernetes' default webhook timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// A held pod fails after ten minutes: long enough for a freeze or a
/// budget reset to pass, short enough that nobody waits on a pod that
/// will never run.
pub const DEFAULT_HOLD_WINDOW: Duration = Duration::from_secs(10 * 60);

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            fail_open: false,
            allowed_priority_classes: Vec::new(),
            allowed_service_accounts: Vec::new(),
            hold_window: DEFAULT_HOLD_WINDOW,
        }
    }
}

/// The verdict of all hooks on one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Go on, with these accumulated changes (possibly none).
    Admit {
        /// What the hooks changed.
        changes: Changes,
        /// Hooks that failed open, for a Warning event.
        warnings: Vec<String>,
    },
    /// Wait and try again later.
    Hold(String),
    /// Fail the pod for good.
    Refuse(String),
}

/// The configured hooks, run in order.
#[derive(Clone, Default)]
pub struct Admission {
    hooks: Vec<Arc<dyn Hook>>,
    config: AdmissionConfig,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.hooks.iter().map(|h| h.name()).collect();
        f.debug_struct("Admission")
            .field("hooks", &names)
            .field("config", &self.config)
            .finish()
    }
}

impl Admission {
    /// Admission with no hooks: every attempt is admitted unchanged.
    pub fn none() -> Self {
        Self::default()
    }

    /// Hooks run in the given order; the timeout is capped at
    /// [`super::MAX_TIMEOUT`].
    pub fn new(hooks: Vec<Arc<dyn Hook>>, mut config: AdmissionConfig) -> Self {
        config.timeout = config.timeout.min(super::MAX_TIMEOUT);
        Self { hooks, config }
    }

    /// The settings.
    pub fn config(&self) -> &AdmissionConfig {
        &self.config
    }

    /// Whether any hook is configured.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Runs every hook on the attempt.
    pub async fn admit(&self, mut req: Request) -> Outcome {
        let mut changes = Changes::default();
        let mut warnings = Vec::new();
        for hook in &self.hooks {
            let answer = match tokio::time::timeout(self.config.timeout, hook.admit(&req)).await {
                Ok(answer) => answer,
                Err(_) => Err(HookError::Deadline(self.config.timeout)),
            };
            match answer {
                Ok(Decision::Admit) => {}
                Ok(Decision::AdmitWith(c)) => {
                    if let Err(why) = self.check(&c) {
                        return Outcome::Hold(format!(
                            "admission hook {} proposed changes that are not allowed: {why}",
                            hook.name()
                        ));
                    }
                    apply_to_request(&mut req, &c);
                    changes.merge(c);
                }
                Ok(Decision::Hold(reason)) => return Outcome::Hold(reason),
                Ok(Decision::Refuse(reason)) => return Outcome::Refuse(reason),
                Err(e) if self.config.fail_open => {
                    warnings.push(format!(
                        "{}: {e}; admitted without it (fail-open)",
                        hook.name()
                    ));
                }
                Err(e) => return Outcome::Hold(format!("{e} (hook {})", hook.name())),
            }
        }
        Outcome::Admit { changes, warnings }
    }

    /// Every rule a change set breaks, or Ok.
    fn check(&self, c: &Changes) -> Result<(), String> {
        let mut problems = Vec::new();
        for key in c.labels.keys() {
            if is_reserved_key(key) {
                problems.push(format!("label key {key:?} is reserved"));
            }
        }
        for key in c.annotations.keys() {
            if is_reserved_key(key) {
                problems.push(format!("annotation key {key:?} is reserved"));
            }
        }
        let allowed = |list: &[String], v: &str| {
            v.is_empty() || list.is_empty() || list.iter().any(|a| a == v)
        };
        if !allowed(
            &self.config.allowed_priority_classes,
            &c.priority_class_name,
        ) {
            problems.push(format!(
                "priority class {:?} is not in the allowlist",
                c.priority_class_name
            ));
        }
        if !allowed(&self.config.allowed_service_accounts, &c.service_account) {
            problems.push(format!(
                "service account {:?} is not in the allowlist",
                c.service_account
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// Shows later hooks the placement earlier hooks changed.
fn apply_to_request(req: &mut Request, c: &Changes) {
    let e = &mut req.execution;
    e.node_selector.extend(c.node_selector.clone());
    e.tolerations.extend(c.tolerations.iter().cloned());
    e.labels.extend(c.labels.clone());
    e.annotations.extend(c.annotations.clone());
    if !c.priority_class_name.is_empty() {
        e.priority_class_name = c.priority_class_name.clone();
    }
    if !c.service_account.is_empty() {
        e.service_account = c.service_account.clone();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::admission::{HookFn, HookFuture};

    struct Slow;
    impl Hook for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn admit<'a>(&'a self, _req: &'a Request) -> HookFuture<'a> {
            Box::pin(std::future::pending())
        }
    }

    fn with(changes: Changes) -> Arc<dyn Hook> {
        Arc::new(HookFn::new(move |_| {
            Ok(Decision::AdmitWith(changes.clone()))
        }))
    }

    fn config() -> AdmissionConfig {
        AdmissionConfig {
            timeout: Duration::from_millis(50),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn changes_accumulate_and_later_hooks_see_them() {
        let first = with(Changes {
            node_selector: [("tenant".into(), "a".into())].into(),
            ..Default::default()
        });
        let second: Arc<dyn Hook> = Arc::new(HookFn::new(|req: &Request| {
            assert_eq!(req.execution.node_selector["tenant"], "a");
            Ok(Decision::AdmitWith(Changes {
                labels: [("seen".into(), "yes".into())].into(),
                ..Default::default()
            }))
        }));
        let out = Admission::new(vec![first, second], config())
            .admit(Request::default())
            .await;
        let Outcome::Admit { changes, warnings } = out else {
            panic!("{out:?}")
        };
        assert_eq!(changes.node_selector["tenant"], "a");
        assert_eq!(changes.labels["seen"], "yes");
        assert!(warnings.is_empty());
    }

    #[tokio::test]
    async fn the_first_hold_or_refusal_wins() {
        let hold: Arc<dyn Hook> = Arc::new(HookFn::new(|_| Ok(Decision::Hold("freeze".into()))));
        let refuse: Arc<dyn Hook> = Arc::new(HookFn::new(|_| Ok(Decision::Refuse("no".into()))));
        let a = Admission::new(vec![hold.clone(), refuse.clone()], config());
        assert_eq!(
            a.admit(Request::default()).await,
            Outcome::Hold("freeze".into())
        );
        let a = Admission::new(vec![refuse, hold], config());
        assert_eq!(
            a.admit(Request::default()).await,
            Outcome::Refuse("no".into())
        );
    }

    #[tokio::test]
    async fn reserved_keys_and_allowlists_hold_the_whole_change_set() {
        let mut cfg = config();
        cfg.allowed_priority_classes = vec!["batch".into()];
        let bad = with(Changes {
            labels: [
                ("mesopod.io/task-id".into(), "x".into()),
                ("ok".into(), "1".into()),
            ]
            .into(),
            priority_class_name: "system-critical".into(),
            ..Default::default()
        });
        let Outcome::Hold(reason) = Admission::new(vec![bad], cfg)
            .admit(Request::default())
            .await
        else {
            panic!("must hold")
        };
        assert!(reason.contains("mesopod.io/task-id"), "{reason}");
        assert!(reason.contains("system-critical"), "{reason}");
    }

    #[tokio::test]
    async fn a_late_hook_holds_unless_fail_open() {
        let out = Admission::new(vec![Arc::new(Slow)], config())
            .admit(Request::default())
            .await;
        assert!(
            matches!(&out, Outcome::Hold(r) if r.contains("deadline")),
            "{out:?}"
        );
        let mut open = config();
        open.fail_open = true;
        let out = Admission::new(vec![Arc::new(Slow)], open)
            .admit(Request::default())
            .await;
        let Outcome::Admit { changes, warnings } = out else {
            panic!("fail-open admits")
        };
        assert!(changes.is_empty());
        assert!(warnings[0].contains("fail-open"), "{warnings:?}");
    }

    #[tokio::test]
    async fn the_timeout_is_capped_at_thirty_seconds() {
        let cfg = AdmissionConfig {
            timeout: Duration::from_secs(600),
            ..Default::default()
        };
        assert_eq!(
            Admission::new(vec![], cfg).config().timeout,
            Duration::from_secs(30)
        );
    }
}
