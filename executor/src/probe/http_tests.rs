#![allow(clippy::unwrap_used)]

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::*;

/// A server answering each request by its path; every request's head is
/// sent to the returned channel.
async fn server(answers: Vec<(&'static str, String)>) -> (u16, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = vec![0; 4096];
            let n = s.read(&mut buf).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
            let _ = tx.send(head);
            let answer = answers.iter().find(|(p, _)| *p == path).map_or(
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".into(),
                |(_, a)| a.clone(),
            );
            let _ = s.write_all(answer.as_bytes()).await;
        }
    });
    (port, rx)
}

fn get(port: u16, path: &str) -> HttpGet {
    HttpGet {
        scheme: Scheme::Http,
        host: None,
        port,
        path: path.into(),
        headers: vec![("X-Probe".into(), "yes".into())],
    }
}

const T: Duration = Duration::from_secs(2);

#[tokio::test]
async fn status_codes_redirects_and_headers_are_kubelets() {
    let ok = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_owned();
    let (port, mut heads) = server(vec![
        ("/ok", ok),
        ("/bad", "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n".into()),
        ("/moved", "HTTP/1.1 302 Found\r\nlocation: /ok\r\ncontent-length: 0\r\n\r\n".into()),
        (
            "/away",
            "HTTP/1.1 301 Moved\r\nlocation: http://elsewhere.invalid/x\r\ncontent-length: 4\r\n\r\ngone"
                .into(),
        ),
    ])
    .await;
    assert_eq!(
        probe(&get(port, "/ok"), "127.0.0.1", T).await,
        Outcome::Success
    );
    let head = heads.recv().await.unwrap();
    assert!(head.starts_with("GET /ok HTTP/1.1"), "{head}");
    assert!(
        head.to_lowercase().contains("user-agent: kube-probe/1.33"),
        "{head}"
    );
    assert!(head.to_lowercase().contains("x-probe: yes"), "{head}");
    assert_eq!(
        probe(&get(port, "/bad"), "127.0.0.1", T).await,
        Outcome::Failure("HTTP probe failed with statuscode: 503".into())
    );
    assert_eq!(
        probe(&get(port, "/moved"), "127.0.0.1", T).await,
        Outcome::Success
    );
    assert_eq!(
        probe(&get(port, "/away"), "127.0.0.1", T).await,
        Outcome::Warning("Probe terminated redirects, Response body: gone".into())
    );
}

#[tokio::test]
async fn a_closed_port_and_a_silent_server_fail_with_gos_messages() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepted (by the backlog) but never answered: the timeout speaks.
    let Outcome::Failure(msg) =
        probe(&get(port, "/"), "127.0.0.1", Duration::from_millis(200)).await
    else {
        panic!("a silent server must fail")
    };
    assert!(msg.contains("context deadline exceeded"), "{msg}");
    drop(listener);
    let Outcome::Failure(msg) = probe(&get(port, "/"), "127.0.0.1", T).await else {
        panic!("a closed port must fail")
    };
    assert_eq!(
        msg,
        format!(
            "Get \"http://127.0.0.1:{port}/\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
}
