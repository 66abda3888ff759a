//! Property tests: the parser and the chunked decoder never panic, and their verdicts do not
//! depend on how the input is split across calls; entity-tag lists read back what was written
//! and decide preconditions by their members, not by how the list is spelled.

use proptest::collection::vec;
use proptest::prelude::*;
use weft_http::chunked::{encode_chunk, LAST_CHUNK};
use weft_http::{BodyFraming, ChunkedDecoder, Error, Limits, Parser, RequestHead};

fn small_limits() -> Limits {
    Limits {
        max_request_line: 64,
        max_head_bytes: 200,
        max_headers: 6,
        max_chunk_line: 32,
        max_trailer_bytes: 64,
    }
}

/// Fragments that make random input look enough like HTTP to reach deep into the parser.
const PIECES: &[&[u8]] = &[
    b"GET ",
    b"POST ",
    b"CONNECT ",
    b"OPTIONS ",
    b"/",
    b"*",
    b"http://a",
    b"[::1]",
    b":80",
    b"?q",
    b"#",
    b" HTTP/1.1",
    b" HTTP/1.0",
    b" HTTP/2.0",
    b"\r\n",
    b"\r\n\r\n",
    b"\r",
    b"\n",
    b" ",
    b"\t",
    b":",
    b",",
    b";",
    b"=",
    b"\"",
    b"\\",
    b"Host: x",
    b"Host",
    b"Content-Length",
    b"Transfer-Encoding",
    b"Connection",
    b"Expect",
    b"chunked",
    b"gzip",
    b"close",
    b"keep-alive",
    b"100-continue",
    b"0",
    b"5",
    b"a",
    b"Z",
    b"\x00",
    b"\x01",
    b"\x7f",
    b"\xff",
];

fn http_ish() -> impl Strategy<Value = Vec<u8>> {
    vec(0..PIECES.len(), 0..64)
        .prop_map(|ix| ix.into_iter().flat_map(|i| PIECES[i].to_vec()).collect())
}

fn any_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![vec(any::<u8>(), 0..512), http_ish()]
}

/// Comparable form of a verdict: errors compare by status, heads by everything they say.
fn outcome(r: Result<Option<usize>, Error>, p: &Parser, buf: &[u8]) -> String {
    match r {
        Ok(Some(n)) => format!("{n} {}", summary(p.head(), buf)),
        Ok(None) => "incomplete".into(),
        Err(e) => format!("error {}", e.status()),
    }
}

fn summary(head: &RequestHead, buf: &[u8]) -> String {
    format!(
        "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {} {} {:?} {:?} {:?}",
        head.method(),
        head.method_str(buf),
        head.target(buf),
        head.path(buf),
        head.target_form(),
        head.version(),
        head.framing(),
        head.keep_alive(),
        head.len(),
        head.expect(),
        head.host_span(),
        head.headers()
            .iter()
            .map(|h| (h.name, h.value))
            .collect::<Vec<_>>(),
    )
}

/// Parses `buf` fed as growing prefixes ending at each of `cuts` (then the whole).
fn parse_in_pieces(
    limits: Limits,
    buf: &[u8],
    cuts: &[usize],
) -> (Result<Option<usize>, Error>, Parser) {
    let mut p = Parser::new(limits);
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (buf.len() + 1)).collect();
    ends.sort_unstable();
    ends.push(buf.len());
    let mut r = Ok(None);
    for end in ends {
        r = p.parse(&buf[..end]);
        if !matches!(r, Ok(None)) {
            break;
        }
    }
    (r, p)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics(buf in any_bytes()) {
        for limits in [Limits::default(), small_limits()] {
            let mut p = Parser::new(limits);
            let _ = p.parse(&buf);
            let _ = p.parse(&buf);
        }
    }

    /// Stronger than not panicking: the verdict on any input, valid or not, is the same
    /// whether it arrives whole or in pieces.
    #[test]
    fn any_split_gives_the_same_verdict(buf in any_bytes(), cuts in vec(any::<usize>(), 0..6)) {
        for limits in [Limits::default(), small_limits()] {
            let mut whole = Parser::new(limits);
            let w = whole.parse(&buf);
            let (s, split) = parse_in_pieces(limits, &buf, &cuts);
            prop_assert_eq!(outcome(w, &whole, &buf), outcome(s, &split, &buf));
        }
    }

    #[test]
    fn chunked_decoder_never_panics(buf in prop_oneof![vec(any::<u8>(), 0..512), chunk_ish()], cuts in vec(any::<usize>(), 0..8)) {
        for limits in [Limits::default(), small_limits()] {
            let mut whole = decode_in_pieces(&limits, &buf, &[]);
            let mut split = decode_in_pieces(&limits, &buf, &cuts);
            // How far a failed decode got is not part of its verdict.
            if whole.2.is_some() {
                whole.1 = 0;
            }
            if split.2.is_some() {
                split.1 = 0;
            }
            prop_assert_eq!(whole, split);
        }
    }
}

