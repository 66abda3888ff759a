//! HAProxy's PROXY protocol, versions 1 (text) and 2 (binary), as a load balancer sends it
//! before the client's bytes: which client address the connection really comes from. Sans-I/O:
//! [`parse`] looks at the bytes received so far and says how many more it needs, what the
//! header said and how long it was, or why it is not one.
//!
//! Spec: <https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt>.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest version 1 header, CRLF included (spec §2.1).
pub const V1_MAX: usize = 107;
/// Version 2's 12-byte signature.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 2 header accepted: 16 bytes and up to this many of addresses and TLVs
/// (the spec allows 65535; load balancers send a few hundred; this bounds the buffering).
pub const V2_MAX_PAYLOAD: usize = 4096;

/// What a complete header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proxied {
    /// A relayed connection: the client's address and the address it connected to.
    Tcp {
        source: SocketAddr,
        dest: SocketAddr,
    },
    /// The sender's own connection (a health check: v2 `LOCAL`) or one it cannot describe
    /// (v1 `UNKNOWN`, v2 `UNSPEC` or a unix socket): the connection's own address stands.
    Local,
}

/// Why the bytes are not a PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyError {
    /// Neither signature: the peer did not send a PROXY header.
    Missing,
    /// A version 1 line that breaks the grammar, or longer than [`V1_MAX`].
    BadV1,
    /// A version 2 header with a bad version, command, or address block.
    BadV2,
    /// A version 2 header longer than this parser accepts ([`V2_MAX_PAYLOAD`]).
    TooLong,
}

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProxyError::Missing => "no PROXY protocol header",
            ProxyError::BadV1 => "malformed PROXY v1 header",
            ProxyError::BadV2 => "malformed PROXY v2 header",
            ProxyError::TooLong => "PROXY v2 header too long",
        })
    }
}

impl std::error::Error for ProxyError {}

/// The outcome of looking at the first bytes of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A header, `len` bytes long; the client's own bytes follow it.
    Done { proxied: Proxied, len: usize },
    /// So far a valid prefix: read more and call again with all the bytes.
    Partial,
}

/// Parses the PROXY header at the start of `buf`.
pub fn parse(buf: &[u8]) -> Result<Parsed, ProxyError> {
    const V1: &[u8] = b"PROXY ";
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] == V2_SIGNATURE[..n] && !buf.is_empty() {
        if n < V2_SIGNATURE.len() {
            return Ok(Parsed::Partial);
        }
        return parse_v2(buf);
    }
    let n = buf.len().min(V1.len());
    if buf[..n] == V1[..n] {
        if buf.is_empty() {
            return Ok(Parsed::Partial);
        }
        return parse_v1(buf);
    }
    Err(ProxyError::Missing)
}

fn parse_v1(buf: &[u8]) -> Result<Parsed, ProxyError> {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(cr) = window.iter().position(|&b| b == b'\r') else {
        return if buf.len() >= V1_MAX || window.contains(&b'\n') {
            Err(ProxyError::BadV1)
        } else {
            Ok(Parsed::Partial)
        };
    };
    if cr + 2 > V1_MAX {
        return Err(ProxyError::BadV1);
    }
    match buf.get(cr + 1) {
        None => return Ok(Parsed::Partial),
        Some(b'\n') => {}
        Some(_) => return Err(ProxyError::BadV1),
    }
    // A bare LF before the CR: refused here as it is while the line is still partial (above),
    // so a header's prefixes and the header agree (found by the fuzz target).
    if buf[..cr].contains(&b'\n') {
        return Err(ProxyError::BadV1);
    }
    let line = std::str::from_utf8(&buf[..cr]).map_err(|_| ProxyError::BadV1)?;
    let len = cr + 2;
    // Single spaces between the fields, as the spec writes them.
    let fields: Vec<&str> = line.split(' ').collect();
    let proxied = match fields.as_slice() {
        ["PROXY", "UNKNOWN", ..] => Proxied::Local,
        ["PROXY", family @ ("TCP4" | "TCP6"), src, dst, sport, dport] => {
            let v6 = *family == "TCP6";
            let ip = |s: &str| -> Result<IpAddr, ProxyError> {
                let ip: IpAddr = if v6 {
                    IpAddr::V6(s.parse::<Ipv6Addr>().map_err(|_| ProxyError::BadV1)?)
                } else {
                    IpAddr::V4(s.parse::<Ipv4Addr>().map_err(|_| ProxyError::BadV1)?)
                };
                Ok(ip)
            };
            let port = |s: &str| -> Result<u16, ProxyError> {
                // Decimal without a sign or leading zeros (the spec's 0..65535).
                if s.is_empty() || (s.len() > 1 && s.starts_with('0')) {
                    return Err(ProxyError::BadV1);
                }
                if !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(ProxyError::BadV1);
                }
                s.parse().map_err(|_| ProxyError::BadV1)
            };
            Proxied::Tcp {
                source: SocketAddr::new(ip(src)?, port(sport)?),
                dest: SocketAddr::new(ip(dst)?, port(dport)?),
            }
        }
        _ => return Err(ProxyError::BadV1),
    };
    Ok(Parsed::Done { proxied, len })
}

