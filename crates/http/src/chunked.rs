//! The chunked transfer coding (RFC 9112 §7.1): a sans-I/O decoder with bounded chunk
//! extensions and trailers, and the few bytes an encoder needs.

use crate::request::is_tchar;
use crate::{Error, Limits};

/// The terminating chunk and an empty trailer section.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";
/// What follows the data of every chunk.
pub const CHUNK_END: &[u8] = b"\r\n";

/// Writes the size line of a chunk of `len` bytes (`len` must be non-zero; zero is
/// [`LAST_CHUNK`]) into `out` and returns the number of bytes written (at most 18).
pub fn encode_size_line(len: usize, out: &mut [u8; 18]) -> usize {
    debug_assert!(len > 0);
    let digits = (usize::BITS - len.leading_zeros()).div_ceil(4) as usize;
    for (i, slot) in out.iter_mut().take(digits).enumerate() {
        *slot = b"0123456789abcdef"[(len >> (4 * (digits - 1 - i))) & 0xf];
    }
    out[digits] = b'\r';
    out[digits + 1] = b'\n';
    digits + 2
}

/// Appends `data` as one chunk to `out` (nothing for empty data).
pub fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    let mut line = [0u8; 18];
    let n = encode_size_line(data.len(), &mut line);
    out.extend_from_slice(&line[..n]);
    out.extend_from_slice(data);
    out.extend_from_slice(CHUNK_END);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Hex digits of the size.
    Size {
        digits: u8,
    },
    /// Whitespace (BWS) after the size: only a `;` may follow.
    SizeWs,
    /// After a `;` (and any BWS): the extension's name must follow.
    ExtSemi,
    /// Inside an extension name.
    ExtName,
    /// BWS after an extension name: `=` or `;` must follow.
    ExtNameWs,
    /// After `=` (and any BWS): a token or a quoted-string must follow.
    ExtEq,
    /// Inside a token extension value.
    ExtToken,
    /// Inside a quoted-string extension value.
    ExtQuoted,
    /// After a backslash in a quoted-string.
    ExtQuotedPair,
    /// After a complete extension value: `;` or CR, or BWS before a `;`.
    ExtValueEnd,
    /// BWS after an extension value: only a `;` may follow.
    ExtValueWs,
    /// CR seen after the size line, LF expected.
    SizeLf,
    /// Chunk data with this many bytes left.
    Data(u64),
    /// CR expected after data.
    DataCr,
    /// LF expected after data.
    DataLf,
    /// Start of a trailer line (or the final CRLF).
    TrailerStart,
    /// Inside the name of a trailer field.
    TrailerName,
    /// Inside a trailer field's value, after the colon.
    Trailer,
    /// CR of a trailer line seen, LF expected.
    TrailerLf,
    /// CR of the final empty line seen, LF expected.
    EndLf,
    Done,
}

/// What one call to [`ChunkedDecoder::decode`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Bytes of input consumed.
    pub consumed: usize,
    /// Range of the input (within the consumed part) that is body data, possibly empty.
    pub data: (usize, usize),
    /// True once the last chunk and trailer section have been consumed.
    pub done: bool,
}

/// Incremental decoder. Call [`ChunkedDecoder::decode`] with unconsumed input until it reports
/// `done`; each call returns at most one contiguous run of data and never copies.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    size: u64,
    line_len: usize,
    trailer_len: usize,
    max_chunk_line: usize,
    max_trailer_bytes: usize,
}

