//! The handlers every model shares: static files, CGI scripts, the reverse proxy, the echo
//! function, the status page, the health check.

pub mod cgi;
pub mod echo;
pub mod health;
/// Request-path normalisation (in weft-http, where it is fuzzed with the codec).
pub use weft_http::path;
pub mod proxy;
/// `Range` header parsing (in weft-http, where it is fuzzed with the codec).
pub use weft_http::range;
pub mod static_files;
pub mod status;
