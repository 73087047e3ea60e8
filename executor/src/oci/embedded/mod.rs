//! The embedded OCI runtime: `mesopod runtime`, a runc-compatible CLI
//! (`create`, `start`, `state`, `kill`, `delete`, `list`) over namespaces,
//! `pivot_root` and cgroups, so a machine with nothing installed runs real
//! containers through the same path as runc.
//!
//! `run --detach` is `create` then `start` in one process, without the
//! FIFO: its `init` execs once `create` has recorded the container and
//! exited.
//!
//! `create` is a short-lived process: it makes the container's cgroups,
//! unshares the PID namespace (or joins the one the config names), and
//! forks `init` ([`fork`]: no second exec of this binary), which becomes
//! the container's PID 1 and enters the mount, UTS and IPC namespaces.
//! `init` builds the root filesystem, pivots into it, drops to the
//! container's user and capabilities, says it is ready, and waits on
//! `exec.fifo` until `start` opens it; then it execs the container's
//! process. The process that runs `create` should be a child subreaper (the
//! container's shim is, `crate::shim`): `init` is then its child, and
//! `init` arms `PR_SET_PDEATHSIG`, so a container dies with its shim, and
//! never lives on unwatched.
//!
//! As root, `init` makes its mount namespace from a small template
//! ([`mntns`]), not from a copy of the host's whole mount table.
//!
//! `sandbox` (mesopod's own, not runc's) makes a pod's shared IPC and UTS
//! namespaces (see [`crate::oci::sandbox`]).
//!
//! Everything here runs single-threaded in a process of its own: nothing
//! forks inside the multi-threaded executor.

mod console;
mod create;
mod exec;
mod fork;
mod init;
mod mntns;
mod state;

use std::path::PathBuf;

pub use state::ContainerState;

/// A runtime invocation's failure, printed to stderr (runc style).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RuntimeFailure(pub String);

impl RuntimeFailure {
    pub(crate) fn io(what: impl std::fmt::Display, e: impl std::fmt::Display) -> RuntimeFailure {
        RuntimeFailure(format!("{what}: {e}"))
    }
}

/// Runs `mesopod runtime ARGS…` (arguments after `runtime`); returns the
/// exit code.
pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mesopod runtime: {e}");
            1
        }
    }
}

fn run(args: &[String]) -> Result<i32, RuntimeFailure> {
    // A rootless executor's commands work in its user and mount namespace.
    crate::oci::rootless_ns::join_from_env()?;
    let (root, i) = global_flags(args)?;
    let command = args.get(i).ok_or_else(|| {
        RuntimeFailure("no command: create, start, run, exec, state, kill, delete or list".into())
    })?;
    // exec's command keeps its own options, so it is not split into flags here.
    match command.as_str() {
        // The command's own exit code is exec's.
        "exec" => exec::exec(&root, &args[i + 1..]),
        "exec-inner" => exec::exec_inner(&root, &args[i + 1..]).map(|()| 0),
        _ => run_command(&root, command, &args[i + 1..]).map(|()| 0),
    }
}

/// runc's global flags before the command; returns `--root` and where the command is.
fn global_flags(args: &[String]) -> Result<(PathBuf, usize), RuntimeFailure> {
    let mut root = PathBuf::from("/run/mesopod-runtime");
    let mut i = 0;
    // Global flags before the command (runc's `--root`, `--log`, `--log-format`).
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "--root" | "--log" | "--log-format" => {
                let v = args
                    .get(i + 1)
                    .ok_or_else(|| RuntimeFailure(format!("{a} needs a value")))?;
                if a == "--root" {
                    root = PathBuf::from(v);
                }
                i += 2;
            }
            s if s.starts_with("--root=") => {
                root = PathBuf::from(&s["--root=".len()..]);
                i += 1;
            }
            s if s.starts_with("--log") => i += 1,
            _ => break,
        }
    }
    Ok((root, i))
}

