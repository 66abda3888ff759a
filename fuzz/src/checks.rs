//! Invariants over arbitrary input, shared by the fuzz targets (`fuzz/fuzz_targets/`) and by
//! the corpus replay test (`crates/http/tests/corpus.rs`, which includes this file).
//!
//! The first byte of an input steers the check (limits and split points); the rest is the
//! data. Each function panics if an invariant breaks.

use weft_http::{ChunkedDecoder, Error, Limits, Parser};

/// Small limits, so that short inputs reach every limit check.
fn small_limits() -> Limits {
    Limits {
        max_request_line: 64,
        max_head_bytes: 256,
        max_headers: 8,
        max_chunk_line: 32,
        max_trailer_bytes: 64,
    }
}

fn limits_for(control: u8) -> Limits {
    if control & 0x80 != 0 {
        small_limits()
    } else {
        Limits::default()
    }
}

/// A verdict in comparable form: a complete head by everything it holds, an error by status.
fn verdict(r: Result<Option<usize>, Error>, p: &Parser) -> String {
    match r {
        Ok(Some(n)) => format!("{n} {:?}", p.head()),
        Ok(None) => "incomplete".into(),
        Err(e) => format!("error {}", e.status()),
    }
}

/// Parses the input whole, then again fed in two pieces split where the control byte says;
/// both must agree, and a complete head must describe bytes inside itself.
pub fn request_head(data: &[u8]) {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = limits_for(control);
    let mut whole = Parser::new(limits);
    let w = whole.parse(input);
    if let Ok(Some(n)) = w {
        assert!(n <= input.len());
        let head = whole.head();
        assert_eq!(head.len(), n);
        let _ = (head.method_str(input), head.target(input), head.path(input));
        // The path ends at its first `?`, or where the path span does.
        let path = head.path_span();
        let first_q = path.get(input).iter().position(|&b| b == b'?');
        assert_eq!(
            head.query_at(),
            first_q.map_or(path.end, |i| path.start + i as u32)
        );
        for h in head.headers() {
            assert!(h.name.end as usize <= n && h.value.end as usize <= n);
            assert!(h.name.start < h.name.end && h.value.start <= h.value.end);
        }
        // The parser's precondition flag says what a scan of the field names would.
        assert_eq!(
            head.has_preconditions(),
            head.headers()
                .iter()
                .any(|h| weft_http::conditional::is_precondition_name(h.name.get(input)))
        );
        let _ = head.header(input, "host");
        // The request's host: the absolute-form authority (a valid one, inside the target) or
        // the Host field (RFC 9112 §3.2.2).
        if let Some(a) = head.authority_span() {
            assert!(a.end as usize <= n && a.start < a.end);
            assert!(weft_http::valid_authority(a.get(input)));
            assert_eq!(head.effective_host_span(), Some(a));
        } else {
            assert_eq!(head.effective_host_span(), head.host_span());
        }
        // A completed parser keeps its verdict.
        assert_eq!(whole.parse(input), w);
    }
    let split = usize::from(control & 0x7f) * input.len() / 0x7f;
    let mut pieces = Parser::new(limits);
    let s = match pieces.parse(&input[..split]) {
        Ok(None) => pieces.parse(input),
        done => done,
    };
    assert_eq!(
        verdict(w, &whole),
        verdict(s, &pieces),
        "split at {split} of {}",
        input.len()
    );
    // Reused after a reset (twice, as a connection may) or after its head was taken, the
    // parser reads the input again as a fresh one did.
    if control & 0x80 != 0 {
        if let Ok(Some(_)) = s {
            let head = pieces.take_head();
            pieces.recycle(head);
        }
    } else {
        pieces.reset();
    }
    pieces.reset();
    let again = pieces.parse(input);
    assert_eq!(verdict(w, &whole), verdict(again, &pieces), "parser reused");
    // Taken into a head that held another request (as the connection loop refills its
    // request): that head becomes the one parsed, and the parser, given the old one back
    // emptied, reads the input again as a fresh one did.
    if let Ok(Some(_)) = again {
        let parsed = format!("{:?}", pieces.head());
        let mut dst = stale_head();
        pieces.take_head_into(&mut dst);
        assert_eq!(format!("{dst:?}"), parsed, "head taken into another");
        let third = pieces.parse(input);
        assert_eq!(
            verdict(w, &whole),
            verdict(third, &pieces),
            "parser after take_head_into"
        );
    }
}

