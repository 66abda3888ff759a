//! Timestamps as seconds since the Unix epoch: RFC 3339's (`2025-01-02T04:00:00Z`, ACME's
//! renewal windows), and the civil-date arithmetic the certificate readers share.

/// Days from 1970-01-01 to the proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the epoch of a calendar date and time, UTC; `None` for a field out of range.
pub(crate) fn utc(year: i64, month: i64, day: i64, hour: i64, min: i64, sec: i64) -> Option<i64> {
    let ok = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..=23).contains(&hour)
        && (0..=59).contains(&min)
        && (0..=60).contains(&sec);
    ok.then(|| days_from_civil(year, month, day) * 86_400 + hour * 3_600 + min * 60 + sec)
}

/// An RFC 3339 `date-time` (`2025-01-02T04:00:00Z`, `2025-01-02t04:00:00.5+02:00`) in whole
/// seconds since the epoch (a fraction is dropped); `None` for anything else.
pub fn rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter().try_fold(0i64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let at = utc(
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    )?;
    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|d| d.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let two = |a: u8, b: u8| -> Option<i64> {
                (a.is_ascii_digit() && b.is_ascii_digit())
                    .then(|| i64::from(a - b'0') * 10 + i64::from(b - b'0'))
            };
            let (h, m) = (two(*h1, *h2)?, two(*m1, *m2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = h * 3_600 + m * 60;
            if *sign == b'+' {
                secs
            } else {
                -secs
            }
        }
        _ => return None,
    };
    Some(at - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_read_as_unix_seconds() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339("2025-01-02T04:00:00Z"), Some(1_735_790_400));
        assert_eq!(rfc3339("2025-01-02t04:00:00.123456z"), Some(1_735_790_400));
        assert_eq!(rfc3339("2025-01-02T06:00:00+02:00"), Some(1_735_790_400));
        assert_eq!(rfc3339("2025-01-02T03:30:00-00:30"), Some(1_735_790_400));
        for bad in [
            "",
            "2025-01-02",
            "2025-01-02T04:00:00",
            "2025-13-02T04:00:00Z",
            "2025-01-02T24:00:00Z",
            "2025-01-02T04:00:00.Z",
            "2025-01-02T04:00:00+2:00",
            "2025/01/02T04:00:00Z",
            "2025-01-02T04:00:00Zjunk",
            "２025-01-02T04:00:00Z",
        ] {
            assert_eq!(rfc3339(bad), None, "{bad:?}");
        }
    }
}
