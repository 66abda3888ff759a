//! `[cgi]`: CGI/1.1 scripts.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, de_size, ser_duration};

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
    /// Largest header section a script may write (nginx `fastcgi_buffer_size` is 4k or 8k;
    /// Apache allows 8190 bytes a line): past it, 502.
    #[serde(deserialize_with = "de_size")]
    pub max_header_bytes: usize,
    /// Output that has already arrived after the header section, up to this, is read at once:
    /// a script that has finished by then is answered with a `Content-Length` (so an HTTP/1.0
    /// client keeps its connection) instead of a streamed body (nginx buffers a FastCGI
    /// response in `fastcgi_buffers`, 8 8k).
    #[serde(deserialize_with = "de_size")]
    pub output_buffer: usize,
    /// A line of a script's stderr longer than this is logged in pieces (nginx cuts an error
    /// log line at 2048 bytes).
    #[serde(deserialize_with = "de_size")]
    pub max_stderr_line: usize,
    /// How long a finished script's last stderr lines may take to reach the log before its
    /// connection goes on (a process-model child exits soon after); longer only while
    /// something the script started still holds its stderr.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub stderr_settle: Duration,
}

impl Default for CgiConfig {
    fn default() -> Self {
        CgiConfig {
            dir: None,
            prefix: "/cgi-bin/".into(),
            timeout: Duration::from_secs(60),
            extensions: Vec::new(),
            max_header_bytes: 32 * 1024,
            output_buffer: 64 * 1024,
            max_stderr_line: 4096,
            stderr_settle: Duration::from_millis(200),
        }
    }
}
