//! Seccomp end to end with the real kubectl, on the embedded runtime and on
//! Debian's runc: `RuntimeDefault` (containerd's profile) confines a
//! container (`Seccomp: 2`, `unshare` refused with EPERM), `Unconfined`
//! does not, `--seccomp-default` confines a container that asks nothing,
//! a `Localhost` profile under `--root-dir` applies (to `kubectl exec` too,
//! on the embedded runtime), and a missing one leaves the container in `CreateContainerError`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::path::Path;
use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use framework::app::App;
use images::testing::Registry;
use k8s_openapi::api::core::v1::{ContainerState, Pod};
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);

/// What each confined container prints: its seccomp mode, then whether
/// `unshare(CLONE_NEWUSER)` (no capability needed, but outside
/// containerd's profile without CAP_SYS_ADMIN) and `mkdir` went through.
const PROBE: &str = "grep '^Seccomp:' /proc/self/status; \
     unshare -U true 2>&1; echo unshare-rc=$?; \
     mkdir /tmp/made 2>&1; echo mkdir-rc=$?";

/// A Localhost profile: everything but `mkdir`, refused with EACCES.
const DENY_MKDIR: &str = r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
    {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}"#;

fn container(name: &str, image: &str, profile: &str, script: &str) -> String {
    let security = match profile {
        "" => String::new(),
        p => format!("    securityContext:\n      seccompProfile:\n{p}"),
    };
    format!(
        "  - name: {name}\n    image: {image}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n{security}"
    )
}

fn state(p: &Pod, name: &str) -> Option<ContainerState> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)?
        .state
        .clone()
}

async fn cluster_with(runtime: &str, store: &Path, root_dir: &Path) -> App {
    let mut cfg = common::cluster::app_config(Setup {
        agents: vec![agent("cpus:8;mem:8192;disk:20480", "rack:r0", 0)],
        ..Setup::default()
    });
    cfg.executor.args = vec![
        format!("--container-runtime={runtime}"),
        format!("--image-store={}", store.display()),
        "--seccomp-default".into(),
        format!("--root-dir={}", root_dir.display()),
    ];
    App::start(cfg).await.expect("mesopod starts")
}

async fn scenario(runtime: &str, registry: &Registry) {
    let (_keep, store) = store();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("seccomp/profiles")).unwrap();
    std::fs::write(
        root.path().join("seccomp/profiles/deny-mkdir.json"),
        DENY_MKDIR,
    )
    .unwrap();
    let repository = if runtime == "embedded" {
        "test/seccomp-embedded"
    } else {
        "test/seccomp-runc"
    };
    let image = registry.push(repository, "1", &test_image()).await;
    let app = cluster_with(runtime, &store, root.path()).await;
    let server = app.api_url();
    let k = Kubectl::new(&server);

    let localhost = "        type: Localhost\n        localhostProfile: profiles/deny-mkdir.json\n";
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: confined\nspec:\n  restartPolicy: Never\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n{}{}{}{}{}",
        container(
            "runtime-default",
            &image,
            "        type: RuntimeDefault\n",
            PROBE
        ),
        container("unconfined", &image, "        type: Unconfined\n", PROBE),
        container("defaulted", &image, "", PROBE),
        container("localhost", &image, localhost, PROBE),
        container("sleeper", &image, localhost, "sleep 3600"),
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let probes = ["runtime-default", "unconfined", "defaulted", "localhost"];
    let done = wait_pod(app.api(), "default", "confined", T, |p| {
        probes
            .iter()
            .all(|c| state(p, c).is_some_and(|s| s.terminated.is_some()))
            && state(p, "sleeper").is_some_and(|s| s.running.is_some())
    })
    .await;
    for c in probes {
        let code = state(&done, c).unwrap().terminated.unwrap().exit_code;
        assert_eq!(code, 0, "{c}: {:?}", done.status);
    }
    let logs = |c: &'static str| {
        let k = Kubectl::new(&server);
        async move { ok(&k.run(&["logs", "confined", "-c", c]).await) }
    };
    let eperm = "Operation not permitted";
    for (c, seccomp, unshare_rc, mkdir_rc) in [
        ("runtime-default", "2", "1", "0"),
        ("unconfined", "0", "0", "0"),
        ("defaulted", "2", "1", "0"),
        ("localhost", "2", "0", "1"),
    ] {
        let text = logs(c).await;
        let want = [
            format!("Seccomp:\t{seccomp}"),
            format!("unshare-rc={unshare_rc}"),
            format!("mkdir-rc={mkdir_rc}"),
        ];
        for w in &want {
            assert!(text.contains(w.as_str()), "{c}: {w:?} not in\n{text}");
        }
        // containerd's profile answers EPERM; the Localhost one EACCES.
        assert_eq!(text.contains(eperm), unshare_rc == "1", "{c}:\n{text}");
        assert_eq!(
            text.contains("Permission denied"),
            mkdir_rc == "1",
            "{c}:\n{text}"
        );
    }
    // What `kubectl exec` runs is under the container's filter too. Only
    // on the embedded runtime: `runc exec` reads the bundle's config.json,
    // which the executor removes once the container runs (a separate bug).
    if runtime == "embedded" {
        let exec = ok(&k
            .run(&[
                "exec", "confined", "-c", "sleeper", "--", "/bin/sh", "-c", PROBE,
            ])
            .await);
        assert!(
            exec.contains("Seccomp:\t2") && exec.contains("mkdir-rc=1"),
            "{exec}"
        );
    }

    // The pod's profile is each container's that sets none; a file that is
    // not there fails the container with kubelet's reason, never runs it.
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: missing\nspec:\n  restartPolicy: Never\n  \
         terminationGracePeriodSeconds: 1\n  securityContext:\n    seccompProfile:\n      \
         type: Localhost\n      localhostProfile: missing.json\n  containers:\n{}",
        container("main", &image, "", "echo must not run"),
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let failed = wait_pod(app.api(), "default", "missing", T, |p| {
        state(p, "main")
            .and_then(|s| s.waiting)
            .and_then(|w| w.reason)
            .as_deref()
            == Some("CreateContainerError")
    })
    .await;
    assert_eq!(phase(&failed), "Pending");
    let message = state(&failed, "main")
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap();
    let path = root.path().join("seccomp/missing.json");
    let want = format!(
        "spec: failed to generate spec: cannot load seccomp profile \"{p}\": open {p}: no such file or directory",
        p = path.display()
    );
    assert!(
        message.starts_with("failed to generate container \"") && message.ends_with(&want),
        "{message}"
    );
    let table = ok(&k.run(&["get", "pod", "missing"]).await);
    assert!(table.contains("CreateContainerError"), "{table}");

    for name in ["confined", "missing"] {
        ok(&k.run(&["delete", "pod", name, "--wait=false"]).await);
    }
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seccomp_profiles_confine_containers_on_the_embedded_runtime() {
    if prerequisites(false)
        && let Some(registry) = Registry::start_or_skip("seccomp on the embedded runtime").await
    {
        scenario("embedded", &registry).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seccomp_profiles_confine_containers_on_runc() {
    if prerequisites(true)
        && let Some(registry) = Registry::start_or_skip("seccomp on runc").await
    {
        scenario(RUNC, &registry).await;
    }
}
