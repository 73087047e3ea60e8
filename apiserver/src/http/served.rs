//! The version a response is served in: the stored one, or another converted from it
//! at the edge (`autoscaling/v1` HorizontalPodAutoscaler over the stored v2), so lists,
//! gets, watches and deletes of both read the same store and stream.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use crate::kinds::autoscaling::v1;
use crate::resource::Resource;

/// Which conversion the objects of a response go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    /// None: the stored version.
    Stored,
    /// HorizontalPodAutoscaler v2 to `autoscaling/v1`.
    AutoscalingV1,
}

/// A resource in the version a route serves it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    /// The stored resource: its store key, selectors and Table columns.
    pub(crate) resource: Resource,
    version: Version,
}

impl From<Resource> for Served {
    fn from(resource: Resource) -> Self {
        Self {
            resource,
            version: Version::Stored,
        }
    }
}

impl Served {
    /// `autoscaling/v1` HorizontalPodAutoscalers.
    pub(crate) const HPA_V1: Served = Served {
        resource: Resource::HorizontalPodAutoscalers,
        version: Version::AutoscalingV1,
    };

    /// The `apiVersion` its objects and lists carry.
    pub(crate) fn api_version(self) -> &'static str {
        match self.version {
            Version::Stored => self.resource.api_version(),
            Version::AutoscalingV1 => "autoscaling/v1",
        }
    }

    /// A stored object as served (borrowed when nothing converts: a GET of any other
    /// kind copies nothing).
    pub(crate) fn object(self, stored: &Value) -> Cow<'_, Value> {
        match self.version {
            Version::Stored => Cow::Borrowed(stored),
            Version::AutoscalingV1 => Cow::Owned(v1::value_to_v1(stored)),
        }
    }

    /// Stored objects as served (borrowed when nothing converts).
    pub(crate) fn items(self, stored: &[Arc<Value>]) -> Cow<'_, [Arc<Value>]> {
        match self.version {
            Version::Stored => Cow::Borrowed(stored),
            Version::AutoscalingV1 => Cow::Owned(
                stored
                    .iter()
                    .map(|o| Arc::new(v1::value_to_v1(o)))
                    .collect(),
            ),
        }
    }

    /// A stored object as served, shared.
    pub(crate) fn shared(self, stored: &Arc<Value>) -> Arc<Value> {
        match self.version {
            Version::Stored => Arc::clone(stored),
            Version::AutoscalingV1 => Arc::new(v1::value_to_v1(stored)),
        }
    }
}
