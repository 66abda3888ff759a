//! The PROXY protocol header (`[[listen]] proxy_protocol`) a connection starts with, before
//! its first request: taken off the read buffer (every model) or read within the header-read
//! timeout (the blocking driver and TLS).

use std::io;
use std::time::Instant;

use crate::app::App;
use crate::body::ReadBuf;
use crate::net::Transport;

use super::ConnInfo;

/// What [`take_proxy_header`] found at the front of the read buffer.
#[derive(Debug)]
pub(crate) enum ProxyStep {
    /// Not all of the header yet: read more.
    NeedMore,
    /// Taken (and consumed); `info.proxied` is set.
    Done,
    /// Not a PROXY header: close the connection (after logging why).
    Bad(weft_http::proxy_protocol::ProxyError),
}

/// Takes a PROXY protocol header off the front of `rbuf`, recording what it says in
/// `info.proxied`; the bytes after it stay for the request.
pub(crate) fn take_proxy_header(rbuf: &mut ReadBuf, info: &ConnInfo) -> ProxyStep {
    use weft_http::proxy_protocol::{parse, Parsed, Proxied};
    match parse(rbuf.data()) {
        Ok(Parsed::Partial) => ProxyStep::NeedMore,
        Ok(Parsed::Done { proxied, len }) => {
            rbuf.consume(len);
            let client = match proxied {
                Proxied::Tcp { source, .. } => Some(source),
                Proxied::Local => None,
            };
            let _ = info.proxied.set(client);
            ProxyStep::Done
        }
        Err(e) => ProxyStep::Bad(e),
    }
}

/// The read buffer's limit while a PROXY header is read: room for the longest one.
pub(crate) fn proxy_read_max(cfg: &crate::config::Config) -> usize {
    (cfg.limits.max_head_bytes + 1).max(16 + weft_http::proxy_protocol::V2_MAX_PAYLOAD)
}

/// Reads the PROXY protocol header a connection must start with, within the header-read
/// timeout. False (with a log line) when the connection is to be closed: no header, a bad one,
/// the client gone, or too slow.
pub(crate) fn read_proxy_header<T: Transport>(
    stream: &mut T,
    rbuf: &mut ReadBuf,
    app: &App,
    info: &ConnInfo,
) -> io::Result<bool> {
    let timeout = app.cfg.timeouts.header_read;
    let deadline = Instant::now() + timeout;
    let max = proxy_read_max(&app.cfg);
    loop {
        if !rbuf.is_empty() {
            match take_proxy_header(rbuf, info) {
                ProxyStep::Done => return Ok(true),
                ProxyStep::Bad(e) => {
                    log::info!("{}: {e}; connection closed", info.peer);
                    return Ok(false);
                }
                ProxyStep::NeedMore => {}
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            log::info!(
                "{}: no PROXY header within {timeout:?}; connection closed",
                info.peer
            );
            return Ok(false);
        }
        stream.set_read_timeout(Some(left))?;
        match rbuf.fill(stream, max) {
            Ok(0) => {
                log::info!("{}: closed before its PROXY header", info.peer);
                return Ok(false);
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                log::info!(
                    "{}: no PROXY header within {timeout:?}; connection closed",
                    info.peer
                );
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
    }
}
