//! TLS to a registry host: Docker's `certs.d` CA files, a host file's CAs
//! and client certificates, and containerd's words for a refused
//! certificate.

use std::path::{Path, PathBuf};

/// Docker's directory of per-registry TLS files.
pub(crate) const DOCKER_CERTS_DIR: &str = "/etc/docker/certs.d";

/// The PEM bytes of Docker's CA files for `host`: every `*.crt` in
/// `<certs_dir>/<host>/`, in name order; `None` without that directory.
pub(super) fn docker_cas(certs_dir: &Path, host: &str) -> Result<Option<Vec<u8>>, String> {
    let dir = certs_dir.join(host);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "crt"))
        .collect();
    files.sort();
    concat(&files).map(|pem| (!pem.is_empty()).then_some(pem))
}

/// The files' bytes, one after another.
pub(super) fn concat(files: &[PathBuf]) -> Result<Vec<u8>, String> {
    let mut pem = Vec::new();
    for file in files {
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        pem.extend_from_slice(&bytes);
        pem.push(b'\n');
    }
    Ok(pem)
}

/// containerd's words for a certificate rustls refused, from an error chain.
pub(super) fn x509_words(chain: &str) -> Option<String> {
    if !chain.contains("invalid peer certificate") {
        return None;
    }
    let what = if chain.contains("UnknownIssuer") {
        "x509: certificate signed by unknown authority".to_string()
    } else if chain.contains("Expired") || chain.contains("NotValidYet") {
        "x509: certificate has expired or is not yet valid".to_string()
    } else if chain.contains("NotValidForName") {
        "x509: certificate is not valid for the registry's name".to_string()
    } else {
        format!("x509: {chain}")
    };
    Some(format!("tls: failed to verify certificate: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_certificates_read_as_containerd_says() {
        assert_eq!(
            x509_words("error sending request: client error (Connect): invalid peer certificate: UnknownIssuer")
                .as_deref(),
            Some("tls: failed to verify certificate: x509: certificate signed by unknown authority")
        );
        assert_eq!(x509_words("connection refused"), None);
    }
}
