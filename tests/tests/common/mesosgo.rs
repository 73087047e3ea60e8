//! A mesos-go program (Debian's `golang-github-mesos-mesos-go-dev`, its v1
//! HTTP API) built from `tests/go/<name>/main.go` in GOPATH mode, so nothing
//! is fetched: whether Go and mesos-go are installed
//! (`.ci/install-mesos-go.sh`; required under `CI=true`, else skipped
//! loudly), and the build.

use std::path::PathBuf;
use std::process::Stdio;

/// Where Debian puts Go libraries' source.
const GOPATH: &str = "/usr/share/gocode";
/// A package of mesos-go's v1 scheduler client, to tell that it is there.
const MESOS_GO: &str =
    "/usr/share/gocode/src/github.com/mesos/mesos-go/api/v1/lib/httpcli/httpsched";

/// Whether a mesos-go program can be built. If not: a failure under
/// `CI=true`, else `false` after saying that `test` is skipped and why.
pub fn available_or_skip(test: &str) -> bool {
    let go = std::process::Command::new("go")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if go && std::path::Path::new(MESOS_GO).is_dir() {
        return true;
    }
    let msg = "Go or mesos-go is not installed (run .ci/install-mesos-go.sh)";
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{msg}: required in CI"
    );
    eprintln!("\n!!!!!!!! SKIPPED {test}: {msg} !!!!!!!!\n");
    false
}

/// Builds `tests/go/<name>` and returns the program's path. Go's build cache
/// lives in cargo's per-target temporary directory, so a rerun links only;
/// tests of one binary build one at a time (one output path, one cache).
pub async fn build(name: &str) -> PathBuf {
    static BUILDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = BUILDING.lock().await;
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mesosgo");
    let out = tmp.join(name);
    let source = format!("{}/go/{name}/main.go", env!("CARGO_MANIFEST_DIR"));
    let built = tokio::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(&source)
        .env("GO111MODULE", "off")
        .env("GOPATH", GOPATH)
        .env("GOCACHE", tmp.join("cache"))
        .env("GOFLAGS", "")
        .kill_on_drop(true)
        .output()
        .await
        .expect("go runs");
    assert!(
        built.status.success(),
        "go build {source}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}
