#![allow(clippy::unwrap_used)]
use super::*;
use mesos::proto::{AgentId, ExecutorId, FrameworkId, TaskId, TaskState};

fn agent_info(id: &str, port: i32) -> AgentInfo {
    AgentInfo {
        hostname: "agent-0".into(),
        port: Some(port),
        id: Some(AgentId::new(id)),
        ..Default::default()
    }
}

fn status(state: TaskState, uuid: u8) -> TaskStatus {
    TaskStatus {
        task_id: Some(TaskId::new("t1")),
        state: state as i32,
        uuid: Some(vec![uuid; 16]),
        data: Some(b"{\"phase\":\"Running\"}".to_vec()),
        ..Default::default()
    }
}

/// Writes one framework with one executor run and one task with an
/// acknowledged and a pending update.
fn write_all(dir: &Path) -> (FrameworkInfo, ExecutorInfo, TaskRecord) {
    write_agent(dir, &agent_info("A-S0", 40123)).unwrap();
    let fw = FrameworkInfo {
        id: Some(FrameworkId::new("F-0000")),
        name: "fw".into(),
        checkpoint: Some(true),
        ..Default::default()
    };
    write_framework(dir, "A-S0", &fw).unwrap();
    let ex = ExecutorInfo {
        executor_id: Some(ExecutorId::new("E")),
        framework_id: fw.id.clone(),
        ..Default::default()
    };
    let e = ExecutorRef::new("A-S0", "F-0000", "E");
    let pid = ProcessId {
        pid: 4242,
        start_time: 777,
    };
    write_executor(dir, e, "C1", &ex, Some(pid)).unwrap();
    mark_subscribed(dir, e, "C1").unwrap();
    let record = TaskRecord {
        task: TaskInfo {
            name: "pod".into(),
            task_id: Some(TaskId::new("t1")),
            ..Default::default()
        },
        role: "*".into(),
        resources: Vec::new(),
    };
    write_task(dir, e, "C1", &record).unwrap();
    let acked = status(TaskState::TaskStarting, 1);
    let pending = [status(TaskState::TaskRunning, 2)];
    write_updates(dir, e, "C1", "t1", Some(&acked), &pending).unwrap();
    (fw, ex, record)
}

#[test]
fn a_checkpoint_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let (fw, ex, record) = write_all(dir.path());
    assert_eq!(
        latest(dir.path())
            .unwrap()
            .get("agent-0")
            .map(String::as_str),
        Some("A-S0")
    );
    let agent = recover_agent(dir.path(), "A-S0").unwrap();
    assert_eq!(agent.info, agent_info("A-S0", 40123));
    assert!(agent.skipped.is_empty());
    assert_eq!(agent.frameworks.len(), 1);
    let f = &agent.frameworks[0];
    assert_eq!(f.info, fw);
    let run = &f.executors[0];
    assert_eq!(run.info, ex);
    assert_eq!(run.container_id, "C1");
    assert_eq!(
        run.pid,
        Some(ProcessId {
            pid: 4242,
            start_time: 777
        })
    );
    assert!(run.subscribed);
    let task = &run.tasks[0];
    assert_eq!(task.record, record);
    assert_eq!(task.latest, Some(status(TaskState::TaskRunning, 2)));
    assert_eq!(
        task.pending,
        vec![status(TaskState::TaskRunning, 2)],
        "the acknowledged update is not pending"
    );
    // Files are written whole: no temporary file is left behind.
    let tdir = dir
        .path()
        .join("meta/slaves/A-S0/frameworks/F-0000/executors/E/runs/C1/tasks/t1");
    let names: Vec<String> = std::fs::read_dir(&tdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");

    // A finished task and an ended executor are forgotten.
    let e = ExecutorRef::new("A-S0", "F-0000", "E");
    remove_task(dir.path(), e, "C1", "t1").unwrap();
    assert!(
        recover_agent(dir.path(), "A-S0").unwrap().frameworks[0].executors[0]
            .tasks
            .is_empty()
    );
    remove_executor(dir.path(), e).unwrap();
    assert!(
        recover_agent(dir.path(), "A-S0").unwrap().frameworks[0]
            .executors
            .is_empty()
    );
}

#[test]
fn a_corrupt_framework_is_skipped_with_its_file_named_and_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path());
    let updates = dir
        .path()
        .join("meta/slaves/A-S0/frameworks/F-0000/executors/E/runs/C1/tasks/t1/task.updates");
    std::fs::write(&updates, "{\"update\": {\"state\": \"TASK_RUNNING\"\n").unwrap();
    let agent = recover_agent(dir.path(), "A-S0").unwrap();
    assert!(agent.frameworks.is_empty(), "starts fresh for it");
    let (fw, err) = &agent.skipped[0];
    assert_eq!(fw, "F-0000");
    let text = err.to_string();
    assert!(text.starts_with("corrupt checkpoint "), "{text}");
    assert!(
        text.contains("task.updates") && text.contains("line 1"),
        "{text}"
    );
    assert!(
        !dir.path()
            .join("meta/slaves/A-S0/frameworks/F-0000")
            .exists()
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("meta/corrupt"))
            .unwrap()
            .count(),
        1
    );
    // Starting fresh: the next read sees no framework and no error.
    let again = recover_agent(dir.path(), "A-S0").unwrap();
    assert!(again.frameworks.is_empty() && again.skipped.is_empty());
}

#[test]
fn a_corrupt_agent_info_or_pid_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path());
    let pid = dir
        .path()
        .join("meta/slaves/A-S0/frameworks/F-0000/executors/E/runs/C1/pids/forked.pid");
    std::fs::write(&pid, "not-a-pid").unwrap();
    let agent = recover_agent(dir.path(), "A-S0").unwrap();
    let text = agent.skipped[0].1.to_string();
    assert!(
        text.contains("forked.pid") && text.contains("<pid> <start time>"),
        "{text}"
    );

    std::fs::write(dir.path().join("meta/slaves/A-S0/slave.info"), "\0garbage").unwrap();
    let err = recover_agent(dir.path(), "A-S0").unwrap_err();
    assert!(err.to_string().contains("slave.info"), "{err}");
    assert!(matches!(
        recover_agent(dir.path(), "no-such-agent"),
        Err(CheckpointError::Read { .. })
    ));
}

#[test]
fn ids_that_would_leave_the_directory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["..", "a/b", ""] {
        let e = ExecutorRef::new("A", "F", bad);
        assert!(matches!(
            write_executor(dir.path(), e, "C", &ExecutorInfo::default(), None),
            Err(CheckpointError::BadId(_))
        ));
    }
}
