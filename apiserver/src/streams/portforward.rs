//! port-forward: SPDY/3.1, and SPDY inside WebSocket (`SPDY/3.1+portforward.k8s.io`).
