//! FastCGI 1.0, the web server's side (the client of an application such as php-fpm), without
//! I/O: the records of one request out, the records of its response in.
//!
//! FastCGI runs a CGI/1.1 program as a long-lived process that the web server reaches over a
//! socket. For each request the server sends a BEGIN_REQUEST record, the CGI variables as
//! name-value pairs in a PARAMS stream and the request body as a STDIN stream; the application
//! answers with a STDOUT stream (exactly what a CGI script writes: RFC 3875 header lines, a
//! blank line, the body), an optional STDERR stream and an END_REQUEST record.
//!
//! # Sending a request
//!
//! [`begin_request`], [`params`] (a [`Params`] writer whose [`Params::finish`] ends the
//! stream), [`stdin`] for each piece of the body as it arrives and [`end_stdin`] append whole
//! records to a `Vec<u8>` the caller owns and reuses: nothing else is allocated. The role is
//! always RESPONDER and the flags always FCGI_KEEP_CONN, so the application leaves the
//! connection open for the next request. Records carry at most [`MAX_RECORD_CONTENT`]
//! (65,528) content bytes and are padded to a multiple of 8 bytes, as the specification
//! recommends; 65,528 rather than 65,535 because php-fpm refuses a PARAMS record whose
//! content and padding together pass 65,535 (`fcgi_read_request` in php-src's
//! `main/fastcgi.c`). A name-value pair is never split across PARAMS records when it fits in
//! one, since php-fpm reads each record's pairs on their own; a pair that is larger than a
//! record is split, as the specification allows, and php-fpm will refuse it (the server's
//! request-head limits keep real pairs far below that).
//!
//! # Reading the response
//!
//! A [`Decoder`] takes the bytes read from the connection in whatever pieces they come and
//! hands out [`Event`]s: [`Event::Stdout`] and [`Event::Stderr`] borrow the content straight
//! from the input (never copied, never more than one record's content at a time, and an empty
//! slice never), and [`Event::End`] carries the application's exit status. The decoder itself
//! holds no more than one record header and one END_REQUEST body (16 bytes, fixed); its size
//! does not grow with the input. Every fault is a [`DecodeError`] value and stays: the
//! connection must then be closed.
//!
//! The STDOUT stream is a CGI response: the concatenation of the [`Event::Stdout`] slices, in
//! order, is byte for byte what a CGI script would have written, record boundaries and padding
//! gone. The server appends them to a head buffer of its own until
//! [`crate::cgi::find_blank_line`] finds the end of the header section (bounded by its
//! header limit, as for CGI), reads the head with [`crate::cgi::parse_head`], and streams what
//! follows the blank line, and every later STDOUT slice, as the body.
//!
//! The connection may carry the next request once [`Decoder::is_done`] is true (END_REQUEST
//! with REQUEST_COMPLETE, its padding included, and nothing after it in the bytes decoded),
//! provided the server has no bytes left over from its last read and has written the whole
//! request, through [`end_stdin`]: an application that answers before reading all of STDIN
//! would otherwise read the rest as the start of the next request.
//!
//! # Not supported
//!
//! * Multiplexing: one request at a time per connection. The request id is a parameter
//!   (1 is the usual choice); a record for any other id is an error.
//! * The AUTHORIZER and FILTER roles, and so FCGI_DATA.
//! * Management queries: the server never sends FCGI_GET_VALUES. An FCGI_GET_VALUES_RESULT or
//!   FCGI_UNKNOWN_TYPE record (request id 0) is skipped without being buffered, since it is
//!   harmless and can only answer a query the peer thinks it saw; with any other request id it
//!   is an error.
//!
//! # Example
//!
//! ```
//! use std::num::NonZeroU16;
//! use weft_http::{cgi, fastcgi};
//! use weft_http::fastcgi::{Decoder, Event};
//!
//! let id = NonZeroU16::MIN; // request id 1
//! let mut out = Vec::new(); // reused for every request on the connection
//! fastcgi::begin_request(&mut out, id);
//! let mut params = fastcgi::params(&mut out, id);
//! params
//!     .pair(b"REQUEST_METHOD", b"POST")
//!     .pair(b"SCRIPT_FILENAME", b"/srv/www/index.php");
//! params.finish();
//! fastcgi::stdin(&mut out, id, b"a=1"); // as each piece of the body arrives
//! fastcgi::end_stdin(&mut out, id);
//! // ... write `out` to the socket, then read the answer:
//! let answer = [
//!     &[1, 6, 0, 1, 0, 30, 2, 0][..], // STDOUT, request 1, 30 bytes, 2 of padding
//!     b"Content-Type: text/plain\r\n\r\nhi",
//!     &[0, 0],
//!     &[1, 6, 0, 1, 0, 0, 0, 0], // the empty STDOUT record ends the stream
//!     &[1, 3, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // END_REQUEST, REQUEST_COMPLETE
//! ]
//! .concat();
//! let mut decoder = Decoder::new(id);
//! let mut stdout = Vec::new();
//! let mut rest = &answer[..]; // as many reads as it takes, in any pieces
//! loop {
//!     let step = decoder.decode(rest).unwrap();
//!     rest = &rest[step.consumed..];
//!     match step.event {
//!         Some(Event::Stdout(bytes)) => stdout.extend_from_slice(bytes),
//!         Some(Event::Stderr(line)) => eprintln!("{}", String::from_utf8_lossy(line)),
//!         Some(Event::End { app_status }) => assert_eq!(app_status, 0),
//!         None => break, // every byte taken: read more, or stop at the end
//!     }
//! }
//! assert!(decoder.is_done());
//! let (head_len, body_start) = cgi::find_blank_line(&stdout).unwrap();
//! let fields = cgi::parse_head(&stdout[..head_len]).unwrap();
//! assert_eq!((fields.status(), &stdout[body_start..]), (200, &b"hi"[..]));
//! ```

