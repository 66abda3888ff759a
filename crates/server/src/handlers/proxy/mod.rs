//! The reverse proxy: requests under a configured prefix (or, for a fallback upstream,
//! everything that is not a file, as the pipeline paper hands dynamic requests to a server
//! behind it) are forwarded to an upstream HTTP/1.1 server over a pool of keep-alive
//! connections, with our own upstream client (the response head is parsed by
//! [`weft_http::ResponseParser`], chunked bodies decoded by [`weft_http::ChunkedDecoder`]).
//!
//! What it promises:
//! - **Routing**: a prefix matches when both the request path and its normalised form start
//!   with it, so `/api/../secret` is not forwarded by an `/api/` mount (the upstream would
//!   resolve it outside the prefix). Mounts are tried in configuration order, before CGI
//!   and static files. The fallback entry (`fallback = true`, `--proxy '*=URL'`) takes GET
//!   and HEAD requests the static files answer 404, and every other method no route took.
//!   CONNECT is never forwarded (405).
//! - **Headers**: hop-by-hop fields are removed both ways: `Connection` and every field it
//!   names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`,
//!   `Proxy-Authorization`, `Proxy-Authenticate`. `Expect` is answered here (the client gets
//!   `100 Continue` when the body is first read), not forwarded. `X-Forwarded-For` gets the
//!   client's address appended to what the client sent; `X-Forwarded-Proto` (`http`,
//!   `https` over TLS) and `X-Forwarded-Host` (the request's host) replace the client's; `Via`
//!   gets `1.x weft` appended both ways. `Host` is the request's host by default
//!   (`host = "upstream"`: the upstream's authority). The request's host is
//!   [`Request::host`](crate::Request::host): an absolute-form target's authority replaces
//!   the client's `Host` (RFC 9112 §3.2.2).
//! - **No ambiguous request upstream**: the client's request was already refused if its
//!   framing was ambiguous (weft-http); every framing field it sent is dropped and exactly one
//!   is written from the parsed framing: `Content-Length` for a sized body (also `0` when the
//!   client sent `Content-Length: 0`), `Transfer-Encoding: chunked` for a chunked one.
//! - **Request buffering** (`request_buffering`, on by default as nginx's
//!   `proxy_request_buffering`): the whole request body is read (bounded by `limits.max_body`,
//!   chunked framing checked, under the body timeouts and minimum rate) before an upstream
//!   connection is taken, so a request that turns out malformed never reaches the upstream;
//!   it goes up with a `Content-Length`.
//! - **Streaming**: without request buffering, the request body is copied to the upstream a
//!   piece at a time as it arrives (a chunked body is re-chunked); the response body streams
//!   back through [`Body::Stream`](crate::Body::Stream): its `Content-Length` passed on, a
//!   chunked body decoded and re-chunked by the driver, a close-delimited body read until the
//!   upstream closes. Memory per request stays at a few buffers whatever the body size.
//! - **Pool**: per upstream, at most `max_idle` idle connections, most recently used first,
//!   each closed after `idle_timeout` idle or when a non-blocking read shows it closed (or
//!   holding unexpected bytes) at checkout. A connection returns to the pool only after a
//!   whole request went out and a whole response came back that both sides allow to be kept
//!   alive; any error, timeout or cut body closes it.
//! - **Retry**: a request is sent once more, on a fresh connection, only if a pooled
//!   connection turned out dead before any byte of the response (write error, or end of
//!   stream or reset at the first read), the method is idempotent (RFC 9110 §9.2.2) and the
//!   request has no body or a buffered one (a body already streamed cannot be replayed).
//! - **Failures**: connection refused or unreachable, a malformed or unsupported upstream
//!   response (see `weft_http::ResponseParser`), or a dead connection that cannot be retried:
//!   502. Connect timeout or read timeout before the response head: 504. Once the response
//!   has begun, a failure ends the client connection mid-body (no last chunk, or fewer bytes
//!   than the `Content-Length`), so the client can tell. Each is logged once.
//! - **No blocked worker**: upstream sockets are [`weft_fiber::net::TcpStream`]s, which park
//!   the fiber on the fiber model and block the connection's own thread on the thread and
//!   process models. Upstream names are resolved once, when the server starts.
//!
//! The request body is written before the response is read (as a simple client does): an
//! upstream that answers early without reading a large body holds the request until the
//! write times out (`read_timeout`), unless it closes the connection, in which case what it
//! sent is relayed if it can be read.
//!
//! Layout: `route.rs` chooses the upstream (prefixes, fallback); `client.rs` forwards the
//! request and relays the response (buffering, retry, failures, the streamed body);
//! `headers.rs` rewrites the fields both ways; `pool.rs` keeps the idle connections.

mod client;
mod group;
mod headers;
mod pool;
mod route;
mod tls;

pub(crate) use group::Groups;
pub(crate) use route::Proxy;
