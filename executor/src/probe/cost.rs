//! The probe benchmark: 500 containers' readiness probes (httpGet, every
//! second) against busybox httpd for a minute, and the CPU time this
//! process (the prober's side) spent. Run with
//! `cargo test -p executor --lib probe::cost -- --ignored --nocapture`
//! (`PROBE_BENCH_HANDLER=tcp` for tcpSocket probes, `PROBE_BENCH_SECS`
//! for another duration). The figure is for the build it runs in: a debug
//! build costs several times what a release build does.

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::sync::mpsc;

use super::exec::NoExec;
use super::spec::HttpGet;
use super::worker::{Context, Observed, start};
use super::{Handler, ProbeKind, ProbeSpec, Scheme};

/// User plus system CPU time of this process (`/proc/self/stat`).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the whole line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // /proc counts in USER_HZ, 100 on every Linux ABI.
    Duration::from_millis(ticks * 10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a one-minute benchmark"]
async fn five_hundred_pods_probed_every_second_cost_under_five_percent_of_a_core() {
    const PODS: usize = 500;
    let seconds: u64 = std::env::var("PROBE_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    // The server is busybox's httpd in its own process, so what is measured
    // is the prober's side only (the executor's CPU), not the server's.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("healthz"), "ok").unwrap();
    let mut httpd = std::process::Command::new("/bin/busybox");
    httpd
        .args(["httpd", "-f", "-p", &format!("127.0.0.1:{port}"), "-h"])
        .arg(root.path());
    let Ok(_server) = testkit::ProcessGuard::spawn(&mut httpd) else {
        println!("SKIPPED: the probe benchmark needs /bin/busybox (busybox-static)");
        return;
    };
    let tcp = std::env::var("PROBE_BENCH_HANDLER").as_deref() == Ok("tcp");
    let (tx, mut rx) = mpsc::channel(64);
    let sets: Vec<_> = (0..PODS)
        .map(|i| {
            let spec = ProbeSpec {
                kind: ProbeKind::Readiness,
                handler: if tcp {
                    Handler::Tcp { host: None, port }
                } else {
                    Handler::Http(HttpGet {
                        scheme: Scheme::Http,
                        host: None,
                        port,
                        path: "/healthz".into(),
                        headers: Vec::new(),
                    })
                },
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(1),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 3,
                termination_grace: None,
            };
            // Spread the pods over the second, as containers start at different times.
            let offset = Duration::from_millis((i as u64 * 1000) / PODS as u64);
            start(
                vec![spec],
                Context {
                    container: i,
                    run: 1,
                    host: "127.0.0.1".into(),
                    exec: Arc::new(NoExec(String::new())),
                    started: Arc::new(AtomicBool::new(true)),
                    started_at: tokio::time::Instant::now() + offset,
                    reports: tx.clone(),
                },
            )
        })
        .collect();
    let mut ready = 0;
    while ready < PODS {
        if let Some(r) = rx.recv().await
            && r.what == Observed::Result(true)
        {
            ready += 1;
        }
    }
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let before = cpu_time();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let used = cpu_time() - before;
    let share = used.as_secs_f64() / seconds as f64 * 100.0;
    let what = if tcp { "tcpSocket" } else { "httpGet" };
    println!(
        "probes: {PODS} pods x 1 s {what} for {seconds} s: {used:?} CPU = {share:.2}% of a core"
    );
    drop(sets);
    drain.abort();
    assert!(share < 5.0, "{share:.2}% of a core");
}