mod decode;
mod encode;
#[cfg(test)]
mod tests;

use std::fmt;

pub use decode::{Decoder, Event, Step};
pub use encode::{
    abort_request, begin_request, end_stdin, header, padding_for, params, stdin, Params,
};

/// The protocol version this module speaks and accepts (FCGI_VERSION_1).
pub const VERSION_1: u8 = 1;

/// The length of a record header.
pub const HEADER_LEN: usize = 8;

/// The most content bytes a record can carry (a 16-bit length).
pub const MAX_CONTENT_LEN: usize = 0xffff;

/// The most content bytes in a record this module writes: the largest multiple of 8 below
/// [`MAX_CONTENT_LEN`], so that content and padding together never pass 65,535 (php-fpm
/// refuses a PARAMS record that does).
pub const MAX_RECORD_CONTENT: usize = 65_528;

/// The largest name or value length a name-value pair can carry (31 bits).
pub const MAX_PAIR_PART: usize = 0x7fff_ffff;

/// FCGI_RESPONDER, the only role this module asks for.
pub(crate) const ROLE_RESPONDER: u16 = 1;

/// FCGI_KEEP_CONN: the application leaves the connection open after the request.
pub(crate) const FLAG_KEEP_CONN: u8 = 1;

/// The END_REQUEST body's protocol status values (specification §5.5).
pub(crate) mod protocol_status {
    pub const REQUEST_COMPLETE: u8 = 0;
    pub const CANT_MPX_CONN: u8 = 1;
    pub const OVERLOADED: u8 = 2;
    pub const UNKNOWN_ROLE: u8 = 3;
}

/// The record types of FastCGI 1.0 (specification §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordType {
    BeginRequest,
    AbortRequest,
    EndRequest,
    Params,
    Stdin,
    Stdout,
    Stderr,
    Data,
    GetValues,
    GetValuesResult,
    UnknownType,
}

