//! Test helpers (feature `testing`): Debian's `docker-registry` started on
//! 127.0.0.1 with a temporary storage directory, and small images built
//! from `/bin/busybox` (busybox-static) to push to it. For this crate's
//! tests and the executor's end-to-end tests.
//!
//! A test that needs the registry calls [`Registry::start_or_skip`]: it
//! panics under `CI=true` when the registry is missing (CI installs it with
//! `.ci/install-registry.sh`) and elsewhere returns `None` after saying
//! loudly what was skipped.

mod build;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub use build::{
    Layer, MARKER, MARKER_PATH, Spec, TestImage, busybox_full_layer, busybox_image, busybox_layer,
    docker_save, gzip, image, image_with_blobs, oci_archive, sha256,
};

use crate::manifest::OCI_INDEX;

/// Where Debian installs the registry.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// Whether CI demands every test run.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `true` when `need` holds; else panics under `CI=true`, or prints that
/// `test` is skipped and why and returns `false`.
pub fn require(test: &str, need: bool, what: &str) -> bool {
    if need {
        return true;
    }
    assert!(!in_ci(), "{test}: {what} is required under CI=true");
    eprintln!("SKIPPED {test}: {what} is missing");
    false
}

/// [`require`] for root (mounts, chown).
pub fn require_root(test: &str) -> bool {
    require(test, rustix::process::geteuid().is_root(), "root")
}

/// The user of [`Registry::start_with_auth`]'s registry.
pub const AUTH_USER: &str = "mesopod";
/// Its password (a test fixture, not a secret).
pub const AUTH_PASSWORD: &str = "test-password";
/// bcrypt of [`AUTH_PASSWORD`], for the registry's htpasswd file.
const AUTH_HTPASSWD: &str =
    "mesopod:$2b$04$xcHwIreEBVuNei9waeAKwO6KOMdWtpRo.fd99jYk3W9qDqD0uLBAK\n";

/// A `docker-registry` on 127.0.0.1, ended when dropped.
pub struct Registry {
    guard: Option<testkit::ProcessGuard<std::process::Child>>,
    dir: tempfile::TempDir,
    port: u16,
    http: reqwest::Client,
    auth: bool,
    tls: bool,
}

/// The files of a registry serving TLS ([`Registry::start_tls`]).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Its certificate chain (PEM), valid for 127.0.0.1.
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA that signed `cert`, which the pushing client trusts.
    pub ca: PathBuf,
}

impl Registry {
    /// Starts a registry, or skips as [`require`] says when
    /// `docker-registry` or `/bin/busybox` is not installed.
    ///
    /// # Panics
    ///
    /// When the registry does not start and answer within 30 s.
    pub async fn start_or_skip(test: &str) -> Option<Self> {
        if !Self::installed(test) {
            return None;
        }
        Some(Self::start().await)
    }

    /// [`Registry::start_tls`], or skips as [`Registry::start_or_skip`].
    ///
    /// # Panics
    ///
    /// As [`Registry::start`].
    pub async fn start_tls_or_skip(test: &str, tls: TlsFiles) -> Option<Self> {
        if !Self::installed(test) {
            return None;
        }
        Some(Self::start_tls(tls).await)
    }

    fn installed(test: &str) -> bool {
        let installed = Path::new(REGISTRY_BIN).exists() && Path::new("/bin/busybox").exists();
        require(
            test,
            installed,
            "docker-registry and busybox-static (.ci/install-registry.sh)",
        )
    }

    /// Starts a registry on a free loopback port.
    ///
    /// # Panics
    ///
    /// When it does not start and answer within 30 s.
    pub async fn start() -> Self {
        Self::start_inner(false, None).await
    }

    /// A registry serving HTTPS with `tls`'s certificate.
    ///
    /// # Panics
    ///
    /// As [`Registry::start`].
    pub async fn start_tls(tls: TlsFiles) -> Self {
        Self::start_inner(false, Some(tls)).await
    }

    /// A registry that asks for basic auth ([`AUTH_USER`], [`AUTH_PASSWORD`]).
    ///
    /// # Panics
    ///
    /// As [`Registry::start`].
    pub async fn start_with_auth() -> Self {
        Self::start_inner(true, None).await
    }