fn parse_v2(buf: &[u8]) -> Result<Parsed, ProxyError> {
    if buf.len() < 16 {
        return Ok(Parsed::Partial);
    }
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Err(ProxyError::BadV2);
    }
    let payload = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    if payload > V2_MAX_PAYLOAD {
        return Err(ProxyError::TooLong);
    }
    let len = 16 + payload;
    if buf.len() < len {
        return Ok(Parsed::Partial);
    }
    let body = &buf[16..len];
    let proxied = match ver_cmd & 0x0f {
        // LOCAL: the proxy's own connection; the address block is to be ignored.
        0 => Proxied::Local,
        1 => match buf[13] {
            // TCP over IPv4, then over IPv6 (UDP is not for an HTTP server).
            0x11 => {
                if body.len() < 12 {
                    return Err(ProxyError::BadV2);
                }
                let ip = |o: usize| {
                    IpAddr::V4(Ipv4Addr::new(
                        body[o],
                        body[o + 1],
                        body[o + 2],
                        body[o + 3],
                    ))
                };
                let port = |o: usize| u16::from_be_bytes([body[o], body[o + 1]]);
                Proxied::Tcp {
                    source: SocketAddr::new(ip(0), port(8)),
                    dest: SocketAddr::new(ip(4), port(10)),
                }
            }
            0x21 => {
                if body.len() < 36 {
                    return Err(ProxyError::BadV2);
                }
                let ip = |o: usize| {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(&body[o..o + 16]);
                    IpAddr::V6(Ipv6Addr::from(a))
                };
                let port = |o: usize| u16::from_be_bytes([body[o], body[o + 1]]);
                Proxied::Tcp {
                    source: SocketAddr::new(ip(0), port(32)),
                    dest: SocketAddr::new(ip(16), port(34)),
                }
            }
            // UNSPEC or unix sockets: nothing to use; the spec says accept and keep the
            // connection's own address.
            0x00 | 0x31 | 0x32 => Proxied::Local,
            _ => return Err(ProxyError::BadV2),
        },
        _ => return Err(ProxyError::BadV2),
    };
    Ok(Parsed::Done { proxied, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(buf: &[u8]) -> (Proxied, usize) {
        match parse(buf) {
            Ok(Parsed::Done { proxied, len }) => (proxied, len),
            other => panic!("{other:?} for {buf:?}"),
        }
    }

    fn tcp(src: &str, dst: &str) -> Proxied {
        Proxied::Tcp {
            source: src.parse().unwrap(),
            dest: dst.parse().unwrap(),
        }
    }

    #[test]
    fn v1_tcp4_and_tcp6_with_the_request_after_it() {
        let h = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n";
        assert_eq!(done(h), (tcp("192.168.0.1:56324", "192.168.0.11:443"), 47));
        let h = b"PROXY TCP6 2001:db8::1 ::1 65535 80\r\n";
        assert_eq!(done(h), (tcp("[2001:db8::1]:65535", "[::1]:80"), h.len()));
        assert_eq!(done(b"PROXY UNKNOWN\r\n"), (Proxied::Local, 15));
        assert_eq!(
            done(b"PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n").0,
            Proxied::Local
        );
    }

    #[test]
    fn every_prefix_of_a_header_asks_for_more() {
        let v1 = b"PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n";
        let v2 = v2_header(0x21, 0x11, &[10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2]);
        for h in [&v1[..], &v2[..]] {
            for n in 0..h.len() {
                assert_eq!(parse(&h[..n]), Ok(Parsed::Partial), "{:?}", &h[..n]);
            }
            assert!(matches!(parse(h), Ok(Parsed::Done { len, .. }) if len == h.len()));
        }
    }

    /// Regression (fuzz): an UNKNOWN line with a bare LF before its CRLF was accepted whole,
    /// while its prefix up to the LF was refused.
    #[test]
    fn a_bare_lf_in_a_v1_line_is_refused_whole_and_in_part() {
        let h = b"PROXY UNKNOWN TCP6\0\0:1 ::1 \0\n\r\n65535 80\r\n";
        assert_eq!(parse(h), Err(ProxyError::BadV1));
        assert_eq!(parse(&h[..29]), Err(ProxyError::BadV1));
        assert_eq!(parse(b"PROXY UNKNOWN\n\r\n"), Err(ProxyError::BadV1));
    }

    #[test]
    fn v1_rejects_what_the_grammar_does_not_allow() {
        for bad in [
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"[..],
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX",
            b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            b"PROXY TCP4 ::1 ::1 1 2\r\n",
            b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
            b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY \xff\r\n",
        ] {
            assert_eq!(parse(bad), Err(ProxyError::BadV1), "{bad:?}");
        }
        // No CRLF within the longest header.
        let long = [b"PROXY ".as_slice(), &[b'A'; 200]].concat();
        assert_eq!(parse(&long), Err(ProxyError::BadV1));
    }

    #[test]
    fn anything_else_is_missing() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Err(ProxyError::Missing));
        assert_eq!(parse(b"PROXX"), Err(ProxyError::Missing));
        assert_eq!(parse(b"\r\n\r\n\0\r\nQUIX"), Err(ProxyError::Missing));
    }

    fn v2_header(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.push(ver_cmd);
        h.push(fam);
        h.extend_from_slice(&(body.len() as u16).to_be_bytes());
        h.extend_from_slice(body);
        h
    }

    #[test]
    fn v2_ipv4_ipv6_local_and_tlvs() {
        let mut body = vec![192, 0, 2, 1, 198, 51, 100, 7, 0xdc, 0x05, 0x01, 0xbb];
        // A TLV after the addresses (PP2_TYPE_AUTHORITY "a"), skipped.
        body.extend_from_slice(&[0x02, 0x00, 0x01, b'a']);
        let mut h = v2_header(0x21, 0x11, &body);
        let len = h.len();
        h.extend_from_slice(b"GET /");
        assert_eq!(done(&h), (tcp("192.0.2.1:56325", "198.51.100.7:443"), len));
        let mut body = [0u8; 36];
        body[15] = 1; // ::1
        body[16] = 0x20;
        body[17] = 0x01; // 2001::
        body[32..34].copy_from_slice(&8080u16.to_be_bytes());
        body[34..36].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(
            done(&v2_header(0x21, 0x21, &body)).0,
            tcp("[::1]:8080", "[2001::]:80")
        );
        // LOCAL (a health check), whatever the family says.
        assert_eq!(done(&v2_header(0x20, 0x11, &[0; 12])).0, Proxied::Local);
        assert_eq!(done(&v2_header(0x21, 0x00, &[])).0, Proxied::Local);
    }

    #[test]
    fn v2_rejects_bad_versions_commands_families_and_short_blocks() {
        assert_eq!(
            parse(&v2_header(0x11, 0x11, &[0; 12])),
            Err(ProxyError::BadV2)
        );
        assert_eq!(
            parse(&v2_header(0x22, 0x11, &[0; 12])),
            Err(ProxyError::BadV2)
        );
        assert_eq!(
            parse(&v2_header(0x21, 0x11, &[0; 11])),
            Err(ProxyError::BadV2)
        );
        assert_eq!(
            parse(&v2_header(0x21, 0x21, &[0; 35])),
            Err(ProxyError::BadV2)
        );
        assert_eq!(
            parse(&v2_header(0x21, 0x41, &[0; 12])),
            Err(ProxyError::BadV2)
        );
        let mut h = V2_SIGNATURE.to_vec();
        h.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(parse(&h), Err(ProxyError::TooLong));
    }
}
