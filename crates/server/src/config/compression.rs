//! `[compression]`: which responses are compressed and how (`crate::compress` does it).

use serde::{Deserialize, Serialize};

/// `[compression]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompressionConfig {
    /// Compress responses at all (off by default, as nginx's `gzip` and Caddy without
    /// `encode`).
    pub enabled: bool,
    /// Codings weft produces, in its order of preference for a tie of q-values.
    pub encodings: Vec<String>,
    /// MIME types compressed on the fly (static files, CGI and proxied responses); `text/*`
    /// matches every text type. Precompressed siblings are served whatever the type.
    pub types: Vec<String>,
    /// Bodies shorter than this are not compressed on the fly (nginx `gzip_min_length`):
    /// a coding's framing would outweigh what it saves.
    #[serde(deserialize_with = "crate::config::de_size")]
    pub min_length: u64,
    /// Serve `file.br`, `file.zst`, `file.gz` beside `file` to clients that accept the coding
    /// (nginx `gzip_static on`).
    pub precompressed: bool,
    /// Compress CGI and proxied responses that have no `Content-Encoding` (nginx
    /// `gzip_proxied any`).
    pub dynamic: bool,
    /// gzip level, 1 (fastest) to 9 (nginx `gzip_comp_level`).
    pub gzip_level: u32,
    /// Brotli quality, 0 to 11 (ngx_brotli `brotli_comp_level`).
    pub brotli_level: u32,
    /// zstd level, 1 to 19.
    pub zstd_level: i32,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            enabled: false,
            encodings: vec!["br".into(), "zstd".into(), "gzip".into()],
            types: DEFAULT_TYPES.iter().map(|t| t.to_string()).collect(),
            min_length: 256,
            precompressed: false,
            dynamic: true,
            // zlib's own default: nginx's 1 is for compressing per request; a cached variant
            // is compressed once.
            gzip_level: 6,
            // ngx_brotli's default.
            brotli_level: 6,
            // zstd's own default.
            zstd_level: 3,
        }
    }
}

/// The types compressed by default: text and the textual application types (Caddy's list,
/// nginx's `gzip_types` as sites usually set it).
pub const DEFAULT_TYPES: &[&str] = &[
    "text/*",
    "application/javascript",
    "application/x-javascript",
    "application/json",
    "application/ld+json",
    "application/manifest+json",
    "application/xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/xhtml+xml",
    "application/wasm",
    "image/svg+xml",
    "image/x-icon",
    "font/ttf",
    "font/otf",
];
