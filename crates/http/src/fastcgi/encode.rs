//! The records a web server sends for one request, appended to the caller's buffer.

use std::num::NonZeroU16;

use super::{
    RecordType, FLAG_KEEP_CONN, HEADER_LEN, MAX_PAIR_PART, MAX_RECORD_CONTENT, ROLE_RESPONDER,
    VERSION_1,
};

/// A record header: version 1, `kind`, `request_id` (0 for a management record),
/// `content_len` bytes of content followed by `padding` bytes of padding.
///
/// For a large body a caller may send `header(RecordType::Stdin, ..)`, the content itself and
/// `padding_for(len)` zero bytes with one vectored write instead of copying the body through
/// [`stdin`].
///
/// ```
/// use weft_http::fastcgi::{header, RecordType};
/// assert_eq!(header(RecordType::Stdin, 1, 300, 4), [1, 5, 0, 1, 1, 44, 4, 0]);
/// ```
pub fn header(kind: RecordType, request_id: u16, content_len: u16, padding: u8) -> [u8; 8] {
    let [id1, id0] = request_id.to_be_bytes();
    let [len1, len0] = content_len.to_be_bytes();
    [VERSION_1, kind.as_u8(), id1, id0, len1, len0, padding, 0]
}

/// The padding that brings `content_len` bytes of content to a multiple of 8 (0 to 7).
pub fn padding_for(content_len: usize) -> usize {
    content_len.wrapping_neg() % 8
}

/// Appends one record of `content` (at most [`MAX_RECORD_CONTENT`] bytes) and its padding.
fn record(out: &mut Vec<u8>, kind: RecordType, request_id: NonZeroU16, content: &[u8]) {
    debug_assert!(content.len() <= MAX_RECORD_CONTENT);
    let pad = padding_for(content.len());
    // Both fit: content.len() <= 65,528 and pad < 8.
    out.extend_from_slice(&header(
        kind,
        request_id.get(),
        content.len() as u16,
        pad as u8,
    ));
    out.extend_from_slice(content);
    out.extend_from_slice(&[0; 8][..pad]);
}

/// Appends FCGI_BEGIN_REQUEST: role RESPONDER, flag FCGI_KEEP_CONN (the application keeps the
/// connection open for the next request).
pub fn begin_request(out: &mut Vec<u8>, request_id: NonZeroU16) {
    let [role1, role0] = ROLE_RESPONDER.to_be_bytes();
    let body = [role1, role0, FLAG_KEEP_CONN, 0, 0, 0, 0, 0];
    record(out, RecordType::BeginRequest, request_id, &body);
}

/// Appends FCGI_ABORT_REQUEST: the client went away. The application still ends the request
/// with END_REQUEST, which the [`super::Decoder`] reads as usual.
pub fn abort_request(out: &mut Vec<u8>, request_id: NonZeroU16) {
    record(out, RecordType::AbortRequest, request_id, &[]);
}

/// Starts the FCGI_PARAMS stream: add the CGI variables with [`Params::pair`], then end the
/// stream with [`Params::finish`].
pub fn params(out: &mut Vec<u8>, request_id: NonZeroU16) -> Params<'_> {
    Params {
        out,
        request_id,
        open: None,
    }
}

/// Appends `chunk` of the request body as FCGI_STDIN records (as many as its length needs;
/// none for an empty chunk, which would end the stream). Call it for each piece of the body
/// as it arrives, then [`end_stdin`].
pub fn stdin(out: &mut Vec<u8>, request_id: NonZeroU16, chunk: &[u8]) {
    for piece in chunk.chunks(MAX_RECORD_CONTENT) {
        record(out, RecordType::Stdin, request_id, piece);
    }
}

/// Appends the empty FCGI_STDIN record that ends the body (also for a request without one).
pub fn end_stdin(out: &mut Vec<u8>, request_id: NonZeroU16) {
    record(out, RecordType::Stdin, request_id, &[]);
}

/// The FCGI_PARAMS stream being written: pairs are packed into records of up to
/// [`MAX_RECORD_CONTENT`] bytes, a record closed (its header written, its padding added) when
/// the next pair does not fit. Dropped without [`Params::finish`], it leaves a record whose
/// header is all zeros (version 0), which any application refuses.
#[derive(Debug)]
#[must_use = "the PARAMS stream ends only with finish()"]
pub struct Params<'o> {
    out: &'o mut Vec<u8>,
    request_id: NonZeroU16,
    /// Where the open record's header is in `out`.
    open: Option<usize>,
}

