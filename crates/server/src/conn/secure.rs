//! TLS on a blocking transport (the thread and process models, and fibers): the prelude up
//! to the ClientHello ([`super::open`]), the handshake by rustls, then the connection driver
//! over the session (`tls::TlsStream`). The pipeline runs the same handshake a step per
//! readiness (`models/pipeline/tls.rs`) and records it with [`settle`].

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use crate::app::App;
use crate::body::ReadBuf;
use crate::net::Transport;
use crate::tls::{Session, Tls, TlsInfo, TlsStream};

use super::{ConnInfo, Opened, Prelude, Reason};

/// Runs the server side of a TLS handshake on `inner` by `deadline`
/// (`timeouts.tls_handshake` from the accept), starting with `early`: the first bytes of the
/// ClientHello, which the connection's prelude read and recognised (`conn::Prelude`). Records
/// what it settled in `info.tls`. `None` (logged once) when the connection is to be closed:
/// a failed handshake, a timeout, the client gone.
pub(crate) fn handshake<T: Transport>(
    inner: &mut T,
    tls: &Tls,
    cfg: &crate::config::Config,
    deadline: Instant,
    info: &ConnInfo,
    early: &[u8],
) -> Option<Session> {
    let peer = info.peer;
    let timed_out = || Prelude::handshake_late(cfg).log(peer, None);
    let mut conn = Session::of(tls, &info.listener)
        .map_err(|e| log::error!("{peer}: TLS session: {e}"))
        .ok()?;
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        timed_out();
        return None;
    }
    if inner.set_read_timeout(Some(left)).is_err() || inner.set_write_timeout(Some(left)).is_err() {
        return None;
    }
    conn.feed(early);
    loop {
        if let Err(e) = conn.process_new_packets() {
            log::info!("{peer}: TLS handshake failed: {e}");
            // The alert rustls queued tells the client why.
            let _ = crate::tls::stream::flush_tls(&mut conn, inner);
            return None;
        }
        if let Err(e) = crate::tls::stream::flush_tls(&mut conn, inner) {
            if crate::net::timed_out(&e) {
                timed_out();
            } else {
                log::debug!("{peer}: TLS handshake: {e}");
            }
            return None;
        }
        if !conn.is_handshaking() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || inner.set_read_timeout(Some(left)).is_err() {
            timed_out();
            return None;
        }
        match conn.read_tls(inner) {
            Ok(0) => {
                Reason::TlsCut.log(peer, None);
                return None;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if crate::net::timed_out(&e) => {
                timed_out();
                return None;
            }
            Err(e) => {
                log::debug!("{peer}: TLS handshake: {e}");
                return None;
            }
        }
    }
    settle(&conn, info);
    Some(conn)
}

/// Records what a finished handshake settled in `info.tls`.
pub(crate) fn settle(conn: &Session, info: &ConnInfo) {
    let resumed = matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
    info.listener.tls_handshakes.fetch_add(1, Relaxed);
    if resumed {
        info.listener.tls_resumed.fetch_add(1, Relaxed);
    }
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
        _ => "TLS",
    };
    let _ = info.tls.set(std::sync::Arc::new(TlsInfo {
        sni: conn.server_name().map(str::to_string),
        alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
        version,
        resumed,
        client: conn.client_auth(),
    }));
}

/// Starts TLS on a new connection of a TLS listener: the handshake under
/// `timeouts.tls_handshake`. `None` (logged) when the connection is to be closed.
pub(crate) fn start_tls<T: Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
) -> Option<Session> {
    let Some(tls) = &app.tls else {
        log::error!("{}: TLS listener without certificates; closed", info.peer);
        return None;
    };
    // The prelude's first part on the raw socket: on a `proxy_protocol` listener the PROXY
    // header (HAProxy's `send-proxy` in TCP mode), then the first bytes, which must begin a
    // ClientHello (plain HTTP is answered 400, anything else closed).
    let mut early = ReadBuf::new(super::READ_BUF);
    let mut wbuf = Vec::new();
    let mut prelude = Prelude::resume(info, &app.cfg.timeouts, Instant::now());
    match super::open(stream, &mut early, &mut wbuf, &mut prelude, app, info) {
        Ok(Opened::Handshake { until }) => {
            handshake(stream, tls, &app.cfg, until, info, early.data())
        }
        Ok(_) | Err(_) => None,
    }
}

/// Serves a connection of a TLS listener on a model that gives it its own thread of control
/// to the end (thread, process): handshake, then the connection driver over TLS.
pub(crate) fn serve_tls<T: Transport>(
    stream: &mut T,
    app: &App,
    info: &ConnInfo,
) -> std::io::Result<()> {
    let Some(mut session) = start_tls(stream, app, info) else {
        return Ok(());
    };
    super::serve(&mut TlsStream::new(stream, &mut session), app, info)
}