fn chunk_ish() -> impl Strategy<Value = Vec<u8>> {
    const CHUNK_PIECES: &[&[u8]] = &[
        b"0",
        b"1",
        b"a",
        b"F",
        b"ffffffffffffffff",
        b"\r\n",
        b"\r",
        b"\n",
        b";",
        b"=",
        b" ",
        b"\t",
        b"\"",
        b"\\",
        b"x",
        b":",
        b"Trailer",
        b"\x00",
        b"\xff",
    ];
    vec(0..CHUNK_PIECES.len(), 0..64).prop_map(|ix| {
        ix.into_iter()
            .flat_map(|i| CHUNK_PIECES[i].to_vec())
            .collect()
    })
}

/// Decodes `buf` handing the decoder pieces that end at `cuts` (as a socket would): returns
/// the data, the bytes consumed, and the error's status if it failed.
fn decode_in_pieces(
    limits: &Limits,
    buf: &[u8],
    cuts: &[usize],
) -> (Vec<u8>, usize, Option<u16>, bool) {
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (buf.len() + 1)).collect();
    ends.sort_unstable();
    ends.push(buf.len());
    let mut d = ChunkedDecoder::new(limits);
    let mut data = Vec::new();
    let mut at = 0;
    for end in ends {
        while at < end && !d.is_done() {
            match d.decode(&buf[at..end]) {
                Ok(step) => {
                    assert!(step.data.0 <= step.data.1 && step.data.1 <= step.consumed);
                    assert!(step.consumed <= end - at);
                    data.extend_from_slice(&buf[at + step.data.0..at + step.data.1]);
                    at += step.consumed;
                    if step.consumed == 0 {
                        break;
                    }
                }
                Err(e) => return (data, at, Some(e.status()), false),
            }
        }
    }
    (data, at, None, d.is_done())
}

// ---- Valid requests ---------------------------------------------------------------------------

const TCHARS: &[u8] =
    b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

fn token(max: usize) -> impl Strategy<Value = String> {
    vec(prop::sample::select(TCHARS), 1..max).prop_map(|b| String::from_utf8(b).unwrap())
}

/// A field value: field-vchars (obs-text included) with SP/HTAB only inside.
fn field_value() -> impl Strategy<Value = Vec<u8>> {
    let vchar = prop_oneof![0x21u8..=0x7e, 0x80u8..=0xff];
    let inner = prop_oneof![4 => vchar.clone(), 1 => Just(b' '), 1 => Just(b'\t')];
    (vchar.clone(), vec(inner, 0..40), vchar).prop_map(|(a, mid, z)| {
        let mut v = vec![a];
        v.extend(mid);
        v.push(z);
        v
    })
}

fn ows() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["", " ", "\t", "  \t "][..])
}

fn path() -> impl Strategy<Value = String> {
    let pchar = prop::sample::select(&b"abcXYZ019-._~!$&'()*+,;=:@%/?\"\\|"[..]);
    vec(pchar, 0..60).prop_map(|b| format!("/{}", String::from_utf8(b).unwrap()))
}

#[derive(Debug, Clone)]
struct Request {
    bytes: Vec<u8>,
    target: String,
    /// (name, value) of every field, in order.
    fields: Vec<(String, Vec<u8>)>,
    framing: BodyFraming,
}

