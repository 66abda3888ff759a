//! HTTP/2 connections on a pipeline listener. The stages pass one request per connection at
//! a time (a connection is in one stage's queue at once); an HTTP/2 connection carries many
//! streams at once, so, once its prelude says HTTP/2, it leaves receive and send for a thread
//! of its own that reads and writes its frames (`conn::serve_h2_staged`, the blocking HTTP/2
//! driver), and each of its streams' handlers enters the process stage as a task of its own
//! ([`super::Task::Stream`]): the requests are processed where HTTP/1.1 requests are, by
//! threads the controller allocates, and the process stage's load counts them. A stream
//! finding process's queue full is run on the connection's thread. ARCHITECTURE.md
//! ("HTTP/2") says what receive and send would need to carry the frames themselves.

use super::Conn;
use crate::conn::Job;

/// Takes an HTTP/2 connection out of the stages: its thread serves it to the end, handing
/// each stream's handler to `process`.
pub(super) fn detach(
    mut conn: Box<Conn>,
    process: impl Fn(Job) -> Result<(), Job> + Send + Sync + 'static,
) {
    // Out of the poller: from here on it is read by blocking reads.
    conn.reg = None;
    let spawned = std::thread::Builder::new()
        .name("weft-h2".into())
        .spawn(move || serve(conn, &process));
    if let Err(e) = spawned {
        log::error!("cannot start a thread for an HTTP/2 connection: {e}");
    }
}

fn serve(mut conn: Box<Conn>, process: &crate::conn::Stage) {
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
    let stage = Some(process);
    let result = match c.tls.as_mut() {
        Some(session) => crate::conn::serve_h2_staged(
            &mut crate::tls::TlsStream::new(&mut blocking, &mut session.conn),
            &early,
            &app,
            &c.info,
            wait,
            stage,
        ),
        None => crate::conn::serve_h2_staged(&mut blocking, &early, &app, &c.info, wait, stage),
    };
    if let Err(e) = result {
        log::debug!("{peer}: HTTP/2: {e}");
    }
}
