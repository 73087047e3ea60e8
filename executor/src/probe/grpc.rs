//! `grpc`: `grpc.health.v1.Health/Check` over plaintext HTTP/2, as
//! kubelet's gRPC probe. `SERVING` succeeds; anything else fails with
//! kubelet's message. The two messages are prost's, declared here with
//! `grpc/health/v1/health.proto`'s names and field numbers.

use std::time::Duration;

use bytes::Bytes;
use prost::Message;

use super::Outcome;
use super::dial::{Conn, dial};
use super::grpc_wire;
use super::tcp::join_host_port;

/// The health RPC's path.
const CHECK: &str = "/grpc.health.v1.Health/Check";
/// gRPC's status code for a method the server lacks.
const UNIMPLEMENTED: &str = "12";

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse` (its `ServingStatus` as a number:
/// one a newer server adds is still read, and named UNKNOWN).
#[derive(Clone, PartialEq, Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

/// `HealthCheckResponse.ServingStatus` by number.
fn serving_status(n: i32) -> &'static str {
    match n {
        1 => "SERVING",
        2 => "NOT_SERVING",
        3 => "SERVICE_UNKNOWN",
        _ => "UNKNOWN",
    }
}

/// The request: one length-prefixed `HealthCheckRequest { service }`.
pub(crate) fn request_body(service: &str) -> Bytes {
    let msg = HealthCheckRequest {
        service: service.to_owned(),
    }
    .encode_to_vec();
    let mut out = vec![0u8];
    out.extend_from_slice(&u32::try_from(msg.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&msg);
    Bytes::from(out)
}

/// The `status` of a length-prefixed `HealthCheckResponse` (0 when absent).
pub(crate) fn response_status(body: &[u8]) -> Option<i32> {
    let len = u32::from_be_bytes(body.get(1..5)?.try_into().ok()?) as usize;
    let msg = body.get(5..5usize.checked_add(len)?)?;
    HealthCheckResponse::decode(msg).ok().map(|r| r.status)
}

/// One gRPC health check of `service` at `host:port`.
pub async fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> Outcome {
    let addr = join_host_port(host, port);
    let secs = timeout.as_secs();
    let conn = match dial(host, port, timeout).await {
        Ok(conn) => conn,
        Err(e) => {
            return Outcome::Failure(format!(
                "timeout: failed to connect service {addr:?} within {secs}s: {e}"
            ));
        }
    };
    match tokio::time::timeout(timeout, check(conn, &addr, service)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failure(format!(
            "timeout: health rpc did not complete within {secs}s"
        )),
    }
}

/// The RPC as one write and a frame reader (`grpc_wire`): no HTTP/2
/// client machinery for a single call on a fresh connection.
async fn check(conn: Conn, addr: &str, service: &str) -> Outcome {
    let failed = |e: String| Outcome::Failure(format!("error: health rpc probe failed: {e}"));
    let Some(request) = grpc_wire::request(addr, CHECK, &request_body(service)) else {
        return failed("the health check request is too large".into());
    };
    let answer = match conn.send(&request).await {
        Ok(conn) => {
            conn.settle().await;
            grpc_wire::answer(conn).await
        }
        Err(e) => Err(e),
    };
    match answer {
        Ok(answer) => verdict(&answer),
        Err(e) => failed(e),
    }
}

fn verdict(answer: &grpc_wire::Answer) -> Outcome {
    let failed = |e: String| Outcome::Failure(format!("error: health rpc probe failed: {e}"));
    match answer.grpc_status.as_deref() {
        Some("0") | None => {}
        Some(UNIMPLEMENTED) => {
            return Outcome::Failure(
                "this server does not implement the grpc health protocol (grpc.health.v1.Health): rpc error: code = Unimplemented".into(),
            );
        }
        Some(code) => return failed(format!("rpc error: code = {code}")),
    }
    match response_status(&answer.body) {
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
                        let h = req.headers();
                        assert_eq!(h["content-type"], "application/grpc");
                        assert_eq!(h["te"], "trailers");
                        assert_eq!(h["user-agent"], crate::probe::USER_AGENT);
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        assert_eq!(body, request_body("web"));
                        if status == 0 {
                            // Trailers-only: a server without the health service.
                            let frames = futures::stream::iter(Vec::new());
                            return Ok(http::Response::builder()
                                .header("content-type", "application/grpc")
                                .header("grpc-status", UNIMPLEMENTED)
                                .body(http_body_util::StreamBody::new(frames))
                                .unwrap());
                        }
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
        let Outcome::Failure(msg) = probe("127.0.0.1", server(0).await, "web", t).await else {
            panic!("a server without the health service fails the probe");
        };
        assert!(msg.starts_with("this server does not implement"), "{msg}");
    }

    #[tokio::test]
    async fn a_server_that_closes_without_answering_fails_the_probe() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                drop(s);
            }
        });
        let out = probe("127.0.0.1", port, "", Duration::from_secs(2)).await;
        let Outcome::Failure(msg) = out else {
            panic!("a closed connection must fail: {out:?}");
        };
        assert!(msg.starts_with("error: health rpc probe failed: "), "{msg}");
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
