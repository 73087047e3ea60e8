//! What the tests of pods on a CNI network share: the plugins check, a
//! network of the test's own (bridge, subnet, lease dir) and a one-agent
//! cluster whose executor attaches pods to it with Debian's plugins.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use framework::app::App;
use serde_json::json;

use crate::common::cluster::{Setup, agent, app_config};

/// Whether Debian's CNI plugins are installed; fails under `CI=true`
/// without them, and says what `test` skips otherwise.
pub(crate) fn cni_ready(test: &str) -> bool {
    let missing: Vec<&str> = ["bridge", "host-local", "portmap", "loopback"]
        .into_iter()
        .filter(|p| !Path::new("/usr/lib/cni").join(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let msg = format!("{test} needs /usr/lib/cni/{missing:?} (.ci/install-cni.sh)");
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    false
}

/// A CNI network of the test's own; its bridge is removed at the end.
pub(crate) struct TestNet {
    _dir: tempfile::TempDir,
    bridge: String,
    /// The first three octets of the pods' /24.
    pub(crate) subnet: String,
    /// Where the conflist is (`--cni-conf-dir`).
    pub(crate) conf_dir: PathBuf,
    /// host-local's lease dir.
    ipam: PathBuf,
}

impl TestNet {
    /// `prefix` names the bridge (with this process's id), `octet` picks
    /// the second octet of the subnet: tests running side by side pick
    /// different ones.
    pub(crate) fn new(prefix: &str, octet: u32) -> TestNet {
        let dir = tempfile::tempdir().unwrap();
        let pid = std::process::id();
        let bridge = format!("{prefix}{}", pid % 100_000);
        let subnet = format!("10.{octet}.{}", pid % 250);
        let conf_dir = dir.path().join("net.d");
        std::fs::create_dir_all(&conf_dir).unwrap();
        let ipam = dir.path().join("ipam");
        let conf = json!({"cniVersion": "1.0.0", "name": "mesopod-e2e", "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": false,
             "ipam": {"type": "host-local", "subnet": format!("{subnet}.0/24"),
                      "dataDir": ipam}},
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]});
        std::fs::write(conf_dir.join("10-pods.conflist"), conf.to_string()).unwrap();
        TestNet {
            _dir: dir,
            bridge,
            subnet,
            conf_dir,
            ipam,
        }
    }

    /// The IPs host-local holds.
    pub(crate) fn leased(&self) -> Vec<String> {
        std::fs::read_dir(self.ipam.join("mesopod-e2e"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
            .collect()
    }

    /// How many IPs host-local holds.
    pub(crate) fn leases(&self) -> usize {
        self.leased().len()
    }

    /// A one-agent cluster on the embedded runtime whose pods join this
    /// network.
    pub(crate) async fn cluster(&self, store: &Path) -> App {
        let mut cfg = app_config(Setup {
            agents: vec![agent(
                "cpus:8;mem:8192;disk:20480;ports:[31000-31010]",
                "rack:r0",
                0,
            )],
            ..Setup::default()
        });
        cfg.executor.args = vec![
            "--container-runtime=embedded".into(),
            format!("--image-store={}", store.display()),
            format!("--cni-conf-dir={}", self.conf_dir.display()),
            "--cni-bin-dir=/usr/lib/cni".into(),
        ];
        // How long a dead executor's containers wait to be adopted (the
        // agent's --recovery_timeout): short, so that what nobody adopts
        // goes within a test.
        cfg.embedded.timing.recovery_timeout = ADOPTION_TIMEOUT;
        App::start(cfg).await.expect("mesopod starts")
    }
}

/// The agent's `--recovery_timeout` in these clusters.
pub(crate) const ADOPTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

impl Drop for TestNet {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
    }
}
