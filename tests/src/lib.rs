//! mesopod's end-to-end tests: the system as its users run it, across
//! processes.
//!
//! # Contract
//!
//! - The tests live in `tests/tests/`, one file per user-visible flow, and
//!   run with the rest under `cargo test --workspace`.
//! - They run the `mesopod` they were built with: the `mesopod-e2e` binary
//!   of this crate is [`framework::cmd::main`], as framework's `mesopod` is,
//!   and cargo builds it before the tests (`CARGO_BIN_EXE_mesopod-e2e`), so
//!   no test runs a stale binary or one found on `PATH`.
//! - They use the real kubectl (`/usr/bin/kubectl` and the versioned ones
//!   beside it), the real `mesopod executor` on localmesos agents, and
//!   pymesos (`.ci/install-pymesos.sh`) as a third-party Mesos client. A
//!   test whose third-party tool is missing skips with a message, and fails
//!   instead when `CI=true`.
//! - Every process a test starts is ended when the test ends, passed or
//!   failed (`testkit::ProcessGuard`, kill-on-drop), and every wait is
//!   bounded and says what it last saw (`testkit::wait_until`).
//! - Servers listen on `127.0.0.1:0`; data lives in temporary directories.
//!
//! What one crate's API does in-process is tested in that crate; what
//! these tests share is in `tests/tests/common/`, and what every crate's
//! tests share is in `testkit` (`tests/testkit`), which depends on none
//! of our crates.
