//! Size limits applied while parsing, each with an nginx-like default.

/// Bounds on what a peer may make the parser hold. Exceeding one is a typed [`crate::Error`]
/// with its own status (414 for the request line, 431 for the header section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line, CRLF included (nginx: `large_client_header_buffers` 8k).
    pub max_request_line: usize,
    /// Longest request head: request line, all header lines and the empty line.
    pub max_head_bytes: usize,
    /// Most header fields in one request.
    pub max_headers: usize,
    /// Longest chunk-size line (size, extensions and CRLF) in a chunked body.
    pub max_chunk_line: usize,
    /// Most bytes of trailer section after the last chunk.
    pub max_trailer_bytes: usize,
}

/// Default [`Limits::max_request_line`].
pub const DEFAULT_MAX_REQUEST_LINE: usize = 8 * 1024;
/// Default [`Limits::max_head_bytes`].
pub const DEFAULT_MAX_HEAD_BYTES: usize = 32 * 1024;
/// Default [`Limits::max_headers`].
pub const DEFAULT_MAX_HEADERS: usize = 100;
/// Default [`Limits::max_chunk_line`].
pub const DEFAULT_MAX_CHUNK_LINE: usize = 1024;
/// Default [`Limits::max_trailer_bytes`].
pub const DEFAULT_MAX_TRAILER_BYTES: usize = 8 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: DEFAULT_MAX_REQUEST_LINE,
            max_head_bytes: DEFAULT_MAX_HEAD_BYTES,
            max_headers: DEFAULT_MAX_HEADERS,
            max_chunk_line: DEFAULT_MAX_CHUNK_LINE,
            max_trailer_bytes: DEFAULT_MAX_TRAILER_BYTES,
        }
    }
}
