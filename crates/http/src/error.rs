//! Typed parse errors, each mapped to the status a server answers with.

use std::fmt;

/// Why a request was refused. [`Error::status`] gives the response status; the `&'static str`
/// is a short reason for the error log (never sent to the client beyond the status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Malformed syntax or an ambiguous message: 400.
    BadRequest(&'static str),
    /// The request line is longer than [`crate::Limits::max_request_line`]: 414.
    UriTooLong,
    /// The head is larger than allowed or has too many fields: 431.
    HeadersTooLarge,
    /// A Transfer-Encoding this server does not implement: 501.
    NotImplemented(&'static str),
    /// An HTTP major version other than 1: 505.
    VersionNotSupported,
    /// A chunked body broke the chunked syntax or its limits: 400.
    BadChunk(&'static str),
}

impl Error {
    /// The status code to answer with.
    pub fn status(&self) -> u16 {
        match self {
            Error::BadRequest(_) | Error::BadChunk(_) => 400,
            Error::UriTooLong => 414,
            Error::HeadersTooLarge => 431,
            Error::NotImplemented(_) => 501,
            Error::VersionNotSupported => 505,
        }
    }

    /// A short description for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::BadRequest(r) | Error::BadChunk(r) | Error::NotImplemented(r) => r,
            Error::UriTooLong => "request line too long",
            Error::HeadersTooLarge => "request header section too large",
            Error::VersionNotSupported => "HTTP major version not supported",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.reason(), self.status())
    }
}

impl std::error::Error for Error {}
