//! Executor tokens, as a Mesos agent mints them with `--jwt_secret_key`:
//! an HS256 JWT (`{"alg":"HS256","typ":"JWT"}`, unpadded base64url) with the
//! string claims `fid`, `eid` and `cid` (framework, executor and container
//! id) and no expiry, handed to the executor as
//! `MESOS_EXECUTOR_AUTHENTICATION_TOKEN`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::hmac;
use serde_json::json;

/// The environment variable that carries the token.
pub(crate) const TOKEN_ENV: &str = "MESOS_EXECUTOR_AUTHENTICATION_TOKEN";

/// The claims of a valid token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claims {
    pub(crate) fid: String,
    pub(crate) eid: String,
    pub(crate) cid: String,
}

/// The token of container `cid` of executor `eid` of framework `fid`.
pub(crate) fn mint(key: &[u8], fid: &str, eid: &str, cid: &str) -> String {
    let header = B64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = B64.encode(json!({"cid": cid, "eid": eid, "fid": fid}).to_string());
    let signing_input = format!("{header}.{claims}");
    let tag = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, key),
        signing_input.as_bytes(),
    );
    format!("{signing_input}.{}", B64.encode(tag.as_ref()))
}

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    /// Not three base64url parts, or not JSON.
    #[error("Malformed token")]
    Malformed,
    /// Not HS256.
    #[error("Unsupported token algorithm")]
    Algorithm,
    /// The signature does not verify with the agent's key.
    #[error("Token signature does not match")]
    Signature,
}

/// The claims of `token`, if it is an HS256 JWT signed with `key`.
pub(crate) fn verify(key: &[u8], token: &str) -> Result<Claims, TokenError> {
    let mut parts = token.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let header: serde_json::Value = B64
        .decode(h)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(TokenError::Malformed)?;
    if header["alg"] != "HS256" {
        return Err(TokenError::Algorithm);
    }
    let signature = B64.decode(s).map_err(|_| TokenError::Malformed)?;
    hmac::verify(
        &hmac::Key::new(hmac::HMAC_SHA256, key),
        format!("{h}.{c}").as_bytes(),
        &signature,
    )
    .map_err(|_| TokenError::Signature)?;
    let claims: serde_json::Value = B64
        .decode(c)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(TokenError::Malformed)?;
    let claim = |k: &str| claims[k].as_str().unwrap_or_default().to_owned();
    Ok(Claims {
        fid: claim("fid"),
        eid: claim("eid"),
        cid: claim("cid"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_with_their_key_only_and_carry_the_ids() {
        let token = mint(b"agent key", "fw-1", "ex-1", "c-1");
        assert_eq!(token.split('.').count(), 3);
        assert!(!token.contains('='), "unpadded");
        assert_eq!(
            verify(b"agent key", &token),
            Ok(Claims {
                fid: "fw-1".into(),
                eid: "ex-1".into(),
                cid: "c-1".into()
            })
        );
        assert_eq!(verify(b"other key", &token), Err(TokenError::Signature));
        assert_eq!(verify(b"agent key", "a.b"), Err(TokenError::Malformed));
        let forged = {
            let mut p: Vec<&str> = token.split('.').collect();
            let claims = B64.encode(br#"{"cid":"c-1","eid":"ex-2","fid":"fw-1"}"#);
            p[1] = &claims;
            p.join(".")
        };
        assert_eq!(verify(b"agent key", &forged), Err(TokenError::Signature));
    }
}
