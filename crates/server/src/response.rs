//! The response a handler returns: status, headers and a body that is bytes in memory, a range
//! of a file (sent with `sendfile`) or a stream read while it is sent (a CGI script's output).
//! `Content-Length`, `Transfer-Encoding`, `Date`, `Server` and `Connection` are written by the
//! connection driver, never by handlers.

use std::borrow::Cow;
use std::fs::File;
use std::sync::Arc;

use bytes::Bytes;

/// A response body.
#[derive(Debug, Default)]
pub enum Body {
    /// No body (Content-Length: 0 unless the status forbids a body).
    #[default]
    Empty,
    /// Bytes in memory, sent with one vectored write together with the head.
    Bytes(Bytes),
    /// `len` bytes of `file` from `offset`, sent with `sendfile(2)`.
    File {
        /// The open file.
        file: Arc<File>,
        /// First byte sent.
        offset: u64,
        /// Bytes sent from `offset`.
        len: u64,
    },
    /// A whole `200` response from the response cache: its head, encoded but for `Date` and
    /// `Connection`, and its body, shared with every connection sending it. The driver sends
    /// the entry's head, not the response's status and headers. Only the cache builds it.
    #[doc(hidden)]
    Prepared(Arc<crate::cache::Entry>),
    /// Bytes read from a reader while the response is sent: with `Content-Length` if the
    /// length is known, else chunked to an HTTP/1.1 client and delimited by closing the
    /// connection to an HTTP/1.0 one. A read error ends the connection mid-body, so the client
    /// can tell the response is incomplete.
    Stream(BodyStream),
    /// A `101 Switching Protocols` whose connection is relayed to the upstream that sent it
    /// from here on (a WebSocket): the head goes out, then the bytes both ways until the
    /// tunnel ends, and the connection closes. Only the reverse proxy builds it.
    #[doc(hidden)]
    Tunnel(Box<crate::tunnel::Tunnel>),
}

/// The reader of a [`Body::Stream`] and its length, if known.
pub struct BodyStream {
    reader: Box<dyn std::io::Read + Send>,
    len: Option<u64>,
}

impl BodyStream {
    /// A body of unknown length read from `reader` until it ends.
    pub fn new(reader: impl std::io::Read + Send + 'static) -> BodyStream {
        BodyStream {
            reader: Box::new(reader),
            len: None,
        }
    }

    /// A body of exactly `len` bytes (a reader that ends sooner ends the connection).
    pub fn with_len(reader: impl std::io::Read + Send + 'static, len: u64) -> BodyStream {
        BodyStream {
            reader: Box::new(reader),
            len: Some(len),
        }
    }

    /// The length, if known in advance.
    pub fn known_len(&self) -> Option<u64> {
        self.len
    }

    /// The reader.
    pub fn reader(&mut self) -> &mut (dyn std::io::Read + Send) {
        &mut *self.reader
    }

    /// The reader, to wrap in another (a compressor).
    pub fn into_reader(self) -> Box<dyn std::io::Read + Send> {
        self.reader
    }
}

impl std::fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyStream")
            .field("len", &self.len)
            .finish()
    }
}

impl Body {
    /// The number of body bytes (for a stream of unknown length: 0, as nothing is known
    /// before it is sent).
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File { len, .. } => *len,
            Body::Prepared(e) => e.body().len() as u64,
            Body::Stream(s) => s.len.unwrap_or(0),
            Body::Tunnel(_) => 0,
        }
    }

    /// True if there are no body bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Header name and value as a handler sets them.
pub type HeaderPair = (Cow<'static, str>, Cow<'static, [u8]>);

/// Header lists kept per thread for the next responses.
const HEADER_LISTS: usize = 8;
/// A list that grew past this many headers is freed instead of kept.
const HEADER_LIST_MAX: usize = 32;

thread_local! {
    /// Emptied header lists of responses already encoded: a handler that adds headers to
    /// every response (most do) reuses one instead of allocating and freeing it per request.
    static HEADER_POOL: std::cell::RefCell<Vec<Vec<HeaderPair>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

// `try_with`: a response made or dropped while the thread's locals are being destroyed goes
// without the pool.
fn pooled_headers() -> Vec<HeaderPair> {
    HEADER_POOL
        .try_with(|p| p.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Gives the header list of an encoded response back to this thread's pool.
pub(crate) fn recycle_headers(mut headers: Vec<HeaderPair>) {
    if headers.capacity() == 0 || headers.capacity() > HEADER_LIST_MAX {
        return;
    }
    headers.clear();
    let _ = HEADER_POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < HEADER_LISTS {
            p.push(headers);
        }
    });
}

/// A response: status, headers, body.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header fields the handler set, in order.
    pub headers: Vec<HeaderPair>,
    /// The body.
    pub body: Body,
    /// Close the connection after this response even if the client would keep it.
    pub close: bool,
}

