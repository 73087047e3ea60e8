//! A Job's syncs driven step by step through the simulated world of
//! [`super::sim`]: the API applies what each sync asks for, the kubelet
//! moves pods when a test says so, and `now` advances by hand.

#![allow(unused_must_use)] // `step()` applies what it returns.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::sim::{World, job, phase, spec};
use super::*;
use crate::Status;

fn secs(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n))
}

fn cond(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> (String, String, String, String) {
    (type_.into(), status.into(), reason.into(), message.into())
}

/// Runs the world's pending pods and lets the oldest running `n` exit with
/// `code`.
fn finish_oldest(w: &mut World, n: usize, code: i32) -> Vec<String> {
    w.run_all();
    let running: Vec<String> = w
        .pods
        .iter()
        .filter(|p| phase(p) == "Running" && p.metadata.deletion_timestamp.is_none())
        .take(n)
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    for name in &running {
        w.exit(name, code);
    }
    running
}

#[test]
fn five_completions_two_at_a_time_complete_with_exact_counts_across_a_restart() {
    let mut w = World::new(job(Some(5), 2));
    let first = w.step();
    assert_eq!(first.reconciled.pod_creations(), 2);
    let s = w.status();
    assert_eq!(s.active, Some(2));
    assert_eq!(s.ready, Some(0));
    assert_eq!(s.terminating, Some(0));
    assert!(s.start_time.is_some());
    assert_eq!(w.settle(3), 0, "a steady state asks for nothing");

    let mut syncs = 0;
    while !w.finished() {
        syncs += 1;
        assert!(syncs < 60, "no end: {:?}", w.status());
        if !w.active().is_empty() {
            finish_oldest(&mut w, 1, 0);
        }
        w.step();
        assert!(w.active().len() <= 2, "more than parallelism active");
        // A restart: the runner forgets everything and reconciles from
        // what the API holds; nothing is counted twice.
        w.finalizers = FinalizerExpectations::new();
        w.backoff = BackoffRecord::rebuild(&w.job, &w.pods.iter().collect::<Vec<_>>());
        assert_eq!(w.sync(), w.sync(), "same inputs, same calls");
        assert!(w.status().succeeded.unwrap_or(0) <= 5, "{:?}", w.status());
    }
    let s = w.status();
    assert_eq!(s.succeeded, Some(5));
    assert_eq!(s.failed, None);
    assert_eq!(s.active, None);
    assert_eq!(w.created.len(), 5);
    assert!(s.completion_time.is_some());
    assert_eq!(
        w.conditions(),
        [
            cond(
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods"
            ),
            cond(
                "Complete",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods"
            ),
        ]
    );
    assert_eq!(
        w.event_log(),
        [("Completed".to_owned(), "Job completed".to_owned())]
    );
    assert!(w.pods.iter().all(|p| !pods::has_tracking_finalizer(p)));
    assert_eq!(
        w.sync().reconciled,
        Reconciled::default(),
        "a finished Job rests"
    );
}

#[test]
fn each_finished_pod_goes_through_uncounted_then_its_finalizer_then_the_counter() {
    let mut w = World::new(job(Some(1), 1));
    w.step();
    let name = w.created[0].clone();
    w.run(&name);
    w.exit(&name, 0);
    let uid = w.pod(&name).metadata.uid.clone().unwrap_or_default();

    let s = w.sync();
    let kinds: Vec<&str> = s
        .reconciled
        .actions
        .iter()
        .map(|a| match a {
            Action::WriteStatus(_) => "status",
            Action::RemovePodFinalizer { .. } => "finalizer",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["status", "finalizer"],
        "the status records the pod first"
    );
    assert_eq!(
        s.reconciled.finalizer_removals().collect::<Vec<_>>(),
        [uid.as_str()]
    );
    w.apply(&s);
    let st = w.status();
    let uncounted = st.uncounted_terminated_pods.clone().unwrap_or_default();
    assert_eq!(uncounted.succeeded, Some(vec![uid.clone()]));
    assert_eq!(st.succeeded, None);
    assert!(w.condition("SuccessCriteriaMet").is_some());
    assert!(
        w.condition("Complete").is_none(),
        "not before the pod is counted"
    );

    w.step();
    let st = w.status();
    assert_eq!(st.succeeded, Some(1));
    assert_eq!(
        st.uncounted_terminated_pods.unwrap_or_default().succeeded,
        None
    );
    assert!(w.finished());
}

#[test]
fn a_status_write_that_failed_is_redone_and_counts_nothing_twice() {
    let mut w = World::new(job(Some(2), 2));
    w.step();
    finish_oldest(&mut w, 1, 0);
    let planned = w.sync();
    // The runner's status write failed: nothing of this sync happened.
    assert_eq!(w.sync(), planned, "same inputs, same calls");
    w.apply(&planned);
    // The finalizer patch failed after the status went through: the next
    // sync removes it again and counts nothing yet.
    let name = w.created[0].clone();
    w.pods
        .iter_mut()
        .filter(|p| p.metadata.name.as_deref() == Some(name.as_str()))
        .for_each(|p| {
            p.metadata
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(JOB_TRACKING_FINALIZER.into())
        });
    let again = w.sync();
    assert!(again.reconciled.status().is_none(), "{again:?}");
    assert_eq!(again.reconciled.finalizer_removals().count(), 1);
    w.apply(&again);
    w.step();
    assert_eq!(w.status().succeeded, Some(1));
    w.step();
    assert_eq!(w.status().succeeded, Some(1));
}

#[test]
fn a_lagging_pod_cache_does_not_count_a_pod_twice() {
    let mut w = World::new(job(Some(3), 1));
    w.step();
    finish_oldest(&mut w, 1, 0);
    // The cache as it is now: the pod finished, with its finalizer.
    let stale: Vec<Pod> = w.pods.clone();
    let s = w.sync();
    w.finalizers
        .expect_removals("ns/pi", s.reconciled.finalizer_removals());
    w.apply(&s);
    w.step(); // counted
    assert_eq!(w.status().succeeded, Some(1));
    // The Job's cache is current, the pods' still shows the finalizer; the
    // removal is pending, so the pod is not taken for a new one.
    let lagging = w.sync_with(&stale.iter().collect::<Vec<_>>());
    let st = match lagging.reconciled.status() {
        Some(Status::Job(s)) => s.clone(),
        _ => w.status(),
    };
    assert_eq!(st.succeeded, Some(1));
    assert_eq!(
        st.uncounted_terminated_pods.unwrap_or_default().succeeded,
        None
    );
    assert_eq!(lagging.reconciled.finalizer_removals().count(), 0);
}

#[test]
fn backoff_limit_fails_the_job_after_delays_that_double() {
    let mut j = job(Some(1), 1);
    spec(&mut j).backoff_limit = Some(3);
    let mut w = World::new(j);
    w.step();
    let mut delays = Vec::new();
    for _ in 0..4 {
        finish_oldest(&mut w, 1, 1);
        // The failure is recorded; no replacement before the backoff ends.
        let s = w.step();
        assert_eq!(s.reconciled.pod_creations(), 0);
        if w.condition("FailureTarget").is_some() {
            break;
        }
        delays.push(s.reconciled.requeue_after);
        w.step(); // counted
        let wait = w.sync().reconciled.requeue_after.unwrap_or_default();
        assert_eq!(w.sync().reconciled.pod_creations(), 0);
        w.advance(i64::try_from(wait.as_secs()).unwrap_or(0));
        assert_eq!(
            w.step().reconciled.pod_creations(),
            1,
            "created once the backoff ends"
        );
    }
    assert_eq!(delays, [secs(10), secs(20), secs(40)]);
    w.settle(5);
    assert_eq!(w.status().failed, Some(4));
    assert_eq!(
        w.conditions(),
        [
            cond(
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit"
            ),
            cond(
                "Failed",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit"
            ),
        ]
    );
    assert_eq!(
        w.events
            .last()
            .map(|e| (e.type_, e.reason.as_str(), e.message.as_str())),
        Some((
            crate::EventType::Warning,
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit"
        ))
    );
    assert!(w.status().completion_time.is_none());
}

#[test]
fn the_backoff_is_capped_at_ten_minutes_and_survives_a_restart() {
    let mut j = job(Some(1), 1);
    spec(&mut j).backoff_limit = Some(100);
    let mut w = World::new(j);
    w.step();
    for n in 1..=9 {
        finish_oldest(&mut w, 1, 1);
        w.step();
        w.step();
        let wait = w.sync().reconciled.requeue_after;
        let want = delay_after(n);
        assert_eq!(wait, Some(want));
        // A restart keeps the delay: the record is rebuilt from the pods.
        w.backoff = BackoffRecord::rebuild(&w.job, &w.pods.iter().collect::<Vec<_>>());
        assert_eq!(w.sync().reconciled.requeue_after, Some(want));
        w.advance(i64::try_from(want.as_secs()).unwrap_or(0));
        assert_eq!(w.step().reconciled.pod_creations(), 1);
    }
    assert_eq!(delay_after(9), Duration::from_secs(600));
}

#[test]
fn a_success_resets_the_backoff() {
    let mut w = World::new(job(Some(3), 1));
    w.step();
    finish_oldest(&mut w, 1, 1);
    w.step();
    assert_eq!(w.backoff.failures_after_last_success, 1);
    w.advance(10);
    w.step();
    finish_oldest(&mut w, 1, 0);
    let s = w.step();
    assert_eq!(w.backoff.failures_after_last_success, 0);
    assert_eq!(s.reconciled.pod_creations(), 1, "no delay after a success");
}

#[test]
fn indexed_pods_run_each_index_once_and_know_their_index() {
    let mut j = job(Some(3), 2);
    spec(&mut j).completion_mode = Some("Indexed".into());
    let mut w = World::new(j);
    let s = w.step();
    let made: Vec<&Pod> = s
        .reconciled
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { pod } => Some(pod),
            _ => None,
        })
        .collect();
    assert_eq!(made.len(), 2);
    for (i, p) in made.iter().enumerate() {
        let ix = i.to_string();
        let m = &p.metadata;
        assert_eq!(
            m.generate_name.as_deref(),
            Some(format!("pi-{i}-").as_str())
        );
        assert_eq!(
            m.annotations
                .as_ref()
                .and_then(|a| a.get(COMPLETION_INDEX_ANNOTATION)),
            Some(&ix)
        );
        assert_eq!(
            m.labels
                .as_ref()
                .and_then(|a| a.get(COMPLETION_INDEX_ANNOTATION)),
            Some(&ix)
        );
        assert_eq!(m.finalizers, Some(vec![JOB_TRACKING_FINALIZER.to_owned()]));
        let r = m.owner_references.clone().unwrap_or_default();
        assert_eq!(
            (
                r[0].kind.as_str(),
                r[0].controller,
                r[0].block_owner_deletion
            ),
            ("Job", Some(true), Some(true))
        );
        let ps = p.spec.clone().unwrap_or_default();
        assert_eq!(ps.hostname, Some(format!("pi-{i}")));
        assert_eq!(ps.subdomain, None);
        let env = ps.containers[0].env.clone().unwrap_or_default();
        assert_eq!(env[0].name, "JOB_COMPLETION_INDEX");
        assert_eq!(
            env[0]
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .map(|f| f.field_path.as_str()),
            Some("metadata.labels['batch.kubernetes.io/job-completion-index']")
        );
    }
    // Index 1 succeeds first, then 0 fails once and is run again.
    w.run_all();
    let one = w.created[1].clone();
    w.exit(&one, 0);
    w.step();
    let s = w.step();
    assert_eq!(w.status().completed_indexes.as_deref(), Some("1"));
    assert_eq!(
        s.reconciled.pod_creations(),
        0,
        "index 2 after the count settles"
    );
    let s = w.step();
    let _ = s;
    let zero = w.created[0].clone();
    w.run_all();
    w.exit(&zero, 1);
    w.settle(5);
    w.advance(10);
    w.settle(5);
    let mut started: Vec<String> = w.created.clone();
    started.sort();
    assert_eq!(started.len(), 4, "{started:?}");
    w.run_all();
    for n in w.active() {
        w.exit(&n, 0);
    }
    w.settle(5);
    let st = w.status();
    assert_eq!(st.completed_indexes.as_deref(), Some("0-2"));
    assert_eq!(st.succeeded, Some(3));
    assert_eq!(st.failed, Some(1));
    assert!(w.finished());
    let per_index: Vec<String> = w
        .created
        .iter()
        .map(|n| {
            n.rsplit_once('-')
                .map(|x| x.0)
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(per_index, ["pi-0", "pi-1", "pi-2", "pi-0"]);
}

#[test]
fn completed_indexes_compress_runs_of_three_or_more() {
    let mut j = job(Some(8), 8);
    spec(&mut j).completion_mode = Some("Indexed".into());
    let mut w = World::new(j);
    w.step();
    w.run_all();
    for i in [1usize, 3, 4, 5, 7] {
        let n = w.created[i].clone();
        w.exit(&n, 0);
    }
    w.step();
    assert_eq!(w.status().completed_indexes.as_deref(), Some("1,3-5,7"));
    assert_eq!(w.status().succeeded, Some(5));
}

#[test]
fn a_template_subdomain_is_kept_for_indexed_pods() {
    let mut j = job(Some(1), 1);
    spec(&mut j).completion_mode = Some("Indexed".into());
    if let Some(ps) = spec(&mut j).template.spec.as_mut() {
        ps.subdomain = Some("workers".into());
        ps.init_containers = Some(vec![k8s_openapi::api::core::v1::Container {
            name: "init".into(),
            ..Default::default()
        }]);
    }
    let w = World::new(j);
    let s = w.sync();
    let Some(Action::CreatePod { pod }) = s.reconciled.actions.first() else {
        panic!("a create: {s:?}");
    };
    let ps = pod.spec.clone().unwrap_or_default();
    assert_eq!(ps.subdomain.as_deref(), Some("workers"));
    assert_eq!(ps.hostname.as_deref(), Some("pi-0"));
    let init_env = ps.init_containers.unwrap_or_default()[0]
        .env
        .clone()
        .unwrap_or_default();
    assert_eq!(init_env[0].name, "JOB_COMPLETION_INDEX");
}