impl Params<'_> {
    /// Adds one name-value pair (a CGI variable). Names and values are bytes, sent as they
    /// are; lengths below 128 take one byte, others four.
    ///
    /// # Panics
    ///
    /// If `name` or `value` is longer than [`MAX_PAIR_PART`] (2 GiB), which FastCGI cannot
    /// express.
    pub fn pair(&mut self, name: &[u8], value: &[u8]) -> &mut Self {
        let mut lengths = [0u8; 8];
        let n = put_length(name.len(), &mut lengths);
        let n = n + put_length(value.len(), &mut lengths[n..]);
        let total = n + name.len() + value.len();
        // php-fpm reads each record's pairs on their own: keep a pair that fits in one record.
        if total <= MAX_RECORD_CONTENT && total > self.room() {
            self.close();
        }
        self.write(&lengths[..n]);
        self.write(name);
        self.write(value);
        self
    }

    /// Closes the open record and appends the empty FCGI_PARAMS record that ends the stream.
    pub fn finish(mut self) {
        self.close();
        record(self.out, RecordType::Params, self.request_id, &[]);
    }

    /// Content bytes the open record can still take (0 with none open).
    fn room(&self) -> usize {
        self.open.map_or(0, |h| {
            MAX_RECORD_CONTENT - (self.out.len() - h - HEADER_LEN)
        })
    }

    /// Appends `bytes` to the stream, opening records as they fill.
    fn write(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.room() == 0 {
                self.close();
                self.open = Some(self.out.len());
                self.out.extend_from_slice(&[0; HEADER_LEN]);
            }
            let take = self.room().min(bytes.len());
            self.out.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
    }

    /// Writes the open record's header and padding. A record is opened only to take bytes,
    /// so it is never empty (an empty record would end the stream).
    fn close(&mut self) {
        let Some(h) = self.open.take() else {
            return;
        };
        let len = self.out.len() - h - HEADER_LEN;
        let pad = padding_for(len);
        let head = header(
            RecordType::Params,
            self.request_id.get(),
            len as u16,
            pad as u8,
        );
        self.out[h..h + HEADER_LEN].copy_from_slice(&head);
        self.out.extend_from_slice(&[0; 8][..pad]);
    }
}

