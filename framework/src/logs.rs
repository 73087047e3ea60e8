//! `kubectl logs` for pods on Mesos agents: reads the container's log files
//! through the agent's `/files/read` endpoint.
//!
//! # Where the bytes are
//!
//! The executor writes one CRI log per run of a container,
//! `pods/<ns>_<name>_<uid>/<container>/<restartCount>.log`, in its sandbox
//! ([`executor::layout`]). A Mesos agent's own `/state`
//! names each executor's sandbox `directory`, which its `/files/read`
//! serves; the agent's address comes from `Offer.url`, remembered per agent
//! id as offers arrive. Sandbox directories are looked up once per
//! executor and remembered.
//!
//! The newest run is read (`/files/browse` lists them), or with
//! `--previous` the one before it; stdout and stderr come interleaved as
//! written, filtered as kubelet filters them ([`filter`]). Following polls
//! the file (from its start again once it shrank: rotated) and ends when the
//! run is over (the container stopped or the pod finished) and nothing new
//! was read.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use apiserver::Api;
use apiserver::logs::{LogError, LogFuture, LogRequest, LogSource, LogStream};
use bytes::Bytes;
use executor::layout;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use registry::annotations;

mod filter;

use filter::Filter;

/// How often a follower polls the agent for new output.
pub const FOLLOW_POLL: Duration = Duration::from_millis(500);
/// Bytes asked of the agent per read: what a Mesos agent serves at most
/// (16 pages), so each read's length is known without decoding its data.
const CHUNK: u64 = 16 * 4096;

/// What the log source needs to know that only the scheduler learns.
#[derive(Debug, Default)]
pub struct AgentDirectory {
    agents: RwLock<HashMap<String, String>>,
    framework_id: RwLock<Option<String>>,
    /// The master of the subscription: it names agents that sent no offer
    /// yet (after a restart, with offers suppressed).
    master: RwLock<Option<String>>,
}

impl AgentDirectory {
    /// Remembers an agent's base URL (`http://ip:port`).
    pub fn set_agent(&self, agent_id: &str, base_url: String) {
        if let Ok(mut map) = self.agents.write() {
            map.insert(agent_id.to_owned(), base_url);
        }
    }

    /// An agent's base URL, if known.
    pub fn agent(&self, agent_id: &str) -> Option<String> {
        self.agents.read().ok()?.get(agent_id).cloned()
    }

    /// Remembers our framework id.
    pub fn set_framework_id(&self, id: &str) {
        if let Ok(mut f) = self.framework_id.write() {
            *f = Some(id.to_owned());
        }
    }

    fn framework_id(&self) -> Option<String> {
        self.framework_id.read().ok()?.clone()
    }

    /// Remembers the master we are subscribed to.
    pub fn set_master(&self, url: &str) {
        if let Ok(mut m) = self.master.write() {
            *m = Some(url.trim_end_matches('/').to_owned());
        }
    }

    /// Learns every agent's address from the master's `/state`
    /// (`slaves[].pid`, `slave(1)@ip:port`).
    async fn learn_from_master(&self, http: &reqwest::Client) {
        let Some(master) = self.master.read().ok().and_then(|m| m.clone()) else {
            return;
        };
        let Ok(resp) = http.get(format!("{master}/state")).send().await else {
            return;
        };
        let Ok(state) = resp.json::<serde_json::Value>().await else {
            return;
        };
        for agent in state["slaves"].as_array().into_iter().flatten() {
            if let (Some(id), Some(addr)) = (
                agent["id"].as_str(),
                agent["pid"]
                    .as_str()
                    .and_then(|p| p.split_once('@'))
                    .map(|(_, a)| a),
            ) {
                self.set_agent(id, format!("http://{addr}"));
            }
        }
    }
}

/// Reads pod logs from Mesos agents.
pub struct AgentLogSource {
    directory: Arc<AgentDirectory>,
    http: reqwest::Client,
    api: Arc<RwLock<Option<Api>>>,
    sandboxes: RwLock<HashMap<String, String>>,
}

