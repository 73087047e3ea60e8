//! `mesopod shim`, the anchor of a container run, on its own: a stand-in
//! "runtime" (`sh` that starts a background child and writes its pid, as
//! `run --detach` does) gives it a container, and the test plays the
//! executors that own it, die and adopt it.
//!
//! - the exit code and the output reach the owner;
//! - an owner that goes leaves the container running and its output in
//!   the pipes; a new owner gets the pidfd and the pipes, and every line;
//! - nobody adopts it within the timeout: the container is killed and the
//!   shim exits, its socket gone;
//! - a timeout of 0 (a rootless executor's): the container goes with its
//!   owner;
//! - an orphan nobody could find any more (its bundle deleted, as a
//!   development cluster's temporary work dir is on its stop) is killed at
//!   once, not after the timeout; so is one whose sandbox was unmounted
//!   lazily (as root: it mounts a tmpfs).
//!
//! Needs nothing but `sh` and `sleep`, and no runtime; root for the one
//! that mounts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;

use containers_support::{alive, prerequisites};
use executor::shim::wire::Held;
use executor::shim::{ContainerEnds, Ended, Shim, Spawn};
use testkit::wait_until;

const T: Duration = Duration::from_secs(30);

/// A shim whose "container" runs `script` (in `sh`), in `bundle`.
fn spawn(bundle: &Path, script: &str, timeout: Duration) -> Spawn {
    let pid_file = bundle.join("pid");
    // The background job is the container: `sh` writes its pid and exits,
    // as a runtime's `run --detach` does, and the job becomes the shim's.
    let runtime = format!("( {script} ) & echo $! > {}", pid_file.display());
    Spawn {
        exe: common::MESOPOD.into(),
        bundle: bundle.to_path_buf(),
        id: "c1".into(),
        pid_file,
        cgroups_path: "mesopod/c1".into(),
        anchor_bases: Vec::new(),
        adoption_timeout: timeout,
        argv: vec!["sh".into(), "-c".into(), runtime.into()],
        env: Vec::new(),
    }
}

/// The container's pipes: its ends, and ours (stdout's read end) with a
/// copy for the shim to hold.
fn pipes() -> (ContainerEnds, OwnedFd, Vec<(Held, OwnedFd)>) {
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (err_r, err_w) = std::io::pipe().unwrap();
    let out_r = OwnedFd::from(out_r);
    let held = vec![
        (Held::Stdout, out_r.try_clone().unwrap()),
        (Held::Stderr, OwnedFd::from(err_r)),
    ];
    let ends = ContainerEnds {
        stdout: out_w.into(),
        stderr: err_w.into(),
        stdin: None,
    };
    (ends, out_r, held)
}

async fn start(bundle: &Path, script: &str, timeout: Duration) -> (Shim, OwnedFd) {
    let (ends, ours, held) = pipes();
    let shim = spawn(bundle, script, timeout)
        .run(ends, held)
        .await
        .expect("the shim starts")
        .expect("the runtime runs");
    (shim, ours)
}

fn read_all(fd: OwnedFd) -> String {
    let mut text = String::new();
    std::fs::File::from(fd).read_to_string(&mut text).unwrap();
    text
}

async fn adopt(bundle: &Path) -> executor::shim::Adopted {
    let bundle = bundle.to_path_buf();
    tokio::task::spawn_blocking(move || Shim::adopt(&bundle))
        .await
        .unwrap()
        .expect("the shim takes a new owner")
}

async fn wait(shim: Shim) -> Ended {
    tokio::task::spawn_blocking(move || shim.wait())
        .await
        .unwrap()
}

#[tokio::test]
async fn the_exit_code_and_the_output_reach_the_owner() {
    let dir = tempfile::tempdir().unwrap();
    // It ends once the shim watches it: a `sh` that saw its job end first
    // would reap it (a runtime's init never is its runtime's to reap).
    let go = dir.path().join("go");
    let script = format!(
        "while [ ! -e {} ]; do sleep 0.01; done; echo out; exit 3",
        go.display()
    );
    let (shim, ours) = start(dir.path(), &script, T).await;
    std::fs::write(&go, "").unwrap();
    let ended = wait(shim).await;
    assert!(
        matches!(ended, Ended::Exited(s) if s.code == 3 && !s.oom),
        "{ended:?}"
    );
    assert_eq!(read_all(ours), "out\n");
    wait_until(
        "the released shim gone",
        T,
        async || dir.path().join(executor::shim::SOCKET).exists(),
        |exists| !exists,
    )
    .await;
}

