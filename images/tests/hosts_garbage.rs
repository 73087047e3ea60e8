//! Random and mutated `hosts.toml` files and `--registry-mirror` values:
//! refused with the file (and line) or Docker's words, never a panic.
#![allow(clippy::unwrap_used, missing_docs)]

use images::{HostsError, RegistryHosts};
use proptest::prelude::*;

const VALID: &str = r#"server = "https://registry-1.docker.io"

[host."http://127.0.0.1:5001"]
  capabilities = ["pull", "resolve"]
  ca = ["a.pem", "/etc/b.pem"]
  client = [["c.cert", "c.key"]]
  skip_verify = false
  dial_timeout = "1s"
  [host."http://127.0.0.1:5001".header]
    x-a = ["1", "2"]

[host."https://mirror.example/prefix"]
  override_path = true
"#;

fn load(text: &[u8]) -> Result<RegistryHosts, HostsError> {
    let dir = tempfile::tempdir().unwrap();
    let hub = dir.path().join("docker.io");
    std::fs::create_dir_all(&hub).unwrap();
    std::fs::write(hub.join("hosts.toml"), text).unwrap();
    let result = RegistryHosts::load(&[], Some(dir.path()));
    if let Err(HostsError::File { path, line, .. }) = &result {
        assert_eq!(path, &hub.join("hosts.toml"));
        assert!(*line >= 1 && *line <= text.split(|b| *b == b'\n').count().max(1));
    }
    result
}

#[test]
fn the_valid_file_loads() {
    load(VALID.as_bytes()).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = load(&bytes);
    }

    #[test]
    fn mutated_files_never_panic(
        at in 0usize..VALID.len(),
        cut in 0usize..40,
        with in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let mut bytes = VALID.as_bytes().to_vec();
        let end = (at + cut).min(bytes.len());
        bytes.splice(at..end, with);
        let _ = load(&bytes);
    }

    #[test]
    fn random_mirrors_are_accepted_or_refused_in_dockers_words(mirror in "\\PC{0,40}") {
        if let Err(e) = RegistryHosts::load(&[mirror], None) {
            prop_assert!(e.to_string().starts_with("invalid mirror: "), "{}", e);
        }
    }
}
