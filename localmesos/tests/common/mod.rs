//! Test helpers: a raw HTTP scheduler client (reqwest + `mesos::codec` +
//! RecordIO), so these tests depend on nothing but the wire.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use localmesos::{AgentConfig, Config, LocalMesos, Timing};
use mesos::codec::Codec;
use mesos::proto::framework_info::{Capability, capability};
use mesos::proto::offer::{Operation, operation};
use mesos::proto::scheduler::{Call, Event, call, event};
use mesos::proto::{
    CommandInfo, ExecutorInfo, FrameworkId, FrameworkInfo, Offer, OfferId, Resource, TaskId,
    TaskInfo, TaskState, TaskStatus,
};
use mesos::resources::Resources;

/// How long any single expectation may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// Fast timings: tests never sleep through Mesos' production intervals.
pub fn fast_timing() -> Timing {
    Timing {
        allocation_interval: Duration::from_millis(50),
        status_update_retry_min: Duration::from_millis(300),
        status_update_retry_max: Duration::from_secs(2),
        executor_shutdown_grace: Duration::from_millis(300),
        ..Timing::default()
    }
}

pub fn agent(resources: &str, simulated: bool) -> AgentConfig {
    let a = AgentConfig::from_flags(resources, "", 0).unwrap();
    if simulated { a.simulated(None) } else { a }
}

pub async fn cluster(agents: Vec<AgentConfig>, timing: Timing) -> LocalMesos {
    testkit::init_crypto();
    LocalMesos::start(Config {
        agents,
        timing,
        ..Config::default()
    })
    .await
    .unwrap()
}

pub async fn simulated_cluster(n: usize) -> LocalMesos {
    let agents = (0..n)
        .map(|_| agent("cpus:4;mem:8192;disk:20480;ports:[31000-32000]", true))
        .collect();
    cluster(agents, fast_timing()).await
}

pub fn framework(name: &str, caps: &[capability::Type]) -> FrameworkInfo {
    FrameworkInfo {
        user: "nobody".into(),
        name: name.into(),
        capabilities: caps.iter().map(|c| Capability::of(*c)).collect(),
        ..Default::default()
    }
}