/// A head of another request than any input's: fields, a query, a body length, HTTP/1.0.
fn stale_head() -> weft_http::RequestHead {
    let mut p = Parser::new(Limits::default());
    let other = b"POST /x?y HTTP/1.0\r\nHost: h\r\nContent-Length: 5\r\nA: b\r\n\r\n";
    assert!(matches!(p.parse(other), Ok(Some(_))));
    p.take_head()
}

/// What decoding produced: the data, the bytes consumed (when it did not fail), the error's
/// status, and whether the body ended.
type Decoded = (Vec<u8>, Option<usize>, Option<u16>, bool);

/// Decodes `input` handed over in pieces of the given sizes (cycled; whole if empty).
fn decode(limits: &Limits, input: &[u8], sizes: &[usize]) -> Decoded {
    let mut d = ChunkedDecoder::new(limits);
    let mut data = Vec::new();
    let mut at = 0;
    let mut end = 0;
    let mut sizes = sizes.iter().cycle();
    // The body the size lines announce so far (what a reader checks against its limit before
    // the bytes come): it never shrinks, it stays put while a chunk's data arrives, and once
    // the chunk is whole the data decoded is what its size line announced.
    let announced =
        |d: &ChunkedDecoder, data: &[u8]| (data.len() as u64).saturating_add(d.data_left());
    let mut before = 0;
    let mut promised: Option<u64> = None;
    while end < input.len() {
        end = match sizes.next() {
            Some(n) => (end + n).min(input.len()),
            None => input.len(),
        };
        while at < end && !d.is_done() {
            match d.decode(&input[at..end]) {
                Ok(step) => {
                    assert!(step.data.0 <= step.data.1 && step.data.1 <= step.consumed);
                    assert!(step.consumed <= end - at);
                    assert_eq!(step.done, d.is_done());
                    data.extend_from_slice(&input[at + step.data.0..at + step.data.1]);
                    let now = announced(&d, &data);
                    assert!(now >= before, "announced {before} then {now}");
                    before = now;
                    match promised {
                        Some(p) if d.data_left() == 0 => {
                            assert_eq!(data.len() as u64, p, "a chunk's data against its size");
                            promised = None;
                        }
                        Some(p) => assert_eq!(now, p, "the announced size moved within a chunk"),
                        None if d.data_left() > 0 => promised = Some(now),
                        None => {}
                    }
                    at += step.consumed;
                    if step.consumed == 0 {
                        break;
                    }
                }
                Err(e) => return (data, None, Some(e.status()), false),
            }
        }
        if d.is_done() {
            break;
        }
    }
    (data, Some(at), None, d.is_done())
}

/// Decodes the input whole and in pieces whose sizes come from the control byte; both must
/// give the same data and verdict.
pub fn chunked(data: &[u8]) {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = limits_for(control);
    let sizes = [
        usize::from(control & 0x07) + 1,
        usize::from((control >> 3) & 0x0f) + 1,
        1,
    ];
    let whole = decode(&limits, input, &[]);
    let pieces = decode(&limits, input, &sizes);
    assert_eq!(whole, pieces, "pieces of {sizes:?}");
}

/// A `Range` header against a size taken from the first eight bytes: never a panic, a single
/// range always lies inside the representation, and several are sorted, inside it, apart from
/// each other (none overlaps or touches the next) and at most `MAX_RANGES`.
pub fn range(data: &[u8]) {
    use weft_http::range::{parse_range, RangeSpec};
    if data.len() < 8 {
        return;
    }
    let (size, value) = data.split_at(8);
    // Sizes near zero and near u64::MAX both matter: let the control bytes pick either.
    let size = u64::from_le_bytes(size.try_into().expect("eight bytes"));
    let size = if size & 1 == 0 { size >> 40 } else { size };
    match parse_range(value, size) {
        RangeSpec::Single { start, end } => {
            assert!(start <= end && end < size, "{start}-{end} of {size}");
        }
        RangeSpec::Multi(ranges) => {
            assert!(ranges.len() >= 2 && ranges.len() <= weft_http::range::MAX_RANGES);
            for &(start, end) in &ranges {
                assert!(start <= end && end < size, "{start}-{end} of {size}");
            }
            for w in ranges.windows(2) {
                assert!(w[0].1.saturating_add(1) < w[1].0, "{ranges:?}");
            }
        }
        RangeSpec::Full | RangeSpec::Unsatisfiable => {}
    }
}

