//! The v1 scheduler API client: SUBSCRIBE to a master, then calls on the
//! subscription.
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> Result<(), mesos::client::ClientError> {
//! use futures::StreamExt as _;
//! use mesos::client::SchedulerClient;
//! use mesos::codec::Codec;
//! use mesos::proto::{FrameworkInfo, scheduler::{Call, call}};
//!
//! let client = SchedulerClient::new(
//!     vec!["http://m1:5050".into(), "http://m2:5050".into()],
//!     Codec::Protobuf,
//! )?;
//! let mut sub = client
//!     .subscribe(Call {
//!         r#type: Some(call::Type::Subscribe as i32),
//!         subscribe: Some(call::Subscribe {
//!             framework_info: Some(FrameworkInfo { user: "nobody".into(), name: "demo".into(), ..Default::default() }),
//!             ..Default::default()
//!         }),
//!         ..Default::default()
//!     })
//!     .await?;
//! while let Some(event) = sub.events.next().await {
//!     let event = event?;
//!     // ... answer with client.call(&sub.handle, call).await?
//! }
//! # Ok(()) }
//! ```

use std::time::Duration;

use bytes::Bytes;
use reqwest::Url;
use tracing::{info, warn};

use super::http::{self, Request};
use super::{ClientError, EventStream};
use crate::codec::Codec;
use crate::proto::scheduler::{Call, Event};

/// Where masters serve the scheduler API.
pub const SCHEDULER_PATH: &str = "/api/v1/scheduler";

/// A scheduler API client for a list of masters. Cheap to clone; clones
/// share the connection pool.
#[derive(Clone, Debug)]
pub struct SchedulerClient {
    http: reqwest::Client,
    masters: Vec<Url>,
    codec: Codec,
    timeout: Duration,
    credential: Option<super::Credential>,
    /// The `--mesos-cafile` client, for https masters.
    tls: Option<reqwest::Client>,
}

/// An accepted subscription: where later calls go, and the events.
pub struct Subscription {
    /// What every later call needs.
    pub handle: SubscriptionHandle,
    /// The master's events, first SUBSCRIBED (or ERROR), then the rest. Ends
    /// when the master closes the stream.
    pub events: EventStream<Event>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// The master that accepted a subscription and the stream id it gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionHandle {
    /// The `Mesos-Stream-Id` every call must carry.
    pub stream_id: String,
    /// Base URL of the master that accepted (after redirects), e.g.
    /// `http://10.0.0.2:5050`.
    pub master: String,
}

impl SchedulerClient {
    /// A client for `masters` (`http://host:port` or `host:port`), tried in
    /// order on SUBSCRIBE, speaking `codec`.
    ///
    /// # Errors
    /// [`ClientError::InvalidEndpoint`] for an empty list or an address
    /// that is not HTTP; [`ClientError::Http`] if the HTTP client cannot be built.
    pub fn new(masters: Vec<String>, codec: Codec) -> Result<Self, ClientError> {
        Self::with_security(masters, codec, &super::ClientSecurity::default())
    }

    /// [`SchedulerClient::new`] with TLS and a framework credential. With
    /// `security.tls` every master must be `https://`.
    ///
    /// # Errors
    /// As [`SchedulerClient::new`], and [`ClientError::InvalidEndpoint`] for
    /// a plain-HTTP master when TLS is configured.
    pub fn with_security(
        masters: Vec<String>,
        codec: Codec,
        security: &super::ClientSecurity,
    ) -> Result<Self, ClientError> {
        if masters.is_empty() {
            return Err(ClientError::InvalidEndpoint("(no masters given)".into()));
        }
        let masters = masters
            .iter()
            .map(|m| http::endpoint(m, SCHEDULER_PATH))
            .collect::<Result<Vec<_>, _>>()?;
        if security.tls.is_some()
            && let Some(plain) = masters.iter().find(|m| m.scheme() != "https")
        {
            return Err(ClientError::InvalidEndpoint(format!(
                "{plain}: --mesos-cafile needs https:// masters (no plaintext fallback)"
            )));
        }
        Ok(Self {
            http: http::client()?,
            tls: security.tls.as_ref().map(http::tls_client).transpose()?,
            masters,
            codec,
            timeout: http::DEFAULT_RESPONSE_TIMEOUT,
            credential: security.credential.clone(),
        })
    }

    /// The same client with another deadline for response headers.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The codec this client speaks.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Sends SUBSCRIBE to each master in turn, following redirects to the
    /// leader, until one answers 200 with a `Mesos-Stream-Id`.
    ///
    /// A master that is unreachable, answers 503 or redirects badly is
    /// skipped; any other refusal (400, 403, …) is returned at once, since
    /// another master would refuse the same call.
    ///
    /// # Errors
    /// [`ClientError::NoMasterReachable`] when every master was skipped;
    /// the status error of a refusal; [`ClientError::MissingStreamId`].
    pub async fn subscribe(&self, call: Call) -> Result<Subscription, ClientError> {
        let req = self.request(call, None);
        let mut failures = Vec::new();
        for master in &self.masters {
            match http::post(&req, master.clone()).await {
                Ok(posted) => {
                    let status = posted.response.status().as_u16();
                    if status != 200 {
                        return Err(ClientError::UnexpectedStatus {
                            status,
                            body: "SUBSCRIBE must answer 200 with an event stream".into(),
                        });
                    }
                    let stream_id = posted
                        .response
                        .headers()
                        .get(http::STREAM_ID_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .filter(|v| !v.is_empty())
                        .ok_or(ClientError::MissingStreamId)?
                        .to_owned();
                    let handle = SubscriptionHandle {
                        stream_id,
                        master: http::base_of(&posted.url, SCHEDULER_PATH),
                    };
                    info!(master = %handle.master, stream_id = %handle.stream_id, "subscribed");
                    let events = http::event_stream(posted.response, self.codec);
                    return Ok(Subscription { handle, events });
                }
                Err(err) if err.is_transient() => {
                    warn!(%master, error = %err, "master did not take the subscription");
                    failures.push(format!("{master}: {err}"));
                }
                Err(err) => return Err(err),
            }
        }
        Err(ClientError::NoMasterReachable(failures.join("; ")))
    }

    /// Sends a call on a subscription (to the master that accepted it, with
    /// its stream id). Any 2xx (Mesos answers 202) is success.
    ///
    /// # Errors
    /// The status error the master answered, or [`ClientError::Http`].
    pub async fn call(&self, sub: &SubscriptionHandle, call: Call) -> Result<(), ClientError> {
        let url = http::endpoint(&sub.master, SCHEDULER_PATH)?;
        let req = self.request(call, Some(&sub.stream_id));
        http::post(&req, url).await.map(drop)
    }

    fn request<'a>(&'a self, call: Call, stream_id: Option<&'a str>) -> Request<'a> {
        Request {
            http: &self.http,
            codec: self.codec,
            body: Bytes::from(self.codec.encode(&call)),
            stream_id,
            timeout: self.timeout,
            auth: self
                .credential
                .as_ref()
                .map(super::Credential::authorization),
            tls: self.tls.as_ref(),
        }
    }
}
