//! kubectl's WebSocket stream protocols, `v5.channel.k8s.io` and `v4.channel.k8s.io`.
