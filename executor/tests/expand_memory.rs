//! The expansion bomb against the real environment resolver, in a
//! test binary of its own so this process' peak RSS (`VmHWM`) is the
//! resolver's: 18 variables each twice the one before would reach 512 MiB
//! in the last one (1 GiB in all); the bounded expansion stops at the first
//! one past `MAX_ARG_STRLEN`, having allocated a few hundred KiB.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use executor::objects::NoObjects;
use executor::pod::{ExecLimits, PodContext, PodPlan, resolve};
use futures::FutureExt as _;
use serde_json::json;

/// This process' peak resident set, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmHWM in /proc/self/status");
    kib * 1024
}

#[test]
fn a_doubling_chain_of_18_variables_fails_early_with_small_peak_memory() {
    let mut env = vec![json!({"name": "V0", "value": "x".repeat(4096)})];
    for i in 1..18 {
        env.push(json!({"name": format!("V{i}"), "value": format!("$(V{})$(V{})", i - 1, i - 1)}));
    }
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "bomb", "namespace": "default", "uid": "u-1"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                  "command": ["sh", "-c", "echo $(V17)"], "env": env}]}
    }))
    .unwrap();
    let plan = PodPlan::from_pod(pod).unwrap();
    let cx = PodContext {
        pod: &plan.pod,
        key: &plan.key,
        node_name: "node-a",
        host_ip: "10.0.0.5",
        pod_ip: "10.0.0.5",
        containers: &plan.containers,
    };
    let before = peak_rss();
    let result = resolve(
        &plan.containers[0],
        &cx,
        &NoObjects,
        ExecLimits::of_this_process(),
    )
    .now_or_never()
    .expect("no objects to wait for");
    let grew = peak_rss().saturating_sub(before);
    assert_eq!(
        result.unwrap_err(),
        "env var \"V5\" would be longer than 131072 bytes, the most the kernel takes in one string (MAX_ARG_STRLEN)"
    );
    assert!(
        grew < 8 << 20,
        "peak RSS grew by {grew} bytes while resolving"
    );
}
