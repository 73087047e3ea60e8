//! What the agent's image store holds, for its Node's `status.images`, as
//! kubelet reports its images:
//!
//! - executor → scheduler (executor `MESSAGE`): [`NODE_IMAGES_MESSAGE`]
//!   followed by a [`NodeImages`] as JSON, sent when the executor starts
//!   (subscribes), after each pull and each image gc pass that changed
//!   the list, and again when a new scheduler asks for the node key
//!   ([`crate::apiclient::protocol::REGISTER_AGAIN_MESSAGE`]), whose
//!   Nodes know no images yet.
//!
//! Each image is named as kubelet names it (its digest name, then its tag
//! names; at most [`MAX_NAMES_PER_IMAGE`]); the largest come first, at
//! most [`MAX_IMAGES`] (kubelet's `--node-status-max-images` default), so
//! the message stays small whatever the store holds.
//!
//! The message says its [`NodeImages::version`]: a field added later that
//! an older scheduler may ignore keeps the version; anything an older
//! scheduler would misread takes a new one, which that scheduler refuses
//! ([`NodeImagesError::Version`]) and so keeps what it had.

use serde::{Deserialize, Serialize};

/// Prefix of the message.
pub const NODE_IMAGES_MESSAGE: &[u8] = b"mesopod.io/node-images ";

/// The version this executor writes and this scheduler reads.
pub const NODE_IMAGES_VERSION: u32 = 1;

/// kubelet's `--node-status-max-images` default: the largest images only.
pub const MAX_IMAGES: usize = 50;

/// kubelet's `MaxNamesPerImageInNodeStatus`.
pub const MAX_NAMES_PER_IMAGE: usize = 5;

/// The store's images, and what the executor measured of the agent's disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeImages {
    /// [`NODE_IMAGES_VERSION`] when written.
    pub version: u32,
    /// Largest first, at most [`MAX_IMAGES`].
    #[serde(default)]
    pub images: Vec<NodeImage>,
    /// Bytes of the filesystem of the agent's work directory, where pods'
    /// writable layers, logs and emptyDirs live (kubelet's nodefs), if it
    /// could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem_bytes: Option<u64>,
}

/// One image: `status.images[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeImage {
    /// Its digest name (`repo@sha256:…`), then its tag names.
    pub names: Vec<String>,
    /// Bytes of its unpacked layers and config.
    pub size_bytes: u64,
}

/// Why a message that says it is a [`NodeImages`] cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum NodeImagesError {
    /// Not JSON of the shape above.
    #[error("malformed node images message: {0}")]
    Malformed(#[from] serde_json::Error),
    /// Written by an executor that speaks a version this scheduler does not.
    #[error(
        "node images message of version {0}; this scheduler reads version {NODE_IMAGES_VERSION}"
    )]
    Version(u32),
}

impl NodeImages {
    /// The message for what the store holds (in any order).
    pub fn from_store(stored: &[images::StoredImage], filesystem_bytes: Option<u64>) -> Self {
        let images = stored
            .iter()
            .map(|s| {
                let mut names = vec![s.image_id.clone()];
                names.extend(s.references.iter().filter(|r| **r != s.image_id).cloned());
                NodeImage {
                    names,
                    size_bytes: s.size,
                }
            })
            .collect();
        NodeImages {
            version: NODE_IMAGES_VERSION,
            images: largest_first(images),
            filesystem_bytes,
        }
    }

    /// The MESSAGE data.
    pub fn encode(&self) -> Vec<u8> {
        crate::apiclient::protocol::encode(NODE_IMAGES_MESSAGE, self)
    }

    /// The message in `data`: `Ok(None)` when `data` is another message.
    ///
    /// # Errors
    ///
    /// When `data` is this message but cannot be read.
    pub fn decode(data: &[u8]) -> Result<Option<NodeImages>, NodeImagesError> {
        let Some(json) = data.strip_prefix(NODE_IMAGES_MESSAGE) else {
            return Ok(None);
        };
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let Versioned { version } = serde_json::from_slice(json)?;
        if version != NODE_IMAGES_VERSION {
            return Err(NodeImagesError::Version(version));
        }
        let mut message: NodeImages = serde_json::from_slice(json)?;
        // Whoever sent it, the Node gets kubelet's shape.
        message.images = largest_first(message.images);
        Ok(Some(message))
    }
}

