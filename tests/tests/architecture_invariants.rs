//! ARCHITECTURE.md's invariants, checked where a test can check them: which crates
//! a crate may depend on, and which parts of the code may read a clock, await, or
//! do I/O. A check reads the sources as text, comments and test code left out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .into()
}

/// The crate names in `crate_dir`'s `[dependencies]` (not dev- or build-).
fn dependencies(crate_dir: &str) -> Vec<String> {
    let text = std::fs::read_to_string(workspace().join(crate_dir).join("Cargo.toml")).unwrap();
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && let Some((name, _)) = line.split_once('=') {
            // `thiserror.workspace = true` names thiserror.
            let name = name.trim().split('.').next().unwrap_or("");
            if !name.is_empty() && !name.starts_with('#') {
                out.push(name.to_owned());
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`, but test files and those under `skip`.
fn sources(dir: &str, skip: &[&str]) -> Vec<PathBuf> {
    fn walk(p: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(p).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = workspace().join(dir);
    let mut out = Vec::new();
    walk(&root, &mut out);
    out.retain(|p| {
        let rel = p
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let name = p.file_name().unwrap().to_string_lossy();
        !skip.iter().any(|s| rel.starts_with(s))
            && name != "tests.rs"
            && !name.ends_with("_tests.rs")
            && !rel.split('/').any(|c| c == "tests" || c == "testing")
    });
    assert!(!out.is_empty(), "no sources under {dir}");
    out
}

/// The code of `path`: without comments, and without what follows `#[cfg(test)]`.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push_str(line.split(" // ").next().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The places in `files` where any of `forbidden` appears.
fn found(files: &[PathBuf], forbidden: &[&str]) -> Vec<String> {
    let mut hits = Vec::new();
    for f in files {
        let code = code(f);
        for word in forbidden {
            if code.contains(word) {
                hits.push(format!("{}: {word}", f.display()));
            }
        }
    }
    hits
}

const CLOCKS: &[&str] = &["SystemTime::now", "Instant::now", "Utc::now"];
const ASYNC: &[&str] = &["async fn", ".await", "tokio::"];
const IO: &[&str] = &["std::fs", "std::net", "TcpStream", "reqwest"];

#[test]
fn leaf_crates_depend_on_nothing_they_should_not() {
    // quantity: a leaf, only thiserror.
    assert_eq!(dependencies("quantity"), ["thiserror"]);
    // mesos knows nothing of pods, the registry or Kubernetes.
    let mesos = dependencies("mesos");
    for no in [
        "k8s-openapi",
        "registry",
        "apiserver",
        "procurement",
        "framework",
    ] {
        assert!(!mesos.iter().any(|d| d == no), "mesos depends on {no}");
    }
    // The API shim knows nothing of Mesos.
    let api = dependencies("apiserver");
    for no in [
        "mesos",
        "localmesos",
        "procurement",
        "registry",
        "framework",
        "executor",
    ] {
        assert!(!api.iter().any(|d| d == no), "apiserver depends on {no}");
    }
    // Procurement, the registry and the controllers are not the framework.
    for krate in ["procurement", "registry", "controllers"] {
        let deps = dependencies(krate);
        assert!(
            !deps
                .iter()
                .any(|d| d == "framework" || d == "executor" || d == "localmesos"),
            "{krate}: {deps:?}"
        );
    }
}

#[test]
fn the_pure_parts_read_no_clock_await_nothing_and_do_no_io() {
    let mut forbidden = CLOCKS.to_vec();
    forbidden.extend_from_slice(ASYNC);
    forbidden.extend_from_slice(IO);
    let mut hits = Vec::new();
    hits.extend(found(&sources("registry/src", &[]), &forbidden));
    hits.extend(found(&sources("procurement/src", &[]), &forbidden));
    hits.extend(found(&sources("controllers/src", &["runner"]), &forbidden));
    hits.extend(found(
        &sources("framework/src/core", &["runner"]),
        &forbidden,
    ));
    assert!(hits.is_empty(), "{hits:#?}");
    // The check can fail: the core's runner, which does I/O, is caught by it.
    assert!(!found(&sources("framework/src/core/runner", &[]), ASYNC).is_empty());
}