impl ChunkedDecoder {
    /// A decoder bounded by `limits` (chunk line and trailer sizes).
    pub fn new(limits: &Limits) -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            size: 0,
            line_len: 0,
            trailer_len: 0,
            max_chunk_line: limits.max_chunk_line,
            max_trailer_bytes: limits.max_trailer_bytes,
        }
    }

    /// True once the whole body has been decoded.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Bytes of the current chunk its size line announced that have not been decoded yet
    /// (0 between chunks): with the data already decoded, what the body will be at least, so
    /// a reader can refuse a body over its limit at the size line, before the bytes come.
    pub fn data_left(&self) -> u64 {
        match self.state {
            State::Data(left) => left,
            _ => 0,
        }
    }

    /// Decode from `input`. Stops after the first run of data so the caller can take it.
    pub fn decode(&mut self, input: &[u8]) -> Result<Step, Error> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Data(left) => return Ok(self.data(left, input, i)),
                State::Done => break,
                _ => {}
            }
            self.byte(input[i])?;
            i += 1;
            if self.state == State::Done {
                return Ok(Step {
                    consumed: i,
                    data: (i, i),
                    done: true,
                });
            }
        }
        Ok(Step {
            consumed: i,
            data: (i, i),
            done: self.state == State::Done,
        })
    }

    /// Chunk data at `input[i..]` with `left` bytes of the chunk still to come: taken in bulk,
    /// never byte by byte, and handed back at once so the caller can take it.
    fn data(&mut self, left: u64, input: &[u8], i: usize) -> Step {
        let take = (input.len() - i).min(usize::try_from(left).unwrap_or(usize::MAX));
        let left = left - take as u64;
        self.state = if left == 0 {
            State::DataCr
        } else {
            State::Data(left)
        };
        Step {
            consumed: i + take,
            data: (i, i + take),
            done: false,
        }
    }

    /// One byte of framing (a size line, the CRLF after data, the trailer section), in any
    /// state but `Data` and `Done`.
    fn byte(&mut self, b: u8) -> Result<(), Error> {
        self.state = match self.state {
            State::Size { digits } => {
                self.count_line()?;
                self.size_digit(digits, b)?
            }
            State::SizeLf => self.end_size_line(b)?,
            State::DataCr | State::DataLf => after_data(self.state, b)?,
            // The final LF is not counted against the trailer section's limit.
            State::EndLf => trailer_step(self.state, b)?,
            State::TrailerStart | State::TrailerName | State::Trailer | State::TrailerLf => {
                self.count_trailer()?;
                trailer_step(self.state, b)?
            }
            State::Data(_) | State::Done => {
                debug_assert!(false, "decode handles data and the end itself");
                self.state
            }
            State::SizeWs
            | State::ExtSemi
            | State::ExtName
            | State::ExtNameWs
            | State::ExtEq
            | State::ExtToken
            | State::ExtQuoted
            | State::ExtQuotedPair
            | State::ExtValueEnd
            | State::ExtValueWs => {
                self.count_line()?;
                extension_step(self.state, b)?
            }
        };
        Ok(())
    }

    /// A byte of the chunk size: another hex digit, or what ends the size.
    fn size_digit(&mut self, digits: u8, b: u8) -> Result<State, Error> {
        if let Some(d) = hex(b) {
            // Leading zeros are fine; a size that would not fit in 64 bits is not.
            if self.size >> 60 != 0 {
                return Err(Error::BadChunk("chunk size too large"));
            }
            self.size = (self.size << 4) | u64::from(d);
            return Ok(State::Size {
                digits: digits.saturating_add(1),
            });
        }
        if digits == 0 {
            return Err(Error::BadChunk("chunk size missing"));
        }
        match b {
            b'\r' => Ok(State::SizeLf),
            b';' => Ok(State::ExtSemi),
            b' ' | b'\t' => Ok(State::SizeWs),
            _ => Err(Error::BadChunk("invalid character in chunk size")),
        }
    }

    /// The LF of a size line: data follows, or the trailer section after the last chunk.
    fn end_size_line(&mut self, b: u8) -> Result<State, Error> {
        if b != b'\n' {
            return Err(Error::BadChunk("chunk size line not ended by CRLF"));
        }
        self.line_len = 0;
        let next = if self.size == 0 {
            State::TrailerStart
        } else {
            State::Data(self.size)
        };
        self.size = 0;
        Ok(next)
    }

    fn count_line(&mut self) -> Result<(), Error> {
        self.line_len += 1;
        if self.line_len > self.max_chunk_line {
            return Err(Error::BadChunk("chunk size line too long"));
        }
        Ok(())
    }

    fn count_trailer(&mut self) -> Result<(), Error> {
        self.trailer_len += 1;
        if self.trailer_len > self.max_trailer_bytes {
            return Err(Error::BadChunk("trailer section too large"));
        }
        Ok(())
    }
}