#[tokio::test]
async fn a_new_owner_adopts_the_container_and_every_line_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let said = dir.path().join("said");
    // It writes its second line once its first owner is gone.
    let gone = dir.path().join("gone");
    let script = format!(
        "echo before; while [ ! -e {gone} ]; do sleep 0.05; done; echo meanwhile; touch {said}; exec sleep 300",
        gone = gone.display(),
        said = said.display()
    );
    let (shim, ours) = start(dir.path(), &script, T).await;
    let pid = shim.pid;
    // The owner dies: its socket and its end of the pipes close.
    drop(shim);
    drop(ours);
    std::fs::write(&gone, "").unwrap();
    wait_until(
        "the orphan's line written",
        T,
        async || said.exists(),
        |s| *s,
    )
    .await;
    assert!(alive(pid), "the container outlives its owner");
    let adopted = adopt(dir.path()).await;
    assert_eq!(adopted.shim.pid, pid);
    assert_eq!(adopted.exit, None);
    let stdout = adopted
        .held
        .into_iter()
        .find_map(|(kind, fd)| (kind == Held::Stdout).then_some(fd))
        .expect("the shim held stdout");
    rustix::process::pidfd_send_signal(&adopted.shim.pidfd, rustix::process::Signal::KILL).unwrap();
    let ended = wait(adopted.shim).await;
    assert!(
        matches!(ended, Ended::Exited(s) if s.code == 137),
        "{ended:?}"
    );
    assert_eq!(read_all(stdout), "before\nmeanwhile\n", "no line lost");
}

#[tokio::test]
async fn nobody_adopts_it_in_time_and_the_container_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (shim, _ours) = start(dir.path(), "exec sleep 300", Duration::from_secs(1)).await;
    let pid = shim.pid;
    drop(shim);
    wait_until("the orphan killed", T, async || alive(pid), |a| !a).await;
    wait_until(
        "the shim gone",
        T,
        async || dir.path().join(executor::shim::SOCKET).exists(),
        |exists| !exists,
    )
    .await;
    assert!(
        Shim::adopt(dir.path()).is_err(),
        "no shim to adopt any more"
    );
}

#[tokio::test]
async fn with_no_adoption_the_container_goes_with_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let (shim, _ours) = start(dir.path(), "exec sleep 300", Duration::ZERO).await;
    let pid = shim.pid;
    drop(shim);
    wait_until("the container killed", T, async || alive(pid), |a| !a).await;
}

#[tokio::test]
async fn an_orphan_nobody_could_find_goes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    let (shim, _ours) = start(&bundle, "exec sleep 300", Duration::from_secs(900)).await;
    let pid = shim.pid;
    drop(shim);
    assert!(alive(pid), "an orphan waits for its adopter");
    std::fs::remove_dir_all(&bundle).unwrap();
    wait_until(
        "the unfindable orphan killed",
        T,
        async || alive(pid),
        |a| !a,
    )
    .await;
}

#[tokio::test]
async fn an_owned_container_outlives_its_deleted_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (shim, _ours) = start(dir.path(), "exec sleep 300", Duration::from_secs(900)).await;
    std::fs::remove_file(dir.path().join(executor::shim::SOCKET)).unwrap();
    // The owner still reads its exit: only an orphan is given up on.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(shim.pid.try_into().unwrap()).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let ended = wait(shim).await;
    assert!(
        matches!(ended, Ended::Exited(s) if s.code == 128 + 15),
        "{ended:?}"
    );
}

#[tokio::test]
async fn an_orphan_whose_sandbox_was_unmounted_goes_at_once() {
    if !prerequisites(false) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sandbox = dir.path().join("sandbox");
    std::fs::create_dir(&sandbox).unwrap();
    rustix::mount::mount(
        "tmpfs",
        &sandbox,
        "tmpfs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .unwrap();
    let bundle = sandbox.join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    let (shim, _ours) = start(&bundle, "exec sleep 300", Duration::from_secs(900)).await;
    let pid = shim.pid;
    drop(shim);
    // The shim's working directory keeps the detached tmpfs, and the
    // bundle in it, alive: nothing is ever deleted there.
    rustix::mount::unmount(&sandbox, rustix::mount::UnmountFlags::DETACH).unwrap();
    wait_until(
        "the unfindable orphan killed",
        T,
        async || alive(pid),
        |a| !a,
    )
    .await;
}
