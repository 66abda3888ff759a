//! DER's tag-length-value elements (X.690), as far as weft reads them: the OCSP responses it
//! staples ([`crate::ocsp`]) and the names in a client certificate ([`crate::x509`]). Definite
//! lengths only, in their shortest form; one-byte tags.

/// The content of `bytes`, which must be exactly one element with tag `tag`; `Err(what)` when
/// it is not.
pub(crate) fn whole<'a>(
    bytes: &'a [u8],
    tag: u8,
    what: &'static str,
) -> Result<&'a [u8], &'static str> {
    match element(bytes, tag, what)? {
        (content, []) => Ok(content),
        _ => Err(what),
    }
}

/// The content of the element `bytes` starts with, which must have tag `tag`, and the bytes
/// after it; `Err(what)` when there is no such element.
pub(crate) fn element<'a>(
    bytes: &'a [u8],
    tag: u8,
    what: &'static str,
) -> Result<(&'a [u8], &'a [u8]), &'static str> {
    match any(bytes, what)? {
        (t, content, rest) if t == tag => Ok((content, rest)),
        _ => Err(what),
    }
}

/// The element `bytes` starts with, whatever its tag: (tag, content, the bytes after it).
pub(crate) fn any<'a>(
    bytes: &'a [u8],
    what: &'static str,
) -> Result<(u8, &'a [u8], &'a [u8]), &'static str> {
    let [t, first, rest @ ..] = bytes else {
        return Err(what);
    };
    // High tag numbers (low five bits all set) take more octets: none of weft's.
    if t & 0x1f == 0x1f {
        return Err(what);
    }
    let (len, rest) = match *first {
        n @ 0..=0x7f => (usize::from(n), rest),
        // Long form, one to four length octets (no indefinite length in DER), shortest form.
        n @ 0x81..=0x84 => {
            let k = usize::from(n & 0x7f);
            if rest.len() < k || rest[0] == 0 {
                return Err(what);
            }
            let len = rest[..k]
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            if len < 0x80 {
                return Err(what);
            }
            (len, &rest[k..])
        }
        _ => return Err(what),
    };
    if rest.len() < len {
        return Err(what);
    }
    let (content, rest) = rest.split_at(len);
    Ok((*t, content, rest))
}

/// An element: tag, length (short or long form, up to 64 KiB), content.
pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match content.len() {
        n @ 0..=0x7f => out.push(n as u8),
        n @ 0x80..=0xff => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(content);
    out
}
