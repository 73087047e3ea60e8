//! The little DER reading the authenticators need: a certificate's subject names and a
//! public key's bits inside a `SubjectPublicKeyInfo`. Bounds are checked on every step;
//! malformed input gives `None`, never a panic.

/// One TLV: its tag and contents, and what follows it.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | *b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The contents of a SEQUENCE (or SET) as its elements.
fn elements(mut input: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let (tag, value, rest) = tlv(input)?;
        out.push((tag, value));
        input = rest;
    }
    Some(out)
}

const SEQUENCE: u8 = 0x30;
const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_O: &[u8] = &[0x55, 0x04, 0x0a];

/// The subject's common name and organizations of an X.509 certificate (DER).
pub fn subject_names(cert: &[u8]) -> Option<(String, Vec<String>)> {
    let (tag, cert, _) = tlv(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = tlv(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let fields = elements(tbs)?;
    // version [0] is optional; then serial, signature, issuer, validity, subject.
    let skip = usize::from(fields.first()?.0 == 0xa0);
    let (tag, subject) = *fields.get(skip + 4)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut cn = String::new();
    let mut orgs = Vec::new();
    for (_, rdn) in elements(subject)? {
        for (_, atv) in elements(rdn)? {
            let parts = elements(atv)?;
            let (&(_, oid), &(_, value)) = (parts.first()?, parts.get(1)?);
            let text = String::from_utf8_lossy(value).into_owned();
            if oid == OID_CN {
                cn = text;
            } else if oid == OID_O {
                orgs.push(text);
            }
        }
    }
    Some((cn, orgs))
}

/// The key bits of a DER `SubjectPublicKeyInfo` (the BIT STRING without its unused-bits
/// byte): PKCS#1 for RSA keys, the uncompressed point for EC keys.
pub fn spki_key_bits(spki: &[u8]) -> Option<&[u8]> {
    let (tag, body, _) = tlv(spki)?;
    if tag != SEQUENCE {
        return None;
    }
    let parts = elements(body)?;
    let &(tag, bits) = parts.get(1)?;
    if tag != 0x03 {
        return None;
    }
    let (&unused, key) = bits.split_first()?;
    (unused == 0).then_some(key)
}

/// The algorithm OID bytes of a DER `SubjectPublicKeyInfo`.
pub fn spki_algorithm(spki: &[u8]) -> Option<&[u8]> {
    let (_, body, _) = tlv(spki)?;
    let (_, alg, _) = tlv(body)?;
    let (tag, oid, _) = tlv(alg)?;
    (tag == 0x06).then_some(oid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_or_garbage_input_gives_none() {
        for bad in [
            &[][..],
            &[0x30],
            &[0x30, 0x85, 1, 1, 1, 1, 1],
            &[0x30, 0x05, 0x02],
            &[0x02, 0x01, 0x00],
        ] {
            assert_eq!(subject_names(bad), None);
            assert_eq!(spki_key_bits(bad), None);
        }
    }
}
