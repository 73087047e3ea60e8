//! Where the store's keys live in etcd: kube-apiserver's layout under `--etcd-prefix`.
//!
//! Objects go to `<prefix>/<resource>/[<namespace>/]<name>` as kube-apiserver writes
//! them (nodes are `minions` and replication controllers `controllers`, their
//! historical names), so `etcdctl get --prefix /registry`
//! reads the same either way. The side key-value space lives under
//! `<prefix>/mesopod.io/meta/`, a path no Kubernetes resource takes.

/// The sub-path of the side key-value space.
const META: &str = "mesopod.io/meta/";

/// Store keys whose first segment kube-apiserver spells differently in etcd.
const RENAMED: &[(&str, &str)] = &[
    ("nodes/", "minions/"),
    ("replicationcontrollers/", "controllers/"),
];

/// What an etcd key under the prefix holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// An object, by its store key.
    Object(String),
    /// A side value, by its key.
    Meta(String),
}

/// The mapping for one `--etcd-prefix`.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// The prefix with exactly one trailing slash.
    root: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        let trimmed = prefix.trim_end_matches('/');
        Self {
            root: format!("{trimmed}/"),
        }
    }

    /// Everything this store owns, as a key prefix.
    pub(crate) fn all(&self) -> &str {
        &self.root
    }

    /// The etcd key of an object, or the etcd prefix of a store prefix.
    pub(crate) fn object(&self, key: &str) -> String {
        for (ours, theirs) in RENAMED {
            if let Some(rest) = key.strip_prefix(ours) {
                return format!("{}{theirs}{rest}", self.root);
            }
        }
        format!("{}{key}", self.root)
    }

    /// The etcd key of a side value.
    pub(crate) fn meta(&self, key: &str) -> String {
        format!("{}{META}{key}", self.root)
    }

    /// What `etcd_key` holds; `None` if it is not under the prefix or not UTF-8.
    pub(crate) fn parse(&self, etcd_key: &[u8]) -> Option<Key> {
        let rest = std::str::from_utf8(etcd_key)
            .ok()?
            .strip_prefix(&self.root)?;
        if let Some(meta) = rest.strip_prefix(META) {
            return Some(Key::Meta(meta.to_string()));
        }
        for (ours, theirs) in RENAMED {
            if let Some(tail) = rest.strip_prefix(theirs) {
                return Some(Key::Object(format!("{ours}{tail}")));
            }
        }
        Some(Key::Object(rest.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_take_kube_apiservers_paths_and_read_back() {
        let keys = Keys::new("/registry/");
        assert_eq!(keys.object("pods/default/x"), "/registry/pods/default/x");
        assert_eq!(keys.object("nodes/n1"), "/registry/minions/n1");
        assert_eq!(keys.object("nodes/"), "/registry/minions/");
        assert_eq!(
            keys.parse(b"/registry/minions/n1"),
            Some(Key::Object("nodes/n1".into()))
        );
        assert_eq!(
            keys.parse(keys.meta("framework-id").as_bytes()),
            Some(Key::Meta("framework-id".into()))
        );
        assert_eq!(
            keys.object("replicationcontrollers/default/old"),
            "/registry/controllers/default/old"
        );
        assert_eq!(
            keys.parse(b"/registry/controllers/default/old"),
            Some(Key::Object("replicationcontrollers/default/old".into()))
        );
        assert_eq!(keys.parse(b"/other/pods/a/b"), None);
    }
}
