//! What the end-to-end tests share; each test file takes the parts it uses.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod cluster;
pub mod ha;
pub mod harness;
pub mod logs;
pub mod mesosgo;
pub mod pymesos;
pub mod restart;
pub mod secure;

/// apiserver's own test server (in-process, on 127.0.0.1:0, with a test log
/// source), shared with apiserver's tests rather than copied.
#[path = "../../../apiserver/tests/common/mod.rs"]
pub mod shim;

/// The `mesopod` cargo built for these tests.
pub const MESOPOD: &str = env!("CARGO_BIN_EXE_mesopod-e2e");

/// An older and the matching kubectl, run directly (the dispatcher,
/// [`testkit::KUBECTL`], runs kubectl.1.<server minor>).
pub const KUBECTL_131: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.31";
pub const KUBECTL_133: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// Every kubectl the tests exercise.
pub const ALL_KUBECTLS: [&str; 3] = [testkit::KUBECTL, KUBECTL_131, KUBECTL_133];

/// The kubectl `program` against `server`.
pub fn kubectl(program: &str, server: &str) -> testkit::Kubectl {
    testkit::Kubectl::new(server).program(program)
}

/// The kubectl versions issue 18's tests run (the oldest two validate through
/// OpenAPI v2), run directly.
pub const ISSUE_18_KUBECTLS: [&str; 4] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.28",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.30",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
];

/// `1.27` of `/usr/lib/google-cloud-sdk/bin/kubectl.1.27`.
pub fn kubectl_version(program: &str) -> &str {
    program.rsplit("kubectl.").next().unwrap_or(program)
}

/// A kubectl whose `edit` runs `sed -i <expr>` on the file it opens: a wrapper script
/// setting KUBE_EDITOR, since kubectl's editor comes from the environment.
pub fn editing_kubectl(
    dir: &std::path::Path,
    program: &str,
    server: &str,
    sed: &str,
) -> testkit::Kubectl {
    let editor = dir.join("editor.sh");
    std::fs::write(&editor, format!("#!/bin/sh\nsed -i '{sed}' \"$1\"\n")).unwrap();
    let wrapper = dir.join("kubectl");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nKUBE_EDITOR={} exec {program} \"$@\"\n",
            editor.display()
        ),
    )
    .unwrap();
    for f in [&editor, &wrapper] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    testkit::Kubectl::new(server).program(wrapper.to_str().unwrap())
}

/// The header and the row of `name` of a `kubectl get` table, split into cells at runs
/// of two spaces or more (kubectl pads columns with three; `CREATED AT` is one cell).
pub fn row(table: &str, name: &str) -> (Vec<String>, Vec<String>) {
    let cells = |l: &str| {
        l.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let header = cells(table.lines().next().unwrap_or(""));
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in {table}"));
    (header, cells(line))
}
