//! The `mesopod` command line: one binary, several subcommands.
//!
//! Each subcommand's flags and entry point live in their own module under
//! [`crate::cmd`], so the parts of the binary change independently.

use clap::{Parser, Subcommand};

use crate::cmd;

/// Kubernetes pods on Apache Mesos.
#[derive(Debug, Parser)]
#[command(
    name = "mesopod",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to run; `scheduler` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Scheduler flags, accepted without the `scheduler` word.
    #[command(flatten)]
    pub scheduler: cmd::scheduler::Args,
}

/// The subcommands of `mesopod`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The framework with its Kubernetes API shim (the default).
    Scheduler(Box<cmd::scheduler::Args>),
    /// The custom executor that a Mesos agent launches.
    Executor(cmd::executor::Args),
    /// A standalone local Mesos master with agents.
    Localmesos(cmd::localmesos::Args),
    /// The scale benchmark.
    Bench(cmd::bench::Args),
    /// Images in the embedded cluster's store (`image load FILE`).
    Image(cmd::image::Args),
}

/// Why a `--config` file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// `--config` without a path.
    #[error("--config needs a file")]
    MissingPath,
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The command line with the flags of a `--config FILE` spliced in where
/// the scheduler's flags go (after `scheduler`, or after the program name).
/// The file holds flags as typed on a command line, any number per line;
/// `#` starts a comment. A flag given on the command line replaces the
/// file's (all its values, for repeatable flags).
///
/// # Errors
/// [`ConfigFileError`] when the path is missing or unreadable.
pub fn splice_config(mut args: Vec<String>) -> Result<Vec<String>, ConfigFileError> {
    let Some(i) = args
        .iter()
        .position(|a| a == "--config" || a.starts_with("--config="))
    else {
        return Ok(args);
    };
    let (path, n) = match args[i].strip_prefix("--config=") {
        Some(p) => (p.to_owned(), 1),
        None => (
            args.get(i + 1)
                .cloned()
                .ok_or(ConfigFileError::MissingPath)?,
            2,
        ),
    };
    let text =
        std::fs::read_to_string(&path).map_err(|source| ConfigFileError::Read { path, source })?;
    let from_file: Vec<String> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .flat_map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    args.drain(i..(i + n).min(args.len()));
    // A flag the command line gives is dropped from the file's, so the
    // command line wins (clap refuses a single-valued flag given twice).
    let flag_name = |a: &str| a.split('=').next().unwrap_or(a).to_owned();
    let given: std::collections::HashSet<String> = args
        .iter()
        .filter(|a| a.starts_with("--"))
        .map(|a| flag_name(a))
        .collect();
    let mut kept = Vec::new();
    let mut keep = true;
    for token in from_file {
        if token.starts_with("--") {
            keep = !given.contains(&flag_name(&token));
        }
        if keep {
            kept.push(token);
        }
    }
    let at = args
        .iter()
        .position(|a| a == "scheduler")
        .map_or(1, |p| p + 1)
        .min(args.len());
    args.splice(at..at, kept);
    Ok(args)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_config_file_configures_admission_and_the_command_line_wins() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mesopod.conf");
        std::fs::write(
            &file,
            "# admission\n--admission-webhook http://127.0.0.1:9/a\n--admission-webhook http://127.0.0.1:9/b\n--admission-timeout 3s --admission-fail-open\n--listen 127.0.0.1:9999\n",
        )
        .unwrap();
        let path = file.to_str().unwrap();
        for args in [
            argv(&["mesopod", "--config", path, "--listen", "127.0.0.1:7777"]),
            argv(&[
                "mesopod",
                "scheduler",
                &format!("--config={path}"),
                "--listen",
                "127.0.0.1:7777",
            ]),
        ] {
            let cli = Cli::parse_from(splice_config(args).unwrap());
            let s = match cli.command {
                Some(Command::Scheduler(s)) => *s,
                _ => cli.scheduler,
            };
            assert_eq!(
                s.admission_webhooks,
                ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]
            );
            assert_eq!(s.admission_timeout, std::time::Duration::from_secs(3));
            assert!(s.admission_fail_open);
            assert_eq!(s.listen.port(), 7777, "the command line wins");
        }
        assert!(matches!(
            splice_config(argv(&["mesopod", "--config"])),
            Err(ConfigFileError::MissingPath)
        ));
        assert!(matches!(
            splice_config(argv(&["mesopod", "--config", "/no/such/file"])),
            Err(ConfigFileError::Read { .. })
        ));
    }
}