impl AgentLogSource {
    /// A log source that looks agents up in `directory`, presenting
    /// `credential` (the framework's) to the master's and agents' read-only
    /// endpoints, which a cluster with `--authenticate_http_readonly` (the
    /// embedded one among them) requires.
    ///
    /// # Errors
    /// reqwest cannot build its client.
    pub fn new(
        directory: Arc<AgentDirectory>,
        credential: Option<&mesos::client::Credential>,
    ) -> Result<Self, reqwest::Error> {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(c) = credential {
            headers.insert(reqwest::header::AUTHORIZATION, c.authorization().clone());
        }
        Ok(Self {
            directory,
            http: reqwest::Client::builder()
                .default_headers(headers)
                .build()?,
            api: Arc::new(RwLock::new(None)),
            sandboxes: RwLock::new(HashMap::new()),
        })
    }

    /// Lets followers see when a pod has finished (the API is built after
    /// its log source, so it is handed over afterwards).
    pub fn set_api(&self, api: Api) {
        if let Ok(mut slot) = self.api.write() {
            *slot = Some(api);
        }
    }

    async fn locate(&self, req: &LogRequest) -> Result<(String, String), LogError> {
        let ann = req.pod.metadata.annotations.clone().unwrap_or_default();
        let agent = ann.get(annotations::AGENT_ID).ok_or_else(|| {
            LogError::NotReady(format!(
                "pod \"{}\" is not running on an agent yet",
                req.name
            ))
        })?;
        let executor = ann.get(annotations::EXECUTOR_ID).ok_or_else(|| {
            LogError::NotReady(format!("pod \"{}\" has no executor recorded", req.name))
        })?;
        if self.directory.agent(agent).is_none() {
            self.directory.learn_from_master(&self.http).await;
        }
        let base = self.directory.agent(agent).ok_or_else(|| {
            LogError::Unavailable(format!("the address of agent {agent} is not known yet"))
        })?;
        let framework = self.directory.framework_id().ok_or_else(|| {
            LogError::Unavailable("mesopod is not registered with Mesos yet".into())
        })?;
        let uid = req.pod.metadata.uid.clone().unwrap_or_default();
        let dir = self.sandbox(&base, &framework, executor).await?;
        let rel = layout::container_dir(&req.namespace, &req.name, &uid, &req.container);
        Ok((base, format!("{dir}/{}", rel.display())))
    }

    /// The executor's sandbox directory, from the agent's `/state`.
    async fn sandbox(
        &self,
        base: &str,
        framework: &str,
        executor: &str,
    ) -> Result<String, LogError> {
        let key = format!("{base} {framework} {executor}");
        if let Some(dir) = self
            .sandboxes
            .read()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(dir);
        }
        let state: serde_json::Value = self
            .http
            .get(format!("{base}/state"))
            .send()
            .await
            .map_err(|e| LogError::Unavailable(format!("agent unreachable: {e}")))?
            .json()
            .await
            .map_err(|e| LogError::Unavailable(format!("agent state unreadable: {e}")))?;
        let dir = ["frameworks", "completed_frameworks"]
            .iter()
            .flat_map(|k| state[*k].as_array().cloned().unwrap_or_default())
            .filter(|f| f["id"] == framework)
            .flat_map(|f| {
                let mut all = f["executors"].as_array().cloned().unwrap_or_default();
                all.extend(
                    f["completed_executors"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default(),
                );
                all
            })
            .find(|e| e["id"] == executor)
            .and_then(|e| e["directory"].as_str().map(str::to_owned))
            .filter(|d| !d.is_empty())
            .ok_or_else(|| {
                LogError::NotReady(format!("the agent has no sandbox for executor {executor}"))
            })?;
        if let Ok(mut m) = self.sandboxes.write() {
            m.insert(key, dir.clone());
        }
        Ok(dir)
    }
}

#[derive(serde::Deserialize)]
struct FileChunk {
    data: String,
    offset: u64,
}

async fn read_chunk(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    offset: u64,
) -> Result<Option<FileChunk>, LogError> {
    let resp = http
        .get(format!("{base}/files/read"))
        .query(&[
            ("path", path),
            // `-1` asks for the size alone.
            (
                "offset",
                &if offset == u64::MAX {
                    "-1".to_owned()
                } else {
                    offset.to_string()
                },
            ),
            ("length", &CHUNK.to_string()),
        ])
        .send()
        .await
        .map_err(|e| LogError::Unavailable(format!("agent unreachable: {e}")))?;
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !resp.status().is_success() {
        return Err(LogError::Unavailable(format!(
            "agent answered {}",
            resp.status()
        )));
    }
    resp.json::<FileChunk>()
        .await
        .map(Some)
        .map_err(|e| LogError::Unavailable(format!("agent sent an unreadable answer: {e}")))
}