impl Response {
    /// A response with `status`, no headers and no body.
    pub fn new(status: u16) -> Response {
        Response {
            status,
            headers: pooled_headers(),
            body: Body::Empty,
            close: false,
        }
    }

    /// Adds a header. Names and values are checked when the head is encoded: a value with CR,
    /// LF or NUL turns the response into a 500, so a handler cannot split a response.
    pub fn header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<HeaderValue>,
    ) -> Response {
        self.headers.push((name.into(), value.into().0));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Body>) -> Response {
        let old = std::mem::replace(&mut self.body, body.into());
        // The usual body replaced is the empty one `new` set, which owns nothing: it is not
        // dropped, so setting a body costs no call of the drop code of every body kind.
        if matches!(old, Body::Empty) {
            std::mem::forget(old);
        } else {
            drop(old);
        }
        self
    }

    /// A `text/plain` response.
    pub fn text(status: u16, text: impl Into<Bytes>) -> Response {
        Response::new(status)
            .header("Content-Type", "text/plain; charset=utf-8")
            .body(text.into())
    }

    /// The small HTML error page every error status gets (as nginx's).
    pub fn error(status: u16) -> Response {
        let reason = weft_http::response::reason(status);
        let page = format!(
            "<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n<center><h1>{status} {reason}</h1></center>\r\n<hr><center>weft</center>\r\n</body>\r\n</html>\r\n"
        );
        Response::new(status)
            .header("Content-Type", "text/html")
            .body(Bytes::from(page))
    }

    /// The value of header `name` if the handler set it.
    pub fn get_header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Body {
        Body::Bytes(b)
    }
}

impl From<Vec<u8>> for Body {
    fn from(b: Vec<u8>) -> Body {
        Body::Bytes(b.into())
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Body {
        Body::Bytes(Bytes::from_static(s.as_bytes()))
    }
}

impl From<String> for Body {
    fn from(s: String) -> Body {
        Body::Bytes(s.into())
    }
}

/// A header value; built from strings or bytes.
#[derive(Debug, Clone)]
pub struct HeaderValue(pub Cow<'static, [u8]>);

impl From<&'static str> for HeaderValue {
    fn from(s: &'static str) -> Self {
        HeaderValue(Cow::Borrowed(s.as_bytes()))
    }
}

impl From<String> for HeaderValue {
    fn from(s: String) -> Self {
        HeaderValue(Cow::Owned(s.into_bytes()))
    }
}

impl From<Vec<u8>> for HeaderValue {
    fn from(v: Vec<u8>) -> Self {
        HeaderValue(Cow::Owned(v))
    }
}

impl From<&'static [u8]> for HeaderValue {
    fn from(v: &'static [u8]) -> Self {
        HeaderValue(Cow::Borrowed(v))
    }
}

impl From<BodyStream> for Body {
    fn from(s: BodyStream) -> Body {
        Body::Stream(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_replaced_is_dropped_and_the_last_one_kept() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        struct Counted(Arc<AtomicUsize>);
        impl std::io::Read for Counted {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Ok(0)
            }
        }
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let stream = || BodyStream::new(Counted(drops.clone()));
        // Empty, then a stream, then bytes: the stream's reader is dropped when replaced.
        let resp = Response::new(200).body(stream()).body("x");
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "the replaced stream was not dropped"
        );
        assert!(matches!(&resp.body, Body::Bytes(b) if &b[..] == b"x"));
        // A stream set last is kept until the response goes.
        let resp = Response::new(200).body("y").body(stream());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(resp);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_encoded_response_gives_its_header_list_to_the_next() {
        // On a fresh thread, so no other test's lists are in its pool.
        std::thread::spawn(|| {
            let first = Response::new(200).header("Content-Type", "text/plain");
            let storage = first.headers.as_ptr();
            recycle_headers(first.headers);
            let next = Response::new(200);
            assert!(next.headers.is_empty());
            assert_eq!(next.headers.as_ptr(), storage, "the list was not reused");
            // An oversized list is freed, not pooled.
            let mut big = Response::new(200);
            for i in 0..=HEADER_LIST_MAX {
                big = big.header(format!("X-{i}"), "v");
            }
            recycle_headers(big.headers);
            assert!(HEADER_POOL.with(|p| p.borrow().is_empty()));
        })
        .join()
        .unwrap();
    }
}
