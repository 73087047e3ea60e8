//! One run's log file, rotated by size as kubelet rotates container logs:
//! `0.log` is renamed `0.log.<YYYYMMDD-hhmmss>` when the next write would
//! take it past the size limit, and the oldest rotated files are removed so
//! that at most `max_files` files (the live one included) remain.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::LogSettings;

/// An append-only log file that rotates itself.
#[derive(Debug)]
pub(crate) struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    settings: LogSettings,
}

impl RotatingFile {
    /// Opens (or creates) `path` for appending.
    pub(crate) fn open(path: &Path, settings: LogSettings) -> io::Result<Self> {
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            file,
            size,
            settings,
        })
    }

    /// Appends `bytes` (whole CRI lines), rotating between lines so that
    /// no file grows past the limit (but for a single line longer than it).
    pub(crate) fn write(&mut self, mut bytes: &[u8], now: SystemTime) -> io::Result<()> {
        while !bytes.is_empty() {
            let room = self.settings.max_size.saturating_sub(self.size);
            let fits = fitting_lines(bytes, usize::try_from(room).unwrap_or(usize::MAX));
            if fits == 0 && self.size > 0 {
                self.rotate(now)?;
                continue;
            }
            // An empty file takes at least one line, however long.
            let take = if fits == 0 {
                bytes
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(bytes.len(), |i| i + 1)
            } else {
                fits
            };
            self.file.write_all(&bytes[..take])?;
            self.size += take as u64;
            bytes = &bytes[take..];
        }
        Ok(())
    }

    fn rotate(&mut self, now: SystemTime) -> io::Result<()> {
        let stamp = super::cri::timestamp(now)
            .strftime("%Y%m%d-%H%M%S")
            .to_string();
        let base = format!("{}.{stamp}", self.path.display());
        let mut target = PathBuf::from(&base);
        // Two rotations within one second keep both files, in order.
        let mut n = 0;
        while target.exists() {
            n += 1;
            target = PathBuf::from(format!("{base}-{n}"));
        }
        std::fs::rename(&self.path, &target)?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        self.prune()
    }

    /// Removes the oldest rotated files beyond `max_files - 1`.
    fn prune(&self) -> io::Result<()> {
        let mut rotated = rotated_files(&self.path)?;
        let keep = self.settings.max_files.saturating_sub(1) as usize;
        if rotated.len() > keep {
            rotated.sort();
            for old in &rotated[..rotated.len() - keep] {
                std::fs::remove_file(old)?;
            }
        }
        Ok(())
    }
}

/// How many leading bytes of `bytes` are whole lines within `room`.
fn fitting_lines(bytes: &[u8], room: usize) -> usize {
    if bytes.len() <= room {
        return bytes.len();
    }
    bytes[..room]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1)
}

/// The rotated files of `path` (`<path>.<timestamp>`), in no order.
pub(crate) fn rotated_files(path: &Path) -> io::Result<Vec<PathBuf>> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            out.push(entry.path());
        }
    }
    Ok(out)
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn rotation_keeps_at_most_max_files_and_the_newest_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        let settings = LogSettings {
            max_size: 100,
            max_files: 3,
        };
        let mut f = RotatingFile::open(&path, settings).unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_475_713_029);
        for i in 0..10u64 {
            // Two lines per write: rotation falls between them.
            let lines = format!(
                "line {:02} {}\nline {:02} {}\n",
                2 * i,
                "x".repeat(40),
                2 * i + 1,
                "x".repeat(40)
            );
            f.write(lines.as_bytes(), t0 + Duration::from_secs(i / 2))
                .unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.contains(&"0.log".to_string()));
        assert!(names.iter().all(|n| n.starts_with("0.log")));
        let live = std::fs::read_to_string(&path).unwrap();
        assert!(live.contains("line 19"), "{live}");
        assert!(live.len() <= 100);
        for name in &names {
            let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
            assert!(text.len() <= 100, "{name}: {}", text.len());
            assert!(
                text.ends_with('\n') && text.starts_with("line "),
                "{name}: {text}"
            );
        }
        // The rotated ones are the two before it, in order.
        assert!(names[1].starts_with("0.log.20161006-00"), "{names:?}");
    }

    #[test]
    fn a_line_longer_than_the_limit_is_still_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.log");
        let settings = LogSettings {
            max_size: 10,
            max_files: 2,
        };
        let mut f = RotatingFile::open(&path, settings).unwrap();
        f.write(b"a line longer than ten\n", SystemTime::now())
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "a line longer than ten\n"
        );
    }
}
