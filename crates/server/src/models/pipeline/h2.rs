//! HTTP/2 connections on a pipeline listener. The stages pass one request per connection at
//! a time (a connection is in one stage's queue at once); an HTTP/2 connection carries many
//! streams at once, so, once its prelude says HTTP/2, it leaves the stages for a thread of its
//! own that runs the blocking HTTP/2 driver (`conn::serve_h2`), as the thread model would.
//! ARCHITECTURE.md ("HTTP/2") says what the stages would need to carry streams themselves.

use super::{Conn, Next};

/// Takes an HTTP/2 connection out of the pipeline: its thread serves it to the end.
pub(super) fn detach(mut conn: Box<Conn>) -> Next {
    // Out of the poller: from here on it is read by blocking reads.
    conn.reg = None;
    let spawned = std::thread::Builder::new()
        .name("weft-h2".into())
        .spawn(move || serve(conn));
    match spawned {
        Ok(_) => Next::Detached,
        Err(e) => {
            log::error!("cannot start a thread for an HTTP/2 connection: {e}");
            Next::Detached
        }
    }
}

fn serve(mut conn: Box<Conn>) {
    let c = &mut *conn;
    let peer = c.info.peer;
    let stream = match c
        .stream
        .set_nonblocking(false)
        .and_then(|()| c.stream.try_clone())
    {
        Ok(s) => s,
        Err(e) => {
            log::debug!("{peer}: HTTP/2: {e}");
            return;
        }
    };
    let mut blocking = crate::net::BlockingStream::new(stream);
    let early = c.rbuf.data().to_vec();
    c.rbuf.consume(c.rbuf.len());
    let app = c.app.clone();
    let wait = crate::conn::OnIdle::Wait;
    let result = match c.tls.as_mut() {
        Some(session) => crate::conn::serve_h2(
            &mut crate::tls::TlsStream::new(&mut blocking, &mut session.conn),
            &early,
            &app,
            &c.info,
            wait,
        ),
        None => crate::conn::serve_h2(&mut blocking, &early, &app, &c.info, wait),
    };
    if let Err(e) = result {
        log::debug!("{peer}: HTTP/2: {e}");
    }
}
