//! `load_archive`: images from a `docker save` tarball or an OCI image
//! layout archive (plain or gzip), as `kind load` imports them.
//!
//! The archive is unpacked into the store's `tmp` (refusing paths that
//! escape it), each blob is hashed and moved into the store, and each image
//! is then stored as a pull would store it, from those local blobs only.

use std::fs;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::error::StoreError;
use crate::manifest::{self, Manifest, OCI_MANIFEST};
use crate::reference::Reference;
use crate::store::record::Layout;
use crate::store::{Image, ImageStore, Source};
use crate::unpack::{self, UnpackError};

/// An image of the archive, ready to import from local blobs.
struct Found {
    names: Vec<String>,
    top_digest: String,
    manifest: Vec<u8>,
    manifest_digest: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SaveEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

impl ImageStore {
    /// Imports every named image of the `docker save` or OCI layout
    /// archive at `path` and returns them.
    ///
    /// # Errors
    ///
    /// When the archive is unreadable, not one of those formats, holds a
    /// blob that is not its digest, or names no image.
    pub async fn load_archive(&self, path: &Path) -> Result<Vec<Image>, StoreError> {
        let layout = Layout {
            root: self.root().to_path_buf(),
        };
        let archive = path.to_path_buf();
        let temp = layout.temp("archive");
        let (layout2, temp2) = (layout.clone(), temp.clone());
        let found = tokio::task::spawn_blocking(move || read_archive(&layout2, &archive, &temp2))
            .await
            .map_err(|e| io::Error::other(e).to_string());
        let _ = tokio::task::spawn_blocking(move || unpack::remove_any(&temp)).await;
        let archive_error = |detail: String| StoreError::Archive {
            path: path.to_path_buf(),
            detail,
        };
        let found = found.map_err(archive_error)?.map_err(archive_error)?;
        let mut images = Vec::new();
        for image in found {
            for name in &image.names {
                let reference = Reference::parse(name)
                    .map_err(|e| archive_error(format!("image name {name:?}: {e}")))?;
                let image_id = reference.with_digest(&image.top_digest);
                let source = Source::Local(reference.to_string());
                let stored = self
                    .import(
                        &reference,
                        &image_id,
                        &image.manifest,
                        &image.manifest_digest,
                        &source,
                    )
                    .await
                    .map_err(|e| StoreError::Import {
                        path: path.to_path_buf(),
                        source: Box::new(e),
                    })?;
                images.push(stored);
            }
        }
        if images.is_empty() {
            return Err(archive_error(
                "it names no image (no RepoTags, no image name annotation)".into(),
            ));
        }
        Ok(images)
    }
}

fn read_archive(layout: &Layout, archive: &Path, temp: &Path) -> Result<Vec<Found>, String> {
    extract(archive, temp).map_err(|e| e.to_string())?;
    if temp.join("manifest.json").exists() {
        docker_save(layout, temp)
    } else if temp.join("index.json").exists() {
        oci_layout(layout, temp)
    } else {
        Err("neither a docker save tarball (manifest.json) nor an OCI layout (index.json)".into())
    }
}

/// Unpacks the archive's files into `dest`; symlinks (older `docker
/// save`s link repeated layers) become copies of files inside it.
fn extract(archive: &Path, dest: &Path) -> Result<(), UnpackError> {
    fs::create_dir_all(dest)?;
    let mut tar = tar::Archive::new(unpack::open_tarball(archive)?);
    let mut links = Vec::new();
    let bad = |e: io::Error| UnpackError::Corrupt(format!("not a valid tar archive: {e}"));
    for entry in tar.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let rel = unpack::clean(&entry.path().map_err(bad)?)?;
        if rel.as_os_str().is_empty() {
            continue;
        }
        unpack::check_ancestors(dest, &rel)?;
        let path = dest.join(&rel);
        match entry.header().entry_type() {
            tar::EntryType::Directory => fs::create_dir_all(&path)?,
            tar::EntryType::Regular => {
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)?;
                }
                let mut file = fs::File::create(&path)?;
                io::copy(&mut entry, &mut file).map_err(bad)?;
            }
            tar::EntryType::Symlink | tar::EntryType::Link => {
                if let Some(target) = entry.link_name().map_err(bad)? {
                    let base = match entry.header().entry_type() {
                        tar::EntryType::Symlink => {
                            rel.parent().unwrap_or(Path::new("")).join(target)
                        }
                        _ => target.into_owned(),
                    };
                    links.push((rel, normalise(&base)?));
                }
            }
            _ => {}
        }
    }
    for (rel, target) in links {
        unpack::check_ancestors(dest, &target)?;
        if let Some(parent) = dest.join(&rel).parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(dest.join(&target), dest.join(&rel))?;
    }
    Ok(())
}