pub fn subscribe_call(info: FrameworkInfo) -> Call {
    Call {
        framework_id: info.id.clone(),
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: Some(info),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A raw POST; returns status, headers and body.
pub async fn post(
    url: &str,
    content_type: Option<&str>,
    accept: Option<&str>,
    stream_id: Option<&str>,
    body: Vec<u8>,
) -> reqwest::Response {
    testkit::init_crypto();
    let mut req = reqwest::Client::new()
        .post(format!("{url}/api/v1/scheduler"))
        .body(body);
    if let Some(ct) = content_type {
        req = req.header("Content-Type", ct);
    }
    if let Some(a) = accept {
        req = req.header("Accept", a);
    }
    if let Some(s) = stream_id {
        req = req.header("Mesos-Stream-Id", s);
    }
    req.send().await.unwrap()
}

/// An open subscription.
pub struct Sub {
    pub url: String,
    pub codec: Codec,
    pub stream_id: String,
    pub framework_id: FrameworkId,
    resp: reqwest::Response,
    decoder: mesos::recordio::Decoder,
    pub subscribed: event::Subscribed,
}

pub async fn subscribe(url: &str, codec: Codec, info: FrameworkInfo) -> Sub {
    let resp = post(
        url,
        Some(codec.content_type()),
        Some(codec.content_type()),
        None,
        codec.encode(&subscribe_call(info)),
    )
    .await;
    assert_eq!(resp.status(), 200, "SUBSCRIBE answered {}", resp.status());
    let ct = resp
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(ct, codec.content_type());
    let stream_id = resp
        .headers()
        .get("Mesos-Stream-Id")
        .expect("Mesos-Stream-Id header")
        .to_str()
        .unwrap()
        .to_owned();
    let mut sub = Sub {
        url: url.to_owned(),
        codec,
        stream_id,
        framework_id: FrameworkId::default(),
        resp,
        decoder: mesos::recordio::Decoder::new(1 << 24),
        subscribed: event::Subscribed::default(),
    };
    let first = sub.next().await.expect("a first event");
    assert_eq!(
        first.kind(),
        Some(event::Type::Subscribed),
        "first event: {first:?}"
    );
    sub.subscribed = first.subscribed.unwrap();
    sub.framework_id = sub.subscribed.framework_id.clone().unwrap();
    sub
}

impl Sub {
    /// The next event, or None when the stream ended. Fails after [`WAIT`].
    pub async fn next(&mut self) -> Option<Event> {
        self.next_within(WAIT).await.expect("no event in time")
    }

    /// `Err(())` on timeout, `Ok(None)` when the stream ended.
    pub async fn next_within(&mut self, wait: Duration) -> Result<Option<Event>, ()> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(rec) = self.decoder.next_record().unwrap() {
                return Ok(Some(self.codec.decode::<Event>(&rec).unwrap()));
            }
            match tokio::time::timeout_at(deadline, self.resp.chunk()).await {
                Err(_) => return Err(()),
                Ok(Ok(Some(chunk))) => self.decoder.push(&chunk),
                Ok(Ok(None)) | Ok(Err(_)) => return Ok(None),
            }
        }
    }

    /// The next event of `kind`, skipping heartbeats and other kinds.
    pub async fn expect(&mut self, kind: event::Type) -> Event {
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

    /// Skips events until an UPDATE; returns its status.
    pub async fn update(&mut self) -> TaskStatus {
        self.expect(event::Type::Update)
            .await
            .update
            .unwrap()
            .status
            .unwrap()
    }

    /// The next OFFERS' offers.
    pub async fn offers(&mut self) -> Vec<Offer> {
        self.expect(event::Type::Offers)
            .await
            .offers
            .unwrap()
            .offers
    }

    /// Asserts that no event of `kind` arrives within `wait`.
    pub async fn assert_none(&mut self, kind: event::Type, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_within(left).await {
                Err(()) => return,
                Ok(None) => return,
                Ok(Some(ev)) => assert_ne!(ev.kind(), Some(kind), "unexpected {ev:?}"),
            }
        }
    }

    /// Sends a call with this subscription's framework and stream ids.
    pub async fn call(&self, mut c: Call) -> reqwest::StatusCode {
        c.framework_id = Some(self.framework_id.clone());
        let resp = post(
            &self.url,
            Some(self.codec.content_type()),
            None,
            Some(&self.stream_id),
            self.codec.encode(&c),
        )
        .await;
        resp.status()
    }

    pub async fn accept(
        &self,
        offer_ids: Vec<OfferId>,
        ops: Vec<Operation>,
        refuse: Option<f64>,
    ) -> reqwest::StatusCode {
        self.call(Call {
            r#type: Some(call::Type::Accept as i32),
            accept: Some(call::Accept {
                offer_ids,
                operations: ops,
                filters: refuse.map(|s| mesos::proto::Filters {
                    refuse_seconds: Some(s),
                }),
            }),
            ..Default::default()
        })
        .await
    }

    pub async fn launch(&self, offer: &Offer, tasks: Vec<TaskInfo>) -> reqwest::StatusCode {
        self.accept(vec![offer.id.clone().unwrap()], vec![launch(tasks)], None)
            .await
    }

    pub async fn ack(&self, status: &TaskStatus) -> reqwest::StatusCode {
        self.call(Call {
            r#type: Some(call::Type::Acknowledge as i32),
            acknowledge: Some(call::Acknowledge {
                agent_id: status.agent_id.clone(),
                task_id: status.task_id.clone(),
                uuid: status.uuid.clone().expect("a reliable update"),
            }),
            ..Default::default()
        })
        .await
    }

    pub async fn simple(&self, kind: call::Type) -> reqwest::StatusCode {
        self.call(Call {
            r#type: Some(kind as i32),
            ..Default::default()
        })
        .await
    }

    pub async fn reconcile(&self, tasks: Vec<(&str, Option<&str>)>) -> reqwest::StatusCode {
        self.call(Call {
            r#type: Some(call::Type::Reconcile as i32),
            reconcile: Some(call::Reconcile {
                tasks: tasks
                    .into_iter()
                    .map(|(t, a)| call::reconcile::Task {
                        task_id: Some(TaskId::new(t)),
                        agent_id: a.map(mesos::proto::AgentId::new),
                    })
                    .collect(),
            }),
            ..Default::default()
        })
        .await
    }

    pub async fn kill(&self, task: &str, agent: Option<&str>) -> reqwest::StatusCode {
        self.call(Call {
            r#type: Some(call::Type::Kill as i32),
            kill: Some(call::Kill {
                task_id: Some(TaskId::new(task)),
                agent_id: agent.map(mesos::proto::AgentId::new),
                kill_policy: None,
            }),
            ..Default::default()
        })
        .await
    }

    /// Closes the stream (drops the connection).
    pub fn close(self) {}
}

pub fn launch(tasks: Vec<TaskInfo>) -> Operation {
    Operation {
        r#type: Some(operation::Type::Launch as i32),
        launch: Some(operation::Launch { task_infos: tasks }),
        ..Default::default()
    }
}

pub fn res(spec: &str) -> Vec<Resource> {
    Resources::parse(spec).unwrap().to_protos()
}

pub fn command_task(id: &str, offer: &Offer, resources: &str, cmd: &str) -> TaskInfo {
    TaskInfo {
        name: id.into(),
        task_id: Some(TaskId::new(id)),
        agent_id: offer.agent_id.clone(),
        resources: res(resources),
        command: Some(CommandInfo {
            value: Some(cmd.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn executor_task(id: &str, offer: &Offer, resources: &str, executor: ExecutorInfo) -> TaskInfo {
    TaskInfo {
        name: id.into(),
        task_id: Some(TaskId::new(id)),
        agent_id: offer.agent_id.clone(),
        resources: res(resources),
        executor: Some(executor),
        ..Default::default()
    }
}

pub fn state_of(s: &TaskStatus) -> TaskState {
    TaskState::try_from(s.state).unwrap()
}

/// Polls `cond` until true or [`WAIT`] passes (for conditions with no event).
pub async fn eventually(mut cond: impl FnMut() -> bool) {
    testkit::wait_until("the condition", WAIT, async || cond(), |met| *met).await;
}

pub async fn get_json(url: &str) -> serde_json::Value {
    testkit::init_crypto();
    reqwest::get(url).await.unwrap().json().await.unwrap()
}
