//! The custom executor's side of the executor API, played by the tests: its
//! process, its calls and its event stream, and the agent's sandbox files.

use std::net::SocketAddr;

use crate::common::*;
use localmesos::LocalMesos;
use mesos::codec::Codec;
use mesos::proto::executor::{Call as ExecCall, Event as ExecEvent, call as ecall, event as eev};
use mesos::proto::task_status::Source;
use mesos::proto::{
    CommandInfo, ExecutorId, ExecutorInfo, FrameworkId, TaskId, TaskState, TaskStatus,
};

/// The executor process: records its environment, then waits to be killed.
pub(crate) const EXECUTOR_CMD: &str = "env > env.txt; exec sleep 30";

pub(crate) fn executor_info(id: &str, cmd: &str) -> ExecutorInfo {
    ExecutorInfo {
        executor_id: Some(ExecutorId::new(id)),
        command: Some(CommandInfo {
            value: Some(cmd.into()),
            ..Default::default()
        }),
        resources: res("cpus:0.1;mem:32"),
        ..Default::default()
    }
}

pub(crate) async fn real_cluster(timing: localmesos::Timing) -> LocalMesos {
    cluster(vec![agent("cpus:4;mem:1024", false)], timing).await
}

pub(crate) fn endpoint(cluster: &LocalMesos) -> SocketAddr {
    cluster.state().agents[0].endpoint.unwrap()
}

pub(crate) async fn exec_post(ep: SocketAddr, call: &ExecCall, accept: bool) -> reqwest::Response {
    testkit::init_crypto();
    let mut req = reqwest::Client::new()
        .post(format!("http://{ep}/api/v1/executor"))
        .header("Content-Type", "application/json")
        .body(Codec::Json.encode(call));
    if accept {
        req = req.header("Accept", "application/json");
    }
    req.send().await.unwrap()
}

pub(crate) fn exec_call(fw: &FrameworkId, exec: &str, kind: ecall::Type) -> ExecCall {
    ExecCall {
        executor_id: Some(ExecutorId::new(exec)),
        framework_id: Some(fw.clone()),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

pub(crate) struct ExecStream {
    resp: reqwest::Response,
    dec: mesos::recordio::Decoder,
}

impl ExecStream {
    pub(crate) async fn open(ep: SocketAddr, fw: &FrameworkId, exec: &str) -> ExecStream {
        let mut c = exec_call(fw, exec, ecall::Type::Subscribe);
        c.subscribe = Some(ecall::Subscribe::default());
        let resp = exec_post(ep, &c, true).await;
        assert_eq!(resp.status(), 200);
        ExecStream {
            resp,
            dec: mesos::recordio::Decoder::new(1 << 24),
        }
    }

    pub(crate) async fn next(&mut self) -> Option<ExecEvent> {
        loop {
            if let Some(rec) = self.dec.next_record().unwrap() {
                return Some(Codec::Json.decode(&rec).unwrap());
            }
            match tokio::time::timeout(WAIT, self.resp.chunk())
                .await
                .expect("executor event in time")
            {
                Ok(Some(c)) => self.dec.push(&c),
                _ => return None,
            }
        }
    }

    pub(crate) async fn expect(&mut self, kind: eev::Type) -> ExecEvent {
        loop {
            let ev = self
                .next()
                .await
                .unwrap_or_else(|| panic!("stream ended waiting for {kind}"));
            if ev.kind() == Some(kind) {
                return ev;
            }
        }
    }
}

pub(crate) fn exec_status(task: &str, state: TaskState) -> TaskStatus {
    TaskStatus {
        task_id: Some(TaskId::new(task)),
        state: state as i32,
        source: Some(Source::SourceExecutor as i32),
        uuid: Some(uuid::Uuid::new_v4().as_bytes().to_vec()),
        ..Default::default()
    }
}

pub(crate) async fn update(
    ep: SocketAddr,
    fw: &FrameworkId,
    exec: &str,
    status: TaskStatus,
) -> u16 {
    let mut c = exec_call(fw, exec, ecall::Type::Update);
    c.update = Some(ecall::Update {
        status: Some(status),
    });
    exec_post(ep, &c, false).await.status().as_u16()
}

/// The file's content, or "" while it does not exist.
pub(crate) async fn read_file(ep: SocketAddr, path: &str) -> String {
    let url = format!("http://{ep}/files/read?path={path}&offset=0");
    let resp = reqwest::get(url).await.unwrap();
    if resp.status() == 404 {
        return String::new();
    }
    let v: serde_json::Value = resp.json().await.unwrap();
    v["data"].as_str().unwrap().to_owned()
}
