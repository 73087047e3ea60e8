//! Errors of pulls and of the store. A [`PullError`] is what a pod shows:
//! kubelet's waiting reason and a message naming the image and the cause.

/// Why an image could not be made present. [`PullError::reason`] is the
/// container's waiting reason; `Display` is its message (and the text of
/// the `Failed` event after `Failed to pull image "IMG": `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    /// The image name does not parse.
    #[error(
        "Failed to apply default image tag \"{image}\": couldn't parse image name \"{image}\": {detail}"
    )]
    InvalidImageName {
        /// The image as the pod gave it.
        image: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Pull policy `Never` and the store has no such image.
    #[error("Container image \"{image}\" is not present with pull policy of Never")]
    NeverPull {
        /// The image as the pod gave it.
        image: String,
    },
    /// The registry has no such repository, tag or digest.
    #[error(
        "failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": {reference}: not found"
    )]
    NotFound {
        /// The normalised reference.
        reference: String,
    },
    /// The registry refused the credentials, or asked for some.
    #[error("failed to pull and unpack image \"{reference}\": failed to authorize: {detail}")]
    Unauthorized {
        /// The normalised reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// The registry could not be reached.
    #[error(
        "failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": failed to do request: registry {registry} is unreachable: {detail}"
    )]
    Unreachable {
        /// The normalised reference.
        reference: String,
        /// The registry's host and port.
        registry: String,
        /// The connection error.
        detail: String,
    },
    /// Content whose digest is not the one asked for.
    #[error(
        "failed to pull and unpack image \"{reference}\": unexpected commit digest {actual}, expected {expected}: failed precondition"
    )]
    DigestMismatch {
        /// The normalised reference.
        reference: String,
        /// The digest asked for.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// A layer that is not a tarball we can unpack safely, or whose
    /// content is not its config's diff ID.
    #[error(
        "failed to pull and unpack image \"{reference}\": failed to extract layer {digest}: {detail}"
    )]
    CorruptLayer {
        /// The normalised reference.
        reference: String,
        /// The layer's digest.
        digest: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Neither the manifest list nor the image is for linux/amd64.
    #[error(
        "failed to pull and unpack image \"{reference}\": no match for platform in manifest: {detail}: not found"
    )]
    Platform {
        /// The normalised reference.
        reference: String,
        /// The platforms the image has.
        detail: String,
    },
    /// A manifest or config we cannot read.
    #[error("failed to pull and unpack image \"{reference}\": {detail}")]
    BadManifest {
        /// The normalised reference.
        reference: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Any other failure (registry errors, local disk).
    #[error("failed to pull and unpack image \"{reference}\": {detail}")]
    Other {
        /// The normalised reference.
        reference: String,
        /// What failed.
        detail: String,
    },
}

impl PullError {
    /// kubelet's waiting reason: `InvalidImageName`, `ErrImageNeverPull`,
    /// else `ErrImagePull`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidImageName { .. } => "InvalidImageName",
            Self::NeverPull { .. } => "ErrImageNeverPull",
            _ => "ErrImagePull",
        }
    }
}

/// An error and its causes, `a: b: c`, as Go's wrapped errors print.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// Why the store cannot be opened or changed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or directory of the store.
    #[error("image store {path}: {source}")]
    Io {
        /// The path.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The `--registry-config` file.
    #[error("registry config {path}: {detail}")]
    RegistryConfig {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// An archive given to `load_archive` that is not a `docker save` or
    /// OCI layout tarball, or whose content is not what it says.
    #[error("image archive {path}: {detail}")]
    Archive {
        /// The archive.
        path: std::path::PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// An image of an archive that could not be stored.
    #[error("image archive {path}: {source}")]
    Import {
        /// The archive.
        path: std::path::PathBuf,
        /// The error of the image it held.
        source: Box<PullError>,
    },
}

impl StoreError {
    pub(crate) fn io(path: impl Into<std::path::PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}
