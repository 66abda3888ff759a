//! The `Range` request header for byte ranges (RFC 9110 §14.2). The satisfiable ranges are
//! sorted and those that overlap or touch are merged (RFC 9110 §14.2 lets a server coalesce
//! them; it is what keeps a request such as Apache's CVE-2011-3192 from asking for the same
//! bytes many times over): one range left gives 206 with that range, several give 206 with a
//! `multipart/byteranges` body; none satisfiable gives 416. More than [`MAX_RANGES`] ranges, or
//! a header that does not parse, is answered with the whole representation (a server may
//! ignore Range).

/// What to send for a `Range` header on a representation of `size` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeSpec {
    /// Send the whole representation with 200.
    Full,
    /// Send bytes `start..=end` with 206.
    Single { start: u64, end: u64 },
    /// Send these ranges, sorted, apart from each other (none touches the next), with 206 as
    /// `multipart/byteranges`.
    Multi(Vec<(u64, u64)>),
    /// 416 with `Content-Range: bytes */size`.
    Unsatisfiable,
}

/// At most this many ranges are looked at (nginx's `max_ranges`; Apache allows 200); more (a
/// classic amplification trick) is answered with the whole representation.
pub const MAX_RANGES: usize = 16;

/// Parses a `Range` value against `size`.
pub fn parse_range(value: &[u8], size: u64) -> RangeSpec {
    let Some(rest) = strip_prefix_ci(value, b"bytes=") else {
        return RangeSpec::Full;
    };
    let mut count = 0;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for part in rest.split(|&b| b == b',') {
        let part = trim(part);
        if part.is_empty() {
            continue;
        }
        count += 1;
        if count > MAX_RANGES {
            return RangeSpec::Full;
        }
        let Some(r) = parse_one(part) else {
            return RangeSpec::Full;
        };
        ranges.extend(resolve(r, size));
    }
    if count == 0 {
        return RangeSpec::Full;
    }
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1.saturating_add(1) => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    match merged.as_slice() {
        [] => RangeSpec::Unsatisfiable,
        &[(start, end)] => RangeSpec::Single { start, end },
        _ => RangeSpec::Multi(merged),
    }
}

#[derive(Debug, Clone, Copy)]
enum Raw {
    FromTo(u64, Option<u64>),
    Suffix(u64),
}

fn parse_one(p: &[u8]) -> Option<Raw> {
    let dash = p.iter().position(|&b| b == b'-')?;
    let (a, b) = (trim(&p[..dash]), trim(&p[dash + 1..]));
    if a.is_empty() {
        return Some(Raw::Suffix(num(b)?));
    }
    let start = num(a)?;
    if b.is_empty() {
        return Some(Raw::FromTo(start, None));
    }
    let end = num(b)?;
    // Compared as written: two positions past u64 both read as u64::MAX.
    (digits_cmp(b, a) != std::cmp::Ordering::Less).then_some(Raw::FromTo(start, Some(end)))
}

/// Two runs of ASCII digits compared as the numbers they write, of any length.
fn digits_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let strip = |d: &[u8]| -> usize { d.iter().position(|&c| c != b'0').unwrap_or(d.len()) };
    let (a, b) = (&a[strip(a)..], &b[strip(b)..]);
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn resolve(r: Raw, size: u64) -> Option<(u64, u64)> {
    match r {
        Raw::FromTo(start, end) if start < size => {
            Some((start, end.map_or(size - 1, |e| e.min(size - 1))))
        }
        Raw::FromTo(..) => None,
        Raw::Suffix(0) => None,
        Raw::Suffix(n) if size > 0 => Some((size - n.min(size), size - 1)),
        Raw::Suffix(_) => None,
    }
}

