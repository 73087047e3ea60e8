//! The whole Mesos status → task state table, driven through the registry.
//!
//! Rows are the states a task can be in (reached by real update sequences),
//! columns every Mesos `TaskState` (LOST split by source and reason). Each
//! cell is the outcome of one newer update:
//! `P R K U N F` applied, landing in Pending, Running, Killing, Unreachable,
//! Unknown, Finished; `<` refused as a regression (stale); `o` refused as
//! older than the last applied update (stale); `=` absorbed by Finished.
//!
//! The table is run twice: with an update newer than everything applied,
//! and with one older than that (progress still applies, nothing else does).

#![allow(clippy::unwrap_used)]

mod common;

use common::{Update, at, task};
use mesos::proto::TaskState::{self, *};
use mesos::proto::task_status::{Reason, Source};
use registry::{InMemoryRegistry, Registry, StaleReason, State, StatusOutcome};

fn column(name: &str) -> Update {
    let id = mesos::proto::TaskId::new("placeholder");
    let plain = |s: TaskState| Update::new(&id, s);
    let lost = |src: Source, r: Reason| Update::new(&id, TaskLost).source(src).reason(r);
    match name {
        "STAGING" => plain(TaskStaging),
        "STARTING" => plain(TaskStarting),
        "RUNNING" => plain(TaskRunning),
        "KILLING" => plain(TaskKilling),
        "FINISHED" => plain(TaskFinished),
        "FAILED" => plain(TaskFailed),
        "KILLED" => plain(TaskKilled),
        "ERROR" => plain(TaskError),
        "DROPPED" => plain(TaskDropped),
        "GONE" => plain(TaskGone),
        "GONE_BY_OP" => plain(TaskGoneByOperator),
        "UNREACHABLE" => plain(TaskUnreachable).source(Source::SourceMaster),
        "UNKNOWN" => plain(TaskUnknown).source(Source::SourceMaster),
        "LOST" => plain(TaskLost),
        "LOST/removed" => lost(Source::SourceMaster, Reason::ReasonAgentRemoved),
        "LOST/recon" => lost(Source::SourceMaster, Reason::ReasonReconciliation),
        "LOST/offers" => lost(Source::SourceMaster, Reason::ReasonInvalidOffers),
        "LOST/operator" => lost(Source::SourceMaster, Reason::ReasonAgentRemovedByOperator),
        "LOST/agent" => lost(Source::SourceAgent, Reason::ReasonExecutorTerminated),
        other => panic!("no column {other}"),
    }
}

const COLUMNS: [&str; 19] = [
    "STAGING",
    "STARTING",
    "RUNNING",
    "KILLING",
    "FINISHED",
    "FAILED",
    "KILLED",
    "ERROR",
    "DROPPED",
    "GONE",
    "GONE_BY_OP",
    "UNREACHABLE",
    "UNKNOWN",
    "LOST",
    "LOST/removed",
    "LOST/recon",
    "LOST/offers",
    "LOST/operator",
    "LOST/agent",
];