/// Reads a file from `offset` to the size it has now (from its start if it
/// shrank: it was rotated); returns the bytes and the new offset. Offsets
/// advance by the lengths asked, not by the decoded text, which the agent
/// may have had to repair where a read split a UTF-8 character.
async fn read_from(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    mut offset: u64,
) -> Result<(Vec<u8>, u64), LogError> {
    let Some(size) = read_chunk(http, base, path, u64::MAX).await? else {
        return Ok((Vec::new(), offset));
    };
    let size = size.offset;
    if size < offset {
        offset = 0;
    }
    let mut out = Vec::new();
    while offset < size {
        let Some(chunk) = read_chunk(http, base, path, offset).await? else {
            break;
        };
        if chunk.data.is_empty() {
            break;
        }
        out.extend_from_slice(chunk.data.as_bytes());
        offset += CHUNK.min(size - offset);
    }
    Ok((out, offset))
}

/// The runs whose logs are in the container's directory (`<N>.log`), oldest first.
async fn runs(http: &reqwest::Client, base: &str, dir: &str) -> Result<Vec<i32>, LogError> {
    let resp = http
        .get(format!("{base}/files/browse"))
        .query(&[("path", dir)])
        .send()
        .await
        .map_err(|e| LogError::Unavailable(format!("agent unreachable: {e}")))?;
    if resp.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(Vec::new());
    }
    let entries: Vec<serde_json::Value> = resp
        .json()
        .await
        .map_err(|e| LogError::Unavailable(format!("agent sent an unreadable answer: {e}")))?;
    let mut runs: Vec<i32> = entries
        .iter()
        .filter_map(|e| e["path"].as_str())
        .filter_map(|p| p.rsplit('/').next())
        .filter_map(|name| name.strip_suffix(".log")?.parse().ok())
        .collect();
    runs.sort_unstable();
    Ok(runs)
}

/// The container's status in `pod`, init containers included.
fn container_status<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|c| c.name == container)
}

/// Whether the run being followed is over: the pod finished, the container
/// is no longer running, or a newer run began.
fn run_over(pod: Option<&Pod>, container: &str) -> bool {
    let Some(pod) = pod else { return true };
    if matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return true;
    }
    container_status(pod, container)
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| {
            s.terminated.is_some()
                || s.waiting
                    .as_ref()
                    .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
        })
}

/// Picks the run to read, with kubelet's errors when there is none.
fn pick_run(req: &LogRequest, runs: &[i32]) -> Result<Option<i32>, LogError> {
    let status = container_status(&req.pod, &req.container);
    if req.previous {
        let terminated = status
            .and_then(|c| c.last_state.as_ref())
            .is_some_and(|s| s.terminated.is_some());
        return match runs {
            [.., prev, _] if terminated => Ok(Some(*prev)),
            _ => Err(LogError::NotReady(format!(
                "previous terminated container \"{}\" in pod \"{}\" not found",
                req.container, req.name
            ))),
        };
    }
    if let Some(last) = runs.last() {
        return Ok(Some(*last));
    }
    let waiting = status
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.as_ref());
    match waiting.and_then(|w| w.reason.as_deref()) {
        Some(reason) => {
            let why = match reason {
                "ErrImagePull" | "ImagePullBackOff" => "image can't be pulled",
                other => other,
            };
            Err(LogError::NotReady(format!(
                "container \"{}\" in pod \"{}\" is waiting to start: {why}",
                req.container, req.name
            )))
        }
        None => Ok(None),
    }
}

