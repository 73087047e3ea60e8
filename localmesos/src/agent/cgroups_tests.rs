//! Each kind of tree kills a whole subtree: a process that forked children
//! after it entered its cgroup, and everything it started, is gone after
//! destroy, and so is the cgroup. Needs root (`CI=true` fails without it)
//! and the hierarchy mounted (skipped, saying which, when the host has none:
//! a v2-only host has no v1 freezer).
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

fn mounted(fstype: &str, controller: Option<&str>) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut f = right.split_whitespace();
        let (kind, options) = (f.next()?, f.nth(1).unwrap_or(""));
        let wanted =
            kind == fstype && controller.is_none_or(|c| options.split(',').any(|o| o == c));
        wanted
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))
            .flatten()
    })
}

fn possible(what: &str, tree: Option<Tree>) -> Option<Tree> {
    if !rustix::process::geteuid().is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: the {what} cgroup test needs root"
        );
        eprintln!("SKIPPED: the {what} cgroup test needs root");
        return None;
    }
    if tree.is_none() {
        eprintln!("SKIPPED: no {what} hierarchy is mounted here");
    }
    tree
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

fn listed(path: &Path) -> Vec<u32> {
    procs(path)
}

/// A shell moved into the cgroup, which then starts two sleepers of its
/// own; all three are killed by destroy.
fn destroys_the_whole_subtree(tree: &Tree) {
    let id = format!("cgroups-test-{}", std::process::id());
    let mut shell = Command::new("/bin/sh")
        .args(["-c", "read go; sleep 1000 & sleep 1000 & wait"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(enter_in(tree, &id, shell.id()), "entered {tree:?}");
    let path = tree.path_for(&id).unwrap();
    shell.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let pids = loop {
        let p = listed(&path);
        if p.len() >= 3 || Instant::now() > deadline {
            break p;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pids.len(), 3, "the shell and its two sleepers: {pids:?}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(destroy_in(tree, &id));
    let _ = shell.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
    assert!(left.is_empty(), "{tree:?} left {left:?}");
    assert!(!path.exists(), "{} removed", path.display());
}

#[test]
fn a_v1_freezer_tree_kills_everything_in_it() {
    let tree = mounted("cgroup", Some("freezer")).map(Tree::Freezer);
    if let Some(tree) = possible("v1 freezer", tree) {
        destroys_the_whole_subtree(&tree);
    }
}

#[test]
fn a_v1_pids_tree_kills_everything_in_it() {
    let tree = mounted("cgroup", Some("pids")).map(Tree::Pids);
    if let Some(tree) = possible("v1 pids", tree) {
        destroys_the_whole_subtree(&tree);
    }
}

#[test]
fn a_v2_tree_kills_everything_in_it() {
    let tree = mounted("cgroup2", None).map(Tree::V2);
    if let Some(tree) = possible("v2", tree) {
        destroys_the_whole_subtree(&tree);
    }
}

#[test]
fn container_ids_that_are_not_one_path_component_get_no_cgroup() {
    let tree = Tree::V2(PathBuf::from("/sys/fs/cgroup"));
    for bad in ["", "a/b", "..", ".hidden"] {
        assert_eq!(tree.path_for(bad), None, "{bad:?}");
    }
    assert_eq!(
        tree.path_for("c1"),
        Some(PathBuf::from("/sys/fs/cgroup/mesos/c1"))
    );
}
