//! The shim's credential on the executor's streaming endpoint.
