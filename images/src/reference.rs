//! Image references with Docker's normalisation: `busybox` is
//! `docker.io/library/busybox:latest`, as containerd and kubelet read it.

use std::fmt;

/// Docker Hub's canonical registry name.
pub(crate) const DOCKER_HUB: &str = "docker.io";

/// A parsed, normalised image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

/// Why a reference does not parse; the text follows Docker's reference
/// package, which kubelet's `InvalidImageName` message quotes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// Empty, or a character or shape the grammar has no place for.
    #[error("invalid reference format")]
    Format,
    /// Upper case in the repository.
    #[error("invalid reference format: repository name must be lowercase")]
    Uppercase,
    /// A digest that is not `sha256:` + 64 hex digits (or sha512's 128).
    #[error("invalid digest format")]
    Digest,
    /// A tag over 128 characters or with a character tags cannot hold.
    #[error("invalid tag format")]
    Tag,
    /// A name over 255 characters.
    #[error("repository name must not be more than 255 characters")]
    TooLong,
}

impl Reference {
    /// Parses `image` as Docker does: the first component is a registry
    /// when it has a `.` or `:` or is `localhost`, else the image is on
    /// Docker Hub, where a one-component name is under `library/`. With
    /// neither tag nor digest the tag is `latest`.
    ///
    /// # Errors
    ///
    /// When `image` is not a valid reference.
    pub fn parse(image: &str) -> Result<Self, ReferenceError> {
        let (name, digest) = match image.split_once('@') {
            Some((n, d)) => (n, Some(parse_digest(d)?)),
            None => (image, None),
        };
        let (name, tag) = match name.rfind(':') {
            Some(i) if !name[i..].contains('/') => (&name[..i], Some(&name[i + 1..])),
            _ => (name, None),
        };
        if let Some(tag) = tag {
            check_tag(tag)?;
        }
        let (registry, path) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        let registry = match registry.as_str() {
            "index.docker.io" | "registry-1.docker.io" => DOCKER_HUB.to_string(),
            _ => registry,
        };
        check_registry(&registry)?;
        let repository = if registry == DOCKER_HUB && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        check_repository(&repository)?;
        if registry.len() + repository.len() + 1 > 255 {
            return Err(ReferenceError::TooLong);
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_string()),
            (None, None) => Some("latest".to_string()),
            (None, Some(_)) => None,
        };
        Ok(Self {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The registry host (and port), `docker.io` for Docker Hub.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository path, `library/busybox` for `busybox`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if any (`latest` when the image named neither tag nor digest).
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest, if the image named one.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// `registry/repository`, the name without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `registry/repository@digest`: containerd's repo digest, kubelet's
    /// `imageID`.
    pub fn with_digest(&self, digest: &str) -> String {
        format!("{}@{digest}", self.name())
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Checks `sha256:<64 hex>` (or sha512's 128) and returns it.
pub(crate) fn parse_digest(d: &str) -> Result<String, ReferenceError> {
    let (algo, hex) = d.split_once(':').ok_or(ReferenceError::Digest)?;
    let len = match algo {
        "sha256" => 64,
        "sha512" => 128,
        _ => return Err(ReferenceError::Digest),
    };
    if hex.len() != len
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ReferenceError::Digest);
    }
    Ok(d.to_string())
}

fn check_tag(tag: &str) -> Result<(), ReferenceError> {
    let mut bytes = tag.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !first_ok
        || tag.len() > 128
        || !bytes.all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    {
        return Err(ReferenceError::Tag);
    }
    Ok(())
}

fn check_registry(registry: &str) -> Result<(), ReferenceError> {
    let (host, port) = match registry.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (registry, None),
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(ReferenceError::Format)
    }
}

/// Docker's path component: lower-case alphanumerics joined by `.`, `_`,
/// `__` or runs of `-`.
fn check_repository(repository: &str) -> Result<(), ReferenceError> {
    if repository.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(ReferenceError::Uppercase);
    }
    for component in repository.split('/') {
        let b = component.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        let ends_ok = b.first().is_some_and(alnum) && b.last().is_some_and(alnum);
        let mut separators_ok = true;
        let mut i = 0;
        while i < b.len() {
            if alnum(&b[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && !alnum(&b[i]) {
                i += 1;
            }
            let sep = &component[start..i];
            if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-')) {
                separators_ok = false;
            }
        }
        if !ends_ok || !separators_ok {
            return Err(ReferenceError::Format);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(s: &str) -> String {
        Reference::parse(s)
            .map(|r| r.to_string())
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn docker_hub_names_are_normalised() {
        assert_eq!(full("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(full("busybox:1.36"), "docker.io/library/busybox:1.36");
        assert_eq!(full("bitnami/redis"), "docker.io/bitnami/redis:latest");
        assert_eq!(
            full("index.docker.io/library/busybox"),
            "docker.io/library/busybox:latest"
        );
    }

    #[test]
    fn registries_ports_and_digests() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(full("localhost/x"), "localhost/x:latest");
        assert_eq!(full("127.0.0.1:5000/a/b:v1"), "127.0.0.1:5000/a/b:v1");
        assert_eq!(
            full(&format!("busybox@{d}")),
            format!("docker.io/library/busybox@{d}")
        );
        assert_eq!(
            full(&format!("busybox:1@{d}")),
            format!("docker.io/library/busybox:1@{d}")
        );
        let r = Reference::parse(&format!("127.0.0.1:5000/x@{d}")).expect("parses");
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.tag(), None);
        assert_eq!(r.with_digest(&d), format!("127.0.0.1:5000/x@{d}"));
    }

    #[test]
    fn bad_references_say_why() {
        assert_eq!(Reference::parse("Busybox"), Err(ReferenceError::Uppercase));
        assert_eq!(Reference::parse(""), Err(ReferenceError::Format));
        assert_eq!(Reference::parse("a//b"), Err(ReferenceError::Format));
        assert_eq!(Reference::parse("busybox:"), Err(ReferenceError::Tag));
        assert_eq!(
            Reference::parse("busybox@sha256:abc"),
            Err(ReferenceError::Digest)
        );
        assert_eq!(Reference::parse("bad name"), Err(ReferenceError::Format));
        assert_eq!(Reference::parse("-x"), Err(ReferenceError::Format));
    }
}
