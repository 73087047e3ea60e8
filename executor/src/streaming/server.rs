//! The executor's streaming server: TLS, the credential check, and WebSocket framing.