/// A request path: never a panic; a normalised path never climbs out of the root, holds no
/// empty, `.` or `..` segment, no NUL or backslash, and normalises to itself.
pub fn path(data: &[u8]) {
    use weft_http::path::normalize;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(n) = normalize(text) else {
        return;
    };
    let rel: &[u8] = &n.rel;
    assert!(!rel.contains(&0) && !rel.contains(&b'\\'), "{rel:?}");
    if !rel.is_empty() {
        for seg in rel.split(|&b| b == b'/') {
            assert!(!seg.is_empty() && seg != b"." && seg != b"..", "{rel:?}");
        }
    }
    if n.has_dot_segment {
        assert!(rel.starts_with(b".") || rel.windows(2).any(|w| w == b"/."));
    }
    // Normal form is a fixed point when it needs no escaping: text (an escape such as `%a2`
    // can decode to a byte that is not UTF-8) without `%` (a decoded `%` would re-decode).
    if let Ok(rel_text) = std::str::from_utf8(rel) {
        if !rel.contains(&b'%') {
            let again = format!("/{rel_text}");
            let m = normalize(&again).expect("a normal form normalises");
            assert_eq!(&*m.rel, &*n.rel, "{text:?}");
        }
    }
}

/// A response head (the proxy's upstream client), whole and in two pieces split where the
/// control byte says (bit 6: the response answers a HEAD request): no panic, the same verdict
/// and head either way, spans inside the head, and a framing that agrees with the fields.
pub fn response_head(data: &[u8]) {
    use weft_http::{ResponseFraming, ResponseParser};
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = limits_for(control);
    let head_request = control & 0x40 != 0;
    let mut whole = ResponseParser::new(limits, head_request);
    let w = whole.parse(input);
    if let Ok(Some(n)) = w {
        assert!(n <= input.len() && n <= limits.max_head_bytes);
        assert!(input[..n].starts_with(b"HTTP/1.") && input[..n].ends_with(b"\r\n\r\n"));
        let head = whole.head();
        assert_eq!(head.len(), n);
        assert!((100..600).contains(&head.status()));
        assert!(head.headers().len() <= limits.max_headers);
        let _ = head.reason(input);
        for h in head.headers() {
            assert!(h.name.end as usize <= n && h.value.end as usize <= n);
            assert!(h.name.start < h.name.end && h.value.start <= h.value.end);
        }
        let no_body = head_request || head.is_interim() || matches!(head.status(), 204 | 304);
        assert!(!(head.is_chunked() && head.content_length().is_some()));
        match head.framing() {
            ResponseFraming::None => assert!(no_body),
            ResponseFraming::Chunked => assert!(!no_body && head.is_chunked()),
            ResponseFraming::Length(l) => {
                assert!(!no_body && head.content_length() == Some(l));
            }
            ResponseFraming::Close => {
                assert!(!no_body && !head.keep_alive() && !head.is_chunked());
                assert!(head.content_length().is_none());
            }
        }
        // A completed parser keeps its verdict.
        assert_eq!(whole.parse(input), w);
    }
    let split = usize::from(control & 0x3f) * input.len() / 0x3f;
    let mut pieces = ResponseParser::new(limits, head_request);
    let s = match pieces.parse(&input[..split]) {
        Ok(None) => pieces.parse(input),
        done => done,
    };
    assert_eq!(w, s, "split at {split} of {}", input.len());
    if let Ok(Some(_)) = w {
        assert_eq!(whole.head(), pieces.head(), "split at {split}");
    }
}

/// A CGI script's output: never a panic; the header section found lies inside the input, and
/// a parsed one holds only values a response head can carry.
pub fn cgi_head(data: &[u8]) {
    use weft_http::cgi::{find_blank_line, parse_head};
    use weft_http::response::{valid_name, valid_value};
    let Some((head_len, body_start)) = find_blank_line(data) else {
        return;
    };
    assert!(head_len < body_start && body_start <= data.len());
    assert!(data[head_len..body_start] == *b"\n" || data[head_len..body_start] == *b"\r\n");
    let Ok(f) = parse_head(&data[..head_len]) else {
        return;
    };
    assert!(f.status.is_none_or(|s| (200..=599).contains(&s)));
    assert!((200..=599).contains(&f.status()));
    if let Some(target) = f.local_redirect() {
        assert!(target.starts_with('/') && !target.starts_with("//"));
    }
    for (name, value) in &f.headers {
        assert!(
            valid_name(name.as_bytes()) && valid_value(value),
            "{name}: {value:?}"
        );
    }
}

