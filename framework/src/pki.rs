//! The certificates mesopod makes for itself on first start with TLS: a CA, a serving
//! certificate for the API, an admin client certificate (`O=system:masters`), a service
//! account signing key, and `DATA_DIR/kubeconfig` for the admin. Made once, in
//! `DATA_DIR/pki/`; later starts reuse them (only the kubeconfig is rewritten, since the
//! address may change).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, date_time_ymd,
};

/// Why the PKI could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Key or certificate generation failed.
    #[error("cannot generate certificates: {0}")]
    Generate(#[from] rcgen::Error),
}

/// Where the generated files are.
#[derive(Debug, Clone)]
pub struct PkiFiles {
    /// The CA certificate (also the client CA).
    pub ca_cert: PathBuf,
    /// The API's serving certificate and key.
    pub serving_cert: PathBuf,
    /// The serving key.
    pub serving_key: PathBuf,
    /// The admin's client certificate.
    pub admin_cert: PathBuf,
    /// The admin's key.
    pub admin_key: PathBuf,
    /// The service account token signing key (PKCS#8, P-256).
    pub sa_key: PathBuf,
}

impl PkiFiles {
    fn in_dir(dir: &Path) -> Self {
        Self {
            ca_cert: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            sa_key: dir.join("sa.key"),
        }
    }

    fn all(&self) -> [&Path; 6] {
        [
            &self.ca_cert,
            &self.serving_cert,
            &self.serving_key,
            &self.admin_cert,
            &self.admin_key,
            &self.sa_key,
        ]
    }
}

/// The admin kubeconfig's path in `data_dir`.
pub fn kubeconfig_path(data_dir: &Path) -> PathBuf {
    data_dir.join("kubeconfig")
}

fn write(path: &Path, text: &str, secret: bool) -> Result<(), PkiError> {
    let io = |source| PkiError::Io {
        path: path.to_owned(),
        source,
    };
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(if secret { 0o600 } else { 0o644 });
    }
    let mut f = opts.open(path).map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)
}

fn this_year() -> i32 {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    1970 + (secs / 31_556_952) as i32
}

fn params(cn: &str, sans: Vec<String>, years: i32) -> Result<CertificateParams, PkiError> {
    let mut p = CertificateParams::new(sans)?;
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    let year = this_year();
    p.not_before = date_time_ymd(year - 1, 1, 1);
    p.not_after = date_time_ymd(year + years, 1, 1);
    Ok(p)
}

/// Makes the PKI in `data_dir/pki` unless it is there; `hosts` are the serving
/// certificate's names and addresses (localhost and 127.0.0.1 are always in).
///
/// # Errors
/// A file cannot be written, or generation failed.
pub fn ensure(data_dir: &Path, hosts: &[String]) -> Result<PkiFiles, PkiError> {
    let dir = data_dir.join("pki");
    let files = PkiFiles::in_dir(&dir);
    if files.all().iter().all(|p| p.exists()) {
        return Ok(files);
    }
    std::fs::create_dir_all(&dir).map_err(|source| PkiError::Io {
        path: dir.clone(),
        source,
    })?;
    let ca_key = KeyPair::generate()?;
    let mut ca = params("mesopod-ca", Vec::new(), 10)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut sans: Vec<String> = vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
    ];
    for h in hosts {
        if !sans.contains(h) {
            sans.push(h.clone());
        }
    }
    let serving_key = KeyPair::generate()?;
    let mut serving = params("kube-apiserver", sans, 1)?;
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = params("kubernetes-admin", Vec::new(), 1)?;
    admin
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    admin.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    let sa_key = KeyPair::generate()?;
    write(&files.sa_key, &sa_key.serialize_pem(), true)?;
    write(&files.serving_key, &serving_key.serialize_pem(), true)?;
    write(&files.serving_cert, &serving_cert.pem(), false)?;
    write(&files.admin_key, &admin_key.serialize_pem(), true)?;
    write(&files.admin_cert, &admin_cert.pem(), false)?;
    // The CA last: its presence with the others means the set is complete.
    write(&files.ca_cert, &ca_cert.pem(), false)?;
    Ok(files)
}

/// Writes `DATA_DIR/kubeconfig` for the admin, pointing at `server` (an https URL).
///
/// # Errors
/// A file cannot be read or written.
pub fn write_kubeconfig(
    data_dir: &Path,
    server: &str,
    files: &PkiFiles,
) -> Result<PathBuf, PkiError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|source| PkiError::Io {
            path: p.to_owned(),
            source,
        })
    };
    let b64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mesopod\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: mesopod-admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: mesopod\n  context:\n    cluster: mesopod\n    user: mesopod-admin\ncurrent-context: mesopod\n",
        ca = b64(read(&files.ca_cert)?),
        cert = b64(read(&files.admin_cert)?),
        key = b64(read(&files.admin_key)?),
    );
    let path = kubeconfig_path(data_dir);
    write(&path, &text, true)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_admin_certificate_names_a_system_masters_user_and_files_are_made_once() {
        let dir = tempfile::tempdir().unwrap();
        let files = ensure(dir.path(), &["mesopod.example".into()]).unwrap();
        let pem = std::fs::read(&files.admin_cert).unwrap();
        let der = apiserver::tls::load_certs(&files.admin_cert).unwrap();
        let (cn, orgs) = apiserver::auth::der::subject_names(&der[0]).unwrap();
        assert_eq!(
            (cn.as_str(), orgs.as_slice()),
            ("kubernetes-admin", &["system:masters".to_owned()][..])
        );
        apiserver::tls::server_config(
            &files.serving_cert,
            &files.serving_key,
            Some(&files.ca_cert),
        )
        .unwrap();
        let again = ensure(dir.path(), &[]).unwrap();
        assert_eq!(
            std::fs::read(&again.admin_cert).unwrap(),
            pem,
            "a second start reuses the PKI"
        );
        let kc = write_kubeconfig(dir.path(), "https://127.0.0.1:6443", &files).unwrap();
        let text = std::fs::read_to_string(kc).unwrap();
        assert!(
            text.contains("server: https://127.0.0.1:6443") && text.contains("client-key-data: ")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&files.admin_key)
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "keys are private to their owner");
        }
    }
}
