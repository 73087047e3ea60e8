//! What the SPDY tests (`portforward_kubectl`, `exec_spdy_kubectl`) share: the
//! kubectl binaries, kubectl's own switch back to SPDY, and the pod they use.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// A versioned kubectl, run directly.
pub fn kubectl(version: &str) -> String {
    let program = format!("/usr/lib/google-cloud-sdk/bin/kubectl.{version}");
    assert!(Path::new(&program).exists(), "{program} is missing");
    program
}

/// `program` with `var=false` (`KUBECTL_PORT_FORWARD_WEBSOCKETS`,
/// `KUBECTL_REMOTE_COMMAND_WEBSOCKETS`: kubectl's switches back to SPDY) set
/// for that child only, as a wrapper script in `dir`.
pub fn with_websockets_off(dir: &Path, program: &str, var: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("kubectl-spdy");
    let script = format!("#!/bin/sh\n{var}=false exec {program} \"$@\"\n");
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper.display().to_string()
}

/// A pod `name` of the test image running `script` under `sh -c`.
pub fn pod(name: &str, image: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    \
         command: [\"/bin/sh\", \"-c\", {script:?}]\n"
    )
}
