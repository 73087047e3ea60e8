//! Real agents: command tasks and custom executors as child processes, the
//! executor API (`/api/v1/executor`) with the agent's validation, and the
//! sandbox file routes. The test itself plays the custom executor's HTTP
//! side; the executor process only records its environment and waits.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
mod support;

use std::time::Duration;

use common::*;
use mesos::codec::Codec;
use mesos::proto::executor::{call as ecall, event as eev};
use mesos::proto::scheduler::{Call, call, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{ExecutorId, FrameworkId, TaskState};
use support::*;

#[tokio::test]
async fn command_tasks_run_as_processes_and_report_their_exit() {
    let cluster = real_cluster(fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("cmd", &[])).await;
    let o = sub.offers().await.remove(0);
    let ok = command_task(
        "ok",
        &o,
        "cpus:0.5;mem:32",
        "echo hello from $MESOS_TASK_ID",
    );
    let bad = command_task("bad", &o, "cpus:0.5;mem:32", "echo oops >&2; exit 3");
    sub.launch(&o, vec![ok, bad]).await;
    let mut finals = std::collections::BTreeMap::new();
    while finals.len() < 2 {
        let u = sub.update().await;
        sub.ack(&u).await;
        let s = state_of(&u);
        if s.is_terminal() {
            finals.insert(
                u.task_id.clone().unwrap().value,
                (s, u.message.clone().unwrap_or_default()),
            );
        } else {
            assert!(
                matches!(s, TaskState::TaskStarting | TaskState::TaskRunning),
                "{s}"
            );
        }
    }
    assert_eq!(finals["ok"].0, TaskState::TaskFinished);
    assert_eq!(
        finals["bad"],
        (
            TaskState::TaskFailed,
            "Command exited with status 3".to_owned()
        )
    );
    // The sandbox: stdout and stderr through /files.
    let st = cluster.state();
    let ep = st.agents[0].endpoint.unwrap();
    let sandbox = cluster
        .work_dir()
        .join("slaves")
        .join(&st.agents[0].id)
        .join("frameworks")
        .join(&sub.framework_id.value)
        .join("executors")
        .join("ok");
    let run = std::fs::read_dir(sandbox.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        read_file(ep, &format!("{}/stdout", run.display())).await,
        "hello from ok\n"
    );
    let listing: serde_json::Value =
        reqwest::get(format!("http://{ep}/files/browse?path={}", run.display()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let names: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(
        names.iter().any(|p| p.ends_with("/stdout"))
            && names.iter().any(|p| p.ends_with("/stderr"))
    );
    assert_eq!(listing[0]["mode"].as_str().unwrap().len(), 10);
    // offset=-1 answers the size; a partial read; errors.
    let size: serde_json::Value = reqwest::get(format!(
        "http://{ep}/files/read?path={}/stdout&offset=-1",
        run.display()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(size["offset"], 14);
    let part: serde_json::Value = reqwest::get(format!(
        "http://{ep}/files/read?path={}/stdout&offset=6&length=4",
        run.display()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(part["data"], "from");
    let missing = reqwest::get(format!(
        "http://{ep}/files/read?path={}/nope&offset=0",
        run.display()
    ))
    .await
    .unwrap();
    assert_eq!(missing.status(), 404);
    let outside = reqwest::get(format!("http://{ep}/files/read?path=/etc/passwd&offset=0"))
        .await
        .unwrap();
    assert_eq!(outside.status(), 404);
    // Only sandboxes are attached: not what an executor keeps beside its
    // sandbox (a runtime's state), not the agent's checkpoints, not through a
    // symlink in the sandbox, and no listing above a sandbox.
    let agent_dir = cluster.work_dir().join("slaves").join(&st.agents[0].id);
    let beside = agent_dir.join("runtime-state.json");
    std::fs::write(&beside, "env").unwrap();
    std::os::unix::fs::symlink(&beside, run.join("link")).unwrap();
    for path in [beside.clone(), run.join("link")] {
        let refused = reqwest::get(format!(
            "http://{ep}/files/read?path={}&offset=0",
            path.display()
        ))
        .await
        .unwrap();
        assert_eq!(refused.status(), 404, "{}", path.display());
    }
    let above = reqwest::get(format!(
        "http://{ep}/files/browse?path={}",
        agent_dir.display()
    ))
    .await
    .unwrap();
    assert_eq!(above.status(), 404);
    let no_offset = reqwest::get(format!(
        "http://{ep}/files/read?path={}/stdout",
        run.display()
    ))
    .await
    .unwrap();
    assert_eq!(no_offset.status(), 400);
    cluster.shutdown().await;
}

#[tokio::test]
async fn killing_a_command_task_terminates_its_process() {
    let cluster = real_cluster(fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("kill", &[])).await;
    let o = sub.offers().await.remove(0);
    sub.launch(&o, vec![command_task("s", &o, "cpus:1", "sleep 60")])
        .await;
    // STARTING, then RUNNING once STARTING is acknowledged.
    let starting = sub.update().await;
    assert_eq!(state_of(&starting), TaskState::TaskStarting);
    sub.ack(&starting).await;
    let r = sub.update().await;
    assert_eq!(state_of(&r), TaskState::TaskRunning);
    sub.ack(&r).await;
    sub.kill("s", None).await;
    let k = sub.update().await;
    assert_eq!(state_of(&k), TaskState::TaskKilled);
    cluster.shutdown().await;
}

#[tokio::test]
async fn custom_executor_gets_mesos_env_subscribes_and_drives_its_tasks() {
    let cluster = real_cluster(fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("custom", &[])).await;
    let fw = sub.framework_id.clone();
    let o = sub.offers().await.remove(0);
    let exec = executor_info("e1", EXECUTOR_CMD);
    sub.launch(
        &o,
        vec![executor_task("t1", &o, "cpus:1;mem:64", exec.clone())],
    )
    .await;
    let ep = endpoint(&cluster);

    // The process started in its sandbox with the agent's environment.
    let sandbox = cluster.state().agents[0].executors[0]
        .sandbox
        .clone()
        .unwrap();
    let agent_state = get_json(&format!("http://{ep}/state")).await;
    let listed = &agent_state["frameworks"][0]["executors"][0];
    assert_eq!(listed["id"], "e1");
    assert_eq!(listed["directory"], sandbox.display().to_string());
    assert_eq!(listed["tasks"][0]["id"], "t1");
    let env_path = format!("{}/env.txt", sandbox.display());
    let deadline = tokio::time::Instant::now() + WAIT;
    let env = loop {
        let env = read_file(ep, &env_path).await;
        if env.contains("MESOS_EXECUTOR_ID") || tokio::time::Instant::now() > deadline {
            break env;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for expected in [
        format!("MESOS_FRAMEWORK_ID={}", fw.value),
        "MESOS_EXECUTOR_ID=e1".to_owned(),
        format!("MESOS_DIRECTORY={}", sandbox.display()),
        format!("MESOS_SANDBOX={}", sandbox.display()),
        format!("MESOS_AGENT_ENDPOINT={ep}"),
        "MESOS_CHECKPOINT=0".to_owned(),
        "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD=".to_owned(),
    ] {
        assert!(
            env.lines().any(|l| l.starts_with(&expected)),
            "missing {expected} in\n{env}"
        );
    }

    // Before SUBSCRIBE: 403. Unknown executor or framework: 400.
    assert_eq!(
        update(ep, &fw, "e1", exec_status("t1", TaskState::TaskRunning)).await,
        403
    );
    assert_eq!(
        update(ep, &fw, "nope", exec_status("t1", TaskState::TaskRunning)).await,
        400
    );
    assert_eq!(
        update(
            ep,
            &FrameworkId::new("nope"),
            "e1",
            exec_status("t1", TaskState::TaskRunning)
        )
        .await,
        400
    );

    let mut es = ExecStream::open(ep, &fw, "e1").await;
    let subscribed = es.expect(eev::Type::Subscribed).await.subscribed.unwrap();
    assert_eq!(
        subscribed.executor_info.unwrap().executor_id,
        exec.executor_id
    );
    assert_eq!(subscribed.framework_info.unwrap().id, Some(fw.clone()));
    assert_eq!(subscribed.agent_info.unwrap().id, o.agent_id);
    let launch = es.expect(eev::Type::Launch).await;
    assert_eq!(
        launch.launch.unwrap().task.unwrap().task_id.unwrap().value,
        "t1"
    );

    // The agent's UPDATE validation.
    let mut no_uuid = exec_status("t1", TaskState::TaskRunning);
    no_uuid.uuid = None;
    assert_eq!(update(ep, &fw, "e1", no_uuid).await, 400);
    let mut bad_uuid = exec_status("t1", TaskState::TaskRunning);
    bad_uuid.uuid = Some(vec![1, 2, 3]);
    assert_eq!(update(ep, &fw, "e1", bad_uuid).await, 400);
    let mut bad_source = exec_status("t1", TaskState::TaskRunning);
    bad_source.source = Some(Source::SourceMaster as i32);
    assert_eq!(update(ep, &fw, "e1", bad_source).await, 400);
    assert_eq!(
        update(ep, &fw, "e1", exec_status("t1", TaskState::TaskStaging)).await,
        400
    );
    let mut other_exec = exec_status("t1", TaskState::TaskRunning);
    other_exec.executor_id = Some(ExecutorId::new("e2"));
    assert_eq!(update(ep, &fw, "e1", other_exec).await, 400);

    // A good update: ACKNOWLEDGED to the executor, UPDATE to the scheduler.
    let running = exec_status("t1", TaskState::TaskRunning);
    assert_eq!(update(ep, &fw, "e1", running.clone()).await, 202);
    let acked = es
        .expect(eev::Type::Acknowledged)
        .await
        .acknowledged
        .unwrap();
    assert_eq!(acked.uuid, running.uuid.clone().unwrap());
    let u = sub.update().await;
    assert_eq!(u.uuid, running.uuid);
    assert_eq!(u.agent_id, o.agent_id);
    assert_eq!(u.executor_id, exec.executor_id);
    sub.ack(&u).await;

    // MESSAGE both ways.
    let agent_id = o.agent_id.clone().unwrap();
    sub.call(Call {
        r#type: Some(call::Type::Message as i32),
        message: Some(call::Message {
            agent_id: Some(agent_id.clone()),
            executor_id: exec.executor_id.clone(),
            data: b"ping".to_vec(),
        }),
        ..Default::default()
    })
    .await;
    assert_eq!(
        es.expect(eev::Type::Message).await.message.unwrap().data,
        b"ping"
    );
    let mut m = exec_call(&fw, "e1", ecall::Type::Message);
    m.message = Some(ecall::Message {
        data: b"pong".to_vec(),
    });
    assert_eq!(exec_post(ep, &m, false).await.status(), 202);
    let msg = sub.expect(event::Type::Message).await.message.unwrap();
    assert_eq!(
        (msg.data.as_slice(), msg.executor_id),
        (&b"pong"[..], exec.executor_id.clone())
    );

    // KILL reaches the executor; its terminal update reaches the scheduler.
    sub.kill("t1", None).await;
    let kill = es.expect(eev::Type::Kill).await.kill.unwrap();
    assert_eq!(kill.task_id.unwrap().value, "t1");
    update(ep, &fw, "e1", exec_status("t1", TaskState::TaskKilled)).await;
    let k = sub.update().await;
    assert_eq!(state_of(&k), TaskState::TaskKilled);
    sub.ack(&k).await;

    // A second task reuses the live executor (no new process).
    let o = sub.offers().await.remove(0);
    assert_eq!(o.executor_ids, vec![ExecutorId::new("e1")]);
    sub.launch(
        &o,
        vec![executor_task("t2", &o, "cpus:1;mem:64", exec.clone())],
    )
    .await;
    assert_eq!(
        es.expect(eev::Type::Launch)
            .await
            .launch
            .unwrap()
            .task
            .unwrap()
            .task_id
            .unwrap()
            .value,
        "t2"
    );
    update(ep, &fw, "e1", exec_status("t2", TaskState::TaskRunning)).await;
    let r2 = sub.update().await;
    sub.ack(&r2).await;

    // SHUTDOWN: the event, then the process is killed after the grace period;
    // the task left running is reported, and FAILURE names the executor.
    sub.call(Call {
        r#type: Some(call::Type::Shutdown as i32),
        shutdown: Some(call::Shutdown {
            executor_id: exec.executor_id.clone(),
            agent_id: Some(agent_id),
        }),
        ..Default::default()
    })
    .await;
    es.expect(eev::Type::Shutdown).await;
    let end = sub.update().await;
    assert_eq!(end.task_id.clone().unwrap().value, "t2");
    assert!(state_of(&end).is_terminal());
    assert_eq!(end.reason, Some(Reason::ReasonExecutorTerminated as i32));
    let failure = sub.expect(event::Type::Failure).await.failure.unwrap();
    assert_eq!(failure.executor_id, exec.executor_id);
    eventually(|| cluster.state().agents[0].used.is_empty()).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_executor_that_dies_fails_its_tasks_and_frees_resources() {
    let cluster = real_cluster(fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("die", &[])).await;
    let fw = sub.framework_id.clone();
    let o = sub.offers().await.remove(0);
    sub.launch(
        &o,
        vec![executor_task(
            "t",
            &o,
            "cpus:1;mem:64",
            executor_info("e", EXECUTOR_CMD),
        )],
    )
    .await;
    let ep = endpoint(&cluster);
    let mut es = ExecStream::open(ep, &fw, "e").await;
    es.expect(eev::Type::Launch).await;
    update(ep, &fw, "e", exec_status("t", TaskState::TaskRunning)).await;
    let r = sub.update().await;
    sub.ack(&r).await;
    cluster
        .kill_executor(&o.agent_id.clone().unwrap().value, &fw.value, "e")
        .unwrap();
    let u = sub.update().await;
    assert_eq!(
        (state_of(&u), u.reason),
        (
            TaskState::TaskFailed,
            Some(Reason::ReasonExecutorTerminated as i32)
        )
    );
    assert_eq!(u.source, Some(Source::SourceAgent as i32));
    assert!(u.uuid.is_some(), "agent-generated updates are reliable");
    let f = sub.expect(event::Type::Failure).await.failure.unwrap();
    assert_eq!(f.status, Some(9));
    eventually(|| cluster.state().agents[0].used.is_empty()).await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn an_executor_that_never_subscribes_is_killed_and_its_tasks_fail() {
    let mut timing = fast_timing();
    timing.executor_registration_timeout = Duration::from_millis(300);
    let cluster = real_cluster(timing).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Json, framework("reg", &[])).await;
    let o = sub.offers().await.remove(0);
    sub.launch(
        &o,
        vec![executor_task(
            "t",
            &o,
            "cpus:1;mem:64",
            executor_info("e", EXECUTOR_CMD),
        )],
    )
    .await;
    let u = sub.update().await;
    assert_eq!(
        (state_of(&u), u.reason),
        (
            TaskState::TaskFailed,
            Some(Reason::ReasonExecutorRegistrationTimeout as i32)
        )
    );
    eventually(|| {
        cluster.state().agents[0].executors.is_empty() && cluster.state().agents[0].used.is_empty()
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn launch_group_reaches_the_executor_as_one_event() {
    let cluster = real_cluster(fast_timing()).await;
    let mut sub = subscribe(cluster.master_url(), Codec::Protobuf, framework("grp", &[])).await;
    let fw = sub.framework_id.clone();
    let o = sub.offers().await.remove(0);
    let mut exec = executor_info("ge", EXECUTOR_CMD);
    exec.r#type = Some(mesos::proto::executor_info::Type::Custom as i32);
    let mut t1 = executor_task("g1", &o, "cpus:0.5", exec.clone());
    let mut t2 = executor_task("g2", &o, "cpus:0.5", exec.clone());
    t1.executor = None;
    t2.executor = None;
    let op = mesos::proto::offer::Operation {
        r#type: Some(mesos::proto::offer::operation::Type::LaunchGroup as i32),
        launch_group: Some(mesos::proto::offer::operation::LaunchGroup {
            executor: Some(exec),
            task_group: Some(mesos::proto::TaskGroupInfo {
                tasks: vec![t1, t2],
            }),
        }),
        ..Default::default()
    };
    sub.accept(vec![o.id.clone().unwrap()], vec![op], None)
        .await;
    let ep = endpoint(&cluster);
    let mut es = ExecStream::open(ep, &fw, "ge").await;
    let lg = es
        .expect(eev::Type::LaunchGroup)
        .await
        .launch_group
        .unwrap();
    let ids: Vec<String> = lg
        .task_group
        .unwrap()
        .tasks
        .into_iter()
        .map(|t| t.task_id.unwrap().value)
        .collect();
    assert_eq!(ids, vec!["g1", "g2"]);
    cluster.shutdown().await;
}