/// Preconditions: entity-tag lists and HTTP dates from arbitrary bytes, evaluated against a
/// representation also taken from the input. The control byte picks the method (bits 0-2)
/// and whether a current representation exists (bit 3); the rest is lines: the current
/// `ETag`, its `Last-Modified`, then fields whose first byte picks the name. Never a panic;
/// every list member read is a well-formed entity tag that reads back the same when written
/// again; a parsed date survives formatting; the outcome is one RFC 9110 §13.2.2 allows.
pub fn conditional(data: &[u8]) {
    use weft_http::conditional::{
        evaluate, members, parse_date, Conditions, Current, EntityTag, Member, Outcome,
    };
    use weft_http::Method;
    const NAMES: [&[u8]; 6] = [
        b"If-Match",
        b"If-None-Match",
        b"If-Modified-Since",
        b"If-Unmodified-Since",
        b"If-Range",
        b"Range",
    ];
    const METHODS: [Method; 8] = [
        Method::Get,
        Method::Head,
        Method::Post,
        Method::Put,
        Method::Delete,
        Method::Options,
        Method::Patch,
        Method::Other,
    ];
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let method = METHODS[usize::from(control & 7)];
    let mut lines = input.split(|&b| b == b'\n');
    let etag_line = lines.next().unwrap_or_default();
    let date_line = lines.next().unwrap_or_default();
    let current = Current {
        etag: EntityTag::parse(etag_line),
        last_modified: parse_date(date_line),
    };
    if let Some(t) = current.etag {
        let mut again = if t.weak { b"W/".to_vec() } else { Vec::new() };
        again.extend_from_slice(t.opaque);
        assert_eq!(again, etag_line);
    }
    if let Some(secs) = current.last_modified {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        let text = weft_http::date::format(t);
        assert_eq!(parse_date(&text), Some(secs), "{date_line:?}");
    }
    let mut conds = Conditions::default();
    let mut fields = 0;
    for line in lines {
        let Some((&pick, value)) = line.split_first() else {
            continue;
        };
        conds.note(NAMES[usize::from(pick) % NAMES.len()], value);
        fields += 1;
        // The value's bytes as a field name: a precondition name exactly when noting it makes
        // a request conditional.
        let alone = Conditions::from_fields([(value, &b"*"[..])]);
        assert_eq!(
            weft_http::conditional::is_precondition_name(value),
            !alone.is_unconditional(),
            "{value:?}"
        );
        // Each value alone, as a list: members are well-formed and read back the same.
        let one = [value];
        let read: Vec<_> = members(&one).collect();
        let failed = read.iter().position(Result::is_err);
        if let Some(i) = failed {
            assert_eq!(i, read.len() - 1, "nothing after a failure");
        }
        let ok: Vec<Member<'_>> = read.iter().filter_map(|m| m.ok()).collect();
        let mut written = Vec::new();
        for m in &ok {
            match m {
                Member::Any => written.extend_from_slice(b"*"),
                Member::Tag(t) => {
                    assert!(t.opaque.len() >= 2);
                    assert!(t.opaque.starts_with(b"\"") && t.opaque.ends_with(b"\""));
                    let inner = &t.opaque[1..t.opaque.len() - 1];
                    assert!(!inner.iter().any(|&b| b == b'"' || b < 0x21 || b == 0x7f));
                    if t.weak {
                        written.extend_from_slice(b"W/");
                    }
                    written.extend_from_slice(t.opaque);
                }
            }
            written.extend_from_slice(b", ");
        }
        let again = [&written[..]];
        let reread: Vec<_> = members(&again).collect();
        assert_eq!(reread, ok.iter().map(|m| Ok(*m)).collect::<Vec<_>>());
    }
    let exists = control & 8 != 0;
    let outcome = evaluate(method, &conds, exists.then_some(&current));
    let get_or_head = matches!(method, Method::Get | Method::Head);
    if fields == 0
        || conds.is_unconditional()
        || matches!(method, Method::Options | Method::Connect | Method::Trace)
    {
        assert_eq!(outcome, Outcome::Proceed);
    }
    match outcome {
        Outcome::NotModified => assert!(get_or_head),
        Outcome::IgnoreRange => {
            assert!(method == Method::Get && conds.range.is_some() && conds.if_range.is_present())
        }
        Outcome::PreconditionFailed => assert!(
            conds.if_match.is_present()
                || conds.if_unmodified_since.is_present()
                || (conds.if_none_match.is_present() && !get_or_head)
        ),
        Outcome::Proceed => {}
    }
    // If-Match cannot hold without a current representation (§13.1.1).
    if !exists && conds.if_match.is_present() && !matches!(method, Method::Options) {
        assert_eq!(outcome, Outcome::PreconditionFailed);
    }
}

