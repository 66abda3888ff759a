//! The `thread` model: one OS thread per accepted connection, blocking I/O — the original
//! Indy server of the fibers paper and the baseline every other model is measured against.

use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::{AcceptGate, ACCEPT_BACKOFF};
use crate::app::LiveApp;
use crate::conn::{self, ConnInfo};
use crate::metrics::{ListenerMetrics, OpenGuard};
use crate::net::BlockingStream;
use weft_sys::poll::poll_readable_any;

/// Accepts on `listener` until shutdown, one thread per connection.
pub fn run(listener: TcpListener, live: Arc<LiveApp>, lm: Arc<ListenerMetrics>) -> io::Result<()> {
    // The shutdown state is the same in every generation.
    let app = live.current();
    // Dropped after the listener (declared before it).
    let _listening = app.shutdown.listening();
    let listener = listener;
    listener.set_nonblocking(true)?;
    // Turns readable when shutdown begins: the accept loop sleeps until a client or shutdown
    // comes, with no timeout to look at the flag.
    let stop = app.shutdown.interrupt().eventfd()?.as_raw_fd();
    let mut gate = AcceptGate::new(app.cfg.limits.max_connections, Some(app.shutdown.clone()));
    while !app.shutdown.is_set() {
        if gate.at_capacity(&lm, || super::backlog_waits(listener.as_raw_fd())) {
            std::thread::sleep(ACCEPT_BACKOFF);
            continue;
        }
        match listener.accept() {
            Ok((stream, peer)) => {
                // The generation this connection keeps for its whole life.
                let app = live.current();
                let accepted = app.cfg.timing.on().then(std::time::Instant::now);
                let local = super::local_addr(&lm, || stream.local_addr());
                let guard = OpenGuard::new(lm.clone());
                let lm2 = lm.clone();
                let spawned = std::thread::Builder::new()
                    .name("weft-conn".into())
                    .stack_size(app.cfg.thread.stack_size)
                    .spawn(move || {
                        let _guard = guard;
                        let mut stream = BlockingStream::new(stream);
                        let key = crate::models::listener_key(&lm2);
                        let registration = Some(app.shutdown.register_on(stream.raw_fd(), key));
                        let info = ConnInfo {
                            peer,
                            local,
                            listener: lm2,
                            registration,
                            accepted,
                            proxied: Default::default(),
                            client_slot: Default::default(),
                            h2: Default::default(),
                            tls: Default::default(),
                            life: crate::conn::Life::now(),
                        };
                        let served = if info.listener.tls() {
                            crate::conn::serve_tls(&mut stream, &app, &info)
                        } else {
                            conn::serve(&mut stream, &app, &info)
                        };
                        if let Err(e) = served {
                            log::debug!("{peer}: connection ended: {e}");
                        }
                        // `info` (and its registration) drops before `stream` closes the socket.
                        drop(info);
                    });
                if let Err(e) = spawned {
                    gate.warn(|| format!("{}: cannot spawn a connection thread: {e}", lm.addr));
                    std::thread::sleep(ACCEPT_BACKOFF);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                poll_readable_any(&[listener.as_raw_fd(), stop], std::time::Duration::MAX)?;
            }
            Err(e) => {
                if gate.failed(&lm, &e) {
                    std::thread::sleep(ACCEPT_BACKOFF);
                }
            }
        }
    }
    Ok(())
}
