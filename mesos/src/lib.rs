//! The Mesos v1 wire protocol, and nothing of scheduling policy.
//!
//! # Contract
//!
//! - [`proto`]: every message of the v1 scheduler and executor APIs that
//!   mesopod and localmesos use, and the operator API's maintenance calls
//!   (`proto::master`, `proto::maintenance`, `proto::allocator`), with Apache Mesos' names and field numbers,
//!   proto2 `required`/`optional` respected, unknown fields skipped. The
//!   messages are written once, in the `.proto` files under `mesos/proto/`
//!   (trimmed copies of Apache Mesos' `include/mesos/v1` protos); `build.rs`
//!   generates the Rust types from them with `prost-build` and the pure-Rust
//!   compiler `protox` (no `protoc`), and their JSON mapping from the same
//!   descriptors. Hand-written helpers sit beside the generated code.
//! - [`codec`]: the two encodings Mesos speaks, protobuf and Mesos' own JSON
//!   mapping, chosen per connection from `Content-Type` / `Accept`.
//! - [`recordio`]: the framing of event streams, decoded incrementally
//!   with a bound on every record.
//! - [`client`]: HTTP clients for the scheduler API (SUBSCRIBE to one of
//!   several masters, following 307s to the leader; calls with the stream
//!   id) and the executor API. They never retry or resubscribe by themselves.
//! - [`duration`]: Mesos' duration syntax (`5secs`, `1.5mins`), as agents
//!   write it into an executor's environment.
//! - [`resources`]: the `Resources` value type with Mesos' arithmetic
//!   (fixed-point scalars, normalised ranges, sets, roles) and Mesos' text
//!   syntax for `--resources` and `--attributes`.
//!
//! # Invariants
//!
//! - This crate knows nothing of pods, the registry or the API shim.
//! - Field numbers and names exist only in the `.proto` files; no Rust code
//!   types one.
//! - Bytes from the network never panic a decoder: every decoder returns a
//!   typed error, and every length read from the wire is bounded before
//!   anything is allocated for it.
//! - Only [`client`] does I/O (HTTP, on the caller's tokio runtime); the
//!   rest is pure data and arithmetic, usable from any thread.
//! - A [`resources::Resources`] is always normalised: no empty items, ranges
//!   sorted and coalesced, scalars on the 0.001 grid.

pub mod client;
pub mod codec;
pub mod duration;
pub mod proto;
pub mod recordio;
pub mod resources;
