//! FastCGI: requests passed to a long-lived application process (php-fpm, or any FastCGI
//! responder) over a Unix or TCP socket, with weft-http's sans-I/O codec
//! ([`weft_http::fastcgi`]) and a pool of keep-alive connections.
//!
//! What it promises:
//! - **Routing** (`route.rs`): a mount takes the paths under its prefix (the prefix must hold
//!   once the path is normalised, as for the proxy). With `php` (the default) it behaves as
//!   Caddy's `php_fastcgi`: the path is decoded and normalised, and split after the first
//!   segment that ends with a `split_path` ending (`.php`): that file, opened beneath the root
//!   (`openat2(RESOLVE_BENEATH)`, so no `..` or symlink leads out of it), is the script and the
//!   rest is `PATH_INFO`. A directory with the `index` file (`index.php`) runs it. A file
//!   without the ending is the static files' to serve (never the application's), and a path
//!   that names nothing goes to the front controller, `PREFIX` + `index` (`try_files $path
//!   $path/ /index.php?$query`; the client's `REQUEST_URI` and query string are kept, as
//!   Laravel and WordPress read them). A file with the ending is never served as source,
//!   under the prefix or not (404). Without `php`, every path under the prefix goes to the
//!   application, with the prefix as `SCRIPT_NAME` and the rest as `PATH_INFO`.
//! - **Variables**: the CGI/1.1 meta-variables of RFC 3875 (as `handlers/cgi.rs` builds them,
//!   the real client address after PROXY protocol and `real_ip_from` included, `HTTPS=on` on
//!   TLS listeners), plus `SCRIPT_FILENAME`, `SCRIPT_NAME`, `DOCUMENT_ROOT`, `DOCUMENT_URI`,
//!   `PATH_INFO`/`PATH_TRANSLATED` and `REDIRECT_STATUS=200`, as nginx's `fastcgi_params`
//!   sends them, then the mount's `params`. Unlike CGI, `HTTP_AUTHORIZATION` is passed (PHP
//!   applications authenticate with it; the application is a server process of the operator's,
//!   not a script any user may have written). `HTTP_PROXY` never is (httpoxy).
//! - **Body**: with `request_buffering` (the default) the whole body is read, its framing
//!   checked and its size bounded by `limits.max_body`, before a connection to the application
//!   is taken, so a slow client never holds a PHP worker. Without it a `Content-Length` body
//!   is sent as STDIN records as it arrives; a chunked one is read whole anyway, because
//!   `CONTENT_LENGTH` is what PHP reads a body by.
//! - **Response** (`client.rs`): STDOUT is a CGI response: the header section (at most
//!   `max_header_bytes`) is parsed as for CGI: `Status` sets the status, `Location: /path`
//!   without a status is a local redirect (the app serves `GET /path` instead, RFC 3875
//!   §6.2.2), any other `Location` a client redirect. A response that ends within
//!   `output_buffer` bytes is sent with a `Content-Length`; a longer one streams
//!   ([`crate::Body::Stream`]), never held whole in memory. STDERR goes to the error log a line
//!   at a time, prefixed with the script's name (PHP's warnings and fatal errors arrive so).
//! - **Connections**: one per request unless `max_conns` is set; then at most that many are
//!   open (a token each in a bounded weft-fiber channel), kept in the pool (`handlers/pool.rs`,
//!   `idle_timeout`) after a request only when the whole request went out and END_REQUEST came
//!   back with no byte after it, and a request that finds them all busy waits for one (a
//!   connection finished meanwhile is closed and its place given to the waiting request, since
//!   a php-fpm worker stays with a kept connection). Any error, timeout or response cut short
//!   closes it. A kept Unix connection is used without probing: one whose worker is gone fails
//!   the first write before anything is delivered, and the request goes again on a new
//!   connection whatever its method; one that dies before any byte of the answer is replaced
//!   and the request sent again if its method is idempotent and its body is at hand.
//! - **Failures**: no application listening (socket missing, connection refused), a malformed
//!   record stream or header section, or a connection closed before END_REQUEST: 502 (with
//!   what happened logged). FCGI_OVERLOADED, or a Unix socket whose backlog is full: 503.
//!   Connect timeout, or no byte for `read_timeout` before the header section: 504, and the
//!   connection is closed (the worker's late answer is never read as another request's).
//!   Once the response has begun, a failure ends the client's connection mid-body.
//! - **No blocked worker**: application sockets are weft-fiber sockets, which park the fiber
//!   on the fiber model and block the connection's own thread on the thread and process
//!   models; a multiplexed (HTTP/2) connection runs the request away from its other streams
//!   (`App::may_block`).
//!
//! Not done: multiplexing several requests on one connection (php-fpm does not support it),
//! the AUTHORIZER and FILTER roles, upstream groups of several FastCGI servers.

mod client;
mod route;

pub(crate) use client::enter_connection_process;
pub(crate) use route::FastCgi;
