//! The executor loop's reliability across failed calls and dropped
//! connections, with and without checkpointing.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::agent::*;
use executor::{ExecutorError, Exit};
use mesos::proto::TaskState;

#[tokio::test]
async fn an_update_whose_call_failed_is_resent_in_the_next_subscribe() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    let marker = h._sandbox.path().join("go");
    let script = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; exit 0",
        marker.display()
    );
    conn.send(Ok(launch("t", simple_pod("r", &script))))
        .unwrap();
    let starting = h.next_status().await;
    conn.send(Ok(ack(&starting))).unwrap();
    let running = h.next_status().await;
    assert_eq!(running.state(), TaskState::TaskRunning);
    // RUNNING is never acknowledged; then calls start failing and FINISHED
    // cannot be delivered; then the stream drops.
    h.reachable.store(false, Ordering::SeqCst);
    std::fs::write(&marker, "").unwrap();
    loop {
        let call = tokio::time::timeout(WAIT, h.lost.recv())
            .await
            .unwrap()
            .unwrap();
        if call.update.unwrap().status.unwrap().state() == TaskState::TaskFinished {
            break;
        }
    }
    drop(conn);
    h.reachable.store(true, Ordering::SeqCst);

    let (sub, conn) = h.subscribe().await;
    let sub = sub.subscribe.unwrap();
    let resent: Vec<TaskState> = sub
        .unacknowledged_updates
        .iter()
        .map(|u| u.status.as_ref().unwrap().state())
        .collect();
    assert_eq!(
        resent,
        vec![TaskState::TaskRunning, TaskState::TaskFinished]
    );
    assert_eq!(
        sub.unacknowledged_updates[0].status.as_ref().unwrap().uuid,
        running.uuid
    );
    assert!(
        sub.unacknowledged_tasks.is_empty(),
        "STARTING's ack acknowledged the task"
    );

    for u in &sub.unacknowledged_updates {
        conn.send(Ok(ack(u.status.as_ref().unwrap()))).unwrap();
    }
    conn.send(Ok(shutdown())).unwrap();
    assert_eq!(ended(h.run).await, Ok(Exit::Shutdown));
    assert!(
        h.calls.try_recv().is_err(),
        "updates resent in SUBSCRIBE are not sent twice"
    );
}

#[tokio::test]
async fn a_failed_update_is_retried_in_order_while_the_subscription_stays_up() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    let done = h._sandbox.path().join("done");
    // Every UPDATE call fails from now on; the stream stays open.
    h.reachable.store(false, Ordering::SeqCst);
    conn.send(Ok(launch(
        "t",
        simple_pod("q", &format!("touch {}", done.display())),
    )))
    .unwrap();
    // The queue blocks on its head: only STARTING is tried, again and again.
    for _ in 0..2 {
        let call = tokio::time::timeout(WAIT, h.lost.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            call.update.unwrap().status.unwrap().state(),
            TaskState::TaskStarting
        );
    }
    tokio::time::timeout(WAIT, async {
        while !done.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    h.reachable.store(true, Ordering::SeqCst);
    assert_eq!(h.next_status().await.state(), TaskState::TaskStarting);
    assert_eq!(h.next_status().await.state(), TaskState::TaskRunning);
    assert_eq!(h.next_status().await.state(), TaskState::TaskFinished);
    assert!(
        h.subscribes.try_recv().is_err(),
        "delivered without a new SUBSCRIBE"
    );
    conn.send(Ok(shutdown())).unwrap();
    ended(h.run).await.unwrap();
}

#[tokio::test]
async fn updates_made_while_disconnected_arrive_exactly_once_after_reconnecting() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    let go = h._sandbox.path().join("go");
    let done = h._sandbox.path().join("done");
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.05; done; touch {done}; exit 0",
        go = go.display(),
        done = done.display()
    );
    conn.send(Ok(launch("t", simple_pod("w", &script))))
        .unwrap();
    h.status_until(TaskState::TaskRunning).await;
    h.reachable.store(false, Ordering::SeqCst);
    drop(conn);
    std::fs::write(&go, "").unwrap();
    tokio::time::timeout(WAIT, async {
        while !done.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    h.reachable.store(true, Ordering::SeqCst);

    // FINISHED comes either inside SUBSCRIBE or as a call right after,
    // depending on when the exit was reaped; never both, never neither.
    let (sub, conn) = h.subscribe().await;
    let mut seen: Vec<TaskState> = sub
        .subscribe
        .unwrap()
        .unacknowledged_updates
        .iter()
        .map(|u| u.status.as_ref().unwrap().state())
        .collect();
    while !seen.contains(&TaskState::TaskFinished) {
        seen.push(h.next_status().await.state());
    }
    assert!(seen.contains(&TaskState::TaskRunning), "{seen:?}");
    conn.send(Ok(shutdown())).unwrap();
    assert_eq!(ended(h.run).await, Ok(Exit::Shutdown));
    while let Ok(call) = h.calls.try_recv() {
        seen.push(call.update.unwrap().status.unwrap().state());
    }
    assert_eq!(
        seen.iter()
            .filter(|s| **s == TaskState::TaskFinished)
            .count(),
        1,
        "{seen:?}"
    );
}

#[tokio::test]
async fn without_checkpointing_a_drop_stops_the_pods_and_exits() {
    let mut h = start(false);
    let (_, conn) = h.subscribe().await;
    let pidfile = h._sandbox.path().join("pid");
    conn.send(Ok(launch(
        "t",
        simple_pod(
            "d",
            &format!("echo $$ > {}; exec sleep 30", pidfile.display()),
        ),
    )))
    .unwrap();
    h.status_until(TaskState::TaskRunning).await;
    tokio::time::timeout(WAIT, async {
        while std::fs::read_to_string(&pidfile)
            .unwrap_or_default()
            .trim()
            .is_empty()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    drop(conn);
    let result = ended(h.run).await;
    assert!(
        matches!(result, Err(ExecutorError::Disconnected(_))),
        "{result:?}"
    );
    // A signalled process dies when next scheduled: poll, bounded.
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.split_whitespace().nth(2) != Some("Z"))
            .unwrap_or(false)
    };
    let gone = tokio::time::timeout(WAIT, async {
        while alive(&pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "the container process {pid} outlived the executor"
    );
}

#[tokio::test]
async fn with_checkpointing_it_gives_up_after_the_recovery_timeout() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    h.reachable.store(false, Ordering::SeqCst);
    drop(conn);
    let started = std::time::Instant::now();
    let result = ended(h.run).await;
    assert!(
        matches!(result, Err(ExecutorError::RecoveryTimeout { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() >= Duration::from_secs(5));
}
