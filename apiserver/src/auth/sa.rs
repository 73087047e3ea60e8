//! Service account tokens: JWTs as Kubernetes' bound tokens are, signed with
//! `--service-account-signing-key-file` and checked with `--service-account-key-file`
//! (RS256 for RSA keys, ES256 for P-256 keys). A token names its service account by
//! uid, may be bound to a pod, and expires; it is accepted only while that service
//! account (and pod) still exist with the same uid.

use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, RsaKeyPair, UnparsedPublicKey};
use rustls::pki_types::pem::{PemObject as _, SectionKind};
use serde_json::{Value, json};

use super::AuthError;
use super::user::UserInfo;
use crate::api::Api;

const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

enum Signer {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

/// A key that verifies: its JWT algorithm and public key bits.
struct Verifier {
    alg: &'static str,
    bits: Vec<u8>,
}

impl Verifier {
    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let alg: &dyn signature::VerificationAlgorithm = match self.alg {
            "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
            _ => &signature::ECDSA_P256_SHA256_FIXED,
        };
        UnparsedPublicKey::new(alg, &self.bits)
            .verify(msg, sig)
            .is_ok()
    }
}

fn sections(path: &Path) -> Result<Vec<(SectionKind, Vec<u8>)>, AuthError> {
    let bad = |detail: String| AuthError::Key {
        path: path.display().to_string(),
        detail,
    };
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("{e:?}")))
}

fn signer_of(kind: SectionKind, der: &[u8]) -> Option<Signer> {
    let rng = SystemRandom::new();
    match kind {
        SectionKind::RsaPrivateKey => RsaKeyPair::from_der(der).ok().map(Signer::Rsa),
        SectionKind::PrivateKey => {
            RsaKeyPair::from_pkcs8(der)
                .ok()
                .map(Signer::Rsa)
                .or_else(|| {
                    EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
                        .ok()
                        .map(Signer::Ec)
                })
        }
        _ => None,
    }
}

impl Signer {
    fn alg(&self) -> &'static str {
        match self {
            Self::Rsa(_) => "RS256",
            Self::Ec(_) => "ES256",
        }
    }

    fn verifier(&self) -> Verifier {
        match self {
            Self::Rsa(k) => Verifier {
                alg: "RS256",
                bits: k.public().as_ref().to_vec(),
            },
            Self::Ec(k) => Verifier {
                alg: "ES256",
                bits: k.public_key().as_ref().to_vec(),
            },
        }
    }

    fn sign(&self, msg: &[u8]) -> Option<Vec<u8>> {
        let rng = SystemRandom::new();
        match self {
            Self::Rsa(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&signature::RSA_PKCS1_SHA256, &rng, msg, &mut sig)
                    .ok()?;
                Some(sig)
            }
            Self::Ec(k) => k.sign(&rng, msg).ok().map(|s| s.as_ref().to_vec()),
        }
    }
}

/// The service account token issuer and verifier.
pub struct TokenAuthority {
    signer: Option<Signer>,
    verifiers: Vec<Verifier>,
    issuers: Vec<String>,
    audiences: Vec<String>,
}

/// What a TokenRequest asks for.
#[derive(Debug, Clone)]
pub struct TokenSpec {
    /// The service account's namespace, name and uid.
    pub namespace: String,
    /// The service account's name.
    pub name: String,
    /// The service account's uid.
    pub uid: String,
    /// Audiences (empty: the API's).
    pub audiences: Vec<String>,
    /// Lifetime.
    pub expiration: Duration,
    /// The pod the token is bound to (name, uid).
    pub pod: Option<(String, String)>,
}

