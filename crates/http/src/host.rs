//! Validation of the `Host` field and of the authority of an absolute-form request target
//! (RFC 9110 §7.2, RFC 3986 §3.2). Strict on purpose: a host that a proxy or a virtual-host
//! lookup could read two ways (a numeric host that is not a plain dotted quad, userinfo,
//! percent-encoding, a second colon) is refused.

use std::net::Ipv6Addr;

/// True if `v` is a valid `Host` field value: `uri-host [ ":" port ]`. An empty value is
/// allowed (RFC 9112 §3.2 for targets without an authority).
pub fn valid_host(v: &[u8]) -> bool {
    if v.is_empty() {
        return true;
    }
    let (host, port) = match split_port(v) {
        Some(hp) => hp,
        None => return false,
    };
    valid_port(port) && valid_uri_host(host)
}

/// True if `v` is a valid authority of an absolute-form target: `host [ ":" port ]`, non-empty
/// host, no userinfo.
pub fn valid_authority(v: &[u8]) -> bool {
    !v.is_empty() && v[0] != b':' && valid_host(v)
}

/// Splits `host[:port]`, honouring brackets of an IP-literal. Returns `None` when the shape is
/// impossible (unbalanced bracket, text after `]` that is not a port).
fn split_port(v: &[u8]) -> Option<(&[u8], &[u8])> {
    if v[0] == b'[' {
        let close = v.iter().position(|&b| b == b']')?;
        let rest = &v[close + 1..];
        match rest.first() {
            None => Some((&v[..=close], &[])),
            Some(b':') => Some((&v[..=close], &rest[1..])),
            Some(_) => None,
        }
    } else {
        match v.iter().position(|&b| b == b':') {
            None => Some((v, &[])),
            Some(i) => Some((&v[..i], &v[i + 1..])),
        }
    }
}

fn valid_port(p: &[u8]) -> bool {
    p.len() <= 5 && p.iter().all(u8::is_ascii_digit) && {
        let n = p.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'));
        n <= 65535
    }
}

fn valid_uri_host(h: &[u8]) -> bool {
    if h.is_empty() {
        return true;
    }
    if h[0] == b'[' {
        // IP-literal: only IPv6 (IPvFuture is refused; no server uses it).
        return h.len() > 2
            && h[h.len() - 1] == b']'
            && std::str::from_utf8(&h[1..h.len() - 1])
                .ok()
                .and_then(|s| s.parse::<Ipv6Addr>().ok())
                .is_some();
    }
    if !h.iter().all(|&b| is_reg_name_char(b)) {
        return false;
    }
    // A host whose last label is numeric is an IPv4 address to every URL parser (WHATWG
    // "ends in a number"), which would also accept octal, hex and short forms such as
    // `0x7f.1` or `017700000001`. Only the plain dotted-quad form is accepted here.
    let last = h
        .rsplit(|&b| b == b'.')
        .find(|l| !l.is_empty())
        .unwrap_or(h);
    let numeric_label = last.iter().all(u8::is_ascii_digit)
        || (last.len() > 1 && last[0] == b'0' && (last[1] | 0x20) == b'x');
    if numeric_label {
        return is_dotted_quad(h);
    }
    true
}

/// Longest name [`site_name`] returns: a DNS name is at most 253 bytes (RFC 1035 §2.3.4), an
/// IPv6 literal with its brackets far less.
pub const MAX_SITE_NAME: usize = 255;

/// The name a virtual host is chosen by: the host of a `Host` value or an authority
/// (`host[:port]`), port and trailing dots dropped (`example.test.` is the fully qualified
/// `example.test`), ASCII-lowercased (RFC 4343: DNS names compare case-insensitively) into
/// `buf`. `None` when no name is left or it is longer than [`MAX_SITE_NAME`]. The value is not
/// validated here (the request parser did that); arbitrary bytes give some answer, never a
/// panic.
pub fn site_name<'a>(v: &[u8], buf: &'a mut [u8; MAX_SITE_NAME]) -> Option<&'a [u8]> {
    if v.is_empty() {
        return None;
    }
    let (host, _) = split_port(v)?;
    let dots = host.iter().rev().take_while(|&&b| b == b'.').count();
    let host = &host[..host.len() - dots];
    if host.is_empty() || host.len() > MAX_SITE_NAME {
        return None;
    }
    let out = &mut buf[..host.len()];
    for (o, &b) in out.iter_mut().zip(host) {
        *o = b.to_ascii_lowercase();
    }
    Some(out)
}

/// RFC 3986 reg-name without pct-encoded: unreserved and sub-delims.
fn is_reg_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
        )
}

/// `dec-octet "." dec-octet "." dec-octet "." dec-octet` with no leading zeros.
fn is_dotted_quad(h: &[u8]) -> bool {
    let mut n = 0;
    for part in h.split(|&b| b == b'.') {
        n += 1;
        let ok = !part.is_empty()
            && part.len() <= 3
            && part.iter().all(u8::is_ascii_digit)
            && !(part.len() > 1 && part[0] == b'0')
            && part.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) <= 255;
        if !ok {
            return false;
        }
    }
    n == 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        for ok in [
            &b"localhost"[..],
            b"localhost:80",
            b"foo_bar.example.com",
            b"127.0.0.1",
            b"127.0.0.1:8080",
            b"[::1]",
            b"[4711::abcd]:8000",
            b"",
            b"example.com:",
        ] {
            assert!(valid_host(ok), "{:?}", String::from_utf8_lossy(ok));
        }
        for bad in [
            &b"localhost:80 x"[..],
            b"localhost:80x",
            b"localhost:80:80",
            b"localhost::80",
            b"4714::abcd:8001",
            b"abc\xa0",
            b"abc\\foo",
            b"017700000001",
            b"0x7f.1",
            b"127.01.0.1",
            b"%3127.0.0.1",
            b"foo@localhost",
            b"[4712::abcd::]",
            b"[::1]x",
            b"[::1",
            b"host:99999",
            b"256.1.1.1",
        ] {
            assert!(!valid_host(bad), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(!valid_authority(b""));
        assert!(!valid_authority(b":80"));
    }

    #[test]
    fn site_names() {
        let mut buf = [0u8; MAX_SITE_NAME];
        for (v, want) in [
            (&b"Example.TEST"[..], Some(&b"example.test"[..])),
            (b"example.test.:8080", Some(b"example.test")),
            (b"example.test:", Some(b"example.test")),
            (b"[::1]:80", Some(b"[::1]")),
            (b"[FE80::1]", Some(b"[fe80::1]")),
            (b"127.0.0.1:8080", Some(b"127.0.0.1")),
            (b"", None),
            (b".", None),
            (b":80", None),
            (b"[::1", None),
        ] {
            assert_eq!(
                site_name(v, &mut buf).map(<[u8]>::to_vec),
                want.map(<[u8]>::to_vec),
                "{:?}",
                String::from_utf8_lossy(v)
            );
        }
        let long = vec![b'a'; MAX_SITE_NAME + 1];
        assert_eq!(site_name(&long, &mut buf), None);
        assert_eq!(
            site_name(&long[1..], &mut buf).map(<[u8]>::len),
            Some(MAX_SITE_NAME)
        );
    }
}
