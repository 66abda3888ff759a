//! `[static_files]`: the static-file handler.

use serde::{Deserialize, Serialize};

/// The static-file handler.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StaticConfig {
    /// Serve files from the root at all.
    pub enabled: bool,
    /// File served for a directory.
    pub index: String,
    /// Serve names starting with `.` (refused with 403 by default).
    pub dotfiles: bool,
    /// Follow symlinks that point outside the root (refused with 403 by default).
    pub symlinks_outside_root: bool,
    /// List a directory without an index file (403 by default).
    pub autoindex: bool,
    /// The charset text types are declared with (nginx `charset`; see
    /// `static_files::with_charset` for the types): `"utf-8"` (the default) or `""` (none).
    /// weft does not read files to guess: a site in another encoding sets `""`.
    pub charset: String,
}

impl Default for StaticConfig {
    fn default() -> Self {
        StaticConfig {
            enabled: true,
            index: "index.html".into(),
            dotfiles: false,
            symlinks_outside_root: false,
            autoindex: false,
            charset: "utf-8".into(),
        }
    }
}
