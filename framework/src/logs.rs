//! `kubectl logs` for pods on Mesos agents: reads the container's log files
//! through the agent's `/files/read` endpoint.
//!
//! # Where the bytes are
//!
//! The executor writes `pods/<ns>_<name>_<uid>/<container>/{stdout,stderr}`
//! in its sandbox ([`executor::layout`]). A Mesos agent's own `/state`
//! names each executor's sandbox `directory`, which its `/files/read`
//! serves; the agent's address comes from `Offer.url`, remembered per agent
//! id as offers arrive. Sandbox directories are looked up once per
//! executor and remembered.
//!
//! Both streams are served: stdout first, then stderr, since the files carry
//! no timestamps to interleave them by. Following polls the files and ends
//! when the pod has reached a terminal phase and nothing new was read.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use apiserver::Api;
use apiserver::logs::{LogError, LogFuture, LogRequest, LogSource, LogStream};
use bytes::Bytes;
use executor::layout::{self, LogStream as Stream};
use registry::annotations;

/// How often a follower polls the agent for new output.
pub const FOLLOW_POLL: Duration = Duration::from_millis(500);
/// Bytes asked of the agent per read.
const CHUNK: u64 = 256 * 1024;

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
    /// A log source that looks agents up in `directory`.
    pub fn new(directory: Arc<AgentDirectory>) -> Self {
        Self {
            directory,
            http: reqwest::Client::new(),
            api: Arc::new(RwLock::new(None)),
            sandboxes: RwLock::new(HashMap::new()),
        }
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
            ("offset", &offset.to_string()),
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

/// Reads a whole file from `offset`; returns the bytes and the new offset.
async fn read_from(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    mut offset: u64,
) -> Result<(Vec<u8>, u64), LogError> {
    let mut out = Vec::new();
    while let Some(chunk) = read_chunk(http, base, path, offset).await? {
        if chunk.data.is_empty() {
            break;
        }
        offset = chunk.offset + chunk.data.len() as u64;
        out.extend_from_slice(chunk.data.as_bytes());
    }
    Ok((out, offset))
}

fn tail(bytes: &[u8], lines: Option<i64>) -> &[u8] {
    let Some(n) = lines.and_then(|n| usize::try_from(n).ok()) else {
        return bytes;
    };
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &bytes[i + 1..];
            }
        }
    }
    if n == 0 { &[] } else { bytes }
}

impl LogSource for AgentLogSource {
    fn logs(&self, req: LogRequest) -> LogFuture<'_> {
        Box::pin(async move {
            let (base, dir) = self.locate(&req).await?;
            let out = format!("{dir}/{}", Stream::Stdout.file_name());
            let err = format!("{dir}/{}", Stream::Stderr.file_name());
            let (mut text, out_off) = read_from(&self.http, &base, &out, 0).await?;
            let (err_text, err_off) = read_from(&self.http, &base, &err, 0).await?;
            text.extend_from_slice(&err_text);
            let first = Bytes::copy_from_slice(tail(&text, req.tail_lines));
            if !req.follow {
                let stream: LogStream = Box::pin(futures::stream::once(async move { Ok(first) }));
                return Ok(stream);
            }
            let http = self.http.clone();
            let api = self.api.read().ok().and_then(|a| a.clone());
            let state = (Some(first), out_off, err_off, false);
            let stream = futures::stream::unfold(state, move |(first, out_off, err_off, done)| {
                let (http, base, out, err, api, req) = (
                    http.clone(),
                    base.clone(),
                    out.clone(),
                    err.clone(),
                    api.clone(),
                    req.clone(),
                );
                async move {
                    if let Some(first) = first {
                        return Some((Ok(first), (None, out_off, err_off, false)));
                    }
                    if done {
                        return None;
                    }
                    loop {
                        tokio::time::sleep(FOLLOW_POLL).await;
                        let finished = api
                            .as_ref()
                            .and_then(|a| a.get_pod(&req.namespace, &req.name).ok())
                            .is_none_or(|p| {
                                matches!(
                                    p.status.and_then(|s| s.phase).as_deref(),
                                    Some("Succeeded" | "Failed")
                                )
                            });
                        let (mut new, o) = read_from(&http, &base, &out, out_off).await.ok()?;
                        let (new_err, e) = read_from(&http, &base, &err, err_off).await.ok()?;
                        new.extend_from_slice(&new_err);
                        if !new.is_empty() {
                            return Some((Ok(Bytes::from(new)), (None, o, e, finished)));
                        }
                        if finished {
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
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail(b"a\nb\nc\n", Some(2)), b"b\nc\n");
        assert_eq!(tail(b"a\nb\nc", Some(1)), b"c");
        assert_eq!(tail(b"a\nb\n", Some(10)), b"a\nb\n");
        assert_eq!(tail(b"a\nb\n", None), b"a\nb\n");
        assert_eq!(tail(b"a\nb\n", Some(0)), b"");
    }
}
