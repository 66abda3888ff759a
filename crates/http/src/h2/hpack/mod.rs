//! HPACK (RFC 7541): the header compression of HTTP/2. The decoder keeps a dynamic table
//! bounded by the size the server advertised; the encoder writes response fields from the
//! static table and as literals without indexing (so an encoded block does not depend on the
//! connection and can be cached), Huffman-coded where that is shorter.
//!
//! The decoder never panics on input and holds at most twice its table size in name and value
//! bytes, plus a scratch buffer for Huffman-decoded strings that is trimmed back to
//! [`SCRATCH_KEEP`] after a block. Fields reach the caller as borrowed slices: in the steady
//! state a block is decoded without allocating.
//!
//! ```
//! use weft_http::h2::hpack::{Decoder, Encoder};
//! let mut block = Vec::new();
//! let mut encoder = Encoder::new();
//! encoder.status(200, &mut block);
//! encoder.field(b"content-type", b"text/html", &mut block);
//! let mut fields = Vec::new();
//! Decoder::new(4096)
//!     .decode(&block, &mut |name, value| fields.push((name.to_vec(), value.to_vec())))
//!     .unwrap();
//! assert_eq!(fields[0], (b":status".to_vec(), b"200".to_vec()));
//! assert_eq!(fields[1], (b"content-type".to_vec(), b"text/html".to_vec()));
//! ```

mod huffman;
mod table;
#[cfg(test)]
mod tests;

use table::{DynamicTable, STATIC};

/// Why a header block could not be decoded: a connection error COMPRESSION_ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

const TRUNCATED: DecodeError = DecodeError("header block ends inside a representation");
const INTEGER_OVERFLOW: DecodeError = DecodeError("integer exceeds 2^32 - 1");
const STRING_TOO_LONG: DecodeError = DecodeError("string longer than the rest of the block");
const INDEX_ZERO: DecodeError = DecodeError("index 0");
const INDEX_OUT_OF_RANGE: DecodeError = DecodeError("index beyond the static and dynamic tables");
const HUFFMAN_EOS: DecodeError = DecodeError("EOS in a Huffman-coded string");
const HUFFMAN_PADDING: DecodeError =
    DecodeError("Huffman padding longer than 7 bits or not the high bits of EOS");
const SIZE_UPDATE_AFTER_FIELD: DecodeError = DecodeError("dynamic table size update after a field");
const SIZE_UPDATE_TOO_LARGE: DecodeError =
    DecodeError("dynamic table size update above SETTINGS_HEADER_TABLE_SIZE");
const SIZE_UPDATE_MISSING: DecodeError =
    DecodeError("no dynamic table size update after SETTINGS_HEADER_TABLE_SIZE was lowered");

/// The protocol's initial dynamic table size (RFC 9113 §6.5.2, SETTINGS_HEADER_TABLE_SIZE):
/// what a peer's encoder may use until it has acknowledged a setting of ours.
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// The capacity of the Huffman scratch buffer kept between blocks; a block that needed more
/// gives the rest back, so an idle connection does not keep its largest string's memory.
pub const SCRATCH_KEEP: usize = 4096;

/// The decoding context of one connection's received header blocks.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// SETTINGS_HEADER_TABLE_SIZE in force: the largest size an update may set.
    limit: usize,
    /// The smallest limit set since the last block, when one was set below the table's size:
    /// the next block must begin with an update to at most this (RFC 7541 §4.2).
    lowered: Option<usize>,
    /// Huffman-decoded strings of the field being decoded.
    scratch: Vec<u8>,
}

/// A string of a literal field: in the block as it was sent, or Huffman-decoded into the
/// decoder's scratch buffer.
enum Text<'a> {
    Raw(&'a [u8]),
    Decoded(std::ops::Range<usize>),
}

impl<'a> Text<'a> {
    fn bytes<'s>(&self, scratch: &'s [u8]) -> &'s [u8]
    where
        'a: 's,
    {
        match self {
            Text::Raw(raw) => raw,
            Text::Decoded(range) => &scratch[range.clone()],
        }
    }
}

/// Whether a literal field is added to the dynamic table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Indexing {
    /// Literal with incremental indexing (§6.2.1).
    Add,
    /// Literal without indexing or never indexed (§6.2.2, §6.2.3).
    Skip,
}

/// The position of a block's representations relative to its fields: size updates are only
/// allowed before the first field (§4.2).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Fields,
}

