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
        for h in head.headers() {
            assert!(h.name.end as usize <= n && h.value.end as usize <= n);
            assert!(h.name.start < h.name.end && h.value.start <= h.value.end);
        }
        let _ = head.header(input, "host");
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
