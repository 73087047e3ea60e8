//! `hostPath`: only under the prefixes the agent allows
//! (`--allowed-host-paths`, none by default), with `type` checked as
//! kubelet checks it, in kubelet's words.

use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};

/// Refuses a path outside every allowed prefix. The path is taken
/// lexically (it must be absolute, without `..`) and, when it exists, once
/// more with its symlinks resolved, so a link cannot lead out.
pub fn check_allowed(path: &str, allowed: &[PathBuf]) -> Result<(), String> {
    let p = Path::new(path);
    if !p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "hostPath {path:?} must be an absolute path without '..'"
        ));
    }
    let refused = || {
        if allowed.is_empty() {
            format!(
                "hostPath {path:?} is not allowed: this agent allows no hostPath volumes (--allowed-host-paths is empty)"
            )
        } else {
            let list: Vec<String> = allowed.iter().map(|a| a.display().to_string()).collect();
            format!(
                "hostPath {path:?} is not allowed: it is not under any of this agent's --allowed-host-paths ({})",
                list.join(", ")
            )
        }
    };
    let under = |p: &Path| allowed.iter().any(|a| p.starts_with(a));
    if !under(p) {
        return Err(refused());
    }
    // The longest existing ancestor, resolved: covers a path that is
    // created later (DirectoryOrCreate) below a symlink.
    let existing = p.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
    let real = existing
        .canonicalize()
        .map_err(|e| format!("hostPath {path:?}: {e}"))?;
    let allowed_real: Vec<PathBuf> = allowed
        .iter()
        .map(|a| a.canonicalize().unwrap_or_else(|_| a.clone()))
        .collect();
    let rest = p.strip_prefix(existing).unwrap_or(Path::new(""));
    if !allowed_real.iter().any(|a| real.join(rest).starts_with(a)) {
        return Err(refused());
    }
    Ok(())
}

/// Kubelet's `hostPath` type check; `*OrCreate` types create what is missing
/// (directories 0755, files 0644, as kubelet does).
pub fn check_type(path: &str, kind: &str) -> Result<(), String> {
    let p = Path::new(path);
    let meta = std::fs::metadata(p).ok();
    let failed = |what: &str| format!("hostPath type check failed: {path} is not {what}");
    let ft = meta.as_ref().map(std::fs::Metadata::file_type);
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" if meta.is_none() => {
            std::fs::create_dir_all(p).map_err(|e| format!("hostPath {path}: {e}"))?;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("hostPath {path}: {e}"))
        }
        "DirectoryOrCreate" | "Directory" => {
            if ft.is_some_and(|t| t.is_dir()) {
                Ok(())
            } else {
                Err(failed("a directory"))
            }
        }
        "FileOrCreate" if meta.is_none() => {
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("hostPath {path}: {e}"))?;
            }
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map_err(|e| format!("hostPath {path}: {e}"))?;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644))
                .map_err(|e| format!("hostPath {path}: {e}"))
        }
        "FileOrCreate" | "File" => {
            if ft.is_some_and(|t| t.is_file()) {
                Ok(())
            } else {
                Err(failed("a file"))
            }
        }
        "Socket" => ft
            .is_some_and(|t| t.is_socket())
            .then_some(())
            .ok_or_else(|| failed("a socket file")),
        "CharDevice" => ft
            .is_some_and(|t| t.is_char_device())
            .then_some(())
            .ok_or_else(|| failed("a character device")),
        "BlockDevice" => ft
            .is_some_and(|t| t.is_block_device())
            .then_some(())
            .ok_or_else(|| failed("a block device")),
        other => Err(format!("{other} is an invalid volume type")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_allowed_prefixes_pass_and_links_cannot_lead_out() {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("ok");
        std::fs::create_dir(&allowed).unwrap();
        std::os::unix::fs::symlink("/etc", allowed.join("out")).unwrap();
        let list = vec![allowed.clone()];
        let inside = allowed.join("data");
        check_allowed(inside.to_str().unwrap(), &list).unwrap();
        let err = check_allowed("/etc", &list).unwrap_err();
        assert!(
            err.contains("not under any of this agent's --allowed-host-paths"),
            "{err}"
        );
        let err = check_allowed(allowed.join("out/passwd").to_str().unwrap(), &list).unwrap_err();
        assert!(err.contains("not allowed"), "{err}");
        let err = check_allowed("/tmp", &[]).unwrap_err();
        assert!(err.contains("allows no hostPath volumes"), "{err}");
        assert!(check_allowed(&format!("{}/../x", allowed.display()), &list).is_err());
    }

    #[test]
    fn types_are_checked_with_kubelets_messages() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let file = format!("{d}/f");
        check_type(&file, "FileOrCreate").unwrap();
        check_type(&file, "File").unwrap();
        assert_eq!(
            check_type(&file, "Directory").unwrap_err(),
            format!("hostPath type check failed: {file} is not a directory")
        );
        let sub = format!("{d}/new/dir");
        check_type(&sub, "DirectoryOrCreate").unwrap();
        assert!(Path::new(&sub).is_dir());
        assert_eq!(
            check_type(&d, "File").unwrap_err(),
            format!("hostPath type check failed: {d} is not a file")
        );
        assert!(
            check_type(&d, "Socket")
                .unwrap_err()
                .ends_with("is not a socket file")
        );
        assert!(check_type("/dev/null", "CharDevice").is_ok());
        assert!(
            check_type(&d, "BlockDevice")
                .unwrap_err()
                .ends_with("is not a block device")
        );
        assert_eq!(
            check_type(&d, "Weird").unwrap_err(),
            "Weird is an invalid volume type"
        );
        check_type(&format!("{d}/missing"), "").unwrap();
    }
}
