//! `mesopod bench` as its users run it: one parseable summary line, and a
//! non-zero exit when a run does not place all its pods. (The full-size
//! scenarios are run by hand on a release build; see README.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::process::{Command, Output};

use common::MESOPOD;

fn bench(args: &[&str]) -> Output {
    Command::new(MESOPOD)
        .arg("bench")
        .args(args)
        .output()
        .expect("mesopod runs")
}

/// The summary line's `key=value` fields, in order of appearance.
fn fields(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .skip(1)
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("key=value");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

/// Runs a bench that must succeed; its summary line's fields.
fn bench_fields(args: &[&str]) -> BTreeMap<String, String> {
    let out = bench(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fields(stdout.lines().next().expect("a summary line"))
}

#[test]
fn a_small_run_prints_one_summary_line_with_every_figure() {
    let out = bench(&["--agents", "20", "--pods", "60", "--warmup", "10"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(lines[0].starts_with("bench scenario=basic "), "{stdout}");
    let f = fields(lines[0]);
    let keys: Vec<&str> = f.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "agents",
            "bound_p50_ms",
            "bound_p99_ms",
            "cpu_s",
            "pods",
            "pods_per_s",
            "rss_mib",
            "running_p50_ms",
            "running_p99_ms",
            "scenario",
            "store",
        ]
    );
    assert_eq!((f["agents"].as_str(), f["pods"].as_str()), ("20", "60"));
    let num = |k: &str| f[k].parse::<f64>().unwrap();
    assert!(num("pods_per_s") > 0.0);
    assert!(num("bound_p50_ms") <= num("bound_p99_ms"));
    assert!(num("running_p50_ms") <= num("running_p99_ms"));
    assert!(
        num("bound_p50_ms") <= num("running_p50_ms"),
        "a pod is bound before it runs"
    );
    assert!(num("rss_mib") > 0.0 && num("cpu_s") > 0.0);
}

/// On etcd the line says so, and adds what etcd itself spent over the wave
/// (read from its `/metrics`), since the two share the machine's cores.
#[test]
fn a_run_on_etcd_reports_etcds_own_cpu() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(etcd) = runtime.block_on(testkit::etcd::Etcd::start(
        "a_run_on_etcd_reports_etcds_own_cpu",
    )) else {
        return;
    };
    let out = bench(&[
        "--agents",
        "20",
        "--pods",
        "400",
        "--warmup",
        "10",
        "--etcd-servers",
        etcd.url.as_str(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f = fields(stdout.trim());
    assert_eq!(f["store"], "etcd", "{stdout}");
    // 400 pods are 1,200 etcd txns: well over the 10 ms etcd counts CPU in.
    let etcd_cpu: f64 = f["etcd_cpu_s"].parse().unwrap();
    assert!(etcd_cpu > 0.0 && etcd_cpu < 60.0, "{stdout}");
    // On redb there is no etcd to report.
    let redb = bench(&["--agents", "20", "--pods", "20", "--warmup", "0"]);
    let redb = String::from_utf8_lossy(&redb.stdout);
    assert!(!redb.contains("etcd_cpu_s"), "{redb}");
}

#[test]
fn a_run_that_cannot_place_every_pod_fails() {
    // One agent of 4 cpus holds about 39 pods of 100m next to its executor.
    let out = bench(&[
        "--agents",
        "1",
        "--pods",
        "60",
        "--warmup",
        "0",
        "--timeout",
        "5s",
    ]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("agents=1 pods=60"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("of 60 pods reached Running"), "{stderr}");
}

/// `--quota-namespaces`: the pods spread over tenant namespaces under quotas, every
/// one placed and charged, and the line says how many; the one-workload scenarios
/// refuse it.
#[test]
fn a_run_with_quotas_spreads_its_pods_over_the_tenants() {
    let f = bench_fields(&[
        "--agents",
        "20",
        "--pods",
        "60",
        "--warmup",
        "10",
        "--quota-namespaces",
        "3",
    ]);
    assert_eq!(f["quota_namespaces"], "3");
    assert_eq!(f["pods"], "60");
    let out = bench(&["--scenario", "jobs", "--quota-namespaces", "3"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--quota-namespaces applies to basic, large and constrained"),
        "{stderr}"
    );
}

/// `--scenario preemption`: the agents are filled by low-priority pods, and each
/// high-priority pod takes exactly one of them, as the sizes allow.
#[test]
fn the_preemption_scenario_stops_one_low_pod_per_preemptor() {
    let f = bench_fields(&[
        "--scenario",
        "preemption",
        "--agents",
        "10",
        "--warmup",
        "40",
        "--pods",
        "5",
    ]);
    assert_eq!(f["scenario"], "preemption");
    assert_eq!((f["low"].as_str(), f["pods"].as_str()), ("40", "5"));
    assert_eq!(f["victims"], "5", "{f:?}");
    assert_eq!(f["victims_per_preemptor"], "1.00", "{f:?}");
    assert!(f["running_s"].parse::<f64>().unwrap() > 0.0, "{f:?}");
}

#[test]
fn an_unknown_scenario_is_refused() {
    let out = bench(&["--scenario", "huge"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown scenario"), "{stderr}");
}

/// `--scenario store` writes each pod three times (create, binding, status) and
/// reports the CPU per commit; on etcd also etcd's own, so the two sides of a
/// write can be set beside each other.
#[test]
fn the_store_scenario_reports_cpu_per_commit_on_both_stores() {
    let run = |extra: &[&str]| {
        let out = bench(&[&["--scenario", "store", "--pods", "300"], extra].concat());
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        let f = fields(stdout.trim());
        assert_eq!(f["scenario"], "store");
        assert_eq!((f["pods"].as_str(), f["commits"].as_str()), ("300", "900"));
        let num = |k: &str| f[k].parse::<f64>().unwrap();
        assert!(
            num("commits_per_s") > 0.0 && num("cpu_us_per_commit") > 0.0,
            "{f:?}"
        );
        f
    };
    let redb = run(&[]);
    assert_eq!(redb["store"], "redb");
    assert!(!redb.contains_key("etcd_cpu_us_per_commit"), "{redb:?}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(server) = runtime.block_on(testkit::etcd::Etcd::start(
        "the_store_scenario_reports_cpu_per_commit_on_both_stores",
    )) else {
        return;
    };
    let on_etcd = run(&["--etcd-servers", server.url.as_str()]);
    assert_eq!(on_etcd["store"], "etcd");
    // 900 txns are well over the 10 ms etcd counts CPU in.
    let etcd_side: f64 = on_etcd["etcd_cpu_us_per_commit"].parse().unwrap();
    assert!(etcd_side > 0.0, "{on_etcd:?}");
}

#[test]
fn the_store_scenario_refuses_flags_it_has_no_use_for() {
    let out = bench(&["--scenario", "store", "--agents", "10"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--agents and --warmup do not apply to --scenario store"),
        "{stderr}"
    );
}

/// The controllers' scenarios, small: a Deployment's create and rolling update,
/// and a Job's completions, each one summary line with its figures.
#[test]
fn the_deployment_and_jobs_scenarios_print_their_figures() {
    for (scenario, keys) in [
        (
            "deployment",
            &[
                "create_s",
                "created_s",
                "pods_per_s",
                "running_s",
                "update_ratio",
                "update_s",
            ][..],
        ),
        (
            "jobs",
            &["complete_s", "completions_per_s", "created_s"][..],
        ),
    ] {
        let out = bench(&[
            "--scenario",
            scenario,
            "--agents",
            "20",
            "--pods",
            "40",
            "--warmup",
            "0",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{scenario}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout.lines().next().unwrap_or_default();
        assert!(
            line.starts_with(&format!("bench scenario={scenario} ")),
            "{stdout}"
        );
        let f = fields(line);
        assert_eq!(f["pods"], "40");
        for k in keys {
            let v: f64 = f[*k].parse().unwrap();
            assert!(v > 0.0, "{scenario}: {k}={v} in {line}");
        }
    }
}
