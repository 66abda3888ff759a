//! The `Basic` authentication scheme's credentials (RFC 7617) from an `Authorization` field
//! value: the scheme name (any letter case), one or more spaces, the token68 in standard
//! base64 with its padding, decoding to `user-id ":" password`. Anything else (another scheme,
//! bad base64, no colon, a control character in the user-id) is `None`: the server answers
//! 401 as if no credentials came. Fuzzed (`fuzz/fuzz_targets/basic_auth.rs`).

/// The user-id and password of a `Basic` `Authorization` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Before the first `:` (RFC 7617 §2: a user-id cannot contain one).
    pub user: Vec<u8>,
    /// After it, as sent (may contain `:`).
    pub password: Vec<u8>,
}

/// The longest token68 read (a user-id and password of about 3 KB); longer is `None`.
pub const MAX_TOKEN: usize = 4096;

/// Parses an `Authorization` field value with the `Basic` scheme.
pub fn basic(value: &[u8]) -> Option<Credentials> {
    let value = trim(value);
    let (scheme, rest) = value.split_at(value.iter().position(|&b| b == b' ')?);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    let token = trim(rest);
    if token.is_empty() || token.len() > MAX_TOKEN {
        return None;
    }
    let decoded = base64_decode(token)?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
    if user.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return None;
    }
    Some(Credentials {
        user: user.to_vec(),
        password: password.to_vec(),
    })
}

fn trim(mut b: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = b {
        b = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = b {
        b = rest;
    }
    b
}

fn sextet(c: u8) -> Option<u32> {
    Some(u32::from(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    }))
}

/// Standard base64 (RFC 4648 §4) with its padding; `None` for any other byte, a length that is
/// not a multiple of 4, padding anywhere but the end, or bits set past the last byte.
pub fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let quads = s.chunks_exact(4);
    let last = quads.len().saturating_sub(1);
    for (i, q) in quads.enumerate() {
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i != last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = n << 6 | sextet(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = 3 - pad;
        // The bits below the last whole byte must be zero (a canonical encoding).
        if bytes[keep..].iter().any(|&b| b != 0) {
            return None;
        }
        out.extend_from_slice(&bytes[..keep]);
    }
    Some(out)
}

/// Standard base64 with padding, for the tests and for `{SHA}` digests.
pub fn base64_encode(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_7617_example_and_variants() {
        // RFC 7617 §2: Aladdin / open sesame.
        let c = basic(b"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==").unwrap();
        assert_eq!(
            (&c.user[..], &c.password[..]),
            (&b"Aladdin"[..], &b"open sesame"[..])
        );
        assert_eq!(
            basic(b"  basic   QWxhZGRpbjpvcGVuIHNlc2FtZQ==  "),
            Some(c.clone())
        );
        assert_eq!(basic(b"BASIC QWxhZGRpbjpvcGVuIHNlc2FtZQ=="), Some(c));
        // A password with colons keeps them; an empty password is a password.
        let c = basic(format!("Basic {}", base64_encode(b"u:a:b")).as_bytes()).unwrap();
        assert_eq!(c.password, b"a:b");
        let c = basic(format!("Basic {}", base64_encode(b"u:")).as_bytes()).unwrap();
        assert_eq!((c.user, c.password), (b"u".to_vec(), Vec::new()));
        for bad in [
            &b"Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ=="[..],
            b"Basic",
            b"Basic ",
            b"BasicQWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            b"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ",
            b"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=x",
            b"Basic QWxh=GRpbjpvcGVuIHNlc2FtZQ==",
            b"Basic bm9jb2xvbg==",
            b"Basic QR==",
        ] {
            assert_eq!(basic(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        let ctl = format!("Basic {}", base64_encode(b"a\x01b:pw"));
        assert_eq!(basic(ctl.as_bytes()), None);
        let long = format!("Basic {}", "A".repeat(MAX_TOKEN + 4));
        assert_eq!(basic(long.as_bytes()), None);
    }

    #[test]
    fn base64_round_trips() {
        for n in 0..40u8 {
            let data: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37)).collect();
            assert_eq!(base64_decode(base64_encode(&data).as_bytes()), Some(data));
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
    }
}
