//! Serves the shim alone for trying kubectl by hand:
//! `cargo run -p apiserver --example serve -- DATA_DIR [PORT]`, then
//! `kubectl --server http://127.0.0.1:PORT get pods`.
#![allow(missing_docs)]

use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: serve DATA_DIR [PORT]")?;
    let port = args.next().unwrap_or_else(|| "8080".into());
    let api = apiserver::Api::open(&dir, Arc::new(apiserver::NoLogs)).await?;
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    println!("serving on http://{}", listener.local_addr()?);
    apiserver::serve(listener, api).await?;
    Ok(())
}
