//! The engine both stores share: in-memory state, the committer thread (group commit),
//! the bounded change history and the live fan-out.
//!
//! Writers hand transactions to one committer thread. It drains whatever is queued (up to
//! [`MAX_BATCH`] transactions), checks each transaction's preconditions against the state
//! plus the batch so far, hands the whole batch to the [`Persist`] backend as one durable
//! write, and only then makes it visible and answers the writers. One fsync therefore
//! covers every write that arrived while the previous one ran: durability costs latency,
//! not throughput.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;

use super::view::{Applied, State, View, under};
use super::watcher::Watcher;
use super::{Change, ChangeKind, Precondition, StoreError, StoreFuture, Stored, WriteOp};

/// How long the committer waits for more writers when fewer are queued than joined the
/// previous batch. Writers answered by one batch resubmit while the next one starts;
/// without this short wait the batches settle at half the writers each, halving
/// throughput. A lone writer never waits (its previous batch had one request). Small
/// next to an fsync (milliseconds), so it costs latency only when it buys batching.
const GATHER_WAIT: Duration = Duration::from_micros(500);

/// Most transactions committed together. Large enough that a burst of writers shares one
/// fsync; small enough that one batch's latency stays in milliseconds.
const MAX_BATCH: usize = 1024;

/// Changes kept for watches that start from an older resourceVersion. A client's gap
/// between a list and its watch is short; anything older is answered 410 Expired and the
/// client relists, which is cheap at this scale.
pub(crate) const HISTORY: usize = 10_000;

/// What a durable backend does with a committed batch.
pub(crate) trait Persist: Send + 'static {
    /// Writes the batch atomically: `objects` in order (`None` removes), `meta` values,
    /// and the new global resourceVersion. Returns only once durable.
    fn write(
        &mut self,
        objects: &[(String, Option<Stored>)],
        meta: &[(String, Vec<u8>)],
        rv: u64,
    ) -> Result<(), StoreError>;
}

/// What a backend hands the engine at start.
#[derive(Default)]
pub(crate) struct Loaded {
    pub(crate) objects: BTreeMap<String, Stored>,
    pub(crate) meta: HashMap<String, Vec<u8>>,
    pub(crate) rv: u64,
}

type Reply = oneshot::Sender<Result<Vec<Arc<Change>>, StoreError>>;

struct Request {
    ops: Vec<WriteOp>,
    reply: Reply,
}