fn run_command(
    root: &std::path::Path,
    command: &str,
    rest: &[String],
) -> Result<(), RuntimeFailure> {
    let (flags, positional) = split_flags(rest);
    let id = || {
        positional
            .first()
            .cloned()
            .ok_or_else(|| RuntimeFailure(format!("{command}: a container id is required")))
    };
    let create = |id: &str, start| {
        let bundle = flag(&flags, &["--bundle", "-b"]).unwrap_or_else(|| ".".into());
        create::create(
            root,
            id,
            &PathBuf::from(bundle),
            flag(&flags, &["--pid-file"]).map(PathBuf::from),
            flag(&flags, &["--console-socket"]).map(PathBuf::from),
            start,
        )
    };
    match command {
        "create" => {
            let id = id()?;
            let executor = create(&id, create::Start::OnFifo)?;
            create::check_executor(root, &id, executor)
        }
        // runc's `run --detach`: create and start in one invocation, so a
        // container costs one runtime exec on its way up, not two.
        "run" => {
            if !flags.iter().any(|(k, _)| k == "--detach" || k == "-d") {
                return Err(RuntimeFailure(
                    "run: only --detach is supported (the caller supervises the container)".into(),
                ));
            }
            // init execs the container's process once this process exits.
            let id = id()?;
            let executor = create(&id, create::Start::WhenCreated)?;
            if state::dir(root, &id)?.join("exec.fifo").exists() {
                state::start(root, &id).inspect_err(|_| {
                    let _ = state::delete(root, &id, true);
                })?;
            }
            create::check_executor(root, &id, executor)
        }
        "start" => state::start(root, &id()?),
        "state" => {
            let s = state::state(root, &id()?)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&s).map_err(|e| RuntimeFailure(e.to_string()))?
            );
            Ok(())
        }
        "kill" => state::kill(
            root,
            &id()?,
            positional.get(1).map_or("SIGTERM", String::as_str),
        ),
        "delete" => state::delete(
            root,
            &id()?,
            flags.iter().any(|(k, _)| k == "--force" || k == "-f"),
        ),
        "sandbox" => crate::oci::sandbox::hold(
            &PathBuf::from(
                positional
                    .first()
                    .ok_or_else(|| RuntimeFailure("sandbox: a directory is required".into()))?,
            ),
            &flag(&flags, &["--hostname"]).unwrap_or_default(),
        ),
        "rootless-ns" => {
            crate::oci::rootless_ns::serve(flags.iter().any(|(k, _)| k == "--map-by-parent"))
        }
        "list" => {
            for id in state::list(root) {
                println!("{id}");
            }
            Ok(())
        }
        other => Err(RuntimeFailure(format!("unknown command {other:?}"))),
    }
}

/// Flags that take a value, as the commands above use them.
const VALUE_FLAGS: &[&str] = &[
    "--bundle",
    "-b",
    "--pid-file",
    "--console-socket",
    "--hostname",
];

fn split_flags(args: &[String]) -> (Vec<(String, String)>, Vec<String>) {
    let mut flags = Vec::new();
    let mut positional = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some((k, v)) = a.split_once('=').filter(|_| a.starts_with('-')) {
            flags.push((k.to_owned(), v.to_owned()));
        } else if VALUE_FLAGS.contains(&a.as_str()) {
            flags.push((a.clone(), it.next().cloned().unwrap_or_default()));
        } else if a.starts_with('-') && a.len() > 1 && !a[1..].chars().all(|c| c.is_ascii_digit()) {
            flags.push((a.clone(), String::new()));
        } else {
            positional.push(a.clone());
        }
    }
    (flags, positional)
}

fn flag(flags: &[(String, String)], names: &[&str]) -> Option<String> {
    flags
        .iter()
        .find(|(k, _)| names.contains(&k.as_str()))
        .map(|(_, v)| v.clone())
}
