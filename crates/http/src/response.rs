//! Response-head encoding: status line, header fields (checked so a value can never split the
//! response), the cached `Date`.

use crate::date;

/// The reason phrase for `status` (RFC 9110 §15); empty for codes without one here.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// True if a status code forbids a message body (1xx, 204, 304).
pub fn status_has_no_body(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

/// A header that cannot be written: its name is not a token or its value holds CR, LF or NUL
/// (which would let a value start a new header or a new response: response splitting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidHeader;

impl std::fmt::Display for InvalidHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid response header name or value")
    }
}

impl std::error::Error for InvalidHeader {}

/// True if `name` may be written as a field name.
pub fn valid_name(name: &[u8]) -> bool {
    // Four table lookups per step without a branch between them: names are short, so
    // looking at every byte costs less than stopping early.
    let tchar = crate::request::is_tchar;
    let mut ok = !name.is_empty();
    let mut quads = name.chunks_exact(4);
    for q in &mut quads {
        ok &= tchar(q[0]) & tchar(q[1]) & tchar(q[2]) & tchar(q[3]);
    }
    for &b in quads.remainder() {
        ok &= tchar(b);
    }
    ok
}

/// True if `value` may be written as a field value.
pub fn valid_value(value: &[u8]) -> bool {
    // HTAB, SP, visible ASCII and obs-text; no other CTL, no DEL (eight bytes per step).
    crate::request::field_value_end(value, 0) == value.len()
}

/// The status line of a 200.
pub const STATUS_200: &[u8] = b"HTTP/1.1 200 OK\r\n";

/// Appends `HTTP/1.1 <status> <reason>\r\n`.
pub fn write_status_line(status: u16, out: &mut Vec<u8>) {
    // The common ones in one copy of a constant.
    let whole: &[u8] = match status {
        200 => STATUS_200,
        304 => b"HTTP/1.1 304 Not Modified\r\n",
        404 => b"HTTP/1.1 404 Not Found\r\n",
        _ => b"",
    };
    if !whole.is_empty() {
        out.extend_from_slice(whole);
        return;
    }
    out.extend_from_slice(b"HTTP/1.1 ");
    write_decimal(u64::from(status), out);
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends `name: value\r\n` after checking both.
pub fn write_header(name: &str, value: &[u8], out: &mut Vec<u8>) -> Result<(), InvalidHeader> {
    if !valid_name(name.as_bytes()) || !valid_value(value) {
        return Err(InvalidHeader);
    }
    write_header_unchecked(name, value, out);
    Ok(())
}

/// Appends `name: value\r\n` for a name and value the caller built from safe parts.
pub fn write_header_unchecked(name: &str, value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends `Date: <now>\r\n` from the per-second cache.
pub fn write_date(out: &mut Vec<u8>) {
    out.extend_from_slice(b"Date: ");
    out.extend_from_slice(&date::now());
    out.extend_from_slice(b"\r\n");
}

/// Appends `Content-Length: n\r\n`.
pub fn write_content_length(n: u64, out: &mut Vec<u8>) {
    const NAME: &[u8] = b"Content-Length: ";
    // The line is built in a fixed-size array and appended whole (a copy of constant length,
    // no call), then the vector is cut back to the line's real length.
    let mut line = [0u8; NAME.len() + 20 + 2];
    line[..NAME.len()].copy_from_slice(NAME);
    let digits = decimal_digits(n);
    let end = NAME.len() + digits;
    put_decimal(n, &mut line[NAME.len()..end]);
    line[end] = b'\r';
    line[end + 1] = b'\n';
    let len = out.len() + end + 2;
    out.extend_from_slice(&line);
    out.truncate(len);
}

/// How many decimal digits `n` has (1 for 0).
fn decimal_digits(n: u64) -> usize {
    let mut digits = 1;
    let mut bound = 10u64;
    while digits < 20 && n >= bound {
        digits += 1;
        bound = bound.saturating_mul(10);
    }
    digits
}

/// Appends the decimal digits of `n`.
pub fn write_decimal(n: u64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let digits = decimal_digits(n);
    put_decimal(n, &mut buf[..digits]);
    out.extend_from_slice(&buf[..digits]);
}

/// Writes the decimal digits of `n` into `out`, which is [`decimal_digits`]`(n)` bytes long.
fn put_decimal(mut n: u64, out: &mut [u8]) {
    for d in out.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_value_takes_exactly_htab_and_the_bytes_from_sp_but_del() {
        let one = |b: u8| b == b'\t' || (b >= 0x20 && b != 0x7f);
        for b in 0..=255u8 {
            // Alone, and at every position of a value longer than one eight-byte word.
            assert_eq!(valid_value(&[b]), one(b), "{b:#x}");
            for at in 0..19 {
                let mut v = b"text/plain; q=0.5 x".to_vec();
                v[at] = b;
                assert_eq!(valid_value(&v), one(b), "{b:#x} at {at}");
            }
        }
        assert!(valid_value(b""));
        assert!(valid_value(b"a\tb\t\t\t\t\t\t\t\tc \x80\xff"));
    }

    #[test]
    fn constant_status_lines_match_the_general_form() {
        for status in [200, 304, 404] {
            let mut out = Vec::new();
            write_status_line(status, &mut out);
            assert_eq!(
                out,
                format!("HTTP/1.1 {status} {}\r\n", reason(status)).as_bytes()
            );
        }
        let mut out = Vec::new();
        write_status_line(201, &mut out);
        assert_eq!(out, b"HTTP/1.1 201 Created\r\n");
    }

    #[test]
    fn encodes_head() {
        let mut out = Vec::new();
        write_status_line(404, &mut out);
        write_header("Content-Type", b"text/plain", &mut out).unwrap();
        write_content_length(1234567, &mut out);
        write_decimal(0, &mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 1234567\r\n0"
        );
    }

    #[test]
    fn refuses_response_splitting() {
        let mut out = Vec::new();
        assert_eq!(
            write_header("X", b"a\r\nSet-Cookie: x", &mut out),
            Err(InvalidHeader)
        );
        assert_eq!(write_header("X", b"a\nb", &mut out), Err(InvalidHeader));
        assert_eq!(write_header("X", b"a\0b", &mut out), Err(InvalidHeader));
        assert_eq!(write_header("X Y", b"a", &mut out), Err(InvalidHeader));
        assert_eq!(write_header("", b"a", &mut out), Err(InvalidHeader));
        assert!(out.is_empty());
    }

    #[test]
    fn content_length_lines_for_every_digit_count() {
        let mut n = 0u64;
        loop {
            for v in [n, n.saturating_sub(1), n.saturating_add(1)] {
                let mut out = b"x".to_vec();
                write_content_length(v, &mut out);
                assert_eq!(out, format!("xContent-Length: {v}\r\n").as_bytes());
            }
            if n == u64::MAX {
                break;
            }
            n = n.saturating_mul(10).max(1);
        }
    }

    #[test]
    fn valid_name_is_exactly_a_token() {
        let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        assert!(!valid_name(b""));
        for b in 0..=255u8 {
            // At every position of names of one to nine bytes (all remainders of four).
            for len in 1..=9 {
                for at in 0..len {
                    let mut name = vec![b'a'; len];
                    name[at] = b;
                    assert_eq!(valid_name(&name), tchar(b), "{b:#x} at {at} of {len}");
                }
            }
        }
    }

    #[test]
    fn date_header_shape() {
        let mut out = Vec::new();
        write_date(&mut out);
        assert!(out.starts_with(b"Date: ") && out.ends_with(b" GMT\r\n"));
        assert_eq!(out.len(), 6 + date::DATE_LEN + 2);
    }
}
