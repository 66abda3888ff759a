//! The handlers every model shares: static files, CGI scripts, FastCGI applications, the
//! reverse proxy, the echo function, the status page, the health check.

pub(crate) mod cgi;
pub(crate) mod echo;
pub(crate) mod fastcgi;
pub(crate) mod health;
/// Request-path normalisation (in weft-http, where it is fuzzed with the codec).
pub(crate) use weft_http::path;
pub(crate) mod pool;
pub(crate) mod proxy;
/// `Range` header parsing (in weft-http, where it is fuzzed with the codec).
pub(crate) use weft_http::range;
pub(crate) mod sock;
pub(crate) mod static_files;
pub(crate) mod status;

use weft_http::conditional::{self, Current, Outcome};

use crate::response::Response;
use crate::Request;

/// RFC 9110 §13.2.2 for a 2xx answer weft computes itself without validators (the echo
/// function, the status pages, a directory listing): the resource exists, so `*` is the only
/// entity tag that matches, and the date conditions are ignored for want of a modification
/// date (§13.1.3, §13.1.4). `Some` is the 304 or 412 to send instead.
pub fn unvalidated_preconditions(req: &Request) -> Option<Response> {
    if !req.has_preconditions() {
        return None;
    }
    let conds = req.conditions();
    match conditional::evaluate(req.method(), &conds, Some(&Current::default())) {
        Outcome::NotModified => Some(Response::new(304)),
        Outcome::PreconditionFailed => Some(Response::error(412)),
        Outcome::Proceed | Outcome::IgnoreRange => None,
    }
}

/// The decoded path after a script, `segments[script + 1..]`, as `PATH_INFO` (RFC 3875
/// §4.1.5): `""` or `/`-separated with a leading `/`, and a trailing `/` where the request path
/// had one and there is anything after the script.
pub(crate) fn path_info(segments: &[&[u8]], script: usize, trailing_slash: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for s in &segments[script + 1..] {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    if trailing_slash && script + 1 < segments.len() {
        out.push(b'/');
    }
    out
}

/// True for a backend read or write that ran out of time.
pub(crate) fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

/// RFC 9110 §9.2.2: a request that may be sent twice (to a backend that died before
/// answering) with the same effect as once.
pub(crate) fn is_idempotent(m: weft_http::Method) -> bool {
    use weft_http::Method;
    matches!(
        m,
        Method::Get | Method::Head | Method::Put | Method::Delete | Method::Options | Method::Trace
    )
}

/// True for the error of a first read from a backend connection that was already dead (closed
/// or reset by the backend while it sat in the pool).
pub(crate) fn is_dead_connection(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
    )
}

/// `dir` canonicalised and opened: the base of `openat2(RESOLVE_BENEATH)` for a handler's
/// files; an error names it as `what` (`CGI directory`, `fastcgi root`).
pub(crate) fn open_dir(
    dir: &std::path::Path,
    what: &str,
) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    let named =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("{what} {}: {e}", dir.display()));
    let canonical = dir.canonicalize().map_err(named)?;
    let file = std::fs::File::open(&canonical).map_err(named)?;
    if !file.metadata().map_err(named)?.is_dir() {
        return Err(named(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a directory",
        )));
    }
    Ok((canonical, file))
}

/// True if `path` (still percent-encoded) starts with `prefix`, and its normalised form does
/// too, so that `/api/../secret` is not under `/api/` (a backend would resolve it outside).
pub(crate) fn under_prefix(path: &str, prefix: &str) -> bool {
    if !path.starts_with(prefix) {
        return false;
    }
    let Ok(n) = path::normalize(path) else {
        return false;
    };
    let mut p = Vec::with_capacity(n.rel.len() + 2);
    p.push(b'/');
    p.extend_from_slice(&n.rel);
    if n.trailing_slash && !n.rel.is_empty() {
        p.push(b'/');
    }
    p.starts_with(prefix.as_bytes())
}
