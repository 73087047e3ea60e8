//! Small images built in a test: layers from files (or hostile raw
//! entries), a config, a manifest, and `docker save` / OCI layout archives.

use std::io::Write as _;

use sha2::{Digest as _, Sha256};

use crate::manifest::{DOCKER_MANIFEST, OCI_MANIFEST};

/// The marker file [`busybox_image`] holds, and what it says.
pub const MARKER_PATH: &str = "etc/mesopod-image";
/// The marker's content.
pub const MARKER: &str = "this file exists only in the mesopod test image\n";

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// An uncompressed layer tarball being built.
pub struct Layer {
    builder: tar::Builder<Vec<u8>>,
}

impl Default for Layer {
    fn default() -> Self {
        Self::new()
    }
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h
}

impl Layer {
    /// An empty layer.
    pub fn new() -> Self {
        Self {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    /// A directory.
    pub fn dir(mut self, path: &str) -> Self {
        let mut h = header(tar::EntryType::Directory, 0o755, 0);
        self.builder
            .append_data(&mut h, path, std::io::empty())
            .expect("a directory entry");
        self
    }

    /// A regular file.
    pub fn file(mut self, path: &str, mode: u32, data: &[u8]) -> Self {
        let mut h = header(tar::EntryType::Regular, mode, data.len() as u64);
        self.builder
            .append_data(&mut h, path, data)
            .expect("a file entry");
        self
    }

    /// A symlink to `target`.
    pub fn symlink(mut self, path: &str, target: &str) -> Self {
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        self.builder
            .append_link(&mut h, path, target)
            .expect("a symlink entry");
        self
    }

    /// A hardlink to `target`, written as given (even `..`).
    pub fn hardlink_raw(self, path: &str, target: &str) -> Self {
        let mut h = header(tar::EntryType::Link, 0o644, 0);
        h.set_link_name_literal(target).expect("a link name");
        self.raw(h, path, &[])
    }

    /// A file whose path is written as given, `..` and all: what a hostile
    /// layer holds.
    pub fn file_raw(self, path: &str, data: &[u8]) -> Self {
        let h = header(tar::EntryType::Regular, 0o644, data.len() as u64);
        self.raw(h, path, data)
    }

    fn raw(mut self, mut h: tar::Header, path: &str, data: &[u8]) -> Self {
        let name = &mut h.as_old_mut().name;
        name.fill(0);
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        self.builder.append(&h, data).expect("a raw entry");
        self
    }

    /// The tarball.
    pub fn tar(self) -> Vec<u8> {
        self.builder.into_inner().expect("a finished tarball")
    }
}

/// gzip of `bytes`.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).expect("gzip in memory");
    enc.finish().expect("gzip in memory")
}

/// An image ready to push: its blobs and manifest.
#[derive(Debug, Clone)]
pub struct TestImage {
    /// The config JSON.
    pub config: Vec<u8>,
    /// Each layer as pushed (gzip), bottom first.
    pub layers: Vec<Vec<u8>>,
    /// Each layer uncompressed, for archives.
    pub layer_tars: Vec<Vec<u8>>,
    /// The manifest JSON.
    pub manifest: Vec<u8>,
    /// The manifest's media type.
    pub media_type: &'static str,
}

impl TestImage {
    /// The manifest's digest.
    pub fn digest(&self) -> String {
        sha256(&self.manifest)
    }

    /// The digest of layer `i` as pushed.
    pub fn layer_digest(&self, i: usize) -> String {
        sha256(&self.layers[i])
    }
}

/// What goes into an image's config.
#[derive(Debug, Clone)]
pub struct Spec {
    /// `Entrypoint`.
    pub entrypoint: Option<Vec<String>>,
    /// `Cmd`.
    pub cmd: Option<Vec<String>>,
    /// `Env`.
    pub env: Vec<String>,
    /// `architecture`.
    pub architecture: String,
    /// Docker v2 media types instead of OCI's.
    pub docker_media_types: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Self {
            entrypoint: None,
            cmd: Some(vec!["sh".into()]),
            env: vec!["PATH=/bin".into()],
            architecture: "amd64".into(),
            docker_media_types: false,
        }
    }
}

/// An image of `layer_tars` (uncompressed; pushed gzip) with `spec`.
pub fn image(layer_tars: Vec<Vec<u8>>, spec: &Spec) -> TestImage {
    let layers: Vec<Vec<u8>> = layer_tars.iter().map(|t| gzip(t)).collect();
    image_with_blobs(layer_tars, layers, spec)
}