impl LogSource for AgentLogSource {
    fn logs(&self, req: LogRequest) -> LogFuture<'_> {
        Box::pin(async move {
            let (base, dir) = self.locate(&req).await?;
            let runs = runs(&self.http, &base, &dir).await?;
            let run = pick_run(&req, &runs)?;
            let path = format!("{dir}/{}", layout::run_log_name(run.unwrap_or(0)));
            let (text, offset) = match run {
                Some(_) => read_from(&self.http, &base, &path, 0).await?,
                None => (Vec::new(), 0),
            };
            let mut filter = Filter::new(req.timestamps, req.since, req.limit_bytes);
            let first =
                Bytes::from(filter.push(&text[filter::tail_start(&text, req.tail_lines)..]));
            if !req.follow || req.previous || filter.exhausted() {
                let stream: LogStream = Box::pin(futures::stream::once(async move { Ok(first) }));
                return Ok(stream);
            }
            let http = self.http.clone();
            let api = self.api.read().ok().and_then(|a| a.clone());
            let state = (Some(first), offset, filter, false);
            let stream =
                futures::stream::unfold(state, move |(first, offset, mut filter, done)| {
                    let (http, base, path, api, req) = (
                        http.clone(),
                        base.clone(),
                        path.clone(),
                        api.clone(),
                        req.clone(),
                    );
                    async move {
                        if let Some(first) = first {
                            return Some((Ok(first), (None, offset, filter, false)));
                        }
                        if done || filter.exhausted() {
                            return None;
                        }
                        loop {
                            tokio::time::sleep(FOLLOW_POLL).await;
                            let pod = api
                                .as_ref()
                                .and_then(|a| a.get_pod(&req.namespace, &req.name).ok());
                            let over = run_over(pod.as_ref(), &req.container);
                            let (new, o) = read_from(&http, &base, &path, offset).await.ok()?;
                            let out = filter.push(&new);
                            if !out.is_empty() {
                                return Some((Ok(Bytes::from(out)), (None, o, filter, over)));
                            }
                            if over {
                                return None;
                            }
                        }
                    }
                });
            let stream: LogStream = Box::pin(stream);
            Ok(stream)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStateWaiting, PodStatus,
    };

    fn req(previous: bool, state: ContainerState, last: Option<ContainerState>) -> LogRequest {
        let pod = Pod {
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "app".into(),
                    state: Some(state),
                    last_state: last,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        LogRequest {
            pod,
            namespace: "default".into(),
            name: "web".into(),
            container: "app".into(),
            follow: false,
            tail_lines: None,
            limit_bytes: None,
            previous,
            timestamps: false,
            since: None,
        }
    }

    fn terminated() -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated::default()),
            ..Default::default()
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_newest_run_is_read_and_previous_is_the_one_before() {
        let r = req(false, ContainerState::default(), Some(terminated()));
        assert_eq!(pick_run(&r, &[0, 1, 2]).unwrap(), Some(2));
        let p = req(true, ContainerState::default(), Some(terminated()));
        assert_eq!(pick_run(&p, &[0, 1, 2]).unwrap(), Some(1));
    }

    #[test]
    fn previous_without_a_finished_run_is_kubelets_error() {
        let p = req(true, ContainerState::default(), None);
        let err = pick_run(&p, &[0]).unwrap_err().to_string();
        assert_eq!(
            err,
            "previous terminated container \"app\" in pod \"web\" not found"
        );
        let p = req(true, ContainerState::default(), Some(terminated()));
        assert!(pick_run(&p, &[0]).is_err());
    }

    #[test]
    fn a_container_that_never_ran_is_waiting_to_start() {
        let r = req(false, waiting("ErrImagePull"), None);
        assert_eq!(
            pick_run(&r, &[]).unwrap_err().to_string(),
            "container \"app\" in pod \"web\" is waiting to start: image can't be pulled"
        );
        let r = req(false, waiting("ContainerCreating"), None);
        assert!(
            pick_run(&r, &[])
                .unwrap_err()
                .to_string()
                .ends_with(": ContainerCreating")
        );
        let r = req(false, ContainerState::default(), None);
        assert_eq!(pick_run(&r, &[]).unwrap(), None);
    }

    #[test]
    fn following_ends_when_the_run_does() {
        let r = req(false, ContainerState::default(), None);
        assert!(!run_over(Some(&r.pod), "app"));
        let t = req(false, terminated(), None);
        assert!(run_over(Some(&t.pod), "app"));
        let b = req(false, waiting("CrashLoopBackOff"), None);
        assert!(run_over(Some(&b.pod), "app"));
        assert!(run_over(None, "app"));
    }
}
