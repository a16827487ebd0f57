//! An algorithm identifier from a certificate (the DER that rustls' and webpki's errors
//! carry: the OID, then any parameters) in words: its name where it is a common one, and
//! its OID in dotted form.

/// `der` (an AlgorithmIdentifier's contents: the OID's TLV, then its parameters) in
/// words: `ecdsa-with-SHA256 (OID 1.2.840.10045.4.3.2)`; an EC key's curve is named
/// too (`EC public key on P-256 (OID 1.2.840.10045.2.1)`). Anything it cannot read:
/// `an algorithm it cannot read`.
pub(super) fn algorithm_words(der: &[u8]) -> String {
    let Some((oid, rest)) = object_id(der) else {
        return "an algorithm it cannot read".into();
    };
    let mut words = match name(&oid) {
        Some(name) => format!("{name} (OID {oid})"),
        None => format!("OID {oid}"),
    };
    // An EC key's parameters name its curve.
    if let Some(curve) = object_id(rest).and_then(|(c, _)| name(&c)) {
        if oid == "1.2.840.10045.2.1" {
            words = format!("EC public key on {curve} (OID {oid})");
        }
    }
    words
}

/// The dotted form of the OID `der` begins with (tag 6, short or long length), and what
/// follows it.
fn object_id(der: &[u8]) -> Option<(String, &[u8])> {
    let (&tag, rest) = der.split_first()?;
    if tag != 0x06 {
        return None;
    }
    let (&len, rest) = rest.split_first()?;
    let (len, rest) = if len < 0x80 {
        (usize::from(len), rest)
    } else {
        let n = usize::from(len & 0x7f);
        if n == 0 || n > 2 || rest.len() < n {
            return None;
        }
        let (digits, rest) = rest.split_at(n);
        (
            digits.iter().fold(0usize, |a, &d| a << 8 | usize::from(d)),
            rest,
        )
    };
    if len == 0 || rest.len() < len {
        return None;
    }
    let (body, rest) = rest.split_at(len);
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for &b in body {
        value = value.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        }
    }
    if body.last().is_some_and(|b| b & 0x80 != 0) {
        return None;
    }
    let dotted: Vec<String> = arcs.iter().map(u64::to_string).collect();
    Some((dotted.join("."), rest))
}

/// The usual name of a signature, key or curve OID (RFC 3279, 4055, 5480, 5758, 8410).
fn name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "1.2.840.113549.1.1.1" => "RSA",
        "1.2.840.113549.1.1.5" => "sha1WithRSAEncryption",
        "1.2.840.113549.1.1.10" => "RSASSA-PSS",
        "1.2.840.113549.1.1.11" => "sha256WithRSAEncryption",
        "1.2.840.113549.1.1.12" => "sha384WithRSAEncryption",
        "1.2.840.113549.1.1.13" => "sha512WithRSAEncryption",
        "1.2.840.10045.2.1" => "EC public key",
        "1.2.840.10045.4.1" => "ecdsa-with-SHA1",
        "1.2.840.10045.4.3.2" => "ecdsa-with-SHA256",
        "1.2.840.10045.4.3.3" => "ecdsa-with-SHA384",
        "1.2.840.10045.4.3.4" => "ecdsa-with-SHA512",
        "1.2.840.10045.3.1.7" => "P-256",
        "1.3.132.0.34" => "P-384",
        "1.3.132.0.35" => "P-521",
        "1.3.101.112" => "Ed25519",
        "1.3.101.113" => "Ed448",
        "1.2.840.10040.4.1" => "DSA",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_in_words() {
        // ecdsa-with-SHA256, as webpki reports a signature algorithm.
        let ecdsa = [6, 8, 42, 134, 72, 206, 61, 4, 3, 2];
        assert_eq!(
            algorithm_words(&ecdsa),
            "ecdsa-with-SHA256 (OID 1.2.840.10045.4.3.2)"
        );
        // rsaEncryption with its NULL parameters.
        let rsa = [6, 9, 42, 134, 72, 134, 247, 13, 1, 1, 1, 5, 0];
        assert_eq!(algorithm_words(&rsa), "RSA (OID 1.2.840.113549.1.1.1)");
        // An EC key on P-256.
        let ec = [
            6, 7, 42, 134, 72, 206, 61, 2, 1, 6, 8, 42, 134, 72, 206, 61, 3, 1, 7,
        ];
        assert_eq!(
            algorithm_words(&ec),
            "EC public key on P-256 (OID 1.2.840.10045.2.1)"
        );
        assert_eq!(algorithm_words(&[6, 3, 43, 6, 1]), "OID 1.3.6.1");
        assert_eq!(algorithm_words(&[5, 0]), "an algorithm it cannot read");
        assert_eq!(algorithm_words(&[6, 9, 42]), "an algorithm it cannot read");
    }
}