/// A PROXY protocol header (`weft_http::proxy_protocol`): never a panic; a complete header
/// lies within the input, parses the same alone and with any bytes after it, and every shorter
/// prefix of it asks for more; an input that asks for more is shorter than the longest header.
pub fn proxy_protocol(data: &[u8]) {
    use weft_http::proxy_protocol::{parse, Parsed, V1_MAX, V2_MAX_PAYLOAD};
    match parse(data) {
        Ok(Parsed::Done { proxied, len }) => {
            assert!(len <= data.len(), "{len} of {}", data.len());
            let alone = parse(&data[..len]);
            assert_eq!(alone, Ok(Parsed::Done { proxied, len }));
            for n in 0..len {
                assert_eq!(
                    parse(&data[..n]),
                    Ok(Parsed::Partial),
                    "prefix {n} of {len}"
                );
            }
        }
        Ok(Parsed::Partial) => {
            assert!(data.len() < 16 + V2_MAX_PAYLOAD, "{} bytes", data.len());
            if data.first() == Some(&b'P') {
                assert!(data.len() < V1_MAX, "v1 partial at {} bytes", data.len());
            }
        }
        Err(_) => {}
    }
}

/// A `Host` value or authority into `weft_http::site_name`, the name a virtual host is chosen
/// by: never longer than its bound, lowercase, no trailing dot, no port (a colon only inside
/// an IPv6 literal's brackets), and its own name again.
pub fn site_name(data: &[u8]) {
    use weft_http::{site_name, MAX_SITE_NAME};
    let mut buf = [0u8; MAX_SITE_NAME];
    let Some(name) = site_name(data, &mut buf) else {
        return;
    };
    let name = name.to_vec();
    assert!(!name.is_empty() && name.len() <= MAX_SITE_NAME);
    assert!(!name.iter().any(u8::is_ascii_uppercase), "{name:?}");
    assert!(!name.ends_with(b"."), "{name:?}");
    if name[0] == b'[' {
        assert!(name.ends_with(b"]"), "{name:?}");
    } else {
        assert!(!name.contains(&b':'), "{name:?}");
    }
    let mut again = [0u8; MAX_SITE_NAME];
    assert_eq!(site_name(&name, &mut again), Some(&name[..]), "{data:?}");
}

/// `Accept-Encoding`: never a panic; the chosen coding is offered by the server and acceptable
/// (or identity, the fallback); no offered coding has a higher q-value; and two field lines
/// mean what they mean joined by a comma (RFC 9110 §5.3). The first byte picks the server's
/// list (its order) and where the value is split into two lines.
pub fn accept_encoding(data: &[u8]) {
    use weft_http::encoding::{AcceptEncoding, Coding};
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let offers: &[&[Coding]] = &[
        &[Coding::Br, Coding::Zstd, Coding::Gzip],
        &[Coding::Gzip],
        &[Coding::Zstd, Coding::Identity, Coding::Gzip],
        &[],
    ];
    let available = offers[usize::from(control & 3)];
    let ae = AcceptEncoding::parse([input]);
    let chosen = ae.choose(available);
    assert!(
        chosen == Coding::Identity || available.contains(&chosen),
        "{chosen:?}"
    );
    if chosen != Coding::Identity {
        assert!(ae.q(chosen) > 0);
        for &c in available {
            assert!(ae.q(c) <= ae.q(chosen), "{c:?} rated above {chosen:?}");
        }
    } else if !available.contains(&Coding::Identity) {
        // Identity over an acceptable offer only where the client rated it at least as high.
        for &c in available {
            assert!(ae.q(c) == 0 || ae.q(c) <= ae.q(Coding::Identity), "{c:?}");
        }
    }
    let split = usize::from(control >> 2) * input.len() / 0x3f;
    let (a, b) = input.split_at(split);
    let joined = [a, b",", b].concat();
    assert_eq!(
        AcceptEncoding::parse([a, b]),
        AcceptEncoding::parse([&joined[..]])
    );
}

