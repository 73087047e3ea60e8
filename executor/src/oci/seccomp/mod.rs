//! Seccomp: which filter a container runs under, by kubelet's and
//! containerd's rules, as the `linux.seccomp` of its `config.json`.
//!
//! # Contract
//!
//! - kubelet's choice ([`resolve`]): the container's `seccompProfile`, else
//!   the pod's, else `RuntimeDefault` under `--seccomp-default`, else
//!   `Unconfined`. containerd's: a privileged container gets no filter;
//!   `RuntimeDefault` is containerd's default profile for the container's
//!   bounding set ([`default_profile`]); `Localhost` is the file
//!   `<--root-dir>/seccomp/<localhostProfile>` (kubelet's seccomp profile
//!   root), read as containerd reads it.
//! - A profile that cannot be read or parsed fails the container's start
//!   with kubelet's `CreateContainerError` and containerd's message; the
//!   container never runs without the filter it asked for.
//! - runc applies `linux.seccomp` with libseccomp; the embedded runtime
//!   compiles it itself ([`compile`]) and installs it in `init` and `exec`
//!   just before the exec.

pub mod compile;
pub mod default_profile;
#[cfg(any(target_arch = "aarch64", test))]
mod table_aarch64;
#[cfg(any(target_arch = "x86_64", test))]
mod table_x86_64;

use std::path::{Component, Path, PathBuf};

use crate::oci::spec::Seccomp;
use crate::pod::Security;

/// kubelet's `--root-dir` default.
pub const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelet";

/// kubelet's waiting reason when the runtime cannot create a container.
pub const CREATE_CONTAINER_ERROR: &str = "CreateContainerError";

/// The agent's seccomp settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeccompSettings {
    /// `--seccomp-default`: `RuntimeDefault` for containers that set no profile.
    pub runtime_default: bool,
    /// `--root-dir`: Localhost profiles are under its `seccomp` directory.
    pub root_dir: PathBuf,
}

impl Default for SeccompSettings {
    fn default() -> Self {
        SeccompSettings {
            runtime_default: false,
            root_dir: PathBuf::from(DEFAULT_ROOT_DIR),
        }
    }
}

impl SeccompSettings {
    /// kubelet's seccomp profile root, `<root-dir>/seccomp`.
    pub fn profile_root(&self) -> PathBuf {
        self.root_dir.join("seccomp")
    }
}

/// The filter a container gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// None.
    Unconfined,
    /// containerd's default, for the container's bounding set.
    RuntimeDefault,
    /// A Localhost profile, as read.
    Profile(Seccomp),
}

impl Choice {
    /// `linux.seccomp` for a container whose bounding set is `bounding`.
    pub fn to_spec(&self, bounding: &[String]) -> Option<Seccomp> {
        match self {
            Choice::Unconfined => None,
            Choice::RuntimeDefault => Some(default_profile::profile(bounding)),
            Choice::Profile(p) => Some(p.clone()),
        }
    }
}

/// The container's filter; an error is the `CreateContainerError` message
/// (containerd's words, `container` naming the container).
pub fn resolve(
    sec: &Security,
    settings: &SeccompSettings,
    container: &str,
) -> Result<Choice, String> {
    if sec.privileged {
        return Ok(Choice::Unconfined);
    }
    let Some(field) = &sec.seccomp else {
        return Ok(if settings.runtime_default {
            Choice::RuntimeDefault
        } else {
            Choice::Unconfined
        });
    };
    match field.kind.as_str() {
        "Unconfined" => Ok(Choice::Unconfined),
        "RuntimeDefault" => Ok(Choice::RuntimeDefault),
        "Localhost" => {
            let relative = field
                .localhost_profile
                .as_deref()
                .filter(|p| !p.is_empty())
                .ok_or("localhostProfile must be set if seccompProfile type is Localhost.")?;
            let path = settings.profile_root().join(relative);
            load(&path, relative).map(Choice::Profile).map_err(|e| {
                format!(
                    "failed to generate container {container:?} spec: failed to generate spec: {e}"
                )
            })
        }
        other => Err(format!("unknown seccomp profile type {other:?}")),
    }
}

/// A profile file, with containerd's messages.
fn load(path: &Path, relative: &str) -> Result<Seccomp, String> {
    let shown = path.display();
    // The API refuses these; the agent's files outside the root stay out of reach anyway.
    let descends = Path::new(relative)
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    if !descends {
        return Err(format!(
            "cannot load seccomp profile \"{shown}\": localhostProfile {relative:?} is not a descending relative path"
        ));
    }
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "cannot load seccomp profile \"{shown}\": {}",
            go_error("open", path, &e)
        )
    })?;
    serde_json::from_slice(&text)
        .map_err(|e| format!("decoding seccomp profile failed \"{shown}\": {e}"))
}

/// An I/O error as Go's `os` package words it (`open /x: no such file or directory`).
fn go_error(op: &str, path: &Path, e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.find(" (os error") {
        Some(i) => &text[..i],
        None => &text,
    };
    format!("{op} {}: {}", path.display(), text.to_lowercase())
}

#[cfg(test)]
mod tests;
