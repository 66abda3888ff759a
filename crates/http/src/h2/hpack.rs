//! HPACK (RFC 7541): the header compression of HTTP/2. The decoder keeps a dynamic table
//! bounded by the size the server advertised; the encoder writes response fields from the
//! static table and as literals without indexing (so an encoded block does not depend on the
//! connection and can be cached), Huffman-coded where that is shorter.

/// Why a header block could not be decoded: a connection error COMPRESSION_ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

/// The decoding context of one connection's received header blocks.
#[derive(Debug)]
pub struct Decoder {
    _private: (),
}

impl Decoder {
    /// A decoder whose dynamic table holds at most `max_table_size` bytes (the
    /// SETTINGS_HEADER_TABLE_SIZE the server advertised).
    pub fn new(max_table_size: usize) -> Decoder {
        let _ = max_table_size;
        todo!()
    }

    /// Decodes one complete header block, calling `emit(name, value)` for each field in order.
    /// Every field is decoded (and the dynamic table updated) even if the caller stops keeping
    /// them, so the context stays in step with the peer's.
    pub fn decode(
        &mut self,
        block: &[u8],
        emit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let _ = (block, emit);
        todo!()
    }
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
        let _ = (status, out);
        todo!()
    }

    /// Appends one field (`name` lower-case) as a literal without indexing, with the static
    /// table's index for the name where it has one.
    pub fn field(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let _ = (name, value, out);
        todo!()
    }
}
