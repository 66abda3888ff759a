//! The header section of a CGI script's output (RFC 3875 §6): where it ends and what it says
//! (`Status`, `Location`, `Content-Length`, `Content-Type` and the fields to pass on). Lines
//! end with LF or CRLF; anything malformed is an error the server answers with 502. Fuzzed
//! (`fuzz/fuzz_targets/cgi_head.rs`).

use crate::response::{valid_name, valid_value};

/// The end of the header section: (length of the header lines, start of the body). Lines end
/// with LF or CRLF (RFC 3875 §6.3 allows either).
pub fn find_blank_line(buf: &[u8]) -> Option<(usize, usize)> {
    if buf.starts_with(b"\n") {
        return Some((0, 1));
    }
    if buf.starts_with(b"\r\n") {
        return Some((0, 2));
    }
    let mut i = 0;
    while let Some(p) = buf[i..].iter().position(|&b| b == b'\n') {
        let nl = i + p;
        match &buf[nl + 1..] {
            [b'\n', ..] => return Some((nl + 1, nl + 2)),
            [b'\r', b'\n', ..] => return Some((nl + 1, nl + 3)),
            _ => i = nl + 1,
        }
    }
    None
}

/// The script's header section, parsed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fields {
    /// `Status`: 200..=599.
    pub status: Option<u16>,
    pub location: Option<String>,
    pub content_length: Option<u64>,
    pub has_content_type: bool,
    /// The other fields, to send as they are.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Fields {
    /// `Location: /path` with no `Status` (RFC 3875 §6.2.2); `//host` is not a local path.
    pub fn local_redirect(&self) -> Option<&str> {
        let loc = self.location.as_deref()?;
        (self.status.is_none() && loc.starts_with('/') && !loc.starts_with("//")).then_some(loc)
    }

    /// The response status: `Status`, else 302 with a `Location`, else 200.
    pub fn status(&self) -> u16 {
        self.status
            .unwrap_or(if self.location.is_some() { 302 } else { 200 })
    }
}

/// Parses the header lines of a script's output (without the blank line).
pub fn parse_head(head: &[u8]) -> Result<Fields, &'static str> {
    let mut f = Fields::default();
    for line in head.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue; // the final LF's empty tail
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or("a line without a colon")?;
        let name = &line[..colon];
        if !valid_name(name) {
            return Err("an invalid field name");
        }
        let value = line[colon + 1..].trim_ascii();
        if !valid_value(value) {
            return Err("an invalid field value");
        }
        let name = std::str::from_utf8(name).map_err(|_| "an invalid field name")?;
        if name.eq_ignore_ascii_case("status") {
            let code = value.get(..3).ok_or("a bad Status")?;
            let ok_end = value.len() == 3 || value[3] == b' ';
            let code: u16 = std::str::from_utf8(code)
                .ok()
                .and_then(|c| c.parse().ok())
                .filter(|c| (200..=599).contains(c) && ok_end)
                .ok_or("a bad Status")?;
            if f.status.replace(code).is_some() {
                return Err("two Status fields");
            }
        } else if name.eq_ignore_ascii_case("location") {
            let loc = std::str::from_utf8(value).map_err(|_| "a bad Location")?;
            if loc.is_empty() || f.location.replace(loc.to_string()).is_some() {
                return Err("a bad Location");
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse().ok())
                .ok_or("a bad Content-Length")?;
            f.content_length = Some(n);
        } else {
            if name.eq_ignore_ascii_case("content-type") {
                f.has_content_type = true;
            }
            f.headers.push((name.to_string(), value.to_vec()));
        }
    }
    if f.status.is_none() && f.location.is_none() && !f.has_content_type {
        return Err("none of Content-Type, Location and Status");
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_line_with_lf_or_crlf() {
        assert_eq!(find_blank_line(b"A: b\n\nbody"), Some((5, 6)));
        assert_eq!(find_blank_line(b"A: b\r\n\r\nbody"), Some((6, 8)));
        assert_eq!(find_blank_line(b"A: b\nC: d\r\n\nx"), Some((11, 12)));
        assert_eq!(find_blank_line(b"\nbody"), Some((0, 1)));
        assert_eq!(find_blank_line(b"A: b\r\n"), None);
        assert_eq!(find_blank_line(b"A: b\n\r"), None);
    }

    #[test]
    fn parses_status_type_and_location() {
        let f =
            parse_head(b"Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-A:  v \n").unwrap();
        assert_eq!(f.status(), 404);
        assert_eq!(
            f.headers,
            vec![
                ("Content-Type".to_string(), b"text/plain".to_vec()),
                ("X-A".to_string(), b"v".to_vec())
            ]
        );
        let f = parse_head(b"Location: /other?x=1\n").unwrap();
        assert_eq!(f.local_redirect(), Some("/other?x=1"));
        let f = parse_head(b"Location: http://example.com/\n").unwrap();
        assert_eq!((f.local_redirect(), f.status()), (None, 302));
        let f = parse_head(b"Location: //example.com/\n").unwrap();
        assert_eq!(f.local_redirect(), None);
        let f = parse_head(b"Status: 301\nLocation: /moved\n").unwrap();
        assert_eq!((f.local_redirect(), f.status()), (None, 301));
        let f = parse_head(b"Content-Type: text/plain\nContent-Length: 12\n").unwrap();
        assert_eq!(f.content_length, Some(12));
    }

    #[test]
    fn refuses_malformed_headers() {
        for bad in [
            &b"no colon here\n"[..],
            b"Bad Name: x\n",
            b": empty name\n",
            b"Status: abc\nContent-Type: text/plain\n",
            b"Status: 99\n",
            b"Status: 1234\n",
            b"Status: 100 Continue\n",
            b"Status: 200\nStatus: 200\n",
            b"Content-Type: a\x01b\n",
            b"Content-Length: -1\nContent-Type: text/plain\n",
            b"X-Only: no type\n",
            b"",
        ] {
            assert!(
                parse_head(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