/// The shared engine; dropping it stops the committer thread after the queued batches.
pub(crate) struct Engine {
    view: Arc<View>,
    tx: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl Engine {
    pub(crate) fn start<P: Persist>(
        loaded: Loaded,
        persist: P,
        history: usize,
    ) -> Result<Self, StoreError> {
        let view = Arc::new(View::new(loaded, history));
        let (tx, rx) = mpsc::channel();
        let worker = Arc::clone(&view);
        let thread = std::thread::Builder::new()
            .name("apiserver-store".into())
            .spawn(move || committer(&worker, rx, persist))
            .map_err(|e| StoreError::Storage(format!("cannot start committer: {e}")))?;
        Ok(Self {
            view,
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    pub(crate) fn commit(&self, ops: Vec<WriteOp>) -> StoreFuture<'_, Vec<Arc<Change>>> {
        Box::pin(async move {
            if ops.is_empty() {
                return Ok(Vec::new());
            }
            let (reply, rx) = oneshot::channel();
            let tx = self.tx.as_ref().ok_or(StoreError::Closed)?;
            tx.send(Request { ops, reply })
                .map_err(|_| StoreError::Closed)?;
            rx.await.map_err(|_| StoreError::Closed)?
        })
    }

    pub(crate) fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.view.get(key)
    }

    pub(crate) fn list(&self, prefix: &str) -> (Vec<Arc<Value>>, u64) {
        self.view.list(prefix)
    }

    pub(crate) fn list_containing(&self, prefix: &str, needle: &str) -> (Vec<Arc<Value>>, u64) {
        self.view.list_containing(prefix, needle)
    }

    pub(crate) fn list_stored(&self, prefix: &str) -> (Vec<Stored>, u64) {
        self.view.list_stored(prefix)
    }

    pub(crate) fn watch(&self, prefix: &str, from: u64) -> Result<Watcher, StoreError> {
        self.view.watch(prefix, from)
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.view.resource_version()
    }

    pub(crate) fn get_meta(&self, key: &str) -> Option<Vec<u8>> {
        self.view.get_meta(key)
    }

    pub(crate) fn changes_since(&self, prefix: &str, from: u64) -> Option<Vec<Arc<Change>>> {
        self.view.changes_since(prefix, from)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Closing the queue ends the committer after the batches already queued, so a
        // reopened store on the same directory finds the file released.
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The batch being built: object writes in order, their latest value per key, meta writes.
#[derive(Default)]
struct Batch {
    latest: HashMap<String, Option<Stored>>,
    writes: Vec<(String, Option<Stored>)>,
    meta: Vec<(String, Vec<u8>)>,
    rv: u64,
}

fn committer<P: Persist>(view: &View, rx: mpsc::Receiver<Request>, mut persist: P) {
    // Changes evicted from the history are freed on a thread of their own: a decoded
    // object is a tree of maps, and freeing thousands of them was a fifth of this
    // thread's time, which every writer waits on.
    let (tx, evicted_rx) = mpsc::channel::<Vec<Arc<Change>>>();
    let freer = std::thread::Builder::new()
        .name("apiserver-free".into())
        .spawn(move || evicted_rx.into_iter().for_each(drop))
        .ok();
    // Without that thread (it could not start), they are freed here.
    let evicted_tx = freer.as_ref().map(|_| tx);
    let mut last_batch = 1;
    while let Ok(first) = rx.recv() {
        let requests = gather(&rx, first, last_batch);
        last_batch = requests.len();
        let mut batch = Batch::default();
        let mut accepted: Vec<(Reply, Vec<Arc<Change>>)> = Vec::with_capacity(requests.len());
        {
            let state = view.state();
            batch.rv = state.rv;
            for req in requests {
                match plan(&state, &mut batch, req.ops) {
                    Ok(changes) => accepted.push((req.reply, changes)),
                    Err(e) => {
                        let _ = req.reply.send(Err(e));
                    }
                }
            }
        }
        if accepted.is_empty() {
            continue;
        }
        if let Err(e) = persist.write(&batch.writes, &batch.meta, batch.rv) {
            tracing::error!(error = %e, "store batch not committed");
            for (reply, _) in accepted {
                let _ = reply.send(Err(e.clone()));
            }
            continue;
        }
        let changes: Vec<Arc<Change>> = accepted
            .iter()
            .flat_map(|(_, changes)| changes.iter().cloned())
            .collect();
        let evicted = view.publish(Applied {
            writes: batch.writes,
            meta: batch.meta,
            rv: batch.rv,
            changes: &changes,
        });
        for (reply, changes) in accepted {
            let _ = reply.send(Ok(changes));
        }
        if let Some(tx) = &evicted_tx {
            let _ = tx.send(evicted);
        }
    }
    drop(evicted_tx);
    if let Some(freer) = freer {
        let _ = freer.join();
    }
}

/// The requests of the next batch: `first`, everything queued, and, if fewer writers are
/// queued than joined the last batch, whatever arrives within [`GATHER_WAIT`].
fn gather(rx: &mpsc::Receiver<Request>, first: Request, last_batch: usize) -> Vec<Request> {
    let mut requests = vec![first];
    while requests.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(r) => requests.push(r),
            Err(_) => break,
        }
    }
    let deadline = Instant::now() + GATHER_WAIT;
    while requests.len() < last_batch.min(MAX_BATCH) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) => requests.push(r),
            Err(_) => break,
        }
    }
    requests
}