/// kubelet's order and caps: largest first (equal sizes by name, so the
/// same store always gives the same list), at most [`MAX_IMAGES`] images
/// of at most [`MAX_NAMES_PER_IMAGE`] names each.
pub fn largest_first(mut images: Vec<NodeImage>) -> Vec<NodeImage> {
    images.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| a.names.cmp(&b.names))
    });
    images.truncate(MAX_IMAGES);
    for image in &mut images {
        image.names.truncate(MAX_NAMES_PER_IMAGE);
    }
    images
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn stored(id: &str, refs: &[&str], size: u64) -> images::StoredImage {
        images::StoredImage {
            image_id: id.into(),
            references: refs.iter().map(|r| (*r).to_owned()).collect(),
            size,
        }
    }

    #[test]
    fn the_store_travels_as_kubelet_lists_it_and_comes_back_whole() {
        let message = NodeImages::from_store(
            &[
                stored("r/small@sha256:1", &["r/small:1"], 10),
                stored(
                    "r/big@sha256:2",
                    &["r/big:a", "r/big:b", "r/big@sha256:2"],
                    30,
                ),
                stored("r/mid@sha256:3", &[], 20),
            ],
            Some(1 << 30),
        );
        let names: Vec<&[String]> = message.images.iter().map(|i| &i.names[..]).collect();
        assert_eq!(
            names,
            [
                &[
                    "r/big@sha256:2".to_owned(),
                    "r/big:a".into(),
                    "r/big:b".into()
                ][..],
                &["r/mid@sha256:3".to_owned()][..],
                &["r/small@sha256:1".to_owned(), "r/small:1".into()][..],
            ],
            "largest first, digest name then tags, no name twice"
        );
        let data = message.encode();
        assert!(data.starts_with(NODE_IMAGES_MESSAGE));
        assert_eq!(NodeImages::decode(&data).unwrap(), Some(message));
        let json: serde_json::Value =
            serde_json::from_slice(&data[NODE_IMAGES_MESSAGE.len()..]).unwrap();
        assert_eq!(json["version"], 1);
        assert_eq!(json["images"][0]["sizeBytes"], 30);
        assert_eq!(json["filesystemBytes"], 1u64 << 30);
    }

    #[test]
    fn a_store_of_many_images_sends_the_largest_fifty_with_five_names_each() {
        let many: Vec<images::StoredImage> = (0..120u64)
            .map(|i| {
                let refs: Vec<String> = (0..8).map(|t| format!("r/i{i}:t{t}")).collect();
                let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
                stored(&format!("r/i{i}@sha256:{i}"), &refs, i)
            })
            .collect();
        let message = NodeImages::from_store(&many, None);
        assert_eq!(message.images.len(), MAX_IMAGES);
        assert_eq!(message.images[0].size_bytes, 119);
        assert_eq!(message.images[49].size_bytes, 70);
        assert!(message.images.iter().all(|i| i.names.len() == 5));
    }

    #[test]
    fn other_messages_are_not_taken_for_it_and_bad_ones_are_refused() {
        assert!(
            NodeImages::decode(crate::NODE_STATUS_MESSAGE)
                .unwrap()
                .is_none()
        );
        assert!(NodeImages::decode(b"").unwrap().is_none());
        for bad in [
            &b"mesopod.io/node-images "[..],
            b"mesopod.io/node-images {",
            b"mesopod.io/node-images {\"images\":[]}",
            b"mesopod.io/node-images {\"version\":1,\"images\":[{\"names\":\"x\"}]}",
            b"mesopod.io/node-images {\"version\":1,\"images\":[{\"names\":[],\"sizeBytes\":-1}]}",
            b"mesopod.io/node-images \xff\xfe",
        ] {
            let err = NodeImages::decode(bad).unwrap_err();
            assert!(matches!(err, NodeImagesError::Malformed(_)), "{err}");
        }
        let newer = b"mesopod.io/node-images {\"version\":2,\"images\":\"changed\"}";
        let err = NodeImages::decode(newer).unwrap_err();
        assert!(matches!(err, NodeImagesError::Version(2)), "{err}");
        // A field this version does not know is ignored; a sender's order is not trusted.
        let unsorted = b"mesopod.io/node-images {\"version\":1,\"new\":true,\"images\":[{\"names\":[\"a\"],\"sizeBytes\":1},{\"names\":[\"b\"],\"sizeBytes\":2}]}";
        let read = NodeImages::decode(unsorted).unwrap().unwrap();
        assert_eq!(read.images[0].names, ["b"]);
        assert_eq!(read.filesystem_bytes, None);
    }
}