fn request() -> impl Strategy<Value = Request> {
    let method = prop_oneof![
        prop::sample::select(&["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"][..])
            .prop_map(String::from),
        token(12),
    ];
    let target = prop_oneof![
        4 => path(),
        1 => (prop::sample::select(&["http://", "HTTPS://"][..]), prop::sample::select(&["example.com", "a.b:8080", "[::1]:81", "10.0.0.1"][..]), path())
            .prop_map(|(s, a, p)| format!("{s}{a}{p}")),
    ];
    let version = prop::sample::select(&["HTTP/1.1", "HTTP/1.0"][..]);
    let host = prop::sample::select(
        &[
            "x",
            "example.com",
            "example.com:8080",
            "[::1]",
            "127.0.0.1:80",
            "",
        ][..],
    );
    let framing = prop_oneof![
        Just(BodyFraming::None),
        (1u64..1_000_000).prop_map(BodyFraming::Length),
        Just(BodyFraming::Chunked),
    ];
    let extra = vec((token(20), field_value(), ows(), ows()), 0..12);
    let leading = 0usize..3;
    (
        method,
        target,
        version,
        host,
        framing,
        extra,
        leading,
        any::<bool>(),
    )
        .prop_map(
            |(method, target, version, host, framing, extra, leading, close)| {
                let mut fields: Vec<(String, Vec<u8>)> = Vec::new();
                let mut lines: Vec<Vec<u8>> = Vec::new();
                let mut add = |name: String, value: Vec<u8>, pre: &str, post: &str| {
                    let mut line = format!("{name}:{pre}").into_bytes();
                    line.extend_from_slice(&value);
                    line.extend_from_slice(post.as_bytes());
                    line.extend_from_slice(b"\r\n");
                    lines.push(line);
                    fields.push((name, value));
                };
                // Extension fields are prefixed so they never collide with ones that mean
                // something to the parser.
                let mut extra = extra.into_iter();
                for (name, value, pre, post) in extra.by_ref().take(6) {
                    add(format!("X-{name}"), value, pre, post);
                }
                add("Host".into(), host.as_bytes().to_vec(), " ", "");
                let chunked = framing == BodyFraming::Chunked && version == "HTTP/1.1";
                match framing {
                    BodyFraming::Length(n) => add(
                        "Content-Length".into(),
                        n.to_string().into_bytes(),
                        " ",
                        "\t",
                    ),
                    BodyFraming::Chunked if chunked => {
                        add("transfer-encoding".into(), b"chunked".to_vec(), "", " ")
                    }
                    _ => {}
                }
                if close {
                    add("Connection".into(), b"close".to_vec(), " ", "");
                }
                for (name, value, pre, post) in extra {
                    add(format!("x-{name}"), value, pre, post);
                }
                let mut bytes = b"\r\n".repeat(leading);
                bytes.extend_from_slice(format!("{method} {target} {version}\r\n").as_bytes());
                for line in lines {
                    bytes.extend_from_slice(&line);
                }
                bytes.extend_from_slice(b"\r\n");
                let framing = match framing {
                    BodyFraming::Chunked if !chunked => BodyFraming::None,
                    f => f,
                };
                Request {
                    bytes,
                    target,
                    fields,
                    framing,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn valid_requests_parse_the_same_however_split(req in request(), cuts in vec(any::<usize>(), 0..8), tail in vec(any::<u8>(), 0..16)) {
        let mut buf = req.bytes.clone();
        let head_len = buf.len();
        buf.extend_from_slice(&tail);

        let mut whole = Parser::new(Limits::default());
        let w = whole.parse(&buf);
        prop_assert_eq!(w, Ok(Some(head_len)), "{}", buf.escape_ascii());
        let head = whole.head();
        prop_assert_eq!(head.target(&buf), req.target.as_str());
        prop_assert_eq!(head.framing(), req.framing);
        let got: Vec<(Vec<u8>, Vec<u8>)> = head
            .headers()
            .iter()
            .map(|h| (h.name.get(&buf).to_vec(), h.value.get(&buf).to_vec()))
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = req
            .fields
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.clone()))
            .collect();
        prop_assert_eq!(got, want);

        // Fed as a growing prefix, cut anywhere, including inside the bytes after the head.
        let mut ends: Vec<usize> = cuts.iter().map(|c| c % (buf.len() + 1)).collect();
        ends.sort_unstable();
        ends.push(buf.len());
        let mut p = Parser::new(Limits::default());
        let mut done = None;
        for end in ends {
            match p.parse(&buf[..end]) {
                Ok(None) => prop_assert!(end < head_len, "incomplete at {} of {}", end, head_len),
                Ok(Some(n)) => {
                    done = Some(n);
                    break;
                }
                Err(e) => prop_assert!(false, "{} at {}", e, end),
            }
        }
        prop_assert_eq!(done, Some(head_len));
        prop_assert_eq!(summary(p.head(), &buf), summary(whole.head(), &buf));
    }

    #[test]
    fn byte_at_a_time_gives_the_same_head(req in request()) {
        let buf = &req.bytes;
        let mut whole = Parser::new(Limits::default());
        prop_assert_eq!(whole.parse(buf), Ok(Some(buf.len())));
        let mut p = Parser::new(Limits::default());
        for end in 1..buf.len() {
            prop_assert_eq!(p.parse(&buf[..end]), Ok(None));
        }
        prop_assert_eq!(p.parse(buf), Ok(Some(buf.len())));
        prop_assert_eq!(summary(p.head(), buf), summary(whole.head(), buf));
    }

    #[test]
    fn chunked_round_trip(
        data in vec(any::<u8>(), 0..4096),
        sizes in vec(1usize..600, 1..20),
        cuts in vec(any::<usize>(), 0..16),
        ext in any::<bool>(),
        trailer in any::<bool>(),
        next in vec(any::<u8>(), 0..8),
    ) {
        let mut enc = Vec::new();
        let mut rest = &data[..];
        let mut sizes = sizes.iter().cycle();
        while !rest.is_empty() {
            let n = (*sizes.next().unwrap()).min(rest.len());
            if ext {
                // An extension on every chunk: the size line must still parse.
                let mut one = Vec::new();
                encode_chunk(&rest[..n], &mut one);
                let crlf = one.iter().position(|&b| b == b'\r').unwrap();
                one.splice(crlf..crlf, b" ; name=\"v \\\" x\";flag".iter().copied());
                enc.extend_from_slice(&one);
            } else {
                encode_chunk(&rest[..n], &mut enc);
            }
            rest = &rest[n..];
        }
        if trailer {
            enc.extend_from_slice(b"0\r\nX-Checksum: abc\r\nX-Other:\t1 2\r\n\r\n");
        } else {
            enc.extend_from_slice(LAST_CHUNK);
        }
        let body_len = enc.len();
        enc.extend_from_slice(&next);
        let (decoded, consumed, err, done) = decode_in_pieces(&Limits::default(), &enc, &cuts);
        prop_assert_eq!(err, None);
        prop_assert!(done);
        prop_assert_eq!(consumed, body_len);
        prop_assert_eq!(decoded, data);
    }
}

/// An entity tag as a client writes it: optional `W/`, a quoted string of `etagc` bytes
/// (commas and obs-text included).
fn entity_tag() -> impl Strategy<Value = (bool, Vec<u8>)> {
    let etagc = prop_oneof![Just(0x21u8), 0x23u8..=0x7e, 0x80u8..=0xff, Just(b','),];
    (any::<bool>(), vec(etagc, 0..12)).prop_map(|(weak, inner)| {
        let mut opaque = vec![b'"'];
        opaque.extend_from_slice(&inner);
        opaque.push(b'"');
        (weak, opaque)
    })
}

/// Writes `tags` as a list: OWS and empty members between them as `seps` says, one field line
/// per member where `split` says.
fn write_list(tags: &[(bool, Vec<u8>)], seps: &[(u8, bool)]) -> Vec<Vec<u8>> {
    let mut lines = vec![Vec::new()];
    for (i, (weak, opaque)) in tags.iter().enumerate() {
        let (sep, split) = seps.get(i).copied().unwrap_or((0, false));
        let line = lines.last_mut().expect("one line");
        if *weak {
            line.extend_from_slice(b"W/");
        }
        line.extend_from_slice(opaque);
        line.extend_from_slice([&b","[..], b" , ", b",\t,", b"\t, ,  "][usize::from(sep % 4)]);
        if split {
            lines.push(Vec::new());
        }
    }
    lines
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn entity_tag_lists_read_back_what_was_written(
        tags in vec(entity_tag(), 0..6),
        seps in vec((any::<u8>(), any::<bool>()), 0..6),
    ) {
        use weft_http::conditional::{members, Member};
        let lines = write_list(&tags, &seps);
        let refs: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        let read: Vec<(bool, Vec<u8>)> = members(&refs)
            .map(|m| match m {
                Ok(Member::Tag(t)) => Ok((t.weak, t.opaque.to_vec())),
                other => Err(format!("{other:?}")),
            })
            .collect::<Result<_, _>>()
            .map_err(TestCaseError::fail)?;
        prop_assert_eq!(read, tags);
    }

    #[test]
    fn a_list_holding_the_current_tag_decides_by_comparison(
        others in vec(entity_tag(), 0..4),
        current in entity_tag(),
        sent_weak in any::<bool>(),
        at in any::<usize>(),
        seps in vec((any::<u8>(), any::<bool>()), 0..6),
    ) {
        use weft_http::conditional::{evaluate, Conditions, Current, EntityTag, Outcome};
        use weft_http::Method;
        let ours = [&b"W/"[..], &current.1].concat();
        let ours: &[u8] = if current.0 { &ours } else { &current.1 };
        let mut tags: Vec<(bool, Vec<u8>)> =
            others.into_iter().filter(|t| t.1 != current.1).collect();
        tags.insert(at % (tags.len() + 1), (sent_weak, current.1.clone()));
        let lines = write_list(&tags, &seps);
        let cur = Current { etag: EntityTag::parse(ours), last_modified: None };
        prop_assert!(cur.etag.is_some());
        for (name, method, want) in [
            // Weak comparison: any spelling of the tag matches.
            ("If-None-Match", Method::Get, Outcome::NotModified),
            ("If-None-Match", Method::Put, Outcome::PreconditionFailed),
            // Strong comparison: only when neither side is weak.
            (
                "If-Match",
                Method::Put,
                if current.0 || sent_weak { Outcome::PreconditionFailed } else { Outcome::Proceed },
            ),
        ] {
            let c = Conditions::from_fields(lines.iter().map(|l| (name.as_bytes(), l.as_slice())));
            let got = evaluate(method, &c, Some(&cur));
            if lines.len() > weft_http::conditional::MAX_LINES {
                // More field lines than are kept: the list counts as unparsable.
                let unparsable = if name == "If-Match" { Outcome::PreconditionFailed } else { Outcome::Proceed };
                prop_assert_eq!(got, unparsable);
            } else {
                prop_assert_eq!(got, want, "{} {:?} {:?}", name, method, lines);
            }
        }
    }

    #[test]
    fn http_dates_read_back(secs in 0u64..253_402_300_800) {
        use std::time::{Duration, UNIX_EPOCH};
        let text = weft_http::date::format(UNIX_EPOCH + Duration::from_secs(secs));
        prop_assert_eq!(weft_http::conditional::parse_date(&text), Some(secs));
    }
}

/// An `Accept-Encoding` element: a known or unknown coding, with or without a q-value, in any
/// case and with optional whitespace.
fn coding_element() -> impl Strategy<Value = (String, Option<u16>)> {
    let name = prop_oneof![
        Just("gzip"),
        Just("x-gzip"),
        Just("br"),
        Just("zstd"),
        Just("identity"),
        Just("*"),
        Just("deflate"),
        Just("compress"),
    ];
    (
        name,
        any::<bool>(),
        proptest::option::of(0u16..=1000),
        ows(),
    )
        .prop_map(|(name, upper, q, ws)| {
            let name = if upper {
                name.to_ascii_uppercase()
            } else {
                name.to_string()
            };
            let text = match q {
                Some(q) => format!("{ws}{name}{ws};{ws}q={}.{:03}{ws}", q / 1000, q % 1000),
                None => format!("{ws}{name}{ws}"),
            };
            (text, q)
        })
}

proptest! {
    /// The choice agrees with a direct reading of RFC 9110 §12.5.3 over the generated
    /// elements: the chosen coding's q-value is the highest among the offered ones, a coding
    /// at q=0 is never chosen, and ties go to the server's order.
    #[test]
    fn accept_encoding_choice(elements in vec(coding_element(), 0..6)) {
        use weft_http::encoding::{AcceptEncoding, Coding};
        let field = elements.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join(",");
        let ae = AcceptEncoding::parse([field.as_bytes()]);
        // The model: each coding's lowest q where named, else `*`'s, else 0 (1 for identity).
        let named = |c: Coding| {
            elements
                .iter()
                .filter(|(t, _)| {
                    let n = t.trim().split(';').next().unwrap().trim();
                    Coding::from_token(n.as_bytes()) == Some(c)
                })
                .map(|(_, q)| q.unwrap_or(1000))
                .min()
        };
        let star = elements
            .iter()
            .filter(|(t, _)| t.trim().starts_with('*'))
            .map(|(_, q)| q.unwrap_or(1000))
            .min();
        for c in Coding::ALL {
            let model = named(c)
                .or(star)
                .unwrap_or(if c == Coding::Identity { 1000 } else { 0 });
            prop_assert_eq!(ae.q(c), model, "{:?} in {:?}", c, field);
        }
        let offer = [Coding::Br, Coding::Zstd, Coding::Gzip];
        let chosen = ae.choose(&offer);
        let best = offer.iter().map(|&c| ae.q(c)).max().unwrap();
        // Identity competes only where the client rated it (itself or through `*`).
        let identity_rated = named(Coding::Identity).or(star).unwrap_or(0);
        if chosen == Coding::Identity {
            prop_assert!(best == 0 || best < identity_rated, "{:?}", field);
        } else {
            prop_assert_eq!(ae.q(chosen), best);
            prop_assert!(best > 0 && best >= identity_rated);
            let first = offer.iter().find(|&&c| ae.q(c) == best).unwrap();
            prop_assert_eq!(chosen, *first);
        }
    }
}