impl Decoder {
    /// A decoder whose dynamic table holds at most `max_table_size` bytes (the
    /// SETTINGS_HEADER_TABLE_SIZE the server advertised).
    ///
    /// A peer may use [`DEFAULT_TABLE_SIZE`] until it acknowledges the server's SETTINGS, and
    /// a client's first request usually comes before that: a server that advertises less
    /// starts with `Decoder::new(DEFAULT_TABLE_SIZE)` and calls
    /// [`Decoder::set_max_table_size`] when the acknowledgement arrives.
    pub fn new(max_table_size: usize) -> Decoder {
        Decoder {
            table: DynamicTable::new(max_table_size),
            limit: max_table_size,
            lowered: None,
            scratch: Vec::new(),
        }
    }

    /// Applies a new SETTINGS_HEADER_TABLE_SIZE, once the peer has acknowledged it. A size
    /// below the peer's current table size obliges the peer to begin its next block with a
    /// dynamic table size update no larger than the smallest size set since its last block
    /// (RFC 7541 §4.2); [`Decoder::decode`] fails that block otherwise. A larger size only
    /// allows larger updates.
    pub fn set_max_table_size(&mut self, max_table_size: usize) {
        self.limit = max_table_size;
        if max_table_size < self.table.max() {
            self.lowered = Some(
                self.lowered
                    .map_or(max_table_size, |l| l.min(max_table_size)),
            );
        }
    }

    /// The §4.1 size of the dynamic table's entries now (each costs its name's and value's
    /// length plus 32); never more than the table size in force.
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// Decodes one complete header block, calling `emit(name, value)` for each field in order.
    /// Every field is decoded (and the dynamic table updated) even if the caller stops keeping
    /// them, so the context stays in step with the peer's.
    ///
    /// An error is a COMPRESSION_ERROR for the whole connection: the fields emitted before it
    /// must be discarded, and the decoder is not to be used again (its context may be out of
    /// step with the peer's).
    pub fn decode(
        &mut self,
        block: &[u8],
        emit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let lowered = self.lowered.take();
        let result = self.decode_block(block, lowered, emit);
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        result
    }

    /// Frees the scratch buffer (an idle connection keeps only its table).
    pub fn shrink(&mut self) {
        self.scratch = Vec::new();
    }

    fn decode_block(
        &mut self,
        block: &[u8],
        mut lowered: Option<usize>,
        emit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let mut input = block;
        let mut phase = Phase::Start;
        while let Some(&first) = input.first() {
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = integer(&mut input, 7)?;
                let (name, value) = field(&self.table, index)?;
                emit(name, value);
            } else if first & 0xc0 == 0x40 {
                // Literal with incremental indexing (§6.2.1).
                self.literal(&mut input, 6, Indexing::Add, emit)?;
            } else if first & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3).
                if phase == Phase::Fields {
                    return Err(SIZE_UPDATE_AFTER_FIELD);
                }
                let size = integer(&mut input, 5)?;
                if size > lowered.take().unwrap_or(self.limit) {
                    return Err(SIZE_UPDATE_TOO_LARGE);
                }
                self.table.set_max(size);
                continue;
            } else {
                // Literal without indexing (0000) or never indexed (0001) (§6.2.2, §6.2.3).
                self.literal(&mut input, 4, Indexing::Skip, emit)?;
            }
            if lowered.is_some() {
                return Err(SIZE_UPDATE_MISSING);
            }
            phase = Phase::Fields;
        }
        if lowered.is_some() {
            return Err(SIZE_UPDATE_MISSING);
        }
        Ok(())
    }

    /// A literal field whose first byte has a `prefix`-bit name index.
    fn literal(
        &mut self,
        input: &mut &[u8],
        prefix: u32,
        indexing: Indexing,
        emit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        self.scratch.clear();
        let name = match integer(input, prefix)? {
            0 => string(input, &mut self.scratch)?,
            index @ 1..=61 => Text::Raw(STATIC[index - 1].0),
            index => {
                // Copied, so that inserting the field cannot evict the bytes it names (§4.4).
                let (name, _) = field(&self.table, index)?;
                self.scratch.extend_from_slice(name);
                Text::Decoded(0..name.len())
            }
        };
        let value = string(input, &mut self.scratch)?;
        let (name, value) = (name.bytes(&self.scratch), value.bytes(&self.scratch));
        emit(name, value);
        if indexing == Indexing::Add {
            self.table.insert(name, value);
        }
        Ok(())
    }
}