    async fn start_inner(auth: bool, tls: Option<TlsFiles>) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        // The registry takes an address, not a listener: a port just freed
        // by the kernel is the nearest thing to port 0.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("storage").display()
        );
        let config = match &tls {
            Some(tls) => format!(
                "{config}  tls:\n    certificate: {}\n    key: {}\n",
                tls.cert.display(),
                tls.key.display()
            ),
            None => config,
        };
        let config = if auth {
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, AUTH_HTPASSWD).expect("htpasswd");
            format!(
                "{config}auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
                htpasswd.display()
            )
        } else {
            config
        };
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("registry log");
        let guard = testkit::ProcessGuard::spawn(
            Command::new(REGISTRY_BIN)
                .arg("serve")
                .arg(&config_path)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log fd"))
                .stderr(log),
        )
        .expect("docker-registry starts")
        .grace(Duration::from_secs(2));
        testkit::init_crypto();
        let http = match &tls {
            Some(tls) => {
                let pem = std::fs::read(&tls.ca).expect("the registry's CA");
                let ca = reqwest::Certificate::from_pem(&pem).expect("a PEM CA");
                reqwest::Client::builder().add_root_certificate(ca).build()
            }
            None => reqwest::Client::builder().build(),
        };
        let registry = Self {
            guard: Some(guard),
            dir,
            port,
            http: http.expect("an HTTP client"),
            auth,
            tls: tls.is_some(),
        };
        let url = format!("{}/v2/", registry.base());
        let http = registry.http.clone();
        testkit::wait_until(
            "the registry to answer /v2/",
            Duration::from_secs(30),
            async || {
                http.get(&url)
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .ok()
            },
            |s| *s == Some(200) || *s == Some(401),
        )
        .await;
        registry
    }

    /// `127.0.0.1:<port>`, the registry part of its images' references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn base(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.host())
    }

    /// Where the registry keeps blobs (to corrupt one behind its back).
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    /// Ends the registry; later pulls find nothing listening.
    pub fn stop(&mut self) {
        self.guard = None;
    }

    /// How many times the blob `digest` of `repository` was fetched (GET).
    pub fn blob_fetches(&self, repository: &str, digest: &str) -> usize {
        let needle = format!("\"GET /v2/{repository}/blobs/{digest} ");
        std::fs::read_to_string(self.dir.path().join("registry.log"))
            .map(|log| log.matches(&needle).count())
            .unwrap_or(0)
    }

    fn with_auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if self.auth {
            req.basic_auth(AUTH_USER, Some(AUTH_PASSWORD))
        } else {
            req
        }
    }

    /// Uploads `blob` to `repository`: a session, then one PUT.
    pub async fn push_blob(&self, repository: &str, blob: &[u8]) -> String {
        let digest = sha256(blob);
        let url = format!("{}/v2/{repository}/blobs/uploads/", self.base());
        let resp = self
            .with_auth(self.http.post(&url))
            .send()
            .await
            .expect("upload session");
        assert_eq!(
            resp.status().as_u16(),
            202,
            "upload session: {:?}",
            resp.text().await
        );
        let location = resp
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .expect("a Location")
            .to_string();
        let location = if location.starts_with("http") {
            location
        } else {
            format!("{}{location}", self.base())
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let resp = self
            .with_auth(self.http.put(format!("{location}{sep}digest={digest}")))
            .header("content-type", "application/octet-stream")
            .body(blob.to_vec())
            .send()
            .await
            .expect("blob upload");
        assert_eq!(
            resp.status().as_u16(),
            201,
            "blob upload: {:?}",
            resp.text().await
        );
        digest
    }

    /// Puts `manifest` (of `media_type`) at `repository:reference`.
    pub async fn push_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        manifest: &[u8],
    ) -> String {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base());
        let resp = self
            .with_auth(self.http.put(&url))
            .header("content-type", media_type)
            .body(manifest.to_vec())
            .send()
            .await
            .expect("manifest upload");
        assert_eq!(
            resp.status().as_u16(),
            201,
            "manifest upload: {:?}",
            resp.text().await
        );
        sha256(manifest)
    }

    /// Pushes `image` as `repository:tag` and returns its reference,
    /// `127.0.0.1:<port>/<repository>:<tag>`.
    pub async fn push(&self, repository: &str, tag: &str, image: &TestImage) -> String {
        self.push_blob(repository, &image.config).await;
        for layer in &image.layers {
            self.push_blob(repository, layer).await;
        }
        self.push_manifest(repository, tag, image.media_type, &image.manifest)
            .await;
        format!("{}/{repository}:{tag}", self.host())
    }

    /// Pushes each image by digest and a manifest list of them at
    /// `repository:tag`, each entry with its `(os, architecture)`.
    pub async fn push_list(
        &self,
        repository: &str,
        tag: &str,
        entries: &[(&TestImage, &str, &str)],
    ) -> String {
        let mut manifests = Vec::new();
        for (image, os, arch) in entries {
            self.push(repository, &image.digest(), image).await;
            manifests.push(serde_json::json!({
                "mediaType": image.media_type,
                "digest": image.digest(),
                "size": image.manifest.len(),
                "platform": {"os": os, "architecture": arch},
            }));
        }
        let index =
            serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests});
        let index = serde_json::to_vec(&index).expect("index JSON");
        self.push_manifest(repository, tag, OCI_INDEX, &index).await;
        format!("{}/{repository}:{tag}", self.host())
    }
}

/// Every path under `root`, relative and sorted, directories with a
/// trailing `/`: to assert what a store holds.
pub fn tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(format!("{rel}/"));
                walk(root, &path, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}
