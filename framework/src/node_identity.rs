//! The scheduler's side of executors' node credentials: an executor's key registration
//! (an executor `MESSAGE`, stamped by the Mesos master with its agent and executor id)
//! is recorded in the API's [`NodeKeys`] under the Node of that agent, and answered with
//! a scheduler `MESSAGE` naming the node, the API's URL and its CA certificate. Nothing
//! secret travels: the key is public, the CA is a certificate.
//!
//! Keys, streaming endpoints and the stream key live in memory: a restarted scheduler or
//! a new leader has none. It asks the executors of its tasks to register again as soon
//! as it subscribes (`core::executors`), and each executor also sends its key on every
//! SUBSCRIBED to its agent, after a failed API call, and until it is answered
//! ([`executor::apiclient`]); registering is idempotent (the newest registration of a
//! node wins).

use std::sync::Arc;
use std::time::Duration;

use apiserver::Api;
use apiserver::auth::node_keys::{NodeKey, NodeKeys};
use base64::Engine as _;
use executor::apiclient::protocol::{self, NODE_KEY_MESSAGE, NODE_REGISTERED_MESSAGE, Registered};
use mesos::proto::scheduler::{Call, Event, call, event};
use mesos::proto::{AgentId, ExecutorId};

use crate::driver::{DriverEvent, MesosHandle};

/// How often, and how long apart, the agent's Node is looked for: it is written on the
/// agent's first offer, which comes before any executor starts there, but that write
/// may still be in flight.
const NODE_LOOKUPS: u32 = 20;
const NODE_LOOKUP_EVERY: Duration = Duration::from_millis(100);

/// Where executors reach the API.
#[derive(Debug, Clone)]
pub struct ApiEndpoint {
    /// `https://host:port`, or `http://127.0.0.1:port` for the plain loopback API.
    pub server: String,
    /// The CA certificate of the serving certificate (PEM); empty for plain HTTP.
    pub ca_pem: String,
}

/// Registers executors' keys; cheap to clone.
#[derive(Clone)]
pub struct NodeIdentities {
    keys: Arc<NodeKeys>,
    api: Api,
    mesos: MesosHandle,
    endpoint: ApiEndpoint,
    /// Where executors' streaming endpoints are recorded, and the public key that
    /// signs stream credentials ([`crate::streams`]).
    streams: Option<(Arc<crate::streams::StreamEndpoints>, String)>,
}

impl NodeIdentities {
    /// Registrations into `keys`, answered with `endpoint`.
    pub fn new(keys: Arc<NodeKeys>, api: Api, mesos: MesosHandle, endpoint: ApiEndpoint) -> Self {
        Self {
            keys,
            api,
            mesos,
            endpoint,
            streams: None,
        }
    }

    /// Also records executors' streaming endpoints in `endpoints` and tells them
    /// `stream_key`.
    pub fn with_streams(
        mut self,
        endpoints: Arc<crate::streams::StreamEndpoints>,
        stream_key: String,
    ) -> Self {
        self.streams = Some((endpoints, stream_key));
        self
    }

    /// Takes `ev` if it is a key registration (true), handling it in the background.
    pub fn intercept(&self, ev: &DriverEvent) -> bool {
        let DriverEvent::Event(e) = ev else {
            return false;
        };
        let Some(msg) = message(e) else {
            return false;
        };
        let Some(key) = protocol::decode::<protocol::NodeKey>(NODE_KEY_MESSAGE, &msg.data) else {
            return false;
        };
        let (Some(agent), Some(executor)) = (msg.agent_id.clone(), msg.executor_id.clone()) else {
            tracing::warn!("a node key without agent or executor id ignored");
            return true;
        };
        let this = self.clone();
        tokio::spawn(async move { this.register(agent, executor, key).await });
        true
    }

