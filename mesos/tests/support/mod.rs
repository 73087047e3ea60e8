//! A scripted HTTP server on 127.0.0.1:0 standing in for a master or agent.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use futures::StreamExt as _;
use tokio::sync::mpsc;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) content_type: Option<String>,
    pub(crate) accept: Option<String>,
    pub(crate) stream_id: Option<String>,
    pub(crate) body: Vec<u8>,
}

/// What the server answers to the next request.
pub(crate) enum Reply {
    /// 200 with an event stream sent in exactly these chunks, then closed.
    Stream {
        stream_id: Option<String>,
        content_type: String,
        chunks: Vec<Vec<u8>>,
    },
    /// 200 with an event stream fed live by the test.
    Live {
        stream_id: String,
        content_type: String,
        chunks: mpsc::Receiver<Vec<u8>>,
    },
    /// Any status with a text body.
    Status(u16, String),
    /// 307 with this Location.
    Redirect(String),
    /// Never answers (a master stuck in recovery, a black hole).
    Hang,
}

#[derive(Clone, Default)]
struct Script {
    requests: Arc<Mutex<Vec<Recorded>>>,
    replies: Arc<Mutex<VecDeque<Reply>>>,
}

/// A running server. Answers 202 once its script is used up.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    script: Script,
}

impl Server {
    pub(crate) async fn start(replies: Vec<Reply>) -> Server {
        testkit::init_crypto();
        let script = Script {
            requests: Arc::default(),
            replies: Arc::new(Mutex::new(replies.into())),
        };
        let app = Router::new().fallback(handle).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Server { addr, script }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(crate) fn push(&self, reply: Reply) {
        self.script.replies.lock().unwrap().push_back(reply);
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.script.requests.lock().unwrap().clone()
    }
}

/// An address nothing listens on (bound, then released).
pub(crate) async fn dead_address() -> String {
    testkit::init_crypto();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

/// Splits bytes into chunks of `size` (the last may be shorter).
pub(crate) fn split(bytes: &[u8], size: usize) -> Vec<Vec<u8>> {
    bytes.chunks(size).map(<[u8]>::to_vec).collect()
}

async fn handle(
    State(script): State<Script>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    script.requests.lock().unwrap().push(Recorded {
        method,
        path: uri.path().to_owned(),
        content_type: text("content-type"),
        accept: text("accept"),
        stream_id: text("mesos-stream-id"),
        body: body.to_vec(),
    });
    let reply = script.replies.lock().unwrap().pop_front();
    let builder = Response::builder();
    match reply {
        None => builder
            .status(StatusCode::ACCEPTED)
            .body(Body::empty())
            .unwrap(),
        Some(Reply::Hang) => std::future::pending().await,
        Some(Reply::Status(code, text)) => builder.status(code).body(Body::from(text)).unwrap(),
        Some(Reply::Redirect(location)) => builder
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header(header::LOCATION, location)
            .body(Body::empty())
            .unwrap(),
        Some(Reply::Stream {
            stream_id,
            content_type,
            chunks,
        }) => {
            let mut b = builder
                .status(200)
                .header(header::CONTENT_TYPE, content_type);
            if let Some(id) = stream_id {
                b = b.header("Mesos-Stream-Id", id);
            }
            let body = futures::stream::iter(chunks).then(|c| async move {
                // Give each chunk its own write, so the client sees the boundaries.
                tokio::task::yield_now().await;
                Ok::<_, Infallible>(Bytes::from(c))
            });
            b.body(Body::from_stream(body)).unwrap()
        }
        Some(Reply::Live {
            stream_id,
            content_type,
            chunks,
        }) => {
            let body = futures::stream::unfold(chunks, |mut rx| async move {
                rx.recv()
                    .await
                    .map(|c| (Ok::<_, Infallible>(Bytes::from(c)), rx))
            });
            builder
                .status(200)
                .header(header::CONTENT_TYPE, content_type)
                .header("Mesos-Stream-Id", stream_id)
                .body(Body::from_stream(body))
                .unwrap()
        }
    }
}