/// An OCSP response to staple (`weft_http::ocsp::check`): never a panic; one that passes is a
/// whole DER element (no shorter prefix passes, and nothing may follow it) of a successful
/// status; a failing one fails the same way again.
pub fn ocsp(data: &[u8]) {
    use weft_http::ocsp::{check, read};
    let verdict = check(data);
    assert_eq!(verdict, check(data));
    // What `read` takes apart, `check` passes, and its signed bytes lie inside the input.
    if let Ok(b) = read(data) {
        assert!(verdict.is_ok());
        assert!(data.windows(b.tbs.len()).any(|w| w == b.tbs));
        // GeneralizedTime: years 0000-9999.
        let years = -62_167_219_200..253_402_300_800;
        for r in &b.responses {
            assert!(years.contains(&r.this_update), "{}", r.this_update);
            assert!(r.next_update.is_none_or(|n| years.contains(&n)));
        }
    }
    if verdict.is_ok() {
        assert_eq!(data[0], 0x30);
        // The outer length's octets, then a successful responseStatus.
        let head = 2 + if data[1] < 0x80 {
            0
        } else {
            usize::from(data[1] & 0x7f)
        };
        assert_eq!(&data[head..head + 3], &[0x0a, 0x01, 0x00]);
        for cut in [0, 1, data.len() / 2, data.len() - 1] {
            assert!(
                check(&data[..cut]).is_err(),
                "a prefix of {cut} bytes passed"
            );
        }
        assert!(
            check(&[data, &[0]].concat()).is_err(),
            "bytes after the response"
        );
    }
}

/// Two header blocks of one connection into the HPACK decoder (`weft_http::h2::hpack`): the
/// first byte picks the table size (its low two bits) and whether the setting is halved
/// between the blocks (bit 2), the second is the first block's length. Never a panic; the
/// table stays within its size; if both blocks decode, the encoder's literals of their fields
/// decode to the same list.
pub fn hpack_decode(data: &[u8]) {
    use weft_http::h2::hpack::{Decoder, Encoder};
    let [control, split, input @ ..] = data else {
        return;
    };
    let size = [4096, 256, 64, 0][usize::from(control & 3)];
    let (first, second) = input.split_at(usize::from(*split).min(input.len()));
    let mut decoder = Decoder::new(size);
    let mut fields = Vec::new();
    for (i, block) in [first, second].into_iter().enumerate() {
        if i == 1 && control & 4 != 0 {
            decoder.set_max_table_size(size / 2);
        }
        let decoded = decoder.decode(block, &mut |n, v| fields.push((n.to_vec(), v.to_vec())));
        assert!(decoder.table_size() <= size);
        if decoded.is_err() {
            return;
        }
    }
    let mut encoder = Encoder::new();
    let mut block = Vec::new();
    for (i, (name, value)) in fields.iter().enumerate() {
        if i % 2 == 0 {
            encoder.field(name, value, &mut block);
        } else {
            encoder.field_never_indexed(name, value, &mut block);
        }
    }
    let mut again = Vec::new();
    Decoder::new(0)
        .decode(&block, &mut |n, v| again.push((n.to_vec(), v.to_vec())))
        .expect("the encoder's block decodes");
    assert_eq!(again, fields);
}

