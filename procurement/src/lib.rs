//! The procurement pipeline: matches one pod task to what is left of one
//! Mesos offer, all or nothing, with typed reasons when it cannot.
//!
//! # Contract
//! - **Pure.** No I/O, no clock, no randomness, no async: the same task and
//!   offer give the same result, so the framework can replay and test it.
//! - **All or nothing.** A [`Procurement`] either procures everything it is
//!   responsible for or leaves the [`ProcureState`] (and, through
//!   [`AllOrNothing`], the task) exactly as it was, returning a typed
//!   [`ProcureError`] naming the procurement and, for resources, the amount
//!   asked and available.
//! - **Exact accounting.** Everything procured plus everything left equals
//!   the offer; nothing is taken twice; no port goes to two pods.
//! - **Deterministic choice.** [`Placer::place_round`], what the scheduler
//!   runs, places a round's pods in order on what is left of the offers. A
//!   pod goes to the best scoring of the feasible offers it samples (at
//!   most [`MAX_CANDIDATES`], from a [`Cursor`] the caller keeps), ties
//!   broken by hostname then offer id, never by arrival or hash order.
//!
//! # Conventions this crate defines
//! - Taints travel as agent attributes `taint.mesopod.io/<key>` with text
//!   `<value>:<Effect>` or `<Effect>` (see [`NodeView`]).
//! - Roles are taken reserved first, in the pod's order, then `*`.
//! - The executor id is `mesopod-<FNV-1a 64 of the executor's protobuf>`
//!   ([`executor_id_for`]); one mesopod executor per agent.
//! - Scoring measures the share of the *offer* a pod takes (an offer is what
//!   an agent has free): bin-packing prefers large shares, spreading small.
//!
//! # What it must not know
//! How offers arrive, expire or are accepted, how tasks are launched or
//! stored, and anything of the Kubernetes API beyond the pod object: the
//! framework owns those. This crate never builds a `TaskInfo`.
//!
//! # Use
//! ```no_run
//! # fn demo(offers: &[mesos::proto::Offer], tasks: &[registry::PodTask]) -> Result<(), Box<dyn std::error::Error>> {
//! use procurement::{Cursor, OfferView, PipelineConfig, Placer, Scoring, default_pipeline};
//! let placer = Placer::new(default_pipeline(&PipelineConfig::default())?, Scoring::default());
//! let views: Vec<OfferView> = offers.iter().filter_map(|o| OfferView::new(o).ok()).collect();
//! let mut cursor = Cursor::default(); // kept from round to round
//! for placed in placer.place_round(tasks, &views, &mut cursor) {
//!     match placed {
//!         Ok(p) => println!("{} on {}", p.task.id, p.offer_id),
//!         Err(why) => println!("{why}"), // 0/N agents available: 3 insufficient cpus, ...
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Performance
//! A pod's demand is parsed once ([`PodDemand`], memoised in the state and
//! shared by the placer across offers); an offer is parsed once
//! ([`OfferView`]); an attempt then works on integers and a small log, and
//! a checkpoint is free. Mesos resources are written out only for results.

mod demand;
mod failure;
mod node;
mod offer;
mod pipeline;
mod pool;
mod procure;
mod quantity;
mod round;
mod score;
mod state;

pub use demand::{
    GPU_RESOURCE, PORT_MAPPING_ANNOTATION, PodDemand, PortStrategy, ROLES_ANNOTATION,
};
pub use failure::{AggregateFailure, Owner, ProcureError, Stage};
pub use node::{
    AGENT_ID_LABEL, HOSTNAME_LABEL, MAINTENANCE, NodeView, OfferError, TAINT_ATTRIBUTE_PREFIX,
    Taint, TaintEffect, UNSCHEDULABLE,
};
pub use offer::OfferView;
pub use pipeline::{
    AllOrNothing, BoxedProcurement, ConfigError, FnProcurement, PipelineConfig, Procurement,
    default_pipeline, procurement_fn,
};
pub use pool::ResourceKind;
pub use procure::{
    EXECUTOR_ID_PREFIX, ExecutorProcurement, NodeProcurement, PodResourcesProcurement,
    PortsProcurement, ResourceDefaults, RolesProcurement, executor_id_for,
};
pub use quantity::{QuantityError, f64_to_millis};
pub use round::{Cursor, MAX_CANDIDATES, MayUse, Placement, Placer};
pub use score::{Scoring, Strategy};
pub use state::{Checkpoint, ProcureState};
