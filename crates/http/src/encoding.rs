//! `Accept-Encoding` (RFC 9110 §12.5.3): which content coding a response gets.
//!
//! [`AcceptEncoding::parse`] reads the field's values (every `Accept-Encoding` line of a
//! request, in order) into a q-value per coding the server knows (`gzip`, `br`, `zstd`,
//! `identity`) and for `*`; [`AcceptEncoding::choose`] picks, among the codings the server
//! can produce for one response, the one with the highest q-value, ties going to the earlier
//! in the server's list (its preference).
//!
//! Rules, all RFC 9110's:
//! - q=0 refuses a coding; a coding not named takes `*`'s q-value, or is not acceptable
//!   (§12.5.3: "If the representation's content coding is one of the content codings listed
//!   ... it is acceptable unless it is accompanied by a qvalue of 0");
//! - identity is acceptable unless `identity;q=0`, or `*;q=0` with no entry for identity;
//!   it outranks a coding only where the client rated it higher (itself or through `*`);
//! - an empty field accepts identity only; no field at all is left to the caller (weft then
//!   sends identity, as nginx and Caddy do: a client that sent nothing may not decode);
//! - when nothing the server has is acceptable, not even identity, the answer is identity:
//!   §12.5.3 says the server SHOULD then send a representation without a content coding
//!   (rather than a 406), which is what nginx does;
//! - `x-gzip` is `gzip` (§8.4.1.3); coding names are case-insensitive (§8.4.1).
//!
//! Malformed input never panics and never fails the request: an element that is not
//! `token [ OWS ";" OWS "q=" qvalue ]` is skipped, as if the client had not sent it. A coding
//! named twice keeps its lowest q-value, so a refusal anywhere in the field stands.

/// A content coding weft can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    /// No content coding.
    Identity,
    /// gzip (RFC 1952).
    Gzip,
    /// Brotli (RFC 7932).
    Br,
    /// Zstandard (RFC 8878).
    Zstd,
}

impl Coding {
    /// Every coding, identity first.
    pub const ALL: [Coding; 4] = [Coding::Identity, Coding::Gzip, Coding::Br, Coding::Zstd];

    /// The coding's name as `Content-Encoding` spells it.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Identity => "identity",
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The coding named `name` (case-insensitive; `x-gzip` is gzip), if weft knows it.
    pub fn from_token(name: &[u8]) -> Option<Coding> {
        let eq = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
        if eq("gzip") || eq("x-gzip") {
            Some(Coding::Gzip)
        } else if eq("br") {
            Some(Coding::Br)
        } else if eq("zstd") {
            Some(Coding::Zstd)
        } else if eq("identity") {
            Some(Coding::Identity)
        } else {
            None
        }
    }

    /// The file-name suffix of a precompressed sibling (`.gz`, `.br`, `.zst`: what gzip,
    /// brotli and zstd write by default); none for identity.
    pub fn suffix(self) -> Option<&'static str> {
        match self {
            Coding::Identity => None,
            Coding::Gzip => Some(".gz"),
            Coding::Br => Some(".br"),
            Coding::Zstd => Some(".zst"),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The most a q-value can be, in thousandths.
pub const Q_MAX: u16 = 1000;

/// A parsed `Accept-Encoding` field: a q-value (thousandths, 0..=1000) per coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptEncoding {
    /// q-value of each [`Coding`] (by its index) where the field names it.
    named: [Option<u16>; 4],
    /// q-value of `*` where the field has it.
    star: Option<u16>,
}

impl AcceptEncoding {
    /// Reads the values of every `Accept-Encoding` field of a request, in order. An empty
    /// iterator or empty values mean "identity only" (see the module doc).
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> AcceptEncoding {
        let mut out = AcceptEncoding {
            named: [None; 4],
            star: None,
        };
        for value in values {
            for element in value.split(|&b| b == b',') {
                let Some((name, q)) = parse_element(element) else {
                    continue;
                };
                let slot = if name == b"*" {
                    &mut out.star
                } else {
                    match Coding::from_token(name) {
                        Some(c) => &mut out.named[c.index()],
                        None => continue,
                    }
                };
                *slot = Some(slot.map_or(q, |old| old.min(q)));
            }
        }
        out
    }

