//! https peers with their own CA: a Mesos master reached with
//! `--mesos-cafile` (credentials travel only inside TLS; a certificate from
//! another CA and plain http:// are refused, no plaintext fallback), and an
//! admission webhook with `--admission-webhook-cafile`. The servers are test
//! doubles speaking TLS through `connlimits::serve_with_handshake` with the
//! API's own TLS step, the path the API's TLS serving takes.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use framework::admission::{Decision, Hook, Request, WebhookHook};
use futures::StreamExt as _;
use mesos::client::{ClientError, ClientSecurity, Credential, SchedulerClient};
use mesos::codec::Codec;
use mesos::proto::scheduler::{Call, Event, call, event};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls")).join(name)
}

/// Serves `router` over TLS (the fixture server certificate) on 127.0.0.1:0.
async fn tls_server(router: Router) -> SocketAddr {
    testkit::init_crypto();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture("server.pem"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = connlimits::ConnLimits {
        max_connections: 16,
        header_read_timeout: std::time::Duration::from_secs(5),
    };
    let handshake = apiserver::tls::TlsHandshake::new(Arc::new(config));
    tokio::spawn(connlimits::serve_with_handshake(
        listener,
        handshake,
        router,
        limits,
        std::future::pending(),
    ));
    addr
}

/// A master that answers SUBSCRIBE with SUBSCRIBED and remembers the
/// `Authorization` it was sent.
fn fake_master(seen: Arc<Mutex<Vec<String>>>) -> Router {
    Router::new().route(
        "/api/v1/scheduler",
        post(move |headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                seen.lock().unwrap().push(auth);
                let ev = Event {
                    r#type: Some(event::Type::Subscribed as i32),
                    subscribed: Some(event::Subscribed {
                        framework_id: Some(mesos::proto::FrameworkId::new("fw-tls")),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                let record = Codec::Json.encode(&ev);
                let mut body = format!("{}\n", record.len()).into_bytes();
                body.extend_from_slice(&record);
                (
                    [
                        ("content-type", "application/json"),
                        ("mesos-stream-id", "stream-1"),
                    ],
                    body,
                )
            }
        }),
    )
}

fn subscribe_call() -> Call {
    Call {
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: Some(mesos::proto::FrameworkInfo {
                user: "nobody".into(),
                name: "tls".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn security(ca: &str) -> ClientSecurity {
    ClientSecurity {
        tls: Some(mesos::client::security::tls_from_ca_file(&fixture(ca)).unwrap()),
        credential: Some(Credential::new("mesopod", "tls-secret").unwrap()),
    }
}

#[tokio::test]
async fn an_https_master_is_reached_with_mesos_cafile_and_the_credential_rides_inside_tls() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let addr = tls_server(fake_master(seen.clone())).await;
    let master = format!("https://127.0.0.1:{}", addr.port());
    let client =
        SchedulerClient::with_security(vec![master.clone()], Codec::Json, &security("ca.pem"))
            .unwrap();
    let mut sub = client.subscribe(subscribe_call()).await.unwrap();
    assert_eq!(sub.handle.stream_id, "stream-1");
    assert_eq!(sub.handle.master, master);
    let first = sub.events.next().await.unwrap().unwrap();
    assert_eq!(first.kind(), Some(event::Type::Subscribed));
    use base64::Engine as _;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("mesopod:tls-secret")
    );
    assert_eq!(*seen.lock().unwrap(), [expected]);

    // A certificate from another CA is refused, before anything is sent.
    let wrong = SchedulerClient::with_security(
        vec![master.clone()],
        Codec::Json,
        &security("other-ca.pem"),
    )
    .unwrap();
    let err = wrong.subscribe(subscribe_call()).await.err().unwrap();
    assert!(err.to_string().contains("certificate"), "{err}");
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "nothing sent to an unverified server"
    );

    // No plaintext: an http:// master is refused with --mesos-cafile.
    let plain = SchedulerClient::with_security(
        vec![format!("http://127.0.0.1:{}", addr.port())],
        Codec::Json,
        &security("ca.pem"),
    );
    assert!(matches!(plain, Err(ClientError::InvalidEndpoint(m)) if m.contains("no plaintext")));
    // Without a CA file an https master is refused too (no default trust).
    let untrusted = SchedulerClient::new(vec![master], Codec::Json).unwrap();
    let err = untrusted.subscribe(subscribe_call()).await.err().unwrap();
    assert!(err.to_string().contains("--mesos-cafile"), "{err}");
}

#[tokio::test]
async fn an_https_admission_webhook_is_called_with_admission_webhook_cafile() {
    let router = Router::new().route(
        "/admit",
        post(|body: axum::body::Bytes| async move {
            let req: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let decision = if req["pod"] == "web" {
                "admit"
            } else {
                "refuse"
            };
            axum::Json(serde_json::json!({"decision": decision, "reason": "not web"}))
        }),
    );
    let addr = tls_server(router).await;
    let url = format!("https://127.0.0.1:{}/admit", addr.port());
    let tls = framework::hardening::webhook_tls(Some(&fixture("ca.pem")))
        .unwrap()
        .unwrap();
    let hook = WebhookHook::with_tls(url.clone(), tls);
    let req = Request {
        pod: "web".into(),
        namespace: "default".into(),
        ..Request::default()
    };
    assert_eq!(hook.admit(&req).await, Ok(Decision::Admit));
    let other = Request {
        pod: "db".into(),
        ..req.clone()
    };
    assert_eq!(
        hook.admit(&other).await,
        Ok(Decision::Refuse("not web".into()))
    );
    // Another CA: the hook errs (unreachable), it does not fall back to http.
    let other_ca = framework::hardening::webhook_tls(Some(&fixture("other-ca.pem")))
        .unwrap()
        .unwrap();
    let untrusted = WebhookHook::with_tls(url.clone(), other_ca);
    assert!(untrusted.admit(&req).await.is_err());
    assert!(
        WebhookHook::new(url).admit(&req).await.is_err(),
        "https needs the CA file"
    );
}
