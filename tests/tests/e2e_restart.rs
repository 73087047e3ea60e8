//! End to end across processes: SIGKILL mesopod while pods run, start it
//! again on the same data directory, and check that it rebuilds its
//! registry, reconciles, keeps the pods' status and launches nothing twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::restart::{
    framework_id, get_json, localmesos, reconciled_as, run_sleepers, running_pods, scheduler,
};

fn master_tasks(master: &str) -> Vec<(String, String)> {
    let state = get_json(&format!("{master}/state"));
    let mut out = Vec::new();
    for fw in state["frameworks"].as_array().cloned().unwrap_or_default() {
        let live = fw["tasks"].as_array().cloned().unwrap_or_default();
        let done = fw["completed_tasks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for t in live.into_iter().chain(done) {
            out.push((
                t["id"].as_str().unwrap_or("").to_owned(),
                t["state"].as_str().unwrap_or("").to_owned(),
            ));
        }
    }
    out
}

#[test]
fn sigkill_and_restart_rebuilds_the_registry_and_launches_nothing_twice() {
    let data = tempfile::tempdir().unwrap();
    let (_master, master) = localmesos();
    let (mut first, api) = scheduler(&master, data.path(), &[]);
    let before = run_sleepers(&api, &["keep-a", "keep-b", "keep-c"]);
    let framework_before = framework_id(&api);

    first.kill().unwrap();
    first.wait().unwrap();
    let tasks_before = master_tasks(&master);
    assert_eq!(tasks_before.len(), 3, "{tasks_before:?}");

    let (_second, api) = scheduler(&master, data.path(), &[]);
    reconciled_as(&api, &framework_before, "the framework id is reused");

    let tasks = get_json(&format!("{api}/debug/registry/tasks"));
    let registry: Vec<(String, String)> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_owned(),
                t["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(registry.len(), 3, "{registry:?}");
    assert!(registry.iter().all(|(_, s)| s == "running"), "{registry:?}");
    assert_eq!(
        running_pods(&api),
        before,
        "same pods, same tasks, still Running"
    );
    let tasks_after = master_tasks(&master);
    assert_eq!(
        tasks_after.len(),
        3,
        "nothing launched twice: {tasks_after:?}"
    );
}