    /// The q-value the field gives `coding` (0: not acceptable).
    pub fn q(&self, coding: Coding) -> u16 {
        match (self.named[coding.index()], self.star, coding) {
            (Some(q), _, _) => q,
            (None, Some(q), _) => q,
            (None, None, Coding::Identity) => Q_MAX,
            (None, None, _) => 0,
        }
    }

    /// The coding to send among `available`, listed in the server's order of preference:
    /// the acceptable one with the highest q-value, ties to the earlier in `available`;
    /// identity competes with them where the client rated it (itself or through `*`: a
    /// client preferring it gets it) and is the answer when none is acceptable.
    pub fn choose(&self, available: &[Coding]) -> Coding {
        // Identity competes with the q-value the client gave it (itself or through `*`);
        // acceptable only by default, it comes after every coding the client accepts
        // ("gzip;q=0.5" asks for gzip, not for identity at an implied 1).
        let identity_q = self.named[Coding::Identity.index()]
            .or(self.star)
            .unwrap_or(0);
        let mut best = (Coding::Identity, identity_q);
        let mut best_rank = available
            .iter()
            .position(|&c| c == Coding::Identity)
            .unwrap_or(available.len());
        for (rank, &c) in available.iter().enumerate() {
            let q = self.q(c);
            if q == 0 {
                continue;
            }
            if q > best.1 || (q == best.1 && rank < best_rank) {
                best = (c, q);
                best_rank = rank;
            }
        }
        best.0
    }
}

/// `token [ OWS ";" OWS "q=" qvalue ]` with surrounding OWS: the name and q-value
/// (thousandths), or `None` for anything else (skipped by the caller).
fn parse_element(element: &[u8]) -> Option<(&[u8], u16)> {
    let element = trim_ows(element);
    if element.is_empty() {
        return None;
    }
    let (name, q) = match element.iter().position(|&b| b == b';') {
        None => (element, Q_MAX),
        Some(i) => {
            let param = trim_ows(&element[i + 1..]);
            let value = match param {
                [b'q' | b'Q', b'=', rest @ ..] => rest,
                _ => return None,
            };
            (trim_ows(&element[..i]), parse_qvalue(value)?)
        }
    };
    if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
        return None;
    }
    Some((name, q))
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )` (RFC 9110 §12.4.2), in
/// thousandths.
fn parse_qvalue(v: &[u8]) -> Option<u16> {
    let (&first, rest) = v.split_first()?;
    let frac = match rest {
        [] => &[][..],
        [b'.', frac @ ..] if frac.len() <= 3 => frac,
        _ => return None,
    };
    if !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match first {
        b'0' => Some(thousandths),
        b'1' if thousandths == 0 => Some(Q_MAX),
        _ => None,
    }
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Coding::*;

    const SERVER: [Coding; 3] = [Br, Zstd, Gzip];

    fn pick(value: &str) -> Coding {
        AcceptEncoding::parse([value.as_bytes()]).choose(&SERVER)
    }

    #[test]
    fn server_order_breaks_ties() {
        assert_eq!(pick("gzip, deflate, br, zstd"), Br);
        assert_eq!(pick("gzip, zstd"), Zstd);
        assert_eq!(pick("gzip"), Gzip);
        assert_eq!(pick("GZIP"), Gzip);
        assert_eq!(pick("x-gzip"), Gzip);
        assert_eq!(pick("*"), Br);
    }

    #[test]
    fn q_values_decide_before_server_order() {
        assert_eq!(pick("br;q=0.5, gzip"), Gzip);
        assert_eq!(pick("br;q=0.5, gzip;q=0.501"), Gzip);
        assert_eq!(pick("br ; q=0.9 , gzip;Q=0.8"), Br);
        assert_eq!(pick("gzip;q=0.2, identity;q=0.1"), Gzip);
        // Identity acceptable by default does not outrank a coding the client asked for; one
        // it rates higher does.
        assert_eq!(pick("gzip;q=0.5"), Gzip);
        assert_eq!(pick("gzip;q=0.5, identity"), Identity);
        assert_eq!(pick("gzip;q=0.5, *;q=0.6"), Br);
    }

    #[test]
    fn q_zero_refuses() {
        assert_eq!(pick("br;q=0, gzip"), Gzip);
        assert_eq!(pick("*, br;q=0"), Zstd);
        assert_eq!(pick("*;q=0, gzip"), Gzip);
        assert_eq!(pick("gzip;q=0"), Identity);
        assert_eq!(
            pick("*;q=0"),
            Identity,
            "nothing acceptable: identity anyway"
        );
        assert_eq!(pick("identity;q=0"), Identity);
        assert_eq!(pick("identity;q=0, gzip;q=0.1"), Gzip);
        // A coding named twice keeps its lowest q-value.
        assert_eq!(pick("br, br;q=0, gzip;q=0.5"), Gzip);
    }

    #[test]
    fn identity_rules() {
        let ae = AcceptEncoding::parse([&b""[..]]);
        assert_eq!((ae.q(Identity), ae.q(Gzip)), (Q_MAX, 0));
        let ae = AcceptEncoding::parse([&b"*;q=0"[..]]);
        assert_eq!(ae.q(Identity), 0);
        let ae = AcceptEncoding::parse([&b"*;q=0, identity;q=0.3"[..]]);
        assert_eq!(ae.q(Identity), 300);
        let ae = AcceptEncoding::parse(std::iter::empty());
        assert_eq!(ae.q(Identity), Q_MAX);
    }

    #[test]
    fn several_field_lines_add_up() {
        let ae = AcceptEncoding::parse([&b"gzip"[..], b"br;q=0.1"]);
        assert_eq!((ae.q(Gzip), ae.q(Br), ae.q(Zstd)), (Q_MAX, 100, 0));
        assert_eq!(ae.choose(&SERVER), Gzip);
    }

    #[test]
    fn malformed_elements_are_skipped() {
        for bad in [
            "br;q=1.5",
            "br;q=2",
            "br;q=0.1234",
            "br;q=",
            "br;q",
            "br;level=1",
            "br;q=.5",
            "br;q=1.001",
            "b r",
            "\"br\"",
            ";q=1",
            "br;q=0.5;x=1",
        ] {
            let ae = AcceptEncoding::parse([format!("{bad}, gzip;q=0.2").as_bytes()]);
            assert_eq!(ae.q(Br), 0, "{bad:?}");
            assert_eq!(ae.q(Gzip), 200, "{bad:?}");
        }
        assert_eq!(pick(",,, ,gzip,,"), Gzip);
        assert_eq!(pick("\tgzip\t;\tq=1.000"), Gzip);
    }

    #[test]
    fn qvalues() {
        for (v, q) in [
            ("0", 0),
            ("0.", 0),
            ("0.5", 500),
            ("0.05", 50),
            ("0.001", 1),
            ("1", 1000),
            ("1.", 1000),
            ("1.000", 1000),
        ] {
            assert_eq!(parse_qvalue(v.as_bytes()), Some(q), "{v}");
        }
        for v in ["", "2", "1.1", "0.0000", "-0", "0,5", "0.a"] {
            assert_eq!(parse_qvalue(v.as_bytes()), None, "{v}");
        }
    }

    #[test]
    fn an_empty_server_list_is_identity() {
        assert_eq!(AcceptEncoding::parse([&b"gzip"[..]]).choose(&[]), Identity);
    }
}
