//! Mesos v1 messages, with the field numbers of Apache Mesos' protos.
//!
//! # Encoding rules
//!
//! Every type derives `prost::Message` (protobuf) and serde (Mesos' JSON
//! mapping). proto2 `required` scalars are marked `required`, so a zero
//! value is still encoded: a real master rejects a message whose required
//! field is missing ("not initialized"). Message-typed fields are `Option`
//! whether required or not, so that a missing one can be *detected* and
//! rejected by validation instead of silently defaulted. Decoding skips
//! unknown fields in both codecs.
//!
//! Enum fields are `i32` on the struct (prost's representation); use the
//! generated getters or [`json::WireEnum`] to go to and from the enum types.

pub mod json;

mod cluster;
mod ids;
mod tasks;
mod values;

pub mod executor;
pub mod scheduler;

pub use cluster::*;
pub use ids::*;
pub use tasks::*;
pub use values::*;
