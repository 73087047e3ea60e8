//! Three `mesopod` replicas, each its own process, on one real etcd and one standalone
//! `mesopod localmesos`: the leader SIGKILLed while 500 pods are being placed is
//! replaced within its lease and every pod runs, launched once; a leader frozen
//! (SIGSTOP) past its lease and resumed (SIGCONT) writes nothing to etcd and steps
//! down, staying up as a follower; the real kubectl works against every live replica
//! throughout. Needs etcd
//! (`.ci/install-etcd.sh`): skipped without it, failed under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use common::ha::*;
use rustix::process::Signal;
use serde_json::Value;
use testkit::{Kubectl, ok, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_of_the_leader_while_500_pods_are_placed_launches_each_once() {
    let Some(mut cluster) =
        Cluster::start("sigkill_of_the_leader_while_500_pods_are_placed_launches_each_once").await
    else {
        return;
    };
    let leader = cluster.settled(&[0, 1, 2]).await;
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    for r in &cluster.replicas {
        kubectl_works(r, &format!("before-{}", r.proc.id())).await;
    }
    let framework_id = framework_page(&cluster.replicas[leader].api).await["framework_id"].clone();
    assert!(framework_id.is_string(), "{framework_id}");
    // The 500 go in through a follower, in one kubectl that is still creating when
    // the leader dies; the leader places them as they come.
    let via = cluster.replicas[survivors[0]].api.clone();
    let creating = {
        let kubectl = Kubectl::new(&via).timeout(T);
        tokio::spawn(async move {
            kubectl
                .run_stdin(&["create", "-f", "-"], Some(&pods_yaml("load", 500)))
                .await
        })
    };
    // Mid-placement: some pods Running, most not yet.
    let seen = wait_until(
        "the leader to have placed some of the 500",
        T,
        async || running(&via).await.len(),
        |n| *n >= 50,
    )
    .await;
    let killed = Instant::now();
    cluster.replicas[leader].proc.kill().unwrap();
    cluster.replicas[leader].proc.wait().unwrap();

    // kubectl keeps working against both survivors while nobody leads.
    let during = running(&via).await.len();
    assert!(
        during < 500,
        "the SIGKILL came after placement ({during} Running)"
    );
    for &i in &survivors {
        kubectl_works(&cluster.replicas[i], &format!("during-{i}")).await;
    }
    let next = wait_until(
        "a follower to lead",
        T,
        async || {
            let mut pages = Vec::new();
            for &i in &survivors {
                pages.push((i, framework_page(&cluster.replicas[i].api).await));
            }
            pages
        },
        |pages| pages.iter().any(|(_, p)| p["role"] == "leader"),
    )
    .await;
    let took = killed.elapsed();
    // client-go's bound: the Lease is taken once it went unchanged for the lease
    // duration by the follower's clock, which saw the leader's last renewal at most one
    // jittered retry period (×2.2) late, and looks again at most that often.
    let bound = LEASE + RETRY.mul_f64(2.0 * 2.2);
    eprintln!(
        "takeover after SIGKILL: {took:?} (lease duration {LEASE:?}, bound {bound:?}); \
         {seen} Running when killed, {during} just after"
    );
    assert!(
        took <= bound,
        "a follower led {took:?} after the SIGKILL (lease {LEASE:?})"
    );
    // Nor sooner than the lease allows: the last renewal came at most one retry
    // period before the SIGKILL.
    assert!(
        took >= LEASE - RETRY,
        "a follower took a live lease: {took:?} after the SIGKILL (lease {LEASE:?})"
    );
    let new_leader = next
        .iter()
        .find(|(_, p)| p["role"] == "leader")
        .map(|(i, _)| *i)
        .unwrap();
    assert_eq!(cluster.settled(&survivors).await, new_leader);
    ok(&creating.await.unwrap());
    let page = framework_page(&cluster.replicas[new_leader].api).await;
    assert_eq!(
        page["framework_id"], framework_id,
        "the new leader subscribed as the same framework"
    );
    for &i in &survivors {
        kubectl_works(&cluster.replicas[i], &format!("after-{i}")).await;
    }

    // 500 + 3 before + 2 during + 2 after.
    let total = 507;
    let api = cluster.replicas[new_leader].api.clone();
    let (_, all) = wait_until(
        "every pod Running",
        T,
        async || {
            let all = pods(&api).await;
            (Progress::of(&all), Quiet(all))
        },
        |(p, _)| p.failed > 0 || (p.others.is_empty() && p.running == total),
    )
    .await;
    let all = all.0;
    let failed: Vec<(&String, &str)> = all
        .iter()
        .filter(|(_, p)| p.phase == "Failed")
        .map(|(n, p)| (n, p.reason.as_str()))
        .collect();
    assert!(failed.is_empty(), "pods failed (name, reason): {failed:?}");
    assert_eq!(all.len(), total);
    // Each launched once: Mesos knows exactly one task per Running pod, all of one
    // framework, and it is the task the pod names.
    let tasks = mesos_tasks(&cluster.master).await;
    let frameworks: BTreeSet<&str> = tasks.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(frameworks.len(), 1, "{frameworks:?}");
    assert_eq!(
        Some(&Value::from(*frameworks.first().unwrap())),
        Some(&framework_id)
    );
    let ids: BTreeSet<&str> = tasks.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(ids.len(), tasks.len(), "a task id launched twice");
    let running: BTreeSet<&str> = all
        .values()
        .filter(|p| p.phase == "Running")
        .map(|p| p.task.as_str())
        .collect();
    assert_eq!(
        running, ids,
        "each Running pod's task is the one Mesos runs"
    );
    // A pod the killed leader bound, whose ACCEPT it never sent, runs on its node
    // all the same: the master answers its reconciliation TASK_GONE, and the new
    // leader launches it there with a new task (the one it names now, checked above).
    let relaunched = cluster.replicas[new_leader]
        .log()
        .matches("the task never reached Mesos")
        .count();
    eprintln!(
        "{} Running, each launched once; {relaunched} bound by the killed leader before \
         its ACCEPT, launched again on their nodes",
        running.len()
    );
    assert!(
        relaunched <= framework::core::MAX_LAUNCHING,
        "{relaunched} relaunched"
    );
    let _ = &cluster.etcd;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_frozen_past_its_lease_writes_nothing_after_sigcont_and_steps_down() {
    let Some(mut cluster) = Cluster::start(
        "a_leader_frozen_past_its_lease_writes_nothing_after_sigcont_and_steps_down",
    )
    .await
    else {
        return;
    };
    let old = cluster.settled(&[0, 1, 2]).await;
    let api = cluster.replicas[old].api.clone();
    ok(&cluster.replicas[old]
        .kubectl()
        .run_stdin(&["create", "-f", "-"], Some(&pods_yaml("doomed", 5)))
        .await);
    wait_until(
        "five pods Running",
        T,
        async || running(&api).await.len(),
        |n| *n == 5,
    )
    .await;

    // Frozen: another replica takes the lease once it went unchanged for its duration.
    cluster.replicas[old].signal(Signal::STOP);
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    let next = cluster.settled(&others).await;
    let last = others.into_iter().find(|&i| i != next).unwrap();
    // The new leader freezes too, before it can act on what follows; the last
    // replica (a follower) records five deletions whose grace ends in a second, so
    // that a leader's sweep, were one running, would remove those pods.
    cluster.replicas[next].signal(Signal::STOP);
    let names: Vec<String> = (0..5).map(|i| format!("doomed-{i:03}")).collect();
    let mut delete = vec!["delete", "pod", "--grace-period=1", "--wait=false"];
    delete.extend(names.iter().map(String::as_str));
    ok(&cluster.replicas[last].kubectl().run(&delete).await);
    cluster.replicas[last].signal(Signal::STOP);
    let due = SystemTime::now() + Duration::from_millis(1500);
    // A wall-clock deadline, not a condition: the deletions fall due at that time.
    tokio::time::sleep(due.duration_since(SystemTime::now()).unwrap_or_default()).await;
    // Nobody runs now but etcd: any revision from here on is the old leader's.
    let before = etcd_revision(&cluster.etcd.url);

    cluster.replicas[old].signal(Signal::CONT);
    follows_again(&mut cluster, old).await;
    let after = etcd_revision(&cluster.etcd.url);
    let log = cluster.replicas[old].log();
    // It stops on whichever it hears first: its elector's next round (the renew
    // deadline passed while it was frozen) or Mesos telling it the framework failed
    // over to the new leader's subscription.
    assert!(
        log.contains("leaderelection lost") || log.contains("took over this framework"),
        "{log}"
    );
    assert_eq!(
        after, before,
        "the resumed old leader wrote to etcd after losing its lease\n{log}"
    );

    // The last replica resumes; it or the old leader (following afresh) takes over
    // once the frozen new leader's lease went unchanged for its duration, by their own
    // clocks. The new leader, resumed after that, finds its lease gone too and steps
    // down the same way. Nobody was restarted: kubectl works on all three, and the
    // leader's sweep removes the deleted pods.
    cluster.replicas[last].signal(Signal::CONT);
    let leader = cluster.settled(&[old, last]).await;
    cluster.replicas[next].signal(Signal::CONT);
    follows_again(&mut cluster, next).await;
    assert_eq!(cluster.settled(&[0, 1, 2]).await, leader);
    for (i, r) in cluster.replicas.iter().enumerate() {
        kubectl_works(r, &format!("later-{i}")).await;
    }
    let later = wait_until(
        "the deleted pods gone, the new ones Running",
        T,
        async || running(&cluster.replicas[old].api).await,
        |pods| pods.len() == 3 && pods.keys().all(|p| p.starts_with("later-")),
    )
    .await;
    assert_eq!(later.len(), 3);
}

/// Waits until replica `i`, a leader that lost its lease, follows again, still the
/// same process: it stepped down without exiting.
async fn follows_again(cluster: &mut Cluster, i: usize) {
    wait_until(
        "the resumed leader to step down and follow",
        T,
        async || framework_page(&cluster.replicas[i].api).await,
        |page| page["role"] == "follower",
    )
    .await;
    let exited = cluster.replicas[i].proc.try_wait().unwrap();
    assert!(
        exited.is_none(),
        "the old leader exited ({exited:?}) instead of following\n{}",
        cluster.replicas[i].log()
    );
}