/// Checks and stages one transaction; on any failure the batch is left as it was.
fn plan(
    state: &State,
    batch: &mut Batch,
    ops: Vec<WriteOp>,
) -> Result<Vec<Arc<Change>>, StoreError> {
    let mut local: HashMap<String, Option<Stored>> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut meta = Vec::new();
    let mut changes = Vec::new();
    let mut rv = batch.rv;
    for op in ops {
        match op {
            WriteOp::PutMeta { key, value } => meta.push((key, value)),
            WriteOp::Check { key, precondition } => {
                let current = current(state, batch, &local, &key);
                check(&key, current.as_ref(), precondition)?;
            }
            WriteOp::CheckEmpty { prefix } => {
                if any_under(state, batch, &local, &prefix) {
                    return Err(StoreError::NotEmpty(prefix));
                }
            }
            WriteOp::Put {
                key,
                mut object,
                precondition,
            } => {
                let current = current(state, batch, &local, &key);
                check(&key, current.as_ref(), precondition)?;
                rv += 1;
                stamp(&key, &mut object, rv)?;
                let stored = Stored::encode(&object, rv)?;
                let object = Arc::new(object);
                let stored = stored.with_hot(&object);
                let kind = if current.is_some() {
                    ChangeKind::Modified
                } else {
                    ChangeKind::Added
                };
                changes.push(Arc::new(Change {
                    rv,
                    kind,
                    key: key.clone(),
                    object,
                    previous: current,
                }));
                local.insert(key.clone(), Some(stored));
                order.push(key);
            }
            WriteOp::Delete { key, precondition } => {
                let current = current(state, batch, &local, &key);
                let Some(previous) = current else {
                    return Err(StoreError::NotFound(key));
                };
                check(&key, Some(&previous), precondition)?;
                rv += 1;
                let mut last = previous.decode()?;
                stamp(&key, &mut last, rv)?;
                changes.push(Arc::new(Change {
                    rv,
                    kind: ChangeKind::Deleted,
                    key: key.clone(),
                    object: Arc::new(last),
                    previous: Some(previous),
                }));
                local.insert(key.clone(), None);
                order.push(key);
            }
        }
    }
    for key in order {
        let value = local.get(&key).cloned().flatten();
        batch.latest.insert(key.clone(), value.clone());
        batch.writes.push((key, value));
    }
    batch.meta.extend(meta);
    batch.rv = rv;
    Ok(changes)
}

fn current(
    state: &State,
    batch: &Batch,
    local: &HashMap<String, Option<Stored>>,
    key: &str,
) -> Option<Stored> {
    if let Some(v) = local.get(key) {
        return v.clone();
    }
    if let Some(v) = batch.latest.get(key) {
        return v.clone();
    }
    state.objects.get(key).cloned()
}

fn any_under(
    state: &State,
    batch: &Batch,
    local: &HashMap<String, Option<Stored>>,
    prefix: &str,
) -> bool {
    let staged = local.keys().chain(batch.latest.keys());
    let stored = under(&state.objects, prefix).map(|(k, _)| k);
    staged
        .filter(|k| k.starts_with(prefix))
        .chain(stored)
        .any(|k| current(state, batch, local, k).is_some())
}

fn check(key: &str, current: Option<&Stored>, pre: Precondition) -> Result<(), StoreError> {
    match (pre, current) {
        (Precondition::None, _) => Ok(()),
        (Precondition::Absent, None) => Ok(()),
        (Precondition::Absent, Some(_)) => Err(StoreError::AlreadyExists(key.to_string())),
        (Precondition::Present | Precondition::ResourceVersion(_), None) => {
            Err(StoreError::NotFound(key.to_string()))
        }
        (Precondition::Present, Some(_)) => Ok(()),
        (Precondition::ResourceVersion(expected), Some(obj)) => {
            let actual = obj.rv();
            if actual == expected {
                Ok(())
            } else {
                Err(StoreError::Conflict {
                    key: key.to_string(),
                    expected,
                    actual,
                })
            }
        }
    }
}

pub(crate) fn stamp(key: &str, object: &mut Value, rv: u64) -> Result<(), StoreError> {
    let meta = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| StoreError::Malformed(key.to_string()))?;
    meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    Ok(())
}
