//! `[cgi]`: CGI/1.1 scripts.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, ser_duration};

/// CGI/1.1 scripts (RFC 3875, see `handlers/cgi.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CgiConfig {
    /// The directory the scripts live in; `None` (the default) turns CGI off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// The URL path prefix the directory is mounted at (starts and ends with `/`).
    pub prefix: String,
    /// How long a script may run, from its start to the end of its output (nginx
    /// `fastcgi_read_timeout` is 60s); past it the script's process group is killed and the
    /// client gets 504 (or, once the response has begun, a closed connection).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub timeout: Duration,
    /// File name endings (e.g. `[".cgi"]`) that make an executable file anywhere under the
    /// document root a CGI script (Apache's `AddHandler cgi-script .cgi`); empty: off.
    pub extensions: Vec<String>,
}

impl Default for CgiConfig {
    fn default() -> Self {
        CgiConfig {
            dir: None,
            prefix: "/cgi-bin/".into(),
            timeout: Duration::from_secs(60),
            extensions: Vec::new(),
        }
    }
}
