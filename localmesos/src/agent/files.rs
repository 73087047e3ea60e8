//! Sandbox files, with the routes and JSON shapes of a Mesos agent:
//! `GET /files/read?path=&offset=&length=` answers
//! `{"data": "...", "offset": N}` (`offset=-1` answers the size), and
//! `GET /files/browse?path=` answers an array of
//! `{"path","size","mode","mtime","nlink","uid","gid"}`.
//!
//! Only executor sandboxes are served (`slaves/A/frameworks/F/executors/E/
//! runs/R/…` under the cluster's work directory), as a Mesos agent serves
//! only the paths it attached: its checkpoints (`meta/`) and whatever else an
//! executor keeps beside its sandbox (a container runtime's state, with the
//! container's env) are not. Anything else, `..` and symlink tricks
//! included, is "not found", as unattached paths are in Mesos.

use std::os::unix::fs::MetadataExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;

/// Mesos caps one read at 16 pages of 4 KiB.
const MAX_READ: u64 = 16 * 4096;

#[derive(Clone)]
pub(crate) struct FilesCx {
    pub(crate) root: PathBuf,
}

pub(crate) fn router(cx: FilesCx) -> Router {
    Router::new()
        .route("/files/read", get(read))
        .route("/files/read.json", get(read))
        .route("/files/browse", get(browse))
        .route("/files/browse.json", get(browse))
        .with_state(cx)
}

#[derive(Deserialize)]
struct ReadQuery {
    path: Option<String>,
    offset: Option<String>,
    length: Option<String>,
}

#[derive(Deserialize)]
struct BrowseQuery {
    path: Option<String>,
}

fn bad(msg: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, msg.into()).into_response()
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "No file found at the requested path").into_response()
}

/// The canonical path if it lies in an executor's sandbox under the root.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let root = root.canonicalize().ok()?;
    let p = Path::new(path);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    };
    let canon = full.canonicalize().ok()?;
    in_sandbox(canon.strip_prefix(&root).ok()?).then_some(canon)
}

/// Whether `rel` (relative to the work directory) is a sandbox or inside one:
/// `slaves/A/frameworks/F/executors/E/runs/R[/…]`.
fn in_sandbox(rel: &Path) -> bool {
    let parts: Vec<_> = rel.components().collect();
    let named = |i: usize, name: &str| parts.get(i).is_some_and(|c| c.as_os_str() == name);
    parts.len() >= 8
        && named(0, "slaves")
        && named(2, "frameworks")
        && named(4, "executors")
        && named(6, "runs")
}

async fn read(State(cx): State<FilesCx>, Query(q): Query<ReadQuery>) -> Response {
    let Some(path) = q.path else {
        return bad("Expecting 'path=value' in query.");
    };
    let Some(offset) = q.offset else {
        return bad("Expecting 'offset=value' in query.");
    };
    let Ok(offset) = offset.parse::<i64>() else {
        return bad(format!("Failed to parse offset: '{offset}'"));
    };
    if offset < -1 {
        return bad(format!("Negative offset provided: {offset}"));
    }
    let length = match q.length.as_deref().map(str::parse::<i64>) {
        None => None,
        Some(Ok(l)) if l >= 0 => Some(l as u64),
        Some(Ok(-1)) => None,
        Some(_) => return bad("Failed to parse length"),
    };
    let Some(full) = resolve(&cx.root, &path) else {
        return not_found();
    };
    let Ok(meta) = std::fs::metadata(&full) else {
        return not_found();
    };
    if meta.is_dir() {
        return bad("Cannot read a directory");
    }
    let size = meta.len();
    if offset == -1 {
        return Json(json!({"data": "", "offset": size})).into_response();
    }
    let offset = (offset as u64).min(size);
    let want = length.unwrap_or(MAX_READ).min(MAX_READ).min(size - offset);
    let data = match read_range(&full, offset, want) {
        Ok(d) => d,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    Json(json!({"data": String::from_utf8_lossy(&data), "offset": offset})).into_response()
}

fn read_range(path: &Path, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::with_capacity(len as usize);
    f.take(len).read_to_end(&mut buf)?;
    Ok(buf)
}

async fn browse(State(cx): State<FilesCx>, Query(q): Query<BrowseQuery>) -> Response {
    let Some(path) = q.path else {
        return bad("Expecting 'path=value' in query.");
    };
    let Some(full) = resolve(&cx.root, &path) else {
        return not_found();
    };
    let Ok(meta) = std::fs::metadata(&full) else {
        return not_found();
    };
    if !meta.is_dir() {
        return Json(json!([entry(&full, &meta)])).into_response();
    }
    let Ok(dir) = std::fs::read_dir(&full) else {
        return not_found();
    };
    let mut entries: Vec<serde_json::Value> = dir
        .filter_map(Result::ok)
        .filter_map(|e| {
            let p = e.path();
            std::fs::symlink_metadata(&p).ok().map(|m| entry(&p, &m))
        })
        .collect();
    entries.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    Json(serde_json::Value::Array(entries)).into_response()
}

fn entry(path: &Path, m: &std::fs::Metadata) -> serde_json::Value {
    json!({
        "path": path.display().to_string(),
        "size": m.len(),
        "mode": mode_string(m),
        "mtime": m.mtime() as f64,
        "nlink": m.nlink(),
        "uid": m.uid().to_string(),
        "gid": m.gid().to_string(),
    })
}

/// `drwxr-xr-x`, as Mesos renders modes.
fn mode_string(m: &std::fs::Metadata) -> String {
    let kind = if m.is_dir() {
        'd'
    } else if m.file_type().is_symlink() {
        'l'
    } else {
        '-'
    };
    let bits = m.permissions().mode();
    let mut s = String::with_capacity(10);
    s.push(kind);
    for shift in [6u32, 3, 0] {
        let b = (bits >> shift) & 7;
        s.push(if b & 4 != 0 { 'r' } else { '-' });
        s.push(if b & 2 != 0 { 'w' } else { '-' });
        s.push(if b & 1 != 0 { 'x' } else { '-' });
    }
    s
}
