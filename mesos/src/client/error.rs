//! What can go wrong talking to a master or an agent.

use crate::codec::DecodeError;
use crate::recordio::RecordIoError;

/// A failed call or subscription. Status errors carry the response body,
/// which is where Mesos says what it did not like.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// 400: the call is malformed, invalid, or for an unknown framework /
    /// executor, or the stream id is missing or wrong.
    #[error("400 Bad Request: {0}")]
    BadRequest(String),
    /// 401: no credential, or one the server does not accept.
    #[error("401 Unauthorized: {body} (WWW-Authenticate: {challenge})")]
    Unauthorized {
        /// The response body.
        body: String,
        /// The server's `WWW-Authenticate` challenge(s).
        challenge: String,
    },
    /// 403: the framework or executor is not subscribed (or not allowed).
    #[error("403 Forbidden: {0}")]
    Forbidden(String),
    /// 405: not a POST.
    #[error("405 Method Not Allowed: {0}")]
    MethodNotAllowed(String),
    /// 406: the server cannot answer in the requested codec.
    #[error("406 Not Acceptable: {0}")]
    NotAcceptable(String),
    /// 415: the server does not take the body's codec.
    #[error("415 Unsupported Media Type: {0}")]
    UnsupportedMediaType(String),
    /// 503: the master is recovering or has no leader; the agent is recovering.
    #[error("503 Service Unavailable: {0}")]
    ServiceUnavailable(String),
    /// Any other status.
    #[error("unexpected HTTP status {status}: {body}")]
    UnexpectedStatus {
        /// The status code.
        status: u16,
        /// The response body (bounded).
        body: String,
    },
    /// A redirect without a usable `Location`, or too many of them.
    #[error("redirect: {0}")]
    Redirect(String),
    /// Connecting or the TLS handshake with an https server failed (an
    /// unknown CA, a wrong name), or the connection broke.
    #[error("https: {0}")]
    Tls(String),
    /// Connecting, sending or reading failed.
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    /// A message on the stream did not decode.
    #[error("decoding an event: {0}")]
    Decode(#[from] DecodeError),
    /// The stream's framing is broken.
    #[error(transparent)]
    RecordIo(#[from] RecordIoError),
    /// Every master was tried and none took the subscription; says why for each.
    #[error("no master reachable: {0}")]
    NoMasterReachable(String),
    /// A SUBSCRIBE answered 200 without a `Mesos-Stream-Id` header.
    #[error("SUBSCRIBE response without a Mesos-Stream-Id header")]
    MissingStreamId,
    /// A master or agent address that is not an `http://` URL or `host:port`.
    #[error("invalid endpoint '{0}'")]
    InvalidEndpoint(String),
    /// The server did not answer within the client's deadline.
    #[error("no response within {0:?}")]
    Timeout(std::time::Duration),
}

impl ClientError {
    /// The HTTP status this error stands for, if it is a status error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::BadRequest(_) => Some(400),
            ClientError::Unauthorized { .. } => Some(401),
            ClientError::Forbidden(_) => Some(403),
            ClientError::MethodNotAllowed(_) => Some(405),
            ClientError::NotAcceptable(_) => Some(406),
            ClientError::UnsupportedMediaType(_) => Some(415),
            ClientError::ServiceUnavailable(_) => Some(503),
            ClientError::UnexpectedStatus { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether another master (or a later attempt) might succeed: the
    /// server was unreachable, unavailable or redirected badly, as opposed
    /// to refusing the call itself.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ClientError::ServiceUnavailable(_)
                | ClientError::Http(_)
                | ClientError::Tls(_)
                | ClientError::Redirect(_)
                | ClientError::Timeout(_)
                | ClientError::NoMasterReachable(_)
        ) || matches!(self, ClientError::UnexpectedStatus { status, .. } if *status >= 500)
    }

    /// The typed error for a status and its body.
    pub(crate) fn from_status(status: u16, body: String) -> ClientError {
        match status {
            400 => ClientError::BadRequest(body),
            403 => ClientError::Forbidden(body),
            405 => ClientError::MethodNotAllowed(body),
            406 => ClientError::NotAcceptable(body),
            415 => ClientError::UnsupportedMediaType(body),
            503 => ClientError::ServiceUnavailable(body),
            status => ClientError::UnexpectedStatus { status, body },
        }
    }
}