/// A byte of the chunk extensions, after the size:
/// `chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ( token / quoted-string ) ] )`
/// (RFC 9112 §7.1.1). Extensions are ignored, but only once they parse: a line that two
/// parsers could split differently is refused.
fn extension_step(state: State, b: u8) -> Result<State, Error> {
    const INVALID: Error = Error::BadChunk("invalid character in chunk extension");
    const INVALID_QUOTED: Error = Error::BadChunk("invalid character in quoted chunk extension");
    let ws = matches!(b, b' ' | b'\t');
    // qdtext and quoted-pair's second byte: HTAB, SP, VCHAR, obs-text.
    let qd = matches!(b, b'\t' | b' ' | 0x21..=0x7e | 0x80..=0xff);
    Ok(match state {
        State::SizeWs | State::ExtValueWs => match b {
            _ if ws => state,
            b';' => State::ExtSemi,
            _ => return Err(Error::BadChunk("whitespace in chunk line not before ';'")),
        },
        State::ExtSemi => match b {
            _ if ws => state,
            _ if is_tchar(b) => State::ExtName,
            _ => return Err(Error::BadChunk("chunk extension without a name")),
        },
        State::ExtName => match b {
            _ if is_tchar(b) => state,
            _ if ws => State::ExtNameWs,
            b'=' => State::ExtEq,
            b';' => State::ExtSemi,
            b'\r' => State::SizeLf,
            _ => return Err(INVALID),
        },
        State::ExtNameWs => match b {
            _ if ws => state,
            b'=' => State::ExtEq,
            b';' => State::ExtSemi,
            _ => return Err(INVALID),
        },
        State::ExtEq => match b {
            _ if ws => state,
            b'"' => State::ExtQuoted,
            _ if is_tchar(b) => State::ExtToken,
            _ => return Err(Error::BadChunk("chunk extension without a value")),
        },
        State::ExtToken | State::ExtValueEnd => match b {
            _ if is_tchar(b) && state == State::ExtToken => state,
            _ if ws => State::ExtValueWs,
            b';' => State::ExtSemi,
            b'\r' => State::SizeLf,
            _ => return Err(INVALID),
        },
        State::ExtQuoted => match b {
            b'"' => State::ExtValueEnd,
            b'\\' => State::ExtQuotedPair,
            _ if qd => state,
            _ => return Err(INVALID_QUOTED),
        },
        State::ExtQuotedPair if qd => State::ExtQuoted,
        State::ExtQuotedPair => return Err(INVALID_QUOTED),
        _ => unreachable!("not an extension state: {state:?}"),
    })
}

/// A byte of the CRLF that ends a chunk's data.
fn after_data(state: State, b: u8) -> Result<State, Error> {
    match (state, b) {
        (State::DataCr, b'\r') => Ok(State::DataLf),
        (State::DataLf, b'\n') => Ok(State::Size { digits: 0 }),
        _ => Err(Error::BadChunk("chunk data not followed by CRLF")),
    }
}

