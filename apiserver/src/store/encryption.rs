//! Encryption at rest (`--encryption-provider-config`): kube-apiserver's
//! `EncryptionConfiguration`, applied to the bytes the durable store writes for
//! the configured resources (`secrets`).
//!
//! As in kube-apiserver, the first provider of a resource encrypts every
//! write and reads try each provider by the value's prefix
//! (`k8s:enc:aesgcm:v1:<key name>:`, `k8s:enc:secretbox:v1:<key name>:`);
//! `identity` writes plaintext, and reads plaintext only when it is listed.
//! The layer sits where bytes leave for disk (the redb backend): the
//! engine's memory, watches and reads hold plaintext, as kube-apiserver's
//! watch cache does, and [`super::MemoryStore`] has nothing at rest.
//!
//! Formats: aesgcm = 12-byte random nonce, then AES-GCM sealed text with the
//! store key as associated data (kube-apiserver uses the etcd key); secretbox
//! = 24-byte random nonce, then NaCl secretbox (XSalsa20-Poly1305).

use std::path::Path;

use base64::Engine as _;
use crypto_secretbox::aead::{Aead as _, KeyInit as _};
use ring::aead::{AES_128_GCM, AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};
use serde::Deserialize;

/// Why an encryption configuration cannot be used, or a value not decrypted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncryptionError {
    /// The file cannot be read or is not an EncryptionConfiguration.
    #[error("invalid encryption provider configuration {path}: {message}")]
    Config {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A stored value could not be decrypted.
    #[error("cannot decrypt {key}: {message}")]
    Decrypt {
        /// The store key.
        key: String,
        /// Why.
        message: String,
    },
    /// The random source failed.
    #[error("cannot encrypt {0}: no randomness for a nonce")]
    Random(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigFile {
    api_version: String,
    kind: String,
    resources: Vec<ResourceConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceConfig {
    resources: Vec<String>,
    providers: Vec<ProviderConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderConfig {
    identity: Option<serde_json::Value>,
    aesgcm: Option<KeysConfig>,
    secretbox: Option<KeysConfig>,
    aescbc: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysConfig {
    keys: Vec<KeyConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyConfig {
    name: String,
    secret: String,
}

enum Cipher {
    AesGcm(Box<LessSafeKey>),
    SecretBox(Box<crypto_secretbox::XSalsa20Poly1305>),
}

/// One key of a provider.
struct Key {
    /// `k8s:enc:<provider>:v1:<name>:`
    prefix: Vec<u8>,
    cipher: Cipher,
}

enum Provider {
    Identity,
    Keys(Vec<Key>),
}

struct Rule {
    /// Store key prefixes (`secrets/`); empty matches every key (`*.*`).
    prefixes: Vec<String>,
    providers: Vec<Provider>,
}

/// A loaded EncryptionConfiguration.
pub struct Encryption {
    rules: Vec<Rule>,
    random: SystemRandom,
}

impl std::fmt::Debug for Encryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys.
        f.debug_struct("Encryption")
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}

const ENCRYPTED: &[u8] = b"k8s:enc:";

fn key_cipher(provider: &str, k: &KeyConfig) -> Result<Key, String> {
    let secret = base64::engine::general_purpose::STANDARD
        .decode(k.secret.trim())
        .map_err(|e| format!("key {:?}: secret is not base64: {e}", k.name))?;
    let cipher = match provider {
        "aesgcm" => {
            let alg = match secret.len() {
                16 => &AES_128_GCM,
                32 => &AES_256_GCM,
                n => {
                    return Err(format!(
                        "key {:?}: aesgcm needs a 16- or 32-byte key, not {n} bytes",
                        k.name
                    ));
                }
            };
            let unbound = UnboundKey::new(alg, &secret)
                .map_err(|_| format!("key {:?}: not an AES key", k.name))?;
            Cipher::AesGcm(Box::new(LessSafeKey::new(unbound)))
        }
        _ => {
            if secret.len() != 32 {
                return Err(format!(
                    "key {:?}: secretbox needs a 32-byte key, not {} bytes",
                    k.name,
                    secret.len()
                ));
            }
            let cipher = crypto_secretbox::XSalsa20Poly1305::new_from_slice(&secret)
                .map_err(|_| format!("key {:?}: not a secretbox key", k.name))?;
            Cipher::SecretBox(Box::new(cipher))
        }
    };
    Ok(Key {
        prefix: format!("k8s:enc:{provider}:v1:{}:", k.name).into_bytes(),
        cipher,
    })
}

fn provider(p: &ProviderConfig) -> Result<Provider, String> {
    if p.aescbc.is_some() || p.kms.is_some() {
        return Err("only the identity, aesgcm and secretbox providers are supported".into());
    }
    match (&p.identity, &p.aesgcm, &p.secretbox) {
        (Some(_), None, None) => Ok(Provider::Identity),
        (None, Some(keys), None) | (None, None, Some(keys)) => {
            let name = if p.aesgcm.is_some() {
                "aesgcm"
            } else {
                "secretbox"
            };
            if keys.keys.is_empty() {
                return Err(format!("{name}: keys must not be empty"));
            }
            let keys = keys
                .keys
                .iter()
                .map(|k| key_cipher(name, k))
                .collect::<Result<_, _>>()?;
            Ok(Provider::Keys(keys))
        }
        _ => Err("each provider item must name exactly one provider".into()),
    }
}

fn prefix_of(resource: &str) -> Result<Option<String>, String> {
    if resource == "*.*" {
        return Ok(None);
    }
    if resource.starts_with('*') {
        return Err(format!(
            "resource {resource:?}: only \"*.*\" wildcards are supported"
        ));
    }
    // Core resources are named bare (`secrets`) or with an empty group (`secrets.`).
    let name = resource.strip_suffix('.').unwrap_or(resource);
    Ok(Some(format!("{name}/")))
}

impl Encryption {
    /// Loads `path` (YAML or JSON).
    ///
    /// # Errors
    /// [`EncryptionError::Config`] naming what is wrong; nothing is half-loaded.
    pub fn load(path: &Path) -> Result<Self, EncryptionError> {
        let err = |message: String| EncryptionError::Config {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read(path).map_err(|e| err(e.to_string()))?;
        Self::parse(&text).map_err(err)
    }

    fn parse(text: &[u8]) -> Result<Self, String> {
        let file: ConfigFile = serde_yaml_ng::from_slice(text).map_err(|e| e.to_string())?;
        if file.kind != "EncryptionConfiguration"
            || file.api_version != "apiserver.config.k8s.io/v1"
        {
            return Err(format!(
                "expected apiVersion apiserver.config.k8s.io/v1, kind EncryptionConfiguration, got {}, {}",
                file.api_version, file.kind
            ));
        }
        let mut rules = Vec::new();
        for r in &file.resources {
            if r.providers.is_empty() {
                return Err("resources[].providers must not be empty".into());
            }
            let mut prefixes = Vec::new();
            for res in &r.resources {
                match prefix_of(res)? {
                    Some(p) => prefixes.push(p),
                    None => prefixes.clear(),
                }
                if res == "*.*" {
                    break;
                }
            }
            let providers = r.providers.iter().map(provider).collect::<Result<_, _>>()?;
            rules.push(Rule {
                prefixes,
                providers,
            });
        }
        Ok(Self {
            rules,
            random: SystemRandom::new(),
        })
    }

    fn rule(&self, key: &str) -> Option<&Rule> {
        self.rules
            .iter()
            .find(|r| r.prefixes.is_empty() || r.prefixes.iter().any(|p| key.starts_with(p)))
    }

    /// What to write to disk for `plain` under `key`.
    ///
    /// # Errors
    /// [`EncryptionError::Random`] if no nonce could be drawn.
    pub fn encrypt(&self, key: &str, plain: &[u8]) -> Result<Vec<u8>, EncryptionError> {
        let Some(rule) = self.rule(key) else {
            return Ok(plain.to_vec());
        };
        let Some(Provider::Keys(keys)) = rule.providers.first() else {
            return Ok(plain.to_vec());
        };
        let Some(k) = keys.first() else {
            return Ok(plain.to_vec());
        };
        let random = |buf: &mut [u8]| {
            self.random
                .fill(buf)
                .map_err(|_| EncryptionError::Random(key.to_owned()))
        };
        let mut out = k.prefix.clone();
        match &k.cipher {
            Cipher::AesGcm(cipher) => {
                let mut nonce = [0u8; 12];
                random(&mut nonce)?;
                let mut sealed = plain.to_vec();
                cipher
                    .seal_in_place_append_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(key.as_bytes()),
                        &mut sealed,
                    )
                    .map_err(|_| EncryptionError::Random(key.to_owned()))?;
                out.extend_from_slice(&nonce);
                out.extend_from_slice(&sealed);
            }
            Cipher::SecretBox(cipher) => {
                let mut nonce = [0u8; 24];
                random(&mut nonce)?;
                let sealed = cipher
                    .encrypt(&nonce.into(), plain)
                    .map_err(|_| EncryptionError::Random(key.to_owned()))?;
                out.extend_from_slice(&nonce);
                out.extend_from_slice(&sealed);
            }
        }
        Ok(out)
    }

    /// The plaintext of `stored`, read from disk under `key`.
    ///
    /// # Errors
    /// [`EncryptionError::Decrypt`] when no configured provider reads it.
    pub fn decrypt(&self, key: &str, stored: &[u8]) -> Result<Vec<u8>, EncryptionError> {
        let fail = |message: &str| EncryptionError::Decrypt {
            key: key.to_owned(),
            message: message.to_owned(),
        };
        let Some(rule) = self.rule(key) else {
            return Ok(stored.to_vec());
        };
        if !stored.starts_with(ENCRYPTED) {
            return if rule
                .providers
                .iter()
                .any(|p| matches!(p, Provider::Identity))
            {
                Ok(stored.to_vec())
            } else {
                Err(fail(
                    "stored unencrypted, and the identity provider is not configured",
                ))
            };
        }
        for p in &rule.providers {
            let Provider::Keys(keys) = p else { continue };
            for k in keys {
                let Some(body) = stored.strip_prefix(k.prefix.as_slice()) else {
                    continue;
                };
                return match &k.cipher {
                    Cipher::AesGcm(cipher) => {
                        let (nonce, sealed) = body
                            .split_first_chunk::<12>()
                            .ok_or_else(|| fail("aesgcm value too short"))?;
                        let mut buf = sealed.to_vec();
                        let plain = cipher
                            .open_in_place(
                                Nonce::assume_unique_for_key(*nonce),
                                Aad::from(key.as_bytes()),
                                &mut buf,
                            )
                            .map_err(|_| fail("aesgcm authentication failed"))?;
                        Ok(plain.to_vec())
                    }
                    Cipher::SecretBox(cipher) => {
                        let (nonce, sealed) = body
                            .split_first_chunk::<24>()
                            .ok_or_else(|| fail("secretbox value too short"))?;
                        cipher
                            .decrypt(&(*nonce).into(), sealed)
                            .map_err(|_| fail("secretbox authentication failed"))
                    }
                };
            }
        }
        Err(fail("no configured key matches its prefix"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CONFIG: &str = r"
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
      - secretbox:
          keys:
            - name: box1
              secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=
      - identity: {}
";

    #[test]
    fn secrets_are_sealed_with_the_first_provider_and_read_by_any() {
        let enc = Encryption::parse(CONFIG.as_bytes()).unwrap();
        let plain = br#"{"data":{"password":"hunter2"}}"#;
        let sealed = enc.encrypt("secrets/a/s", plain).unwrap();
        assert!(sealed.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(enc.decrypt("secrets/a/s", &sealed).unwrap(), plain);
        assert!(
            enc.decrypt("secrets/a/other", &sealed).is_err(),
            "the key is associated data"
        );
        assert_eq!(enc.encrypt("pods/a/p", plain).unwrap(), plain);
        assert_eq!(
            enc.decrypt("secrets/a/old", plain).unwrap(),
            plain,
            "identity"
        );

        // secretbox first: it encrypts; aesgcm still reads what it wrote.
        let boxed = CONFIG.replace("      - identity: {}\n", "");
        let (head, rest) = boxed.split_once("      - aesgcm:").unwrap();
        let (aes, sbox) = rest.split_once("      - secretbox:").unwrap();
        let boxed = format!("{head}      - secretbox:{sbox}      - aesgcm:{aes}");
        let old = sealed;
        let sb = Encryption::parse(boxed.as_bytes()).unwrap();
        let sealed = sb.encrypt("secrets/a/s", plain).unwrap();
        assert!(sealed.starts_with(b"k8s:enc:secretbox:v1:box1:"));
        assert_eq!(sb.decrypt("secrets/a/s", &sealed).unwrap(), plain);
        assert_eq!(sb.decrypt("secrets/a/s", &old).unwrap(), plain);
        assert!(sb.decrypt("secrets/a/s", plain).is_err(), "no identity");
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        let short = CONFIG.replace("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "c2hvcnQ=");
        let e = Encryption::parse(short.as_bytes()).err().unwrap();
        assert!(e.contains("16- or 32-byte key"), "{e}");
        let cbc = CONFIG.replace("aesgcm:", "aescbc:");
        let e = Encryption::parse(cbc.as_bytes()).err().unwrap();
        assert!(e.contains("only the identity, aesgcm and secretbox"), "{e}");
        let no_identity = CONFIG.replace("      - identity: {}\n", "");
        let enc = Encryption::parse(no_identity.as_bytes()).unwrap();
        assert!(enc.decrypt("secrets/a/s", b"{}").is_err());
    }
}
