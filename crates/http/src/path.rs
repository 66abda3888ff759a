//! Turning a request path into a path relative to the document root that can never leave it:
//! percent-decoding, then segment-wise normalisation of `.` and `..`. Refused outright (400):
//! bad escapes, NUL, backslashes, and `..` that would climb above the root. Symlinks are the
//! open call's business (`openat2(RESOLVE_BENEATH)`, see `sys::open_beneath`).

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// `%` not followed by two hex digits, or a path not starting with `/`.
    BadSyntax,
    /// A NUL byte (raw or `%00`).
    Nul,
    /// A backslash (raw or `%5c`): a path separator to some systems, refused everywhere.
    Backslash,
    /// `..` segments that would climb above the root.
    AboveRoot,
}

/// A normalised path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized<'a> {
    /// Segments joined by `/`, no leading slash; empty for the root itself. Borrowed from the
    /// request when it needed no decoding or normalisation (the common case).
    pub rel: Cow<'a, [u8]>,
    /// The request path ended with `/` (or was the root).
    pub trailing_slash: bool,
    /// Some segment starts with `.` (a dotfile or dot-directory).
    pub has_dot_segment: bool,
}

/// Decodes and normalises `path` (the request path without query).
pub fn normalize(path: &str) -> Result<Normalized<'_>, PathError> {
    let raw = path.as_bytes();
    if raw.first() != Some(&b'/') {
        return Err(PathError::BadSyntax);
    }
    if is_plain(raw) {
        // Nothing to decode, no empty, `.` or `..` segment: the path is its own normal form.
        let trailing_slash = raw.ends_with(b"/");
        let rel = &raw[1..raw.len() - usize::from(trailing_slash && raw.len() > 1)];
        return Ok(Normalized {
            rel: Cow::Borrowed(rel),
            trailing_slash,
            has_dot_segment: false,
        });
    }
    normalize_general(raw)
}

/// True if `raw` (starting with `/`) has no escape, NUL or backslash and no segment that is
/// empty or starts with `.`, except an empty last one (a trailing slash). Eight bytes a step
/// (what [`is_plain_bytewise`] does a byte at a time).
fn is_plain(raw: &[u8]) -> bool {
    const LOW7: u64 = u64::from_ne_bytes([0x7f; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    // The high bit of each byte of `x` equal to `b`, exactly (no carry crosses a byte).
    let eq = |x: u64, b: u8| {
        let t = x ^ (ONES * u64::from(b));
        !(((t & LOW7) + LOW7) | t) & HIGH
    };
    // Whether the byte before the current word was a slash.
    let mut carry = 0u64;
    let mut words = raw.chunks_exact(8);
    let mut step = |x: u64| {
        let bad = eq(x, b'%') | eq(x, b'\\') | eq(x, 0);
        let slash = eq(x, b'/');
        let next = slash | eq(x, b'.');
        // A slash followed by a slash or a dot: in little-endian order the next byte is the
        // next higher one.
        let pair = ((slash << 8) | carry) & next;
        carry = slash >> 56;
        (bad | pair) == 0
    };
    for w in &mut words {
        if !step(u64::from_le_bytes(w.try_into().expect("eight bytes"))) {
            return false;
        }
    }
    let rest = words.remainder();
    // The tail, padded with a byte that matches nothing.
    let mut last = [b'a'; 8];
    last[..rest.len()].copy_from_slice(rest);
    step(u64::from_le_bytes(last))
}

/// [`is_plain`] a byte at a time: the rule it implements, kept for its tests.
#[cfg(test)]
fn is_plain_bytewise(raw: &[u8]) -> bool {
    let mut prev_slash = false;
    for &b in raw {
        match b {
            b'%' | b'\\' | 0 => return false,
            b'/' | b'.' if prev_slash => return false,
            _ => {}
        }
        prev_slash = b == b'/';
    }
    true
}

fn normalize_general(raw: &[u8]) -> Result<Normalized<'static>, PathError> {
    let decoded = percent_decode(raw)?;
    let mut segments: Vec<&[u8]> = Vec::new();
    for seg in decoded.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                if segments.pop().is_none() {
                    return Err(PathError::AboveRoot);
                }
            }
            s => segments.push(s),
        }
    }
    let last = decoded.rsplit(|&b| b == b'/').next().unwrap_or(b"");
    let trailing_slash = segments.is_empty() || last.is_empty() || last == b"." || last == b"..";
    let has_dot_segment = segments.iter().any(|s| s[0] == b'.');
    Ok(Normalized {
        rel: Cow::Owned(segments.join(&b'/')),
        trailing_slash,
        has_dot_segment,
    })
}

use std::borrow::Cow;