/// The field at an HPACK index: the static table, then the dynamic table newest first.
fn field(table: &DynamicTable, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
    match index {
        0 => Err(INDEX_ZERO),
        1..=61 => Ok(STATIC[index - 1]),
        _ => table
            .get(index - STATIC.len() - 1)
            .ok_or(INDEX_OUT_OF_RANGE),
    }
}

/// Reads an integer with a `prefix`-bit prefix (§5.1). At most 5 continuation bytes are read
/// and the value must fit in 32 bits, so a run of 0x80 bytes cannot keep the decoder busy.
fn integer(input: &mut &[u8], prefix: u32) -> Result<usize, DecodeError> {
    let (&first, mut rest) = input.split_first().ok_or(TRUNCATED)?;
    let max_prefix = (1u32 << prefix) - 1;
    let mut value = u64::from(u32::from(first) & max_prefix);
    if value == u64::from(max_prefix) {
        let mut shift = 0;
        loop {
            let (&byte, more) = rest.split_first().ok_or(TRUNCATED)?;
            rest = more;
            if shift > 28 {
                return Err(INTEGER_OVERFLOW);
            }
            value += u64::from(byte & 0x7f) << shift;
            if value > u64::from(u32::MAX) {
                return Err(INTEGER_OVERFLOW);
            }
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
    }
    *input = rest;
    Ok(value as usize)
}

/// Reads a string literal (§5.2), Huffman-decoding it into `scratch` if it is coded.
fn string<'a>(input: &mut &'a [u8], scratch: &mut Vec<u8>) -> Result<Text<'a>, DecodeError> {
    let huffman = input.first().ok_or(TRUNCATED)? & 0x80 != 0;
    let len = integer(input, 7)?;
    if len > input.len() {
        return Err(STRING_TOO_LONG);
    }
    let (raw, rest) = input.split_at(len);
    *input = rest;
    if !huffman {
        return Ok(Text::Raw(raw));
    }
    let start = scratch.len();
    huffman::decode(raw, scratch)?;
    Ok(Text::Decoded(start..scratch.len()))
}

/// Encodes response header fields.
#[derive(Debug, Default)]
pub struct Encoder {
    _private: (),
}

impl Encoder {
    /// An encoder (no dynamic table is used).
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// Appends `:status` (an indexed field for 200, 204, 206, 304, 400, 404, 500; else a
    /// literal with the static name).
    pub fn status(&mut self, status: u16, out: &mut Vec<u8>) {
        let index = match status {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => {
                // Literal without indexing, name `:status` (index 8), raw decimal value.
                let mut digits = [0u8; 5];
                let mut at = digits.len();
                let mut n = status;
                loop {
                    at -= 1;
                    digits[at] = b'0' + (n % 10) as u8;
                    n /= 10;
                    if n == 0 {
                        break;
                    }
                }
                out.push(0x08);
                out.push((digits.len() - at) as u8);
                out.extend_from_slice(&digits[at..]);
                return;
            }
        };
        out.push(0x80 | index);
    }

    /// Appends one field (`name` lower-case) as a literal without indexing, with the static
    /// table's index for the name where it has one.
    pub fn field(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        literal(0x00, name, value, out);
    }

    /// Appends one field (`name` lower-case) as a literal never indexed (§6.2.3): an
    /// intermediary that re-encodes it must not put it in a dynamic table either, which keeps
    /// a sensitive value (a `set-cookie`, an `authorization`) out of reach of compression-
    /// based guessing (§7.1.3).
    pub fn field_never_indexed(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        literal(0x10, name, value, out);
    }
}

/// A literal without dynamic indexing; `pattern` is its first byte's high half.
fn literal(pattern: u8, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    match table::static_name_index(name) {
        Some(index) => write_integer(pattern, 4, index, out),
        None => {
            out.push(pattern);
            write_string(name, out);
        }
    }
    write_string(value, out);
}

/// Writes `value` with a `prefix`-bit prefix, `high` holding the first byte's other bits.
fn write_integer(high: u8, prefix: u32, value: usize, out: &mut Vec<u8>) {
    let max_prefix = (1usize << prefix) - 1;
    if value < max_prefix {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Writes a string literal, Huffman-coded when that is shorter.
fn write_string(s: &[u8], out: &mut Vec<u8>) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        write_integer(0x80, 7, coded, out);
        huffman::encode(s, out);
    } else {
        write_integer(0x00, 7, s.len(), out);
        out.extend_from_slice(s);
    }
}
