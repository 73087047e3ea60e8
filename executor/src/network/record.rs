//! What an attachment needs to be released by a later executor: one JSON file per
//! pod under the records directory, written atomically.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{NetworkError, PortMapping};

/// One pod's attachment.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Record {
    pub(super) id: String,
    pub(super) netns: PathBuf,
    /// The configuration list ADD ran with; DEL runs with the same.
    pub(super) config: Value,
    pub(super) ports: Vec<PortMapping>,
    /// ADD's final result; `None` while ADD runs (or if it never finished).
    pub(super) result: Option<Value>,
}

fn path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.json"))
}

fn io(what: &'static str, path: PathBuf) -> impl FnOnce(std::io::Error) -> NetworkError {
    move |source| NetworkError::Io { what, path, source }
}

impl Record {
    pub(super) fn write(&self, dir: &Path) -> Result<(), NetworkError> {
        std::fs::create_dir_all(dir).map_err(io("creating the CNI records", dir.to_owned()))?;
        let dest = path(dir, &self.id);
        let tmp = dir.join(format!(".{}.tmp", self.id));
        let body = serde_json::to_vec_pretty(self).unwrap_or_default();
        std::fs::write(&tmp, body).map_err(io("writing the CNI record", tmp.clone()))?;
        std::fs::rename(&tmp, &dest).map_err(io("writing the CNI record", dest))
    }

    pub(super) fn read(dir: &Path, id: &str) -> Result<Record, NetworkError> {
        let file = path(dir, id);
        let text = std::fs::read(&file).map_err(io("reading the CNI record", file.clone()))?;
        serde_json::from_slice(&text).map_err(|e| NetworkError::Io {
            what: "reading the CNI record",
            path: file,
            source: std::io::Error::other(e),
        })
    }

    pub(super) fn remove(dir: &Path, id: &str) -> Result<(), NetworkError> {
        let file = path(dir, id);
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io("removing the CNI record", file)(e))
            }
            _ => Ok(()),
        }
    }

    /// The IDs recorded in `dir` (none when it does not exist).
    pub(super) fn ids(dir: &Path) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_suffix(".json")?;
                (!id.starts_with('.')).then(|| id.to_owned())
            })
            .collect();
        ids.sort();
        ids
    }
}
