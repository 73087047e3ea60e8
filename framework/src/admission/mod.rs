//! The admission hook: operator code that admits, changes, holds or refuses
//! each scheduling attempt, before procurement.
//!
//! A hook sees a copy of the attempt ([`Request`]) and answers a
//! [`Decision`]: `Admit` places the pod as it is, `AdmitWith` places it with
//! its placement and metadata changed ([`Changes`]), `Hold` keeps it waiting
//! and offers it again, and `Refuse` fails the pod for good with a reason
//! `kubectl describe` shows.
//!
//! # Rules
//!
//! - What a hook may change is limited on purpose: node selector,
//!   tolerations, priority class, service account, and labels and
//!   annotations outside the [reserved prefixes](reserved_prefixes). The
//!   image, command, environment, namespace and resources stay as the user
//!   wrote them, so the attempt is charged what it was admitted with.
//! - A change set that breaks a rule (a reserved key, a priority class or
//!   service account outside the operator's allowlists) is refused *whole*:
//!   the attempt is held with a reason that names the rule. Nothing is
//!   silently trimmed.
//! - A hook that errs or misses its deadline holds the attempt (fail
//!   closed), so a hook that is briefly down never lets a pod run
//!   unchecked, unless the operator chose fail-open: then the attempt goes
//!   on unchanged and a Warning event says so.
//! - Several hooks run in order; each sees the changes of the ones before
//!   it. Changes accumulate; the first Hold or Refuse wins.
//! - A Hold is not a scheduling failure: the pod waits on its own backoff,
//!   and fails with the hold's reason once the hold window has passed.
//! - The request never carries env, secrets or the command.
//!
//! # Example
//!
//! A hook that runs each tenant's pods on that tenant's nodes, holds work
//! during a freeze window and refuses pods that ask for more than 8 CPUs
//! (`examples/admission-hook.rs` runs it as a webhook):
//!
//! ```
//! use framework::admission::{Changes, Decision, HookFn, Request, Toleration};
//!
//! let frozen = || false; // ask your change calendar
//! let hook = HookFn::new(move |req: &Request| {
//!     if frozen() {
//!         return Ok(Decision::Hold("weekly maintenance freeze until 06:00 UTC".into()));
//!     }
//!     if req.cpu_millis() > 8000 {
//!         return Ok(Decision::Refuse("pods may request at most 8 CPUs".into()));
//!     }
//!     Ok(Decision::AdmitWith(Changes {
//!         node_selector: [("tenant".to_string(), req.tenant.clone())].into(),
//!         tolerations: vec![Toleration {
//!             key: "tenant".into(),
//!             operator: "Equal".into(),
//!             value: req.tenant.clone(),
//!             effect: "NoSchedule".into(),
//!             toleration_seconds: None,
//!         }],
//!         labels: [("cost-center".to_string(), req.tenant.clone())].into(),
//!         ..Default::default()
//!     }))
//! });
//! # let _ = hook;
//! ```

mod apply;
mod chain;
mod decision;
mod hook;
mod request;
mod webhook;

pub use apply::apply_changes;
pub use chain::{Admission, AdmissionConfig, DEFAULT_HOLD_WINDOW, DEFAULT_TIMEOUT, Outcome};
pub use decision::{Changes, Decision, Toleration, is_reserved_key, reserved_prefixes};
pub use hook::{Hook, HookError, HookFn, HookFuture};
pub use request::{Execution, Request, ResourceList};
pub use webhook::{MAX_TIMEOUT, WebhookHook};
