//! The files kubelet manages in every container: `/etc/hosts`,
//! `/etc/hostname` and `/etc/resolv.conf`.
//!
//! Images rarely carry usable ones (busybox has no `/etc/hosts`, so
//! `localhost` does not resolve), and a pod's containers must agree on them.
//! They are written once per pod into its sandbox directory and bind-mounted
//! into each container, unless the container mounts something of its own
//! there. As kubelet does:
//! - a pod with its own network (CNI) gets a managed hosts file: loopback
//!   names and its own IP with its hostname;
//! - a pod on the agent's network (the default, like `hostNetwork: true`)
//!   sees the agent's `/etc/hosts`;
//! - `resolv.conf` is the agent's (there is no cluster DNS, so every
//!   `dnsPolicy` resolves like `Default`).

use std::net::IpAddr;
use std::path::Path;

use super::sandbox::PodSandbox;
use super::spec::Mount;

const HOSTS: &str = "etc-hosts";
const HOSTNAME: &str = "etc-hostname";
const RESOLV: &str = "etc-resolv.conf";

/// kubelet's managed hosts file for a pod with its own IP.
fn managed_hosts(ip: IpAddr, hostname: &str) -> String {
    format!(
        "# Kubernetes-managed hosts file.\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n\
         {ip}\t{hostname}\n"
    )
}

/// The agent's file, or a minimal one when it cannot be read.
fn host_file(path: &str, fallback: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|_| fallback.to_owned())
}

/// Writes the pod's files into its sandbox directory.
pub(crate) fn write(sandbox: &PodSandbox, hostname: &str) -> Result<(), String> {
    let hosts = match sandbox.ip {
        Some(ip) => managed_hosts(ip, hostname),
        None => host_file(
            "/etc/hosts",
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        ),
    };
    let resolv = host_file("/etc/resolv.conf", "");
    for (name, text) in [
        (HOSTS, hosts),
        (HOSTNAME, format!("{hostname}\n")),
        (RESOLV, resolv),
    ] {
        write_file(&sandbox.dir.join(name), &text)?;
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The bind mounts of the pod's files, leaving out any destination the
/// container already mounts (a volume there wins, as in kubelet).
pub(crate) fn mounts(sandbox: &PodSandbox, taken: &[Mount]) -> Vec<Mount> {
    [
        ("/etc/hosts", HOSTS),
        ("/etc/hostname", HOSTNAME),
        ("/etc/resolv.conf", RESOLV),
    ]
    .into_iter()
    .filter(|(dest, _)| !taken.iter().any(|m| m.destination == *dest))
    .filter(|(_, name)| sandbox.dir.join(name).is_file())
    .map(|(dest, name)| Mount {
        destination: dest.to_owned(),
        kind: Some("bind".to_owned()),
        source: Some(sandbox.dir.join(name).display().to_string()),
        options: vec!["rbind".to_owned(), "rprivate".to_owned()],
    })
    .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sandbox(dir: &Path, ip: Option<IpAddr>) -> PodSandbox {
        PodSandbox {
            ip,
            ..PodSandbox::at(dir)
        }
    }

    #[test]
    fn a_pod_with_its_own_ip_gets_kubelets_managed_hosts_file() {
        let dir = tempfile::tempdir().unwrap();
        let sb = sandbox(dir.path(), Some("10.88.0.7".parse().unwrap()));
        write(&sb, "web").unwrap();
        let hosts = std::fs::read_to_string(dir.path().join(HOSTS)).unwrap();
        assert!(hosts.contains("127.0.0.1\tlocalhost\n"), "{hosts}");
        assert!(hosts.ends_with("10.88.0.7\tweb\n"), "{hosts}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(HOSTNAME)).unwrap(),
            "web\n"
        );
        let all = mounts(&sb, &[]);
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].destination, "/etc/hosts");
    }

    #[test]
    fn a_volume_mounted_on_one_of_the_files_wins() {
        let dir = tempfile::tempdir().unwrap();
        let sb = sandbox(dir.path(), None);
        write(&sb, "p").unwrap();
        let taken = [Mount {
            destination: "/etc/resolv.conf".into(),
            ..Mount::default()
        }];
        let dests: Vec<_> = mounts(&sb, &taken)
            .into_iter()
            .map(|m| m.destination)
            .collect();
        assert_eq!(dests, ["/etc/hosts", "/etc/hostname"]);
    }
}
