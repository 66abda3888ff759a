//! `[[fastcgi]]`: FastCGI applications (php-fpm and the like).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::de::{de_duration, de_size, ser_duration};

/// One FastCGI mount (see `handlers/fastcgi/`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FastcgiConfig {
    /// Requests whose path starts with this (and still does once normalised) may go to the
    /// application; with `php`, only those that name a script or no file at all.
    pub prefix: String,
    /// Where the application listens: `unix:/run/php/php-fpm.sock`, or `HOST:PORT` (resolved
    /// once at start).
    pub server: String,
    /// The scripts' root (`SCRIPT_FILENAME` is this joined with the script's URL path, as
    /// nginx's `$document_root$fastcgi_script_name`); not set: the document root (the site's
    /// `root` within a site).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// PHP's defaults, as Caddy's `php_fastcgi`: only files ending in one of `split_path` go
    /// to the application, `PATH_INFO` is what follows that ending, `index` is the directory
    /// index, a path that names no file goes to the front controller (`try_files $path $path/
    /// PREFIX/index.php?$query`), and no file with such an ending is ever served as source.
    /// `false`: every request under the prefix goes to the application, `SCRIPT_NAME` being
    /// the prefix (a FastCGI application that is not a set of scripts).
    pub php: bool,
    /// The endings that make a file a script (with `php`).
    pub split_path: Vec<String>,
    /// The directory index, and the front controller under the prefix (with `php`).
    pub index: String,
    /// A path that names no file goes to `PREFIX` + `index` (with `php`); `false`: 404.
    pub front_controller: bool,
    /// Variables sent besides the CGI/1.1 ones, replacing one of the same name (nginx
    /// `fastcgi_param`), e.g. `{ PHP_VALUE = "upload_max_filesize=64M" }`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// Longest wait for the connection to the application (nginx `fastcgi_connect_timeout`);
    /// past it, 504.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub connect_timeout: Duration,
    /// Longest wait between two reads from the application, and for each write to it (nginx
    /// `fastcgi_read_timeout`, 60 s); past it, 504, or a cut response once it has begun.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub read_timeout: Duration,
    /// A kept connection idle longer than this is closed rather than reused.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub idle_timeout: Duration,
    /// Connections kept open to the application, and reused, at most (nginx `keepalive` with
    /// `fastcgi_keep_conn on`, and `max_conns`): a request that finds them all busy waits for
    /// one. A php-fpm worker serves one connection for as long as it stays open, so this must
    /// not exceed the pool's `pm.max_children`, or a request sent on a connection no worker
    /// has taken would wait behind kept ones. 0 (the default, as nginx's): a connection per
    /// request, closed after it, and no limit but php-fpm's own.
    pub max_conns: usize,
    /// Read the whole request body (at most `limits.max_body`) before the application is
    /// contacted (nginx `fastcgi_request_buffering on`, its default): a slow client never
    /// holds a PHP worker. `false`: a body with a `Content-Length` streams to the application
    /// as it arrives (a chunked body is read whole anyway: `CONTENT_LENGTH` is required).
    pub request_buffering: bool,
    /// Largest header section the application may send (nginx `fastcgi_buffer_size`); past
    /// it, 502.
    #[serde(deserialize_with = "de_size")]
    pub max_header_bytes: usize,
    /// Response bytes read along with the header section before the answer starts: a
    /// response that ends within it is sent with a `Content-Length` (nginx buffers a FastCGI
    /// response in `fastcgi_buffers`, 8 8k).
    #[serde(deserialize_with = "de_size")]
    pub output_buffer: usize,
}

impl Default for FastcgiConfig {
    fn default() -> Self {
        FastcgiConfig {
            prefix: "/".into(),
            server: String::new(),
            root: None,
            php: true,
            split_path: vec![".php".into()],
            index: "index.php".into(),
            front_controller: true,
            params: BTreeMap::new(),
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            max_conns: 0,
            request_buffering: true,
            max_header_bytes: 32 * 1024,
            output_buffer: 64 * 1024,
        }
    }
}

impl FastcgiConfig {
    /// The file endings `mounts` run as scripts (those of the PHP mounts): what the static
    /// files beside them must never serve.
    pub fn script_endings<'a>(mounts: impl IntoIterator<Item = &'a FastcgiConfig>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in mounts.into_iter().filter(|m| m.php) {
            for e in &m.split_path {
                if !out.iter().any(|o| o.eq_ignore_ascii_case(e)) {
                    out.push(e.clone());
                }
            }
        }
        out
    }
}

impl FromStr for FastcgiConfig {
    type Err = String;
    /// `/PREFIX=unix:/PATH` or `/PREFIX=HOST:PORT`, as `--fastcgi` takes it; PHP's defaults.
    fn from_str(s: &str) -> Result<FastcgiConfig, String> {
        let (prefix, server) = s.split_once('=').ok_or(format!(
            "`{s}`: expected /PREFIX=unix:/PATH or /PREFIX=HOST:PORT"
        ))?;
        if !prefix.starts_with('/') {
            return Err(format!("fastcgi prefix `{prefix}` must start with `/`"));
        }
        Ok(FastcgiConfig {
            prefix: prefix.to_string(),
            server: server.to_string(),
            ..FastcgiConfig::default()
        })
    }
}