/// Writes a name-value pair length into `out` (1 byte below 128, else 4 with the high bit
/// set) and returns how many bytes it took.
fn put_length(len: usize, out: &mut [u8]) -> usize {
    assert!(
        len <= MAX_PAIR_PART,
        "a FastCGI name or value of {len} bytes"
    );
    if len < 128 {
        out[0] = len as u8;
        1
    } else {
        out[..4].copy_from_slice(&(len as u32 | 0x8000_0000).to_be_bytes());
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: NonZeroU16 = NonZeroU16::MIN;

    #[test]
    fn begin_request_is_responder_with_keep_conn() {
        let mut out = Vec::new();
        begin_request(&mut out, NonZeroU16::new(0x0102).unwrap());
        assert_eq!(
            out,
            [
                1, 1, 0x01, 0x02, 0, 8, 0, 0, // version, BEGIN_REQUEST, id 258, 8 bytes
                0, 1, 1, 0, 0, 0, 0, 0, // role RESPONDER, flags KEEP_CONN, reserved
            ]
        );
    }

    /// The specification's own example (appendix B): `\013\002SERVER_PORT80` is one pair.
    #[test]
    fn params_record_as_the_specification_writes_it() {
        let mut out = Vec::new();
        let mut p = params(&mut out, ID);
        p.pair(b"SERVER_PORT", b"80")
            .pair(b"SERVER_ADDR", b"199.170.183.42");
        p.finish();
        let content = b"\x0b\x02SERVER_PORT80\x0b\x0eSERVER_ADDR199.170.183.42";
        assert_eq!(content.len(), 42);
        let mut expected = vec![1, 4, 0, 1, 0, 42, 6, 0];
        expected.extend_from_slice(content);
        expected.extend_from_slice(&[0; 6]);
        expected.extend_from_slice(&[1, 4, 0, 1, 0, 0, 0, 0]); // the stream's end
        assert_eq!(out, expected);
    }

    #[test]
    fn params_are_padded_to_eight() {
        let mut out = Vec::new();
        let mut p = params(&mut out, ID);
        p.pair(b"A", b"bc"); // 1 + 1 + 1 + 2 = 5 bytes, 3 of padding
        p.finish();
        assert_eq!(
            out,
            [1, 4, 0, 1, 0, 5, 3, 0, 1, 2, b'A', b'b', b'c', 0, 0, 0, 1, 4, 0, 1, 0, 0, 0, 0]
        );
    }

    #[test]
    fn long_lengths_take_four_bytes_with_the_high_bit() {
        let name = [b'N'; 128];
        let value = [b'v'; 300];
        let mut out = Vec::new();
        let mut p = params(&mut out, ID);
        p.pair(&name, &value).pair(b"", &[b'x'; 127]);
        p.finish();
        let len = 4 + 4 + 128 + 300 + 1 + 1 + 127;
        assert_eq!(len, 565);
        assert_eq!(&out[..8], [1, 4, 0, 1, 0x02, 0x35, 3, 0]);
        assert_eq!(&out[8..16], [0x80, 0, 0, 128, 0x80, 0, 0x01, 0x2c]);
        assert_eq!(&out[16..144], name);
        assert_eq!(&out[144..444], value);
        assert_eq!(&out[444..446], [0, 127]);
        assert_eq!(out.len(), 8 + 565 + 3 + 8);
    }

    #[test]
    fn no_params_is_just_the_empty_record() {
        let mut out = Vec::new();
        params(&mut out, ID).finish();
        assert_eq!(out, [1, 4, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn a_pair_that_does_not_fit_starts_a_new_record() {
        let mut out = Vec::new();
        let mut p = params(&mut out, ID);
        let big = vec![b'a'; 40_000];
        p.pair(b"ONE", &big).pair(b"TWO", &big);
        p.finish();
        // 1 + 4 + 3 + 40,000 = 40,008 bytes each, 0 of padding: two records and the end.
        assert_eq!(&out[..8], [1, 4, 0, 1, 0x9c, 0x48, 0, 0]);
        assert_eq!(&out[8..16], [3, 0x80, 0, 0x9c, 0x40, b'O', b'N', b'E']);
        assert_eq!(&out[40_016..40_024], [1, 4, 0, 1, 0x9c, 0x48, 0, 0]);
        assert_eq!(
            &out[40_024..40_032],
            [3, 0x80, 0, 0x9c, 0x40, b'T', b'W', b'O']
        );
        assert_eq!(&out[80_032..], [1, 4, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn a_pair_larger_than_a_record_is_split() {
        let mut out = Vec::new();
        let mut p = params(&mut out, ID);
        p.pair(b"X", &vec![b'v'; 70_000]);
        p.finish();
        // 1 + 4 + 1 + 70,000 = 70,006 bytes: 65,528 then 4,478 (2 of padding).
        assert_eq!(&out[..8], [1, 4, 0, 1, 0xff, 0xf8, 0, 0]);
        assert_eq!(&out[8..14], [1, 0x80, 0x01, 0x11, 0x70, b'X']);
        let second = 8 + 65_528;
        assert_eq!(&out[second..second + 8], [1, 4, 0, 1, 0x11, 0x7e, 2, 0]);
        let end = second + 8 + 4_478 + 2;
        assert_eq!(&out[end..], [1, 4, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn stdin_is_split_into_records_and_ended() {
        let mut out = Vec::new();
        stdin(&mut out, ID, b"");
        assert!(out.is_empty(), "an empty chunk must not end the stream");
        stdin(&mut out, ID, b"hello");
        assert_eq!(
            out,
            [1, 5, 0, 1, 0, 5, 3, 0, b'h', b'e', b'l', b'l', b'o', 0, 0, 0]
        );
        out.clear();
        stdin(&mut out, ID, &vec![7; MAX_RECORD_CONTENT + 1]);
        assert_eq!(&out[..8], [1, 5, 0, 1, 0xff, 0xf8, 0, 0]);
        let second = 8 + MAX_RECORD_CONTENT;
        assert_eq!(
            out[second..],
            [1, 5, 0, 1, 0, 1, 7, 0, 7, 0, 0, 0, 0, 0, 0, 0]
        );
        out.clear();
        end_stdin(&mut out, ID);
        assert_eq!(out, [1, 5, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn abort_request_is_empty() {
        let mut out = Vec::new();
        abort_request(&mut out, NonZeroU16::new(2).unwrap());
        assert_eq!(out, [1, 2, 0, 2, 0, 0, 0, 0]);
    }

    #[test]
    fn padding_reaches_a_multiple_of_eight() {
        for len in 0..64 {
            let pad = padding_for(len);
            assert!(pad < 8 && (len + pad).is_multiple_of(8), "{len}");
        }
        assert_eq!(padding_for(MAX_RECORD_CONTENT), 0);
    }

    #[test]
    fn appends_without_touching_what_was_there() {
        let mut out = b"kept".to_vec();
        begin_request(&mut out, ID);
        let mut p = params(&mut out, ID);
        p.pair(b"A", b"b");
        p.finish();
        assert_eq!(&out[..4], b"kept");
        assert_eq!(&out[4..12], [1, 1, 0, 1, 0, 8, 0, 0]);
        assert_eq!(&out[20..28], [1, 4, 0, 1, 0, 4, 4, 0]);
    }
}