impl TokenAuthority {
    /// Loads `--service-account-signing-key-file` (optional: without it no tokens are
    /// issued) and the `--service-account-key-file`s (public or private keys; the
    /// signing key always verifies too).
    ///
    /// # Errors
    /// A file that is unreadable or holds no usable key.
    pub fn load(
        signing: Option<&Path>,
        verifying: &[&Path],
        issuers: Vec<String>,
        audiences: Vec<String>,
    ) -> Result<Self, AuthError> {
        let mut signer = None;
        if let Some(path) = signing {
            signer = sections(path)?
                .iter()
                .find_map(|(k, der)| signer_of(*k, der));
            if signer.is_none() {
                return Err(AuthError::Key {
                    path: path.display().to_string(),
                    detail: "no RSA or P-256 private key in PKCS#1 or PKCS#8 PEM".into(),
                });
            }
        }
        let mut verifiers: Vec<Verifier> = signer.iter().map(Signer::verifier).collect();
        for path in verifying {
            let before = verifiers.len();
            for (kind, der) in sections(path)? {
                if let Some(s) = signer_of(kind, &der) {
                    verifiers.push(s.verifier());
                } else if kind == SectionKind::PublicKey
                    && let Some(bits) = super::der::spki_key_bits(&der)
                {
                    let alg = match super::der::spki_algorithm(&der) {
                        Some(OID_RSA) => "RS256",
                        Some(OID_EC) => "ES256",
                        _ => continue,
                    };
                    verifiers.push(Verifier {
                        alg,
                        bits: bits.to_vec(),
                    });
                }
            }
            if verifiers.len() == before {
                return Err(AuthError::Key {
                    path: path.display().to_string(),
                    detail: "no RSA or P-256 key".into(),
                });
            }
        }
        let audiences = if audiences.is_empty() {
            issuers.clone()
        } else {
            audiences
        };
        Ok(Self {
            signer,
            verifiers,
            issuers,
            audiences,
        })
    }

    /// Whether tokens can be issued.
    pub fn can_issue(&self) -> bool {
        self.signer.is_some() && !self.issuers.is_empty()
    }

    /// A signed token for `spec`, and when it expires.
    pub fn issue(&self, spec: &TokenSpec, now: SystemTime) -> Option<(String, SystemTime)> {
        let signer = self.signer.as_ref()?;
        let iat = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
        let exp = iat + spec.expiration.as_secs();
        let audiences = if spec.audiences.is_empty() {
            &self.audiences
        } else {
            &spec.audiences
        };
        let mut private = json!({
            "namespace": spec.namespace,
            "serviceaccount": {"name": spec.name, "uid": spec.uid},
        });
        if let Some((name, uid)) = &spec.pod {
            private["pod"] = json!({"name": name, "uid": uid});
        }
        let claims = json!({
            "aud": audiences, "exp": exp, "iat": iat, "nbf": iat,
            "iss": self.issuers.first()?, "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": private,
            "sub": format!("system:serviceaccount:{}:{}", spec.namespace, spec.name),
        });
        let header = json!({"alg": signer.alg(), "typ": "JWT"});
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let sig = signer.sign(input.as_bytes())?;
        Some((
            format!("{input}.{}", B64.encode(sig)),
            SystemTime::UNIX_EPOCH + Duration::from_secs(exp),
        ))
    }

    /// The claims of a token whose signature, issuer, audience and times are valid.
    fn verified_claims(&self, token: &str, now: SystemTime) -> Option<Value> {
        let mut parts = token.split('.');
        let (h, c, s) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let header: Value = serde_json::from_slice(&B64.decode(h).ok()?).ok()?;
        let alg = header["alg"].as_str()?;
        let sig = B64.decode(s).ok()?;
        let input = format!("{h}.{c}");
        if !self
            .verifiers
            .iter()
            .any(|v| v.alg == alg && v.verify(input.as_bytes(), &sig))
        {
            return None;
        }
        let claims: Value = serde_json::from_slice(&B64.decode(c).ok()?).ok()?;
        let now = now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs();
        let iss = claims["iss"].as_str()?;
        let aud_ok = match &claims["aud"] {
            Value::String(a) => self.audiences.iter().any(|x| x == a),
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .any(|a| self.audiences.iter().any(|x| x == a)),
            _ => false,
        };
        // A minute of leeway for clock skew, as Kubernetes allows.
        let exp_ok = claims["exp"].as_u64().is_some_and(|e| now < e + 60);
        let nbf_ok = claims["nbf"].as_u64().is_none_or(|n| n <= now + 60);
        (self.issuers.iter().any(|i| i == iss) && aud_ok && exp_ok && nbf_ok).then_some(claims)
    }

