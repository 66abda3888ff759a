//! `[limits]`: connections and request sizes.

use serde::{Deserialize, Serialize};

use super::de::de_size;

/// Limits on connections and request sizes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Open connections per listener; past it the listener stops accepting until one closes.
    pub max_connections: usize,
    /// Longest request line (414).
    #[serde(deserialize_with = "de_size")]
    pub max_request_line: usize,
    /// Largest request head (431).
    #[serde(deserialize_with = "de_size")]
    pub max_head_bytes: usize,
    /// Most header fields (431).
    pub max_headers: usize,
    /// Largest request body (413).
    #[serde(deserialize_with = "de_size")]
    pub max_body: u64,
    /// Longest chunk-size line with extensions (400).
    #[serde(deserialize_with = "de_size")]
    pub max_chunk_line: usize,
    /// Largest chunked trailer section (400).
    #[serde(deserialize_with = "de_size")]
    pub max_trailer_bytes: usize,
    /// Request bodies up to this size are read whole before the process model's master gives
    /// the request a child, or the pipeline's receive stage a process thread (nginx
    /// `client_body_buffer_size`, 16k): a slow body holds neither (issue 24).
    #[serde(deserialize_with = "de_size")]
    pub client_body_buffer: usize,
    /// Open connections per client address (nginx `limit_conn`); past it 503 and close.
    /// 0 (default): no limit. See `limits_ip`.
    pub conn_per_ip: usize,
    /// Slots of the per-client table behind `conn_per_ip` and `[rate_limit]` (nginx's zone
    /// size); a fixed amount of memory, 16 bytes a slot, however many addresses appear.
    pub client_zone: usize,
    /// Internal redirects followed for one request, in a row: a CGI script's local
    /// `Location` and a location's `try_files` URI (Apache `LimitInternalRecursion`, 10;
    /// nginx stops at 10 too); past it, 500.
    pub max_internal_redirects: usize,
    /// A request body the handler left unread is read and dropped up to this many bytes so
    /// the connection can carry the next request; a longer one closes the connection instead
    /// (Tomcat `maxSwallowSize`; nginx discards whole bodies).
    #[serde(deserialize_with = "de_size")]
    pub max_discard_body: u64,
    /// Requests one connection carries before it closes: the last response says
    /// `Connection: close`, an HTTP/2 connection sends GOAWAY (nginx `keepalive_requests`,
    /// 1000), so clients behind a balancer spread over new instances. 0: no bound.
    pub keepalive_requests: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let h = weft_http::Limits::default();
        LimitsConfig {
            max_connections: 10_000,
            max_request_line: h.max_request_line,
            max_head_bytes: h.max_head_bytes,
            max_headers: h.max_headers,
            max_body: 1024 * 1024,
            max_chunk_line: h.max_chunk_line,
            max_trailer_bytes: h.max_trailer_bytes,
            client_body_buffer: 16 * 1024,
            conn_per_ip: 0,
            client_zone: super::rate_limit::DEFAULT_ZONE,
            max_internal_redirects: 10,
            max_discard_body: 64 * 1024,
            keepalive_requests: 1000,
        }
    }
}

impl LimitsConfig {
    /// The parser's share of the limits.
    pub fn http(&self) -> weft_http::Limits {
        weft_http::Limits {
            max_request_line: self.max_request_line,
            max_head_bytes: self.max_head_bytes,
            max_headers: self.max_headers,
            max_chunk_line: self.max_chunk_line,
            max_trailer_bytes: self.max_trailer_bytes,
        }
    }
}