fn percent_decode(raw: &[u8]) -> Result<Vec<u8>, PathError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = match raw[i] {
            b'%' => {
                let hi = raw.get(i + 1).and_then(|&h| (h as char).to_digit(16));
                let lo = raw.get(i + 2).and_then(|&l| (l as char).to_digit(16));
                match (hi, lo) {
                    (Some(h), Some(l)) => {
                        i += 2;
                        (h * 16 + l) as u8
                    }
                    _ => return Err(PathError::BadSyntax),
                }
            }
            b => b,
        };
        match b {
            0 => return Err(PathError::Nul),
            b'\\' => return Err(PathError::Backslash),
            _ => out.push(b),
        }
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(p: &str) -> Result<String, PathError> {
        normalize(p).map(|n| String::from_utf8(n.rel.into_owned()).unwrap())
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_one() {
        // Every path over a small alphabet up to 5 bytes after the leading slash.
        let alphabet = [b'a', b'/', b'.', b'%', b'2', b'e'];
        let mut paths = vec![b"/".to_vec()];
        let mut frontier = paths.clone();
        for _ in 0..5 {
            let mut next = Vec::new();
            for p in &frontier {
                for &c in &alphabet {
                    let mut q = p.clone();
                    q.push(c);
                    next.push(q);
                }
            }
            paths.extend(next.iter().cloned());
            frontier = next;
        }
        let mut plain = 0;
        for p in &paths {
            let s = std::str::from_utf8(p).unwrap();
            if is_plain(p) {
                plain += 1;
            }
            assert_eq!(normalize(s), normalize_general(p), "{s}");
        }
        assert!(plain > 100, "the fast path was taken {plain} times");
    }

    #[test]
    fn eight_bytes_a_step_is_the_byte_rule() {
        // Paths of every length to 40 over the bytes that matter, so that every pair falls
        // within a word and across the boundary of two.
        let alphabet = [b'a', b'/', b'.', b'%', b'\\', 0, b'z', 0x80, 0xff, b'/'];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut checked = [0usize; 2];
        for len in 1..=40 {
            for _ in 0..4000 {
                let mut p = vec![b'/'];
                for _ in 1..len {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    // Mostly plain letters, so that long plain paths occur too.
                    let r = (seed % 40) as usize;
                    p.push(if r < alphabet.len() {
                        alphabet[r]
                    } else {
                        b'a' + (r % 26) as u8
                    });
                }
                let want = is_plain_bytewise(&p);
                assert_eq!(is_plain(&p), want, "{p:?}");
                checked[usize::from(want)] += 1;
            }
        }
        assert!(checked[0] > 10_000 && checked[1] > 10_000, "{checked:?}");
        for p in [
            &b"/abcdefg/.hidden"[..],
            b"/abcdefgh/x",
            b"/abcdefg//x",
            b"/abcdefg/",
        ] {
            assert_eq!(is_plain(p), is_plain_bytewise(p), "{p:?}");
        }
    }

    #[test]
    fn normalises() {
        assert_eq!(rel("/").unwrap(), "");
        assert_eq!(rel("/a/b/../c/./d").unwrap(), "a/c/d");
        assert_eq!(rel("//a///b").unwrap(), "a/b");
        assert_eq!(rel("/a%20b").unwrap(), "a b");
        assert_eq!(rel("/a/%2e%2e/b").unwrap(), "b");
        assert!(normalize("/a/").unwrap().trailing_slash);
        assert!(normalize("/a/..").unwrap().trailing_slash);
        assert!(!normalize("/a").unwrap().trailing_slash);
        assert!(normalize("/x/.git/config").unwrap().has_dot_segment);
        assert!(!normalize("/x/a.b").unwrap().has_dot_segment);
    }

    #[test]
    fn never_leaves_the_root() {
        for p in [
            "/..",
            "/../etc/passwd",
            "/a/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/%2E%2E%2fetc%2fpasswd",
            "/..%2f..%2fetc/passwd",
            "/a/%2e%2e/%2e%2e/x",
            "/.%2e/x",
            "/%2e./x",
        ] {
            assert_eq!(rel(p), Err(PathError::AboveRoot), "{p}");
        }
        assert_eq!(rel("/a%00b"), Err(PathError::Nul));
        assert_eq!(rel("/..\\..\\x"), Err(PathError::Backslash));
        assert_eq!(rel("/..%5c..%5cx"), Err(PathError::Backslash));
        assert_eq!(rel("/%zz"), Err(PathError::BadSyntax));
        assert_eq!(rel("/%2"), Err(PathError::BadSyntax));
        assert_eq!(rel("x"), Err(PathError::BadSyntax));
    }
}
