//! weft-http: the sans-I/O HTTP/1.1 codec every weft concurrency model shares.
//!
//! Nothing here touches a socket, a thread or a clock other than the cached `Date` value:
//! every function takes bytes and returns bytes, a partial/complete verdict, or a typed
//! [`Error`] that names the status code a server should answer. Parsing never panics on input
//! (fuzzed in `fuzz/`, property-tested in `tests/`).
//!
//! * [`Parser`] reads a request head (request line + header fields) incrementally and applies
//!   RFC 9112's framing rules strictly: the message-body length is decided here
//!   ([`BodyFraming`]), so every ambiguity that enables request smuggling is refused before any
//!   handler sees the request.
//! * [`ChunkedDecoder`] / [`chunked`] decode and encode the chunked transfer coding.
//! * [`path`] turns a request path into a root-relative path that cannot leave the root;
//!   [`range`] reads a `Range` header against a representation's size; [`conditional`]
//!   evaluates a request's preconditions (`If-Match` … `If-Range`) in RFC 9110's order.
//! * [`encoding`] reads `Accept-Encoding` and chooses a response's content coding.
//! * [`ResponseParser`] reads a response head (the reverse proxy's upstream client) and
//!   decides its body framing for the request it answers, as strictly as [`Parser`] does.
//! * [`fastcgi`] is the web server's side of FastCGI 1.0 (php-fpm): a request's records out,
//!   the response's records in, its STDOUT a CGI response for [`cgi`].
//! * [`response`] encodes a response head; [`date`] keeps the `Date` value, formatted once a
//!   second.
//!
//! ```
//! use weft_http::{Parser, Limits, BodyFraming};
//! let mut p = Parser::new(Limits::default());
//! let buf = b"GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n";
//! let len = p.parse(buf).unwrap().expect("complete");
//! assert_eq!(len, buf.len());
//! let head = p.head();
//! assert_eq!(head.target(buf), "/index.html");
//! assert_eq!(head.framing(), BodyFraming::None);
//! assert!(head.keep_alive());
//! ```

pub mod auth;
pub mod cgi;
pub mod chunked;
pub mod conditional;
pub mod date;
mod der;
pub mod encoding;
mod error;
pub mod fastcgi;
pub mod h2;
mod host;
mod limits;
pub mod ocsp;
pub mod path;
pub mod proxy_protocol;
pub mod range;
mod request;
pub mod response;
mod response_head;
pub mod timestamp;
pub mod x509;

pub use chunked::ChunkedDecoder;
pub use error::Error;
pub use host::{site_name, valid_authority, valid_host, MAX_SITE_NAME};
pub use limits::Limits;
pub use request::{
    same_bytes, BodyFraming, Expect, Header, Method, Parser, RequestHead, Span, TargetForm, Version,
};
pub use response_head::{ResponseError, ResponseFraming, ResponseHead, ResponseParser};