impl RecordType {
    /// The type of wire value `t`, if FastCGI 1.0 defines one.
    pub fn from_u8(t: u8) -> Option<RecordType> {
        Some(match t {
            1 => RecordType::BeginRequest,
            2 => RecordType::AbortRequest,
            3 => RecordType::EndRequest,
            4 => RecordType::Params,
            5 => RecordType::Stdin,
            6 => RecordType::Stdout,
            7 => RecordType::Stderr,
            8 => RecordType::Data,
            9 => RecordType::GetValues,
            10 => RecordType::GetValuesResult,
            11 => RecordType::UnknownType,
            _ => return None,
        })
    }

    /// The wire value of this type.
    pub fn as_u8(self) -> u8 {
        match self {
            RecordType::BeginRequest => 1,
            RecordType::AbortRequest => 2,
            RecordType::EndRequest => 3,
            RecordType::Params => 4,
            RecordType::Stdin => 5,
            RecordType::Stdout => 6,
            RecordType::Stderr => 7,
            RecordType::Data => 8,
            RecordType::GetValues => 9,
            RecordType::GetValuesResult => 10,
            RecordType::UnknownType => 11,
        }
    }
}

/// Why a response could not be read. Once a [`Decoder`] returns one it returns the same one
/// from then on, and the connection must be closed; [`DecodeError::status`] is the status to
/// answer the client with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// A record header with a version other than 1.
    BadVersion(u8),
    /// A record type FastCGI 1.0 does not define (0, or above 11).
    UnknownType(u8),
    /// A record type only a web server sends (BEGIN_REQUEST, ABORT_REQUEST, PARAMS, STDIN,
    /// DATA, GET_VALUES).
    UnexpectedType(RecordType),
    /// A record for a request id other than this request's (or a management record whose id
    /// is not 0).
    WrongRequestId(u16),
    /// A STDOUT or STDERR record after the empty record that ended that stream.
    StreamClosed(RecordType),
    /// An END_REQUEST record whose content is not 8 bytes long.
    EndRequestLength(u16),
    /// END_REQUEST with FCGI_CANT_MPX_CONN: the application takes one request per
    /// connection and already has one on this one.
    CantMpxConn,
    /// END_REQUEST with FCGI_OVERLOADED: the application refused the request for lack of
    /// resources (its workers are all busy).
    Overloaded,
    /// END_REQUEST with FCGI_UNKNOWN_ROLE: the application does not play the RESPONDER role.
    UnknownRole,
    /// END_REQUEST with a protocol status FastCGI 1.0 does not define.
    UnknownProtocolStatus(u8),
    /// Bytes after the END_REQUEST record (its padding included).
    AfterEnd,
    /// The connection ended before the END_REQUEST record was complete ([`Decoder::finish`]).
    Truncated,
}

impl DecodeError {
    /// The status to answer the client with: 503 for [`DecodeError::Overloaded`], 502 (the
    /// gateway got a bad answer) for everything else.
    pub fn status(&self) -> u16 {
        match self {
            DecodeError::Overloaded => 503,
            _ => 502,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::BadVersion(v) => write!(f, "a FastCGI record of version {v}"),
            DecodeError::UnknownType(t) => write!(f, "a FastCGI record of unknown type {t}"),
            DecodeError::UnexpectedType(t) => write!(f, "a {t:?} record from the application"),
            DecodeError::WrongRequestId(id) => write!(f, "a record for request id {id}"),
            DecodeError::StreamClosed(t) => write!(f, "a {t:?} record after its stream ended"),
            DecodeError::EndRequestLength(n) => write!(f, "an END_REQUEST record of {n} bytes"),
            DecodeError::CantMpxConn => f.write_str("the application refused a second request"),
            DecodeError::Overloaded => f.write_str("the application is overloaded"),
            DecodeError::UnknownRole => f.write_str("the application refused the RESPONDER role"),
            DecodeError::UnknownProtocolStatus(s) => write!(f, "unknown protocol status {s}"),
            DecodeError::AfterEnd => f.write_str("bytes after END_REQUEST"),
            DecodeError::Truncated => f.write_str("the response ended before END_REQUEST"),
        }
    }
}

impl std::error::Error for DecodeError {}