/// Arbitrary bytes into an HTTP/2 server connection (`weft_http::h2::Connection`) after the
/// client preface, in pieces: every request is answered (`send_headers` and `send_data`, as
/// flow control allows), every body byte given back. The first byte steers: bit 0, small
/// limits; bit 1, a client SETTINGS frame goes first; bit 2, the client never reads (the
/// output must stay bounded all the same); the rest, where the pieces end. Never a panic; the
/// requests are well formed; an error stays the same error; the output stays within a
/// multiple of the input.
pub fn h2_connection(data: &[u8]) {
    use std::time::{Duration, Instant};
    use weft_http::h2::{Config, Connection, Event, PREFACE};
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let cfg = if control & 1 != 0 {
        Config {
            max_concurrent_streams: 4,
            initial_window_size: 100,
            connection_window: 65_535,
            max_header_list_size: 128,
            header_table_size: 64,
            max_header_block: 512,
            max_resets_per_sec: 4,
            max_control_per_sec: 16,
            max_control_backlog: 256,
            ..Config::default()
        }
    } else {
        Config::default()
    };
    let reads = control & 4 == 0;
    let mut conn = Connection::new(cfg);
    let mut feed = PREFACE.to_vec();
    if control & 2 != 0 {
        feed.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    }
    feed.extend_from_slice(input);
    let start = Instant::now();
    let first_output = conn.output().len();
    let mut written = 0usize;
    let mut pending: Vec<(u32, usize)> = Vec::new();
    let mut failed = None;
    let mut rest = &feed[..];
    let mut seed = u32::from(control) | 1;
    let mut t = 0u64;
    while !rest.is_empty() {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let n = (1 + (seed >> 16) as usize % 64).min(rest.len());
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        t += u64::from(seed >> 28);
        let r = conn.recv(piece, start + Duration::from_millis(t * 10));
        if let Some(e) = &failed {
            assert_eq!(r.as_ref(), Err(e), "an ended connection stays ended");
        }
        if let Err(e) = r {
            failed = Some(e);
        }
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Request {
                    id,
                    head,
                    end_stream,
                    ..
                } => {
                    assert!(id % 2 == 1);
                    for r in [&head.method, &head.scheme, &head.authority, &head.path] {
                        assert!(r.start <= r.end && r.end as usize <= head.buf.len());
                    }
                    assert!(!head.get(&head.method).is_empty());
                    for (name, value) in &head.fields {
                        let name = head.get(name);
                        assert!(!name.is_empty() && !name.starts_with(b":"));
                        assert!(!name.iter().any(u8::is_ascii_uppercase));
                        assert!(!head.get(value).iter().any(|&b| b == b'\n' || b == 0));
                    }
                    conn.recycle(head);
                    if end_stream {
                        answer(&mut conn, id, &mut pending);
                    }
                }
                Event::Data {
                    id,
                    data,
                    end_stream,
                } => {
                    conn.release(id, data.len());
                    conn.recycle_data(data);
                    if end_stream {
                        answer(&mut conn, id, &mut pending);
                    }
                }
                Event::Trailers { id } => answer(&mut conn, id, &mut pending),
                Event::Reset { id, .. } => pending.retain(|p| p.0 != id),
                Event::GoAway { .. } => {}
            }
        }
        pending.retain_mut(|(id, left)| {
            *left -= conn.send_data(*id, &BODY[BODY.len() - *left..], true);
            *left > 0
        });
        assert!(conn.open_streams() <= cfg.max_concurrent_streams as usize);
        let out = conn.output().len();
        assert!(
            out <= first_output + 8 * (feed.len() - rest.len()) + 1024,
            "{out} bytes of output for {} of input",
            feed.len() - rest.len()
        );
        if reads {
            written += out;
            conn.written(out);
        }
    }
    let _ = (written, conn.is_finished());
}

const BODY: &[u8] = b"hello, fuzzer\n";

fn answer(conn: &mut weft_http::h2::Connection, id: u32, pending: &mut Vec<(u32, usize)>) {
    let fields = [(&b"content-type"[..], &b"text/plain"[..])];
    conn.send_headers(id, 200, fields, false);
    let sent = conn.send_data(id, BODY, true);
    if sent < BODY.len() {
        pending.push((id, BODY.len() - sent));
    }
}

/// A FastCGI application's answer into `weft_http::fastcgi::Decoder`, whole and in pieces.
/// The first byte steers: bit 0, the request is id 1 or 2 (records for the other one are
/// errors); bit 1, the pieces are single bytes; the rest, where the pieces end. Never a panic;
/// every call keeps its promises (an event's bytes are the last ones consumed and never more
/// than one record's content, no event means everything was taken, an error stays); the
/// decoder holds nothing but its fixed-size self; both feeds agree on STDOUT, STDERR, the end
/// and the verdict.
pub fn fastcgi_records(data: &[u8]) {
    use std::num::NonZeroU16;
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    assert!(std::mem::size_of::<weft_http::fastcgi::Decoder>() <= 64);
    let id = NonZeroU16::MIN.saturating_add(u16::from(control & 1));
    let whole = fastcgi_decode(id, input, || input.len());
    let mut seed = u32::from(control) | 1;
    let pieces = fastcgi_decode(id, input, || {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        if control & 2 != 0 {
            1
        } else {
            1 + (seed >> 16) as usize % 64
        }
    });
    assert_eq!(whole, pieces, "{} bytes", input.len());
}

/// What a FastCGI response decoded to.
#[derive(Debug, PartialEq, Eq)]
struct FastCgiDecoded {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    end: Option<u32>,
    verdict: Result<(), weft_http::fastcgi::DecodeError>,
}

