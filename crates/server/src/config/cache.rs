//! `[cache]`: the response cache of static files.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, de_size, ser_duration};

/// The response cache of static files (see `cache.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Keep whole responses of small files in memory.
    pub enabled: bool,
    /// Bytes all entries may take together (bodies, heads and keys).
    #[serde(deserialize_with = "de_size")]
    pub max_bytes: u64,
    /// Files larger than this are never cached (they go out with `sendfile`).
    #[serde(deserialize_with = "de_size")]
    pub max_object_bytes: u64,
    /// An entry older than this is checked against the file (inode, size, mtime, ctime)
    /// before it is served again: a changed file is served stale at most this long.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub revalidate: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: true,
            max_bytes: 64 * 1024 * 1024,
            max_object_bytes: 4 * 1024 * 1024,
            revalidate: Duration::from_secs(1),
        }
    }
}