/// A byte of the trailer section: `*( field-line CRLF ) CRLF`; its last LF ends the body.
fn trailer_step(state: State, b: u8) -> Result<State, Error> {
    Ok(match state {
        State::TrailerStart => match b {
            b'\r' => State::EndLf,
            b' ' | b'\t' => return Err(Error::BadChunk("obsolete line folding in trailer")),
            _ if is_tchar(b) => State::TrailerName,
            _ => return Err(Error::BadChunk("invalid trailer field")),
        },
        State::TrailerName => match b {
            _ if is_tchar(b) => state,
            b':' => State::Trailer,
            _ => return Err(Error::BadChunk("invalid trailer field name")),
        },
        State::Trailer => match b {
            b'\r' => State::TrailerLf,
            b'\t' | 0x20..=0x7e | 0x80..=0xff => state,
            _ => return Err(Error::BadChunk("invalid character in trailer")),
        },
        State::TrailerLf if b == b'\n' => State::TrailerStart,
        State::TrailerLf => return Err(Error::BadChunk("trailer line not ended by CRLF")),
        State::EndLf if b == b'\n' => State::Done,
        State::EndLf => return Err(Error::BadChunk("chunked body not ended by CRLF")),
        _ => unreachable!("not a trailer state: {state:?}"),
    })
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, usize), Error> {
        let mut d = ChunkedDecoder::new(&Limits::default());
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            let step = d.decode(&input[pos..])?;
            out.extend_from_slice(&input[pos + step.data.0..pos + step.data.1]);
            pos += step.consumed;
            if step.done {
                return Ok((out, pos));
            }
            if step.consumed == 0 {
                return Err(Error::BadChunk("incomplete"));
            }
        }
    }

    #[test]
    fn decodes_chunks_extensions_and_trailers() {
        let body = b"4\r\nWiki\r\n5;name=val\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let (out, used) = decode_all(body).unwrap();
        assert_eq!(out, b"Wikipedia in\r\n\r\nchunks.");
        assert_eq!(&body[used..], b"NEXT");
    }

    #[test]
    fn byte_at_a_time_matches_whole() {
        let body = b"a\r\n0123456789\r\n1 ; x=\"y\"\r\nZ\r\n0\r\n\r\n";
        let mut d = ChunkedDecoder::new(&Limits::default());
        let mut out = Vec::new();
        for (i, b) in body.iter().enumerate() {
            let one = [*b];
            let step = d.decode(&one).unwrap();
            assert_eq!(step.consumed, 1, "byte {i}");
            out.extend_from_slice(&one[step.data.0..step.data.1]);
        }
        assert!(d.is_done());
        assert_eq!(out, b"0123456789Z");
    }

    #[test]
    fn data_left_is_what_the_size_line_announced_less_what_was_decoded() {
        let mut d = ChunkedDecoder::new(&Limits::default());
        assert_eq!(d.data_left(), 0, "before any size line");
        // The size line alone: the whole chunk is still to come.
        let step = d.decode(b"ffffffffffffffff\r\n").unwrap();
        assert_eq!((step.consumed, step.data.1 - step.data.0), (18, 0));
        assert_eq!(d.data_left(), u64::MAX);
        let mut d = ChunkedDecoder::new(&Limits::default());
        let step = d.decode(b"a;x=1\r\n0123").unwrap();
        assert_eq!(step.data, (7, 11));
        assert_eq!(d.data_left(), 6);
        let step = d.decode(b"456789\r\n").unwrap();
        assert_eq!(step.data, (0, 6));
        assert_eq!(d.data_left(), 0, "the chunk is whole");
        let step = d.decode(b"\r\n0\r\n\r\n").unwrap();
        assert!(step.done);
        assert_eq!(d.data_left(), 0);
    }

    #[test]
    fn refuses_bad_chunks() {
        for bad in [
            &b"\r\n"[..],
            b"x\r\n",
            b"4\nWiki\r\n0\r\n\r\n",
            b"4\r\nWikiXX0\r\n\r\n",
            b"11111111111111111\r\n",
            b"4 x\r\n",
            b"0\r\n Folded: x\r\n\r\n",
            b"0\r\nBad\x01: x\r\n\r\n",
            b"4;\x00\r\n",
        ] {
            assert!(
                decode_all(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn bounds_extensions_and_trailers() {
        let mut long_ext = b"1;".to_vec();
        long_ext.extend_from_slice(&[b'a'; 2000]);
        long_ext.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
        assert_eq!(
            decode_all(&long_ext),
            Err(Error::BadChunk("chunk size line too long"))
        );
        let mut long_trailer = b"0\r\n".to_vec();
        for i in 0..1000 {
            long_trailer.extend_from_slice(format!("X-T{i}: value\r\n").as_bytes());
        }
        long_trailer.extend_from_slice(b"\r\n");
        assert_eq!(
            decode_all(&long_trailer),
            Err(Error::BadChunk("trailer section too large"))
        );
    }

    /// What the limits count, at the bound and one past it: a size line its bytes up to its
    /// CR; the trailer section every byte but the body's final LF.
    #[test]
    fn limits_count_up_to_the_bound() {
        let run = |limits: &Limits, input: &[u8]| {
            let mut d = ChunkedDecoder::new(limits);
            let step = d.decode(input)?;
            Ok::<_, Error>((step.consumed, step.done))
        };
        // "0;a=b\r": 6 bytes of size line; "X:y\r\n\r": 6 bytes of trailer section.
        let body = b"0;a=b\r\nX:y\r\n\r\n";
        let at = Limits {
            max_chunk_line: 6,
            max_trailer_bytes: 6,
            ..Limits::default()
        };
        assert_eq!(run(&at, body), Ok((body.len(), true)));
        let line = Limits {
            max_chunk_line: 5,
            ..at
        };
        assert_eq!(
            run(&line, body),
            Err(Error::BadChunk("chunk size line too long"))
        );
        let trailer = Limits {
            max_trailer_bytes: 5,
            ..at
        };
        assert_eq!(
            run(&trailer, body),
            Err(Error::BadChunk("trailer section too large"))
        );
    }

    #[test]
    fn encodes() {
        let mut out = Vec::new();
        encode_chunk(b"hello world, this is sixteen+", &mut out);
        encode_chunk(b"", &mut out);
        out.extend_from_slice(LAST_CHUNK);
        assert_eq!(out, b"1d\r\nhello world, this is sixteen+\r\n0\r\n\r\n");
        let (decoded, _) = decode_all(&out).unwrap();
        assert_eq!(decoded, b"hello world, this is sixteen+");
    }
}
