//! Kubelet's AtomicWriter: a volume's files change all at once.
//!
//! ```text
//! <dir>/..2026_12_01_14_20_00.123456789/<the files>
//! <dir>/..data -> ..2026_12_01_14_20_00.123456789
//! <dir>/<name> -> ..data/<name>         (each top-level user-visible name)
//! ```
//!
//! A new payload is written into a fresh timestamped directory, then
//! `..data` is swapped to it with one `rename` of a symlink, so a reader
//! sees the old files or the new ones, never a mix. A `subPath` mount binds
//! the file itself, which is why it keeps the content it was mounted with.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::SystemTime;

/// The symlink to the current payload.
const DATA: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// One file of a payload: content and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Content.
    pub data: Vec<u8>,
    /// Permission bits.
    pub mode: u32,
}

/// A volume's files by relative path (checked: relative, no `..`).
pub type Payload = BTreeMap<String, File>;

/// Writes `payload` into `dir` atomically; returns whether anything changed.
pub fn write(dir: &Path, payload: &Payload) -> std::io::Result<bool> {
    for path in payload.keys() {
        if path.is_empty()
            || path.starts_with('/')
            || path.starts_with("..")
            || path.split('/').any(|c| c == ".." || c.is_empty())
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "invalid path {path:?}: must be relative, without '..', and not start with '..'"
                ),
            ));
        }
    }
    let current = std::fs::read_link(dir.join(DATA)).ok();
    if let Some(cur) = &current
        && same(&dir.join(cur), payload)
    {
        return Ok(false);
    }
    let ts = dir.join(timestamp_name(SystemTime::now()));
    std::fs::create_dir(&ts)?;
    std::fs::set_permissions(&ts, std::fs::Permissions::from_mode(0o755))?;
    for (path, file) in payload {
        let target = ts.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, &file.data)?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(file.mode & 0o7777))?;
    }
    let tmp = dir.join(DATA_TMP);
    let _ = std::fs::remove_file(&tmp);
    let ts_name = ts.file_name().map(|n| n.to_owned()).unwrap_or_default();
    std::os::unix::fs::symlink(&ts_name, &tmp)?;
    std::fs::rename(&tmp, dir.join(DATA))?;
    let wanted: BTreeSet<&str> = payload.keys().filter_map(|p| p.split('/').next()).collect();
    for name in &wanted {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") {
            let old_payload = name != DATA && ts_name.to_string_lossy() != name;
            if old_payload {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        } else if !wanted.contains(name.as_str()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(true)
}

/// Whether `dir` holds exactly `payload`.
fn same(dir: &Path, payload: &Payload) -> bool {
    let mut found = 0usize;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            return false;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p
                .strip_prefix(dir)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Some(want) = payload.get(&rel) else {
                return false;
            };
            let mode = std::fs::metadata(&p).map(|m| m.permissions().mode() & 0o7777);
            if std::fs::read(&p).ok().as_ref() != Some(&want.data)
                || mode.ok() != Some(want.mode & 0o7777)
            {
                return false;
            }
            found += 1;
        }
    }
    found == payload.len()
}

/// `..2006_01_02_15_04_05.<nanoseconds>`, kubelet's name for a payload.
fn timestamp_name(now: SystemTime) -> String {
    let d = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (y, mo, day) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let s = secs % 86_400;
    format!(
        "..{y:04}_{mo:02}_{day:02}_{:02}_{:02}_{:02}.{:09}",
        s / 3600,
        (s / 60) % 60,
        s % 60,
        d.subsec_nanos()
    )
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn payload(files: &[(&str, &str)]) -> Payload {
        files
            .iter()
            .map(|(p, d)| {
                (
                    (*p).to_owned(),
                    File {
                        data: d.as_bytes().to_vec(),
                        mode: 0o644,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn updates_swap_the_data_link_and_prune_old_names() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(write(d, &payload(&[("a", "1"), ("sub/b", "2")])).unwrap());
        assert_eq!(std::fs::read_to_string(d.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(d.join("sub/b")).unwrap(), "2");
        assert_eq!(
            std::fs::read_link(d.join("a")).unwrap(),
            Path::new("..data/a")
        );
        let first = std::fs::read_link(d.join(DATA)).unwrap();
        assert!(!write(d, &payload(&[("a", "1"), ("sub/b", "2")])).unwrap());
        assert!(write(d, &payload(&[("a", "changed")])).unwrap());
        assert_eq!(std::fs::read_to_string(d.join("a")).unwrap(), "changed");
        assert!(!d.join("sub").exists() && !d.join(&first).exists());
        let names: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }

    #[test]
    fn bad_paths_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["../x", "/abs", "..hidden", "a//b"] {
            assert!(write(dir.path(), &payload(&[(bad, "x")])).is_err(), "{bad}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn payload_names_look_like_kubelets() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::new(1_764_598_800, 5);
        assert_eq!(timestamp_name(t), "..2025_12_01_14_20_00.000000005");
    }
}
