//! CronJobs with the real kubectl on simulated agents, their ticks driven by an
//! injected clock (moved a minute at a time, never slept through): one Job per tick
//! named from the tick, `concurrencyPolicy: Forbid` skipping a tick while the last
//! Job runs and `Replace` replacing it, `suspend`, `kubectl create job --from`, and
//! the history limits, which delete the oldest finished Jobs only once they are past
//! the floor and never bring a tick back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apiserver::{Api, ManualClock};
use common::cluster::*;
use futures::StreamExt as _;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(60);

fn cronjob(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: {name}\nspec:\n  schedule: \"* * * * *\"\n{extra}  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: main\n            image: busybox:1.36\n            command: [\"true\"]\n            resources:\n              requests: {{cpu: 10m, memory: 16Mi}}\n"
    )
}

/// A clock standing 10 s past the minute after the real one, and that minute.
fn clock() -> (Arc<ManualClock>, u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let minute = now / 60 + 1;
    let start = UNIX_EPOCH + Duration::from_secs(minute * 60 + 10);
    (Arc::new(ManualClock::new(start)), minute)
}

async fn cluster(clock: &Arc<ManualClock>, task: Option<Duration>) -> framework::app::App {
    let mut cfg = app_config(Setup {
        agents: (0..2)
            .map(|i| agent("cpus:8;mem:16384;ports:[31000-31100]", "", i).simulated(task))
            .collect(),
        ..Setup::default()
    });
    cfg.clock = clock.clone();
    framework::app::App::start(cfg)
        .await
        .expect("mesopod starts")
}

/// The names of the Jobs in `default` not being deleted.
fn jobs(api: &Api) -> BTreeSet<String> {
    api.list_jobs(Some("default"), "")
        .unwrap()
        .items
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter_map(|j| j.metadata.name)
        .collect()
}

async fn jobs_become(api: &Api, want: &[String]) {
    let want: BTreeSet<String> = want.iter().cloned().collect();
    wait_until("the CronJobs' Jobs", T, async || jobs(api), |j| *j == want).await;
}

fn reasons(k_events: &str, reason: &str) -> usize {
    k_events.lines().filter(|l| l.contains(reason)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbid_skips_a_tick_while_its_job_runs_and_replace_replaces_it() {
    let (clock, m) = clock();
    let app = cluster(&clock, None).await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    k.apply(&cronjob("forbid", "  concurrencyPolicy: Forbid\n"))
        .await;
    k.apply(&cronjob("replace", "  concurrencyPolicy: Replace\n"))
        .await;
    k.apply(&cronjob("paused", "  suspend: true\n")).await;
    // No tick yet: nothing runs.
    assert!(jobs(api).is_empty());

    // The next minute: one Job each, named from the tick; the suspended one none.
    clock.advance(Duration::from_secs(60));
    let first = [format!("forbid-{}", m + 1), format!("replace-{}", m + 1)];
    jobs_become(api, &first).await;
    let table = ok(&k.run(&["get", "cronjob", "forbid", "--no-headers"]).await);
    let cols: Vec<&str> = table
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cols[..5],
        ["forbid", "* * * * *", "<none>", "False", "1"],
        "{table}"
    );

    // Another minute, the Jobs still running (simulated tasks never end): Forbid
    // skips the tick, Replace deletes its Job and makes the tick's.
    clock.advance(Duration::from_secs(60));
    let second = [format!("forbid-{}", m + 1), format!("replace-{}", m + 2)];
    jobs_become(api, &second).await;
    let events = ok(&k
        .run(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=CronJob",
        ])
        .await);
    assert!(reasons(&events, "JobAlreadyActive") >= 1, "{events}");
    assert!(
        events.contains(&format!("Deleted job replace-{}", m + 1)),
        "{events}"
    );

    // A run made by hand is no tick of the schedule, and takes no tick's name.
    ok(&k
        .run(&["create", "job", "by-hand", "--from=cronjob/paused"])
        .await);
    let manual = api.get_job("default", "by-hand").unwrap();
    assert_eq!(
        manual.metadata.annotations.unwrap()["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_is_trimmed_past_the_floor_and_no_tick_comes_back() {
    let (clock, m) = clock();
    // Tasks end at once: each tick's Job completes before the next.
    let app = cluster(&clock, Some(Duration::from_millis(50))).await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    // Every Job ever added, by name: a tick brought back would be added twice.
    let mut watch = api
        .watch_jobs(Some("default"), api.resource_version())
        .unwrap();
    let added = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let watcher = tokio::spawn({
        let added = Arc::clone(&added);
        async move {
            while let Some(Ok(ev)) = watch.next().await {
                if ev.kind == apiserver::EventKind::Added {
                    let name = ev.object.metadata.name.unwrap_or_default();
                    added.lock().unwrap().push(name);
                }
            }
        }
    });
    k.apply(&cronjob("hist", "  successfulJobsHistoryLimit: 1\n"))
        .await;
    let complete = |name: String| async move {
        wait_until(
            "the tick's Job complete",
            T,
            async || api.get_job("default", &name).ok(),
            |j| {
                j.as_ref().is_some_and(|j| {
                    j.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Complete"))
                })
            },
        )
        .await;
    };
    for i in 1..=3 {
        clock.advance(Duration::from_secs(60));
        complete(format!("hist-{}", m + i)).await;
    }
    // Three finished Jobs over a limit of one, all inside the floor: all kept.
    assert_eq!(jobs(api).len(), 3);

    // Eleven minutes on: only the latest missed tick runs, and the older Jobs,
    // past the floor now, are trimmed to the limit.
    clock.advance(Duration::from_secs(11 * 60));
    let latest = format!("hist-{}", m + 14);
    complete(latest.clone()).await;
    jobs_become(api, std::slice::from_ref(&latest)).await;
    let cj = api.get_cronjob("default", "hist").unwrap();
    let status = cj.status.unwrap();
    assert!(status.last_successful_time.is_some());
    // A tick deleted by the history was never made again.
    clock.advance(Duration::from_secs(60));
    let last = format!("hist-{}", m + 15);
    complete(last.clone()).await;
    let names = wait_until(
        "the watch to show the last Job",
        T,
        async || added.lock().unwrap().clone(),
        |n| n.contains(&last),
    )
    .await;
    watcher.abort();
    app.shutdown().await;
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "a Job made twice: {names:?}");
    assert_eq!(
        names,
        (1..=3)
            .chain([14, 15])
            .map(|i| format!("hist-{}", m + i))
            .collect::<Vec<_>>()
    );
}
