//! Benchmark: the probe budget of issue #19, "one agent runs 500 pods,
//! each with 1 s probes, at under 5% of a core". The executor's own probe
//! worker (`executor::probe::load`) runs 500 readiness probes, one per pod
//! and each against a listener of its own on 127.0.0.1, every second, as
//! the executor runs them: on the probe runtime (`probe::runtime`, one
//! thread), reporting to a task on the executor's runtime (tokio, two
//! workers) as to a pod's supervisor. The listeners live in a
//! child process, so the CPU measured is the prober's alone: this
//! process's user plus system time (`CLOCK_PROCESS_CPUTIME_ID`, the sum
//! `getrusage(RUSAGE_SELF)` gives) per wall second, as a share of one core.
//! Each handler (httpGet, tcpSocket, grpc) is measured over several runs
//! and its median reported; the bench fails if a median reaches 5%, or if
//! a probe failed.
//!
//! `cargo bench -p executor --bench probes` (a release build: the budget is
//! for what ships). `PODS=N`, `SECS=N` (one run's length, 10 s),
//! `RUNS=N` (5) and `HANDLERS=httpGet,tcpSocket,grpc` change the load.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use executor::probe::exec::NoExec;
use executor::probe::load::Load;
use executor::probe::{Handler, HttpGet, ProbeKind, ProbeSpec, Scheme};
use rustix::time::{ClockId, clock_gettime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The child's role: `PROBE_BENCH_SERVE=<handler>:<listeners>`.
const SERVE: &str = "PROBE_BENCH_SERVE";
const BUDGET_PERCENT: f64 = 5.0;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// This process's CPU time, all threads, user and system.
fn cpu_time() -> Duration {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// This process's user and system time apart (`/proc/self/stat`, in
/// USER_HZ ticks of 10 ms): how much of the cost is the kernel's TCP work.
fn user_system() -> (Duration, Duration) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let ticks = |i: usize| Duration::from_millis(f.get(i).copied().unwrap_or(0) * 10);
    // After the command: state [0], ... utime [11], stime [12] (proc(5)).
    (ticks(11), ticks(12))
}

fn spec(handler: &str, port: u16) -> ProbeSpec {
    let handler = match handler {
        "httpGet" => Handler::Http(HttpGet {
            scheme: Scheme::Http,
            host: None,
            port,
            path: "/healthz".into(),
            headers: Vec::new(),
        }),
        "tcpSocket" => Handler::Tcp { host: None, port },
        "grpc" => Handler::Grpc {
            port,
            service: String::new(),
        },
        other => panic!("no handler {other:?}: httpGet, tcpSocket or grpc"),
    };
    ProbeSpec {
        kind: ProbeKind::Readiness,
        handler,
        initial_delay: Duration::ZERO,
        period: Duration::from_secs(1),
        timeout: Duration::from_secs(1),
        success_threshold: 1,
        failure_threshold: 3,
        termination_grace: None,
    }
}

/// The listeners' process: prints its ports on one line, then the number
/// of connections it accepted, once a second.
fn serve(role: &str) {
    let (handler, n) = role.split_once(':').expect("handler:listeners");
    let (handler, n) = (handler.to_owned(), n.parse::<usize>().expect("a count"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let accepted = Arc::new(AtomicU64::new(0));
        let mut ports = Vec::new();
        for _ in 0..n {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            ports.push(l.local_addr().unwrap().port().to_string());
            let (accepted, handler) = (Arc::clone(&accepted), handler.clone());
            tokio::spawn(async move {
                while let Ok((s, _)) = l.accept().await {
                    accepted.fetch_add(1, Ordering::Relaxed);
                    match handler.as_str() {
                        "httpGet" => drop(tokio::spawn(http_answer(s))),
                        "grpc" => drop(tokio::spawn(grpc_answer(s))),
                        _ => drop(s),
                    }
                }
            });
        }
        let mut out = std::io::stdout();
        writeln!(out, "{}", ports.join(" ")).unwrap();
        out.flush().unwrap();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if writeln!(out, "{}", accepted.load(Ordering::Relaxed)).is_err() {
                return;
            }
            let _ = out.flush();
        }
    });
}

async fn http_answer(mut s: tokio::net::TcpStream) {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let _ = s
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        .await;
}

async fn grpc_answer(s: tokio::net::TcpStream) {
    use http_body_util::BodyExt;
    let svc = hyper::service::service_fn(|req: http::Request<hyper::body::Incoming>| async move {
        let _ = req.into_body().collect().await;
        // HealthCheckResponse { status: SERVING }, then grpc-status 0.
        let msg = bytes::Bytes::from_static(&[0, 0, 0, 0, 2, 0x08, 1]);
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        let frames = futures::stream::iter([
            Ok::<_, Infallible>(hyper::body::Frame::data(msg)),
            Ok(hyper::body::Frame::trailers(trailers)),
        ]);
        Ok::<_, Infallible>(
            http::Response::builder()
                .header("content-type", "application/grpc")
                .body(http_body_util::StreamBody::new(frames))
                .unwrap(),
        )
    });
    let _ = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
        .await;
}

