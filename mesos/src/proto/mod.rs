//! Mesos v1 messages, generated from the `.proto` files in `mesos/proto/`.
//!
//! The files are trimmed copies of Apache Mesos' v1 protos: the messages and
//! fields mesopod and localmesos use (scheduler, executor, and the operator
//! API's maintenance calls), with Mesos' names and field numbers. `build.rs`
//! compiles them with `protox` and `prost-build` into `OUT_DIR`; this module
//! includes the result, and the small files beside it add the hand-written
//! helpers (constructors, `TaskState::is_terminal`, …).
//!
//! # Encoding rules
//!
//! Every type derives `prost::Message` (protobuf) and implements serde with
//! Mesos' JSON mapping ([`json`]). proto2 `required` scalars are marked
//! `required`, so a zero value is still encoded: a real master rejects a
//! message whose required field is missing ("not initialized").
//! Message-typed fields are `Option` whether Mesos declares them required or
//! not (the `.proto` files declare them `optional`), so that a missing one
//! can be *detected* and rejected by validation instead of silently
//! defaulted. Decoding skips unknown fields in both codecs.
//!
//! Enum fields are `i32` on the struct (prost's representation); use the
//! generated getters or [`json::WireEnum`] to go to and from the enum types.

pub mod json;

include!(concat!(env!("OUT_DIR"), "/mesos.v1.rs"));
include!(concat!(env!("OUT_DIR"), "/mesos.v1.json.rs"));

mod cluster;
mod ids;
mod tasks;

pub mod allocator;
pub mod executor;
pub mod maintenance;
pub mod master;
pub mod scheduler;