/// `1*DIGIT` as a position or length; one past `u64::MAX` reads as `u64::MAX`, which is past
/// any representation's end (RFC 9110 §14.1.1 bounds neither: a last position past the end
/// means the end, a first one past it is unsatisfiable, a suffix longer than the whole is
/// the whole).
fn num(d: &[u8]) -> Option<u64> {
    if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(d.iter().fold(0u64, |n, &b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

fn trim(mut b: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', r @ ..] = b {
        b = r;
    }
    while let [r @ .., b' ' | b'\t'] = b {
        b = r;
    }
    b
}

fn strip_prefix_ci<'a>(v: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    (v.len() >= prefix.len() && v[..prefix.len()].eq_ignore_ascii_case(prefix))
        .then(|| &v[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeSpec::*;

    #[test]
    fn ranges() {
        assert_eq!(
            parse_range(b"bytes=0-99", 1000),
            Single { start: 0, end: 99 }
        );
        assert_eq!(
            parse_range(b"bytes=900-", 1000),
            Single {
                start: 900,
                end: 999
            }
        );
        assert_eq!(
            parse_range(b"bytes=-100", 1000),
            Single {
                start: 900,
                end: 999
            }
        );
        assert_eq!(
            parse_range(b"bytes=-5000", 1000),
            Single { start: 0, end: 999 }
        );
        assert_eq!(
            parse_range(b"bytes=990-2000", 1000),
            Single {
                start: 990,
                end: 999
            }
        );
        assert_eq!(
            parse_range(b"Bytes= 1 - 2 ", 1000),
            Single { start: 1, end: 2 }
        );
        assert_eq!(parse_range(b"bytes=1000-", 1000), Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-0", 1000), Unsatisfiable);
        assert_eq!(parse_range(b"bytes=0-0", 0), Unsatisfiable);
        assert_eq!(
            parse_range(b"bytes=0-1,5-6", 1000),
            Multi(vec![(0, 1), (5, 6)])
        );
        assert_eq!(parse_range(b"bytes=2000-3000,4000-", 1000), Unsatisfiable);
        // Sorted, the unsatisfiable dropped, overlapping and touching ones merged.
        assert_eq!(
            parse_range(b"bytes=500-599, -100, 2000-, 0-9", 1000),
            Multi(vec![(0, 9), (500, 599), (900, 999)])
        );
        assert_eq!(
            parse_range(b"bytes=0-9,10-19,5-7", 1000),
            Single { start: 0, end: 19 }
        );
        assert_eq!(
            parse_range(b"bytes=0-9,2000-", 1000),
            Single { start: 0, end: 9 }
        );
        // CVE-2011-3192's shape: the same bytes asked for many times come once.
        let overlapping = format!("bytes=0-,{}", vec!["5-99"; 15].join(","));
        assert_eq!(
            parse_range(overlapping.as_bytes(), 1000),
            Single { start: 0, end: 999 }
        );
        assert_eq!(parse_range(b"bytes=5-1", 1000), Full);
        assert_eq!(parse_range(b"bytes=abc", 1000), Full);
        assert_eq!(parse_range(b"items=0-1", 1000), Full);
        assert_eq!(parse_range(b"bytes=", 1000), Full);
        // Positions past u64: a first one is past the end, a last one means the end, a suffix
        // that long is the whole; the order of two such is still checked as written.
        assert_eq!(
            parse_range(b"bytes=99999999999999999999-", 1000),
            Unsatisfiable
        );
        assert_eq!(
            parse_range(b"bytes=0-99999999999999999999999", 1000),
            Single { start: 0, end: 999 }
        );
        assert_eq!(
            parse_range(b"bytes=-99999999999999999999999", 1000),
            Single { start: 0, end: 999 }
        );
        assert_eq!(
            parse_range(b"bytes=99999999999999999999-99999999999999999998", 1000),
            Full
        );
        assert_eq!(
            parse_range(b"bytes=00099999999999999999998-99999999999999999999", 1000),
            Unsatisfiable
        );
        assert_eq!(
            parse_range(b"bytes=18446744073709551615-", u64::MAX),
            Unsatisfiable
        );
        let many = format!("bytes={}", vec!["0-1"; 17].join(","));
        assert_eq!(parse_range(many.as_bytes(), 1000), Full);
    }
}