/// One handler's figures: the share of a core in each run, and the
/// probes answered per second over all runs.
struct Figures {
    shares: Vec<f64>,
    /// Medians of the user and the system (kernel) share.
    user: f64,
    system: f64,
    per_second: f64,
    failures: u64,
    last_failure: Option<String>,
}

fn measure(
    rt: &tokio::runtime::Runtime,
    handler: &str,
    pods: usize,
    secs: u64,
    runs: usize,
) -> Figures {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.env(SERVE, format!("{handler}:{pods}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    let mut server = testkit::ProcessGuard::spawn(&mut cmd).expect("the listeners' process");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let ports: Vec<u16> = (lines.next().unwrap().unwrap().split(' '))
        .map(|p| p.parse().unwrap())
        .collect();
    // The server's count, read on a thread that wakes once a second.
    let accepted = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            counted.store(line.trim().parse().unwrap_or(0), Ordering::Relaxed);
        }
    });
    let specs = ports.iter().map(|&p| spec(handler, p)).collect();
    rt.block_on(async {
        let mut load = Load::start(
            specs,
            "127.0.0.1",
            Arc::new(NoExec(String::new())),
            Duration::from_secs(1),
        );
        if tokio::time::timeout(Duration::from_secs(60), load.all_passed())
            .await
            .is_err()
        {
            panic!("the {handler} probes did not all pass within a minute");
        }
        // Settle: the first second's connection setup is not the steady state.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (mut user, mut system) = (Vec::new(), Vec::new());
        let (mut shares, start_count, started) =
            (Vec::new(), accepted.load(Ordering::Relaxed), Instant::now());
        // Attempts that failed while 500 probes started at once do not count.
        let failed_before = load.failures();
        for run in 1..=runs {
            let (cpu0, wall0, (user0, sys0)) = (cpu_time(), Instant::now(), user_system());
            tokio::time::sleep(Duration::from_secs(secs)).await;
            let (cpu, wall, (user1, sys1)) = (cpu_time() - cpu0, wall0.elapsed(), user_system());
            let share = cpu.as_secs_f64() / wall.as_secs_f64() * 100.0;
            let pct = |d: Duration| d.as_secs_f64() / wall.as_secs_f64() * 100.0;
            user.push(pct(user1 - user0));
            system.push(pct(sys1 - sys0));
            println!(
                "  {handler} run {run}/{runs}: {cpu:?} CPU in {wall:.2?} = {share:.2}% of a core"
            );
            shares.push(share);
        }
        // The count is a second behind at most: a window of whole seconds.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let per_second = (accepted.load(Ordering::Relaxed) - start_count) as f64
            / started.elapsed().as_secs_f64();
        Figures {
            shares,
            user: median(user),
            system: median(system),
            per_second,
            failures: load.failures() - failed_before,
            last_failure: load.last_failure(),
        }
    })
}

fn main() {
    if let Ok(role) = std::env::var(SERVE) {
        serve(&role);
        return;
    }
    let pods = env("PODS", 500) as usize;
    let secs = env("SECS", 10).max(1);
    let runs = env("RUNS", 5).max(1) as usize;
    let handlers = std::env::var("HANDLERS").unwrap_or_else(|_| "httpGet,tcpSocket,grpc".into());
    // The executor's runtime (`mesopod executor`): two workers.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let mut over = Vec::new();
    for handler in handlers.split(',') {
        let f = measure(&rt, handler, pods, secs, runs);
        let m = median(f.shares.clone());
        println!(
            "bench probes handler={handler} pods={pods} period_s=1 runs={runs} run_s={secs} \
             build={profile} median_core_percent={m:.2} min={:.2} max={:.2} \
             user_percent={:.1} system_percent={:.1} probes_per_s={:.0} failures={}",
            f.shares.iter().copied().fold(f64::INFINITY, f64::min),
            f.shares.iter().copied().fold(0.0, f64::max),
            f.user,
            f.system,
            f.per_second,
            f.failures,
        );
        if let Some(out) = f.last_failure.as_ref().filter(|_| f.failures > 0) {
            println!("  {handler}: the last failed attempt: {out}");
        }
        if m >= BUDGET_PERCENT || f.failures > 0 {
            over.push(format!("{handler}: {m:.2}%, {} failures", f.failures));
        }
    }
    executor::probe::runtime::shutdown();
    assert!(
        over.is_empty(),
        "over the probe budget ({BUDGET_PERCENT}% of a core, no failures): {over:?}"
    );
}
