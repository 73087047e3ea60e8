//! Images for mesopod's executor: what a pod's `image` names, pulled from
//! an OCI distribution registry (Docker Hub's conventions included) into a
//! content-addressed store, and a container root filesystem built from it.
//!
//! # Contract
//!
//! - [`Reference::parse`] normalises as Docker does (`busybox` is
//!   `docker.io/library/busybox:latest`); `Display` gives the full form.
//!   [`PullPolicy::default_for`] is Kubernetes' default (`latest` or no tag
//!   means `Always`).
//! - [`ImageStore::open`] opens the store at [`StoreConfig::root`]
//!   (`<agent work dir>/images`). [`ImageStore::ensure`] makes an image
//!   present per policy and returns an [`Image`]: its `image_id`
//!   (`registry/repo@sha256:…`, what `status.imageID` shows), its config's
//!   Entrypoint, Cmd, Env, WorkingDir and User, and its unpacked layers.
//!   [`ImageStore::ensure_fetched`] also says whether it pulled or found
//!   the image ([`Fetched`], for the two forms of the `Pulled` event).
//!   It never blocks the caller's runtime (file work runs on the blocking
//!   pool) and concurrent pulls of one blob or layer share one download.
//! - Registries on loopback are reached over plain HTTP, others over TLS
//!   (rustls) unless listed in [`StoreConfig::insecure_registries`]. A
//!   registry's CA certificates are Docker's `*.crt` files in
//!   `<`[`StoreConfig::certs_dir`]`>/<host:port>/` (`/etc/docker/certs.d`),
//!   trusted beside the system's roots; a loopback registry with such a
//!   directory is reached over TLS too. A certificate nobody trusts fails
//!   the pull with containerd's `x509: ...` words. The process must have
//!   installed a rustls crypto provider (the `mesopod` binary installs
//!   ring) before a store is opened.
//! - A registry's content may come from other hosts first: Docker Hub's
//!   mirrors (`--registry-mirror`) and the hosts of containerd's
//!   `hosts.toml` files ([`RegistryHosts`], [`StoreConfig::hosts`]). A tag
//!   is resolved on the first host that answers; a host that is down,
//!   silent past 1.5 s, 5xx, 404 or refusing is passed over for the next;
//!   content whose digest is wrong fails the pull whoever served it. The
//!   image's identity stays its name (`imageID` is `docker.io/...@sha256:…`
//!   whichever host served it); [`Fetched::Pulled`] names the mirror.
//!   Each host gets its own credentials only.
//!   Credentials come from [`StoreConfig::registry_config`] (a Docker
//!   `config.json`) and from the caller ([`RegistryAuth`], e.g. a pod's
//!   imagePullSecrets); no credential is logged.
//! - A manifest list gives its linux/amd64 image; an image for another
//!   platform is refused. OCI and Docker v2 media types are both read.
//! - Everything stored is verified: manifests and blobs by their digest,
//!   layers by their config's diff IDs. Blobs, layers and records are
//!   written to temporary paths and renamed, so the store never holds half
//!   of anything; a failed pull leaves nothing behind and the next one
//!   starts afresh. Processes may share a root (the embedded cluster's
//!   agents do); they may then fetch a blob twice, never store it wrong.
//! - A layer whose paths escape its root (`..`, entries under a symlink,
//!   hardlinks outside) is refused whole. Whiteouts are honoured.
//! - [`rootfs::assemble`] mounts an overlay (layers below, the container's
//!   writable layer above) where the kernel allows it, else copies the
//!   layers into one tree ([`rootfs::assemble_copy`] always copies);
//!   [`rootfs::Rootfs::release`] unmounts.
//! - [`ImageStore::gc`] removes images not in use, least recently used
//!   first, while the store is over [`StoreConfig::gc_threshold_bytes`].
//! - [`ImageStore::list`] says what the store holds ([`StoredImage`]:
//!   id, references, size), for a node's `status.images`.
//! - [`ImageStore::load_archive`] imports a `docker save` tarball or an
//!   OCI image layout archive (`mesopod image load`).
//! - Every failure of `ensure` is a [`PullError`] whose
//!   [`PullError::reason`] is kubelet's waiting reason (`ErrImagePull`,
//!   `ErrImageNeverPull`, `InvalidImageName`) and whose message says what
//!   failed, in containerd's words where it has them.
//!
//! With the `testing` feature, `images::testing` starts a real registry on
//! loopback and builds small images to push to it.

mod archive;
mod auth;
mod error;
mod hosts;
mod manifest;
mod policy;
mod reference;
mod remote;
pub mod rootfs;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod unpack;

pub use auth::{AuthError, RegistryAuth};
pub use error::{PullError, StoreError};
pub use hosts::{HostsError, RegistryHosts};
pub use manifest::ImageConfig;
pub use policy::{PullPolicy, PullPolicyError};
pub use reference::{Reference, ReferenceError};
pub use rootfs::{Rootfs, RootfsError, assemble, assemble_copy};
pub use store::{Fetched, GcReport, Image, ImageGcPolicy, ImageStore, StoreConfig, StoredImage};