    async fn register(&self, agent: AgentId, executor: ExecutorId, key: protocol::NodeKey) {
        let Ok(public_key) =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&key.public_key)
        else {
            tracing::warn!(
                agent = agent.value,
                "a node key that is not base64url ignored"
            );
            return;
        };
        if key.alg != "ES256" {
            tracing::warn!(
                agent = agent.value,
                alg = key.alg,
                "a node key of an unknown algorithm ignored"
            );
            return;
        }
        let Some(node) = self.node_of(&agent.value).await else {
            tracing::warn!(
                agent = agent.value,
                "no Node for the agent: its executor's key is not registered"
            );
            return;
        };
        if let (Some((endpoints, _)), Some(ep)) = (&self.streams, &key.streaming) {
            endpoints.set(
                &node,
                crate::streams::Endpoint {
                    host: ep.host.clone(),
                    port: ep.port,
                    public_key: public_key.clone(),
                },
            );
            crate::streams::record_on_node(&self.api, &node, ep.port).await;
        }
        let kid = match self.keys.register(NodeKey {
            node: node.clone(),
            agent_id: agent.value.clone(),
            executor_id: executor.value.clone(),
            public_key,
        }) {
            Ok(kid) => kid,
            Err(e) => {
                tracing::warn!(agent = agent.value, error = %e, "node key refused");
                return;
            }
        };
        tracing::info!(
            agent = agent.value,
            executor = executor.value,
            node,
            kid,
            "registered an executor's node key"
        );
        let answer = Registered {
            kid,
            node,
            server: self.endpoint.server.clone(),
            ca_pem: self.endpoint.ca_pem.clone(),
            stream_key: self
                .streams
                .as_ref()
                .map(|(_, k)| k.clone())
                .unwrap_or_default(),
        };
        let call = Call {
            r#type: Some(call::Type::Message as i32),
            message: Some(call::Message {
                agent_id: Some(agent),
                executor_id: Some(executor),
                data: protocol::encode(NODE_REGISTERED_MESSAGE, &answer),
            }),
            ..Default::default()
        };
        if let Err(e) = self.mesos.call(call).await {
            tracing::warn!(error = %e, "could not answer an executor's key registration");
        }
    }

    /// The name of the Node mesopod wrote for `agent` (`spec.providerID` `mesos://<id>`).
    async fn node_of(&self, agent: &str) -> Option<String> {
        let provider = format!("mesos://{agent}");
        for _ in 0..NODE_LOOKUPS {
            let found = self.api.list_nodes("", "").ok().and_then(|l| {
                l.items.into_iter().find_map(|n| {
                    (n.spec.as_ref()?.provider_id.as_deref() == Some(provider.as_str()))
                        .then_some(n.metadata.name)
                        .flatten()
                })
            });
            if found.is_some() {
                return found;
            }
            tokio::time::sleep(NODE_LOOKUP_EVERY).await;
        }
        None
    }
}

impl ApiEndpoint {
    /// The endpoint of an API listening on `addr`: `https` with `secure`'s CA (the
    /// generated PKI's, else `--client-ca-file`, which usually is the same CA). An
    /// unspecified address is named `127.0.0.1` for an embedded cluster, whose agents
    /// share the host, else by the host name (both are in the generated certificate).
    pub fn of(
        addr: std::net::SocketAddr,
        secure: Option<&crate::security::Secure>,
        embedded: bool,
    ) -> Self {
        let host = if !addr.ip().is_unspecified() {
            addr.ip().to_string()
        } else if embedded {
            "127.0.0.1".to_owned()
        } else {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_else(|_| "localhost".into())
        };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let Some(secure) = secure else {
            return Self {
                server: format!("http://{host}:{}", addr.port()),
                ca_pem: String::new(),
            };
        };
        let ca = secure
            .pki
            .as_ref()
            .map(|(_, files)| files.ca_cert.clone())
            .or_else(|| secure.client_ca.clone());
        let ca_pem = ca
            .and_then(|p| std::fs::read_to_string(&p).map_err(|e| tracing::warn!(path = %p.display(), error = %e, "cannot read the API's CA for executors")).ok())
            .unwrap_or_default();
        Self {
            server: format!("https://{host}:{}", addr.port()),
            ca_pem,
        }
    }
}

fn message(e: &Event) -> Option<&event::Message> {
    (e.kind() == Some(event::Type::Message))
        .then_some(e.message.as_ref())
        .flatten()
}