/// An image whose pushed layer blobs are `layers` as given (corrupt ones
/// included), with diff IDs from `layer_tars`.
pub fn image_with_blobs(layer_tars: Vec<Vec<u8>>, layers: Vec<Vec<u8>>, spec: &Spec) -> TestImage {
    let diff_ids: Vec<String> = layer_tars.iter().map(|t| sha256(t)).collect();
    let config = serde_json::json!({
        "architecture": spec.architecture,
        "os": "linux",
        "config": {"Entrypoint": spec.entrypoint, "Cmd": spec.cmd, "Env": spec.env},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let config = serde_json::to_vec(&config).expect("config JSON");
    let (media_type, config_type, layer_type) = if spec.docker_media_types {
        (
            DOCKER_MANIFEST,
            "application/vnd.docker.container.image.v1+json",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
        )
    } else {
        (
            OCI_MANIFEST,
            "application/vnd.oci.image.config.v1+json",
            "application/vnd.oci.image.layer.v1.tar+gzip",
        )
    };
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": media_type,
        "config": {"mediaType": config_type, "digest": sha256(&config), "size": config.len()},
        "layers": layers.iter().map(|l| serde_json::json!({
            "mediaType": layer_type, "digest": sha256(l), "size": l.len(),
        })).collect::<Vec<_>>(),
    });
    TestImage {
        manifest: serde_json::to_vec(&manifest).expect("manifest JSON"),
        config,
        layers,
        layer_tars,
        media_type,
    }
}

/// A layer with `/bin/busybox` (busybox-static), its applets `sh`, `cat`,
/// `id`, `ls`, `echo`, `sleep`, `hostname`, `env`, `true` and `false` as
/// symlinks, and [`MARKER_PATH`].
///
/// # Panics
///
/// When `/bin/busybox` cannot be read (see [`require_busybox`]).
pub fn busybox_layer() -> Vec<u8> {
    busybox_with_applets(&[
        "sh", "cat", "id", "ls", "echo", "sleep", "hostname", "env", "true", "false", "head", "dd",
    ])
}

/// A layer of `/bin/busybox` with every applet it lists (`httpd`, `date`,
/// `wget`…) linked in `/bin`: enough of an image for `examples/`, whose
/// pods name `busybox`.
///
/// # Panics
///
/// When `/bin/busybox` cannot be read or run.
pub fn busybox_full_layer() -> Vec<u8> {
    let list = std::process::Command::new("/bin/busybox")
        .arg("--list")
        .output()
        .expect("busybox --list");
    let list = String::from_utf8_lossy(&list.stdout);
    let applets: Vec<&str> = list
        .split_whitespace()
        .filter(|a| *a != "busybox")
        .collect();
    busybox_with_applets(&applets)
}

/// `/bin/busybox`, `applets` linked to it, a passwd and group file, the
/// usual empty directories and [`MARKER_PATH`].
fn busybox_with_applets(applets: &[&str]) -> Vec<u8> {
    let busybox = std::fs::read("/bin/busybox").expect("/bin/busybox (busybox-static)");
    let mut layer = Layer::new()
        .dir("bin")
        .file("bin/busybox", 0o755, &busybox)
        .dir("etc")
        .file(MARKER_PATH, 0o644, MARKER.as_bytes())
        .file(
            "etc/passwd",
            0o644,
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
        )
        .file("etc/group", 0o644, b"root:x:0:\nnogroup:x:65534:\n");
    for dir in ["tmp", "proc", "dev", "sys", "root"] {
        layer = layer.dir(dir);
    }
    for applet in applets {
        layer = layer.symlink(&format!("bin/{applet}"), "/bin/busybox");
    }
    layer.tar()
}

/// The busybox image with the default [`Spec`] (Cmd `sh`).
pub fn busybox_image() -> TestImage {
    image(vec![busybox_layer()], &Spec::default())
}

/// A `docker save` tarball of `images`, each with its repo tags.
pub fn docker_save(images: &[(&[&str], &TestImage)]) -> Vec<u8> {
    let mut out = tar::Builder::new(Vec::new());
    let mut manifest = Vec::new();
    let add = |out: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8]| {
        let mut h = header(tar::EntryType::Regular, 0o644, data.len() as u64);
        out.append_data(&mut h, path, data)
            .expect("an archive entry");
    };
    for (tags, image) in images {
        let config_name = format!("{}.json", &sha256(&image.config)[7..]);
        add(&mut out, &config_name, &image.config);
        let mut layers = Vec::new();
        for tar_bytes in &image.layer_tars {
            let name = format!("{}/layer.tar", &sha256(tar_bytes)[7..]);
            add(&mut out, &name, tar_bytes);
            layers.push(name);
        }
        manifest
            .push(serde_json::json!({"Config": config_name, "RepoTags": tags, "Layers": layers}));
    }
    let manifest = serde_json::to_vec(&manifest).expect("manifest.json");
    add(&mut out, "manifest.json", &manifest);
    out.into_inner().expect("an archive")
}

/// An OCI image layout tarball holding `image` named `name`.
pub fn oci_archive(name: &str, image: &TestImage) -> Vec<u8> {
    let mut out = tar::Builder::new(Vec::new());
    let mut add = |path: &str, data: &[u8]| {
        let mut h = header(tar::EntryType::Regular, 0o644, data.len() as u64);
        out.append_data(&mut h, path, data)
            .expect("an archive entry");
    };
    add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#);
    let mut blobs = vec![image.config.clone(), image.manifest.clone()];
    blobs.extend(image.layers.iter().cloned());
    for blob in &blobs {
        add(&format!("blobs/sha256/{}", &sha256(blob)[7..]), blob);
    }
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": image.media_type,
            "digest": image.digest(),
            "size": image.manifest.len(),
            "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": "latest"},
        }],
    });
    add(
        "index.json",
        &serde_json::to_vec(&index).expect("index.json"),
    );
    out.into_inner().expect("an archive")
}
