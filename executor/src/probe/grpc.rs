//! `grpc`: `grpc.health.v1.Health/Check` over plaintext HTTP/2, as
//! kubelet's gRPC probe. `SERVING` succeeds; anything else fails with
//! kubelet's message. The two tiny protobuf messages are coded by hand.

use std::time::Duration;

use bytes::{Buf, Bytes};

use super::dial::connect;
use super::tcp::join_host_port;
use super::{Outcome, USER_AGENT};

/// The health RPC's path.
const CHECK: &str = "/grpc.health.v1.Health/Check";
/// gRPC's status code for a method the server lacks.
const UNIMPLEMENTED: &str = "12";

/// `HealthCheckResponse.ServingStatus` by number.
fn serving_status(n: u64) -> &'static str {
    match n {
        1 => "SERVING",
        2 => "NOT_SERVING",
        3 => "SERVICE_UNKNOWN",
        _ => "UNKNOWN",
    }
}

/// The request: one length-prefixed `HealthCheckRequest { service }`.
pub(crate) fn request_body(service: &str) -> Bytes {
    let mut msg = Vec::new();
    if !service.is_empty() {
        msg.push(0x0a); // field 1, length-delimited
        put_varint(&mut msg, service.len() as u64);
        msg.extend_from_slice(service.as_bytes());
    }
    let mut out = vec![0u8];
    out.extend_from_slice(&u32::try_from(msg.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&msg);
    Bytes::from(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.first()?;
        buf.advance(1);
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The `status` of a length-prefixed `HealthCheckResponse` (0 when absent).
pub(crate) fn response_status(body: &[u8]) -> Option<u64> {
    let len = u32::from_be_bytes(body.get(1..5)?.try_into().ok()?) as usize;
    let mut msg = body.get(5..5 + len)?;
    let mut status = 0;
    while !msg.is_empty() {
        let tag = varint(&mut msg)?;
        match tag & 7 {
            0 => {
                let v = varint(&mut msg)?;
                if tag >> 3 == 1 {
                    status = v;
                }
            }
            2 => {
                let n = usize::try_from(varint(&mut msg)?).ok()?;
                msg = msg.get(n..)?;
            }
            _ => return None,
        }
    }
    Some(status)
}

/// One gRPC health check of `service` at `host:port`.
pub async fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> Outcome {
    let addr = join_host_port(host, port);
    let secs = timeout.as_secs();
    let tcp = match connect(host, port, timeout).await {
        Ok(tcp) => tcp,
        Err(e) => {
            return Outcome::Failure(format!(
                "timeout: failed to connect service {addr:?} within {secs}s: {e}"
            ));
        }
    };
    match tokio::time::timeout(timeout, check(tcp, &addr, service)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failure(format!(
            "timeout: health rpc did not complete within {secs}s"
        )),
    }
}

/// The RPC on h2 directly, its connection driven in this task: no task
/// spawned and no client dispatch per attempt (probes are the executor's
/// hottest loop, and an attempt is one request on a fresh connection).
async fn check(tcp: tokio::net::TcpStream, addr: &str, service: &str) -> Outcome {
    let failed = |e: String| Outcome::Failure(format!("error: health rpc probe failed: {e}"));
    let handshake = h2::client::Builder::new()
        .enable_push(false)
        .handshake::<_, Bytes>(tcp);
    let (client, mut conn) = match handshake.await {
        Ok(h) => h,
        Err(e) => return failed(e.to_string()),
    };
    let exchange = async {
        let mut client = client.ready().await.map_err(|e| e.to_string())?;
        let req = http::Request::post(format!("http://{addr}{CHECK}"))
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(http::header::TE, "trailers")
            .header(http::header::USER_AGENT, USER_AGENT)
            .body(())
            .map_err(|e| e.to_string())?;
        let (response, mut send) = client.send_request(req, false).map_err(|e| e.to_string())?;
        send.send_data(request_body(service), true)
            .map_err(|e| e.to_string())?;
        let response = response.await.map_err(|e| e.to_string())?;
        Ok::<_, String>(read(response).await)
    };
    // The connection is polled only until the exchange is done; it is then
    // dropped, closing the socket.
    let outcome = tokio::select! {
        r = exchange => r,
        r = &mut conn => Err(r.err().map_or_else(|| "connection closed".to_owned(), |e| e.to_string())),
    };
    outcome.unwrap_or_else(failed)
}

async fn read(response: http::Response<h2::RecvStream>) -> Outcome {
    let failed = |e: String| Outcome::Failure(format!("error: health rpc probe failed: {e}"));
    let mut grpc_status = response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Vec::new();
    let mut incoming = response.into_body();
    while let Some(data) = incoming.data().await {
        let data = match data {
            Ok(d) => d,
            Err(e) => return failed(e.to_string()),
        };
        let _ = incoming.flow_control().release_capacity(data.len());
        body.extend_from_slice(&data);
        if body.len() > super::MAX_OUTPUT {
            return failed("response too large".into());
        }
    }
    match incoming.trailers().await {
        Ok(Some(trailers)) => {
            if let Some(s) = trailers.get("grpc-status").and_then(|v| v.to_str().ok()) {
                grpc_status = Some(s.to_owned());
            }
        }
        Ok(None) => {}
        Err(e) => return failed(e.to_string()),
    }
    match grpc_status.as_deref() {
        Some("0") | None => {}
        Some(UNIMPLEMENTED) => {
            return Outcome::Failure(
                "this server does not implement the grpc health protocol (grpc.health.v1.Health): rpc error: code = Unimplemented".into(),
            );
        }
        Some(code) => return failed(format!("rpc error: code = {code}")),
    }
    match response_status(&body) {
        Some(1) => Outcome::Success,
        Some(n) => Outcome::Failure(format!(
            "service unhealthy (responded with {:?})",
            serving_status(n)
        )),
        None => failed("malformed HealthCheckResponse".into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::convert::Infallible;

    use http_body_util::BodyExt;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    use super::*;

    /// A gRPC health server answering `status` for every check.
    async fn server(status: u8) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let svc = hyper::service::service_fn(
                    move |req: http::Request<hyper::body::Incoming>| async move {
                        assert_eq!(req.uri().path(), CHECK);
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        assert_eq!(body, request_body("web"));
                        let msg = Bytes::from(vec![0, 0, 0, 0, 2, 0x08, status]);
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                        let frames = futures::stream::iter(vec![
                            Ok::<_, Infallible>(hyper::body::Frame::data(msg)),
                            Ok(hyper::body::Frame::trailers(trailers)),
                        ]);
                        let body = http_body_util::StreamBody::new(frames);
                        Ok::<_, Infallible>(
                            http::Response::builder()
                                .header("content-type", "application/grpc")
                                .body(body)
                                .unwrap(),
                        )
                    },
                );
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(s), svc),
                );
            }
        });
        port
    }

    #[tokio::test]
    async fn serving_succeeds_and_not_serving_fails_in_kubelets_words() {
        let t = Duration::from_secs(2);
        assert_eq!(
            probe("127.0.0.1", server(1).await, "web", t).await,
            Outcome::Success
        );
        assert_eq!(
            probe("127.0.0.1", server(2).await, "web", t).await,
            Outcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
        );
    }

    #[test]
    fn a_response_with_other_fields_still_reads_its_status() {
        // field 2 (length-delimited, 1 byte) then status 1.
        let body = [0, 0, 0, 0, 5, 0x12, 1, b'x', 0x08, 1];
        assert_eq!(response_status(&body), Some(1));
        assert_eq!(response_status(&[0, 0, 0, 0, 0]), Some(0));
        assert_eq!(response_status(&[0, 0, 0, 0, 9]), None);
    }
}
