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