fn fastcgi_decode(
    id: std::num::NonZeroU16,
    input: &[u8],
    mut piece_len: impl FnMut() -> usize,
) -> FastCgiDecoded {
    use weft_http::fastcgi::{Decoder, Event, MAX_CONTENT_LEN};
    let mut d = Decoder::new(id);
    let mut out = FastCgiDecoded {
        stdout: Vec::new(),
        stderr: Vec::new(),
        end: None,
        verdict: Ok(()),
    };
    let mut rest = input;
    'pieces: while !rest.is_empty() {
        let (mut piece, tail) = rest.split_at(piece_len().clamp(1, rest.len()));
        rest = tail;
        loop {
            let step = match d.decode(piece) {
                Ok(step) => step,
                Err(e) => {
                    assert_eq!(d.decode(b""), Err(e), "an error stays");
                    assert_eq!(d.decode(input), Err(e), "an error stays");
                    out.verdict = Err(e);
                    break 'pieces;
                }
            };
            assert!(step.consumed <= piece.len());
            let taken = piece[..step.consumed].as_ptr_range();
            piece = &piece[step.consumed..];
            let (bytes, into) = match step.event {
                None => {
                    assert!(piece.is_empty(), "no event, yet bytes left");
                    break;
                }
                Some(Event::End { app_status }) => {
                    assert!(out.end.is_none() && d.is_done());
                    out.end = Some(app_status);
                    continue;
                }
                Some(Event::Stdout(b)) => (b, &mut out.stdout),
                Some(Event::Stderr(b)) => (b, &mut out.stderr),
            };
            assert!(!bytes.is_empty() && bytes.len() <= MAX_CONTENT_LEN);
            let at = bytes.as_ptr_range();
            assert!(
                taken.start <= at.start && at.end == taken.end,
                "not the bytes consumed"
            );
            into.extend_from_slice(bytes);
        }
    }
    if out.verdict.is_ok() {
        out.verdict = d.finish();
        assert_eq!(out.verdict.is_ok(), d.is_done());
        assert_eq!(out.verdict.is_ok(), out.end.is_some());
    }
    out
}

/// Arbitrary bytes as an `Authorization` value into `weft_http::auth::basic`: never a panic; a
/// parse gives back a user-id without `:` or control bytes, and encoding the user-id and
/// password again parses to the same credentials; the base64 decoder is the encoder's inverse.
pub fn basic_auth(data: &[u8]) {
    use weft_http::auth::{base64_decode, base64_encode, basic};
    if let Some(c) = basic(data) {
        assert!(!c.user.contains(&b':'));
        assert!(!c.user.iter().any(|&b| b < 0x20 || b == 0x7f));
        let mut plain = c.user.clone();
        plain.push(b':');
        plain.extend_from_slice(&c.password);
        let again = format!("Basic {}", base64_encode(&plain));
        assert_eq!(basic(again.as_bytes()), Some(c));
    }
    if let Some(d) = base64_decode(data) {
        assert_eq!(base64_encode(&d).as_bytes(), data);
    }
    let enc = base64_encode(data);
    assert_eq!(base64_decode(enc.as_bytes()).as_deref(), Some(data));
}

/// Arbitrary bytes as a client certificate into `weft_http::x509::names`: no panic, the same
/// answer twice; names that come out carry no raw control character (they go into logs, CGI
/// variables and headers as they are), and no prefix of an accepted certificate is accepted.
pub fn x509_names(data: &[u8]) {
    use weft_http::x509::{names, serial_and_authority_key_id, validity};
    // The other readers of a certificate: deterministic, never a panic.
    assert_eq!(validity(data), validity(data));
    if let Ok((before, after)) = validity(data) {
        // Years 0000-9999 at most.
        assert!(
            (-62_167_219_200..253_402_300_800).contains(&before),
            "{before}"
        );
        assert!(
            (-62_167_219_200..253_402_300_800).contains(&after),
            "{after}"
        );
    }
    assert_eq!(
        serial_and_authority_key_id(data),
        serial_and_authority_key_id(data)
    );
    assert_eq!(
        weft_http::x509::ocsp_url(data),
        weft_http::x509::ocsp_url(data)
    );
    if let Ok(Some(url)) = weft_http::x509::ocsp_url(data) {
        assert!(
            url.is_ascii() && !url.bytes().any(|b| b.is_ascii_control()),
            "{url:?}"
        );
    }
    assert_eq!(
        weft_http::x509::issuer_key(data),
        weft_http::x509::issuer_key(data)
    );
    // RFC 3339 times (ACME renewal windows) over the same bytes.
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(
            weft_http::timestamp::rfc3339(text),
            weft_http::timestamp::rfc3339(text)
        );
    }
    let got = names(data);
    assert_eq!(got, names(data));
    if let Ok(n) = got {
        for s in [&n.subject, &n.issuer, &n.serial] {
            assert!(!s.chars().any(char::is_control), "{s:?}");
        }
        assert!(n.serial.bytes().all(|b| b.is_ascii_hexdigit()));
        for cut in [0, data.len() / 2, data.len() - 1] {
            assert!(
                names(&data[..cut]).is_err(),
                "a prefix of {cut} bytes passed"
            );
        }
    }
}
