//! The v1 executor API client: SUBSCRIBE to the local agent, send UPDATE
//! and MESSAGE calls. No stream id: the agent knows the executor by the
//! ids in each call.

use std::time::Duration;

use bytes::Bytes;
use reqwest::Url;

use super::http::{self, Request};
use super::{ClientError, EventStream};
use crate::codec::Codec;
use crate::proto::executor::{Call, Event};

/// Where agents serve the executor API.
pub const EXECUTOR_PATH: &str = "/api/v1/executor";

/// An executor API client for one agent. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ExecutorClient {
    http: reqwest::Client,
    url: Url,
    codec: Codec,
    timeout: Duration,
    token: Option<reqwest::header::HeaderValue>,
}

impl ExecutorClient {
    /// A client for the agent at `agent_endpoint` (`MESOS_AGENT_ENDPOINT`,
    /// i.e. `ip:port`, or a URL).
    ///
    /// # Errors
    /// [`ClientError::InvalidEndpoint`], or [`ClientError::Http`] if the
    /// HTTP client cannot be built.
    pub fn new(agent_endpoint: &str, codec: Codec) -> Result<Self, ClientError> {
        Ok(Self {
            http: http::client()?,
            url: http::endpoint(agent_endpoint, EXECUTOR_PATH)?,
            codec,
            timeout: http::DEFAULT_RESPONSE_TIMEOUT,
            token: None,
        })
    }

    /// The same client sending `token` (the agent's
    /// `MESOS_EXECUTOR_AUTHENTICATION_TOKEN`) as `Authorization: Bearer` on
    /// every call, as Mesos' executor library does.
    ///
    /// # Errors
    /// [`ClientError::InvalidEndpoint`] if the token cannot be a header value.
    pub fn with_token(mut self, token: &str) -> Result<Self, ClientError> {
        let header = super::security::bearer(token)
            .map_err(|e| ClientError::InvalidEndpoint(e.to_string()))?;
        self.token = Some(header);
        Ok(self)
    }

    /// The same client with another deadline for response headers.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends SUBSCRIBE (with any unacknowledged tasks and updates in
    /// `call.subscribe`) and returns the agent's events: SUBSCRIBED first,
    /// then LAUNCH, KILL, ACKNOWLEDGED, SHUTDOWN, …
    ///
    /// # Errors
    /// The status error the agent answered (503 while it recovers), or
    /// [`ClientError::Http`].
    pub async fn subscribe(&self, call: Call) -> Result<EventStream<Event>, ClientError> {
        let posted = http::post(&self.request(call), self.url.clone()).await?;
        let status = posted.response.status().as_u16();
        if status != 200 {
            return Err(ClientError::UnexpectedStatus {
                status,
                body: "SUBSCRIBE must answer 200 with an event stream".into(),
            });
        }
        Ok(http::event_stream(posted.response, self.codec))
    }

    /// Sends UPDATE or MESSAGE; any 2xx (the agent answers 202) is success.
    ///
    /// # Errors
    /// The status error the agent answered (403 before SUBSCRIBE, 400 for
    /// an unknown framework or executor), or [`ClientError::Http`].
    pub async fn call(&self, call: Call) -> Result<(), ClientError> {
        http::post(&self.request(call), self.url.clone())
            .await
            .map(drop)
    }

    fn request(&self, call: Call) -> Request<'_> {
        Request {
            http: &self.http,
            codec: self.codec,
            body: Bytes::from(self.codec.encode(&call)),
            stream_id: None,
            timeout: self.timeout,
            auth: self.token.as_ref(),
            tls: None,
        }
    }
}