type Row = (&'static str, &'static [&'static str], State, &'static str);

/// (row name, updates that lead there, the state it is in, expected cells)
/// for an update newer than all before it.
#[rustfmt::skip]
const NEWER: [Row; 9] = [
    //                                                                            STAGING STARTING RUNNING KILLING FINISHED FAILED KILLED ERROR DROPPED GONE GONE_BY_OP UNREACHABLE UNKNOWN LOST LOST/removed LOST/recon LOST/offers LOST/operator LOST/agent
    ("new",                       &[],                         State::Pending,     "P P R K F F F F F F F U N U U U F F F"),
    ("staging",                   &["STAGING"],                State::Pending,     "P P R K F F F F F F F U N U U U F F F"),
    ("running",                   &["RUNNING"],                State::Running,     "< < R K F F F F F F F U N U U U F F F"),
    ("killing",                   &["RUNNING", "KILLING"],     State::Killing,     "< < < K F F F F F F F U N U U U F F F"),
    ("unreachable after running", &["RUNNING", "UNREACHABLE"], State::Unreachable, "< < R K F F F F F F F U N U U U F F F"),
    ("unreachable while staging", &["STAGING", "LOST"],        State::Unreachable, "P P R K F F F F F F F U N U U U F F F"),
    ("unknown after running",     &["RUNNING", "UNKNOWN"],     State::Unknown,     "< < R K F F F F F F F U N U U U F F F"),
    ("unknown before running",    &["UNKNOWN"],                State::Unknown,     "P P R K F F F F F F F U N U U U F F F"),
    ("finished",                  &["RUNNING", "FINISHED"],    State::Finished,    "= = = = = = = = = = = = = = = = = = ="),
];

/// The same rows for an update older than the last applied one: progress
/// (towards Running, Killing, Finished) still applies, nothing else does.
#[rustfmt::skip]
const OLDER: [Row; 9] = [
    ("new",                       &[],                         State::Pending,     "P P R K F F F F F F F U N U U U F F F"),
    ("staging",                   &["STAGING"],                State::Pending,     "o o R K F F F F F F F o o o o o F F F"),
    ("running",                   &["RUNNING"],                State::Running,     "< < o K F F F F F F F o o o o o F F F"),
    ("killing",                   &["RUNNING", "KILLING"],     State::Killing,     "< < < o F F F F F F F o o o o o F F F"),
    ("unreachable after running", &["RUNNING", "UNREACHABLE"], State::Unreachable, "< < o o F F F F F F F o o o o o F F F"),
    ("unreachable while staging", &["STAGING", "LOST"],        State::Unreachable, "o o o o F F F F F F F o o o o o F F F"),
    ("unknown after running",     &["RUNNING", "UNKNOWN"],     State::Unknown,     "< < o o F F F F F F F o o o o o F F F"),
    ("unknown before running",    &["UNKNOWN"],                State::Unknown,     "o o o o F F F F F F F o o o o o F F F"),
    ("finished",                  &["RUNNING", "FINISHED"],    State::Finished,    "= = = = = = = = = = = = = = = = = = ="),
];

fn code(outcome: &StatusOutcome) -> char {
    match outcome {
        StatusOutcome::Applied(t) => match t.current {
            State::Pending => 'P',
            State::Running => 'R',
            State::Killing => 'K',
            State::Unreachable => 'U',
            State::Unknown => 'N',
            State::Finished => 'F',
        },
        StatusOutcome::Stale {
            why: StaleReason::Regression { .. },
            ..
        } => '<',
        StatusOutcome::Stale {
            why: StaleReason::OlderThanLastApplied { .. },
            ..
        } => 'o',
        StatusOutcome::Absorbed { .. } => '=',
        _ => '?',
    }
}

fn send(
    reg: &InMemoryRegistry,
    id: &mesos::proto::TaskId,
    col: &str,
    n: u8,
    ts: f64,
) -> StatusOutcome {
    let mut u = column(col).ts(ts).uuid(n);
    u.status.task_id = Some(id.clone());
    reg.update_status(&u.status, at(u64::from(n)))
}

#[test]
fn every_state_against_every_mesos_state_newer() {
    run_table(&NEWER, 100.0);
}

#[test]
fn every_state_against_every_mesos_state_older() {
    // The set-up updates carry timestamps 1.0, 2.0…
    run_table(&OLDER, 0.5);
}

fn run_table(rows: &[Row], ts: f64) {
    let mut failures = Vec::new();
    for &(row, path, state, expected) in rows {
        let expected: Vec<char> = expected
            .split(' ')
            .filter_map(|c| c.chars().next())
            .collect();
        assert_eq!(expected.len(), COLUMNS.len(), "row {row} is malformed");
        for (col, want) in COLUMNS.iter().zip(expected) {
            let reg = InMemoryRegistry::new();
            let t = reg.register(task("ns", "p")).unwrap();
            for (i, step) in path.iter().enumerate() {
                let n = u8::try_from(i + 1).unwrap();
                assert!(
                    matches!(
                        send(&reg, &t.id, step, n, f64::from(n)),
                        StatusOutcome::Applied(_)
                    ),
                    "setting up row {row}: {step}"
                );
            }
            assert_eq!(
                reg.get(&t.id).unwrap().state,
                state,
                "row {row} starts in {state}"
            );
            let outcome = send(&reg, &t.id, col, 100, ts);
            let got = code(&outcome);
            if got != want {
                failures.push(format!(
                    "{row} --{col}--> want {want}, got {got}: {outcome:?}"
                ));
            }
            // Whatever happened, the stored task agrees with the outcome.
            let stored = reg.get(&t.id).unwrap();
            match &outcome {
                StatusOutcome::Applied(tr) => {
                    assert_eq!(tr.previous, state);
                    assert_eq!(stored.state, tr.current);
                    assert_eq!(stored.updated, at(100));
                }
                _ => assert_eq!(stored.state, state, "{row} --{col}--> must not move"),
            }
            // The pod is claimed exactly while its task is live.
            assert_eq!(
                reg.for_pod(&stored.pod_key()).is_some(),
                stored.state.is_live(),
                "{row} --{col}-->"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} cells differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