    /// The service account user of a valid token whose service account (and bound pod)
    /// still exist with the uids it names.
    pub fn authenticate(&self, api: &Api, token: &str) -> Option<UserInfo> {
        let claims = self.verified_claims(token, api.now())?;
        let k = &claims["kubernetes.io"];
        let ns = k["namespace"].as_str()?;
        let name = k["serviceaccount"]["name"].as_str()?;
        let uid = k["serviceaccount"]["uid"].as_str()?;
        let live_uid = |key: String| {
            api.store()
                .get(&key)
                .and_then(|v| v["metadata"]["uid"].as_str().map(str::to_owned))
        };
        if live_uid(format!("serviceaccounts/{ns}/{name}")).as_deref() != Some(uid) {
            return None;
        }
        let sub = format!("system:serviceaccount:{ns}:{name}");
        if claims["sub"].as_str() != Some(sub.as_str()) {
            return None;
        }
        let groups = vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{ns}"),
        ];
        let mut user = UserInfo::authenticated(sub, uid, groups);
        if let (Some(pod), Some(pod_uid)) = (k["pod"]["name"].as_str(), k["pod"]["uid"].as_str()) {
            if live_uid(format!("pods/{ns}/{pod}")).as_deref() != Some(pod_uid) {
                return None;
            }
            user.extra.insert(
                "authentication.kubernetes.io/pod-name".into(),
                vec![pod.into()],
            );
            user.extra.insert(
                "authentication.kubernetes.io/pod-uid".into(),
                vec![pod_uid.into()],
            );
        }
        if let Some(jti) = claims["jti"].as_str() {
            user.extra.insert(
                "authentication.kubernetes.io/credential-id".into(),
                vec![format!("JTI={jti}")],
            );
        }
        Some(user)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::{Duration, SystemTime};

    use base64::Engine as _;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

    use super::*;
    use crate::store::{Precondition, WriteOp};

    fn key_file(dir: &Path) -> std::path::PathBuf {
        let doc =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(doc.as_ref());
        let path = dir.join("sa.key");
        std::fs::write(
            &path,
            format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n"),
        )
        .unwrap();
        path
    }

    async fn put_sa(api: &Api, uid: &str) {
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder", "namespace": "default", "uid": uid}});
        api.commit(vec![WriteOp::Put {
            key: "serviceaccounts/default/builder".into(),
            object: sa,
            precondition: Precondition::None,
        }])
        .await
        .unwrap();
    }

    fn spec(expiration: u64) -> TokenSpec {
        TokenSpec {
            namespace: "default".into(),
            name: "builder".into(),
            uid: "u1".into(),
            audiences: Vec::new(),
            expiration: Duration::from_secs(expiration),
            pod: None,
        }
    }

    #[tokio::test]
    async fn a_token_names_its_service_account_until_it_expires_or_the_account_goes() {
        let dir = tempfile::tempdir().unwrap();
        let key = key_file(dir.path());
        let issuer = "https://kubernetes.default.svc.cluster.local".to_owned();
        let authority =
            TokenAuthority::load(Some(&key), &[], vec![issuer.clone()], Vec::new()).unwrap();
        let api = Api::in_memory().await.unwrap();
        put_sa(&api, "u1").await;
        let (token, expires) = authority.issue(&spec(3600), api.now()).unwrap();
        assert!(expires > SystemTime::now() + Duration::from_secs(3500));
        let user = authority.authenticate(&api, &token).unwrap();
        assert_eq!(user.name, "system:serviceaccount:default:builder");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]
        );
        assert!(user.extra["authentication.kubernetes.io/credential-id"][0].starts_with("JTI="));

        let claims: Value =
            serde_json::from_slice(&B64.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert_eq!(claims["iss"], issuer.as_str());
        assert_eq!(claims["aud"], json!([issuer]));
        assert_eq!(
            claims["kubernetes.io"]["serviceaccount"],
            json!({"name": "builder", "uid": "u1"})
        );

        let (old, _) = authority
            .issue(&spec(600), SystemTime::now() - Duration::from_secs(7200))
            .unwrap();
        assert!(authority.authenticate(&api, &old).is_none(), "expired");
        let mut other = spec(3600);
        other.audiences = vec!["vault".into()];
        let (vault, _) = authority.issue(&other, api.now()).unwrap();
        assert!(
            authority.authenticate(&api, &vault).is_none(),
            "not for this API's audience"
        );
        let mut forged = token.clone();
        forged.truncate(forged.len() - 4);
        forged.push_str("AAAA");
        assert!(
            authority.authenticate(&api, &forged).is_none(),
            "bad signature"
        );
        let verifier_only = TokenAuthority::load(None, &[&key], vec![issuer], Vec::new()).unwrap();
        assert!(!verifier_only.can_issue());
        assert!(
            verifier_only.authenticate(&api, &token).is_some(),
            "--service-account-key-file verifies"
        );
        put_sa(&api, "u2").await;
        assert!(
            authority.authenticate(&api, &token).is_none(),
            "a recreated account does not honour old tokens"
        );
    }
}
