//! End-to-end tests across processes live in `tests/tests/`; this library holds
//! the helpers they share (finding binaries, starting and stopping processes).