/// `a/b/../c` -> `a/c`, refusing to climb above the archive's root.
fn normalise(path: &Path) -> Result<PathBuf, UnpackError> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::Normal(p) => out.push(p),
            std::path::Component::ParentDir if out.pop() => {}
            std::path::Component::CurDir => {}
            _ => {
                return Err(UnpackError::Hostile(format!(
                    "link to {} leaves the archive",
                    path.display()
                )));
            }
        }
    }
    Ok(out)
}

/// Moves `file` into the store's blobs under its digest, which must be
/// `expected` when given.
fn adopt(layout: &Layout, file: &Path, expected: Option<&str>) -> Result<String, String> {
    let mut hash = Sha256::new();
    let mut f = fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    let digest = format!("sha256:{}", hex::encode(hash.finalize()));
    if let Some(expected) = expected
        && expected != digest
    {
        return Err(format!("blob {expected} holds content of digest {digest}"));
    }
    fs::rename(file, layout.blob(&digest))
        .map_err(|e| format!("cannot store blob {digest}: {e}"))?;
    Ok(digest)
}

fn docker_save(layout: &Layout, dir: &Path) -> Result<Vec<Found>, String> {
    let bytes = fs::read(dir.join("manifest.json")).map_err(|e| format!("manifest.json: {e}"))?;
    let entries: Vec<SaveEntry> =
        serde_json::from_slice(&bytes).map_err(|e| format!("manifest.json: {e}"))?;
    let mut found = Vec::new();
    for entry in entries {
        let config_path =
            dir.join(unpack::clean(Path::new(&entry.config)).map_err(|e| e.to_string())?);
        let config = fs::read(&config_path).map_err(|e| format!("{}: {e}", entry.config))?;
        let config_digest = format!("sha256:{}", hex::encode(Sha256::digest(&config)));
        fs::write(layout.blob(&config_digest), &config)
            .map_err(|e| format!("cannot store config: {e}"))?;
        let mut layers = Vec::new();
        for layer in &entry.layers {
            let file = dir.join(unpack::clean(Path::new(layer)).map_err(|e| e.to_string())?);
            let size = fs::metadata(&file)
                .map_err(|e| format!("{layer}: {e}"))?
                .len();
            // One file may be several layers' (and a layer link's) target.
            let copy = layout.temp("layer-blob");
            fs::copy(&file, &copy).map_err(|e| format!("{layer}: {e}"))?;
            let digest = adopt(layout, &copy, None)?;
            layers.push(serde_json::json!({
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": digest,
                "size": size,
            }));
        }
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest,
                "size": config.len(),
            },
            "layers": layers,
        });
        let manifest = serde_json::to_vec(&manifest).map_err(|e| e.to_string())?;
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&manifest)));
        found.push(Found {
            names: entry.repo_tags.unwrap_or_default(),
            top_digest: digest.clone(),
            manifest,
            manifest_digest: digest,
        });
    }
    Ok(found)
}

fn oci_layout(layout: &Layout, dir: &Path) -> Result<Vec<Found>, String> {
    let blobs = dir.join("blobs/sha256");
    // Every blob is checked against its name as it moves into the store.
    let mut adopted = std::collections::HashSet::new();
    if let Ok(entries) = fs::read_dir(&blobs) {
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            adopted.insert(adopt(
                layout,
                &entry.path(),
                Some(&format!("sha256:{name}")),
            )?);
        }
    }
    let read_blob = |digest: &str| -> Result<Vec<u8>, String> {
        if !adopted.contains(digest) {
            return Err(format!("blob {digest} is not in the archive"));
        }
        fs::read(layout.blob(digest)).map_err(|e| format!("blob {digest}: {e}"))
    };
    let index = fs::read(dir.join("index.json")).map_err(|e| format!("index.json: {e}"))?;
    let Manifest::Index(index) = manifest::parse(&index)? else {
        return Err("index.json is not an image index".into());
    };
    let mut found = Vec::new();
    for entry in index.manifests() {
        let annotations = entry.annotations().clone().unwrap_or_default();
        let name = annotations
            .get("io.containerd.image.name")
            .or_else(|| annotations.get("org.opencontainers.image.ref.name"))
            .filter(|n| n.contains('/') || n.contains(':'))
            .cloned();
        let top_digest = entry.digest().to_string();
        let bytes = read_blob(&top_digest)?;
        let (manifest, manifest_digest) = match manifest::parse(&bytes)? {
            Manifest::Image(_) => (bytes, top_digest.clone()),
            Manifest::Index(inner) => {
                let chosen = manifest::pick_platform(&inner)?.digest().to_string();
                (read_blob(&chosen)?, chosen)
            }
        };
        found.push(Found {
            names: name.into_iter().collect(),
            top_digest,
            manifest,
            manifest_digest,
        });
    }
    Ok(found)
}
