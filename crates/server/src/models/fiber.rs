//! The `fiber` model (the fibers paper): every connection runs `conn::serve` on its own
//! stackful fiber; fibers are scheduled M:N on one worker thread per core, and a fiber yields
//! exactly when a read finds nothing or a write or sendfile would block.
//!
//! Accepting: each worker runs one acceptor fiber on its own `SO_REUSEPORT` socket, so the
//! kernel spreads connections over the workers and a connection's fiber lives on the worker
//! that accepted it (no cross-thread hand-off on the hot path).

use std::io;
use std::net::TcpListener;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_fiber::net::{TcpListener as FiberListener, TcpStream as FiberStream};

use crate::app::App;
use crate::conn::{self, ConnInfo};
use crate::metrics::{ListenerMetrics, OpenGuard};

/// How often an acceptor looks at the shutdown flag while no client arrives.
const ACCEPT_POLL: Duration = Duration::from_millis(100);
/// Pause after accept fails for lack of descriptors or memory (no busy loop).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Runs one acceptor fiber (call it on the worker that owns `listener`) until shutdown.
pub fn accept_loop(
    listener: TcpListener,
    app: Arc<App>,
    lm: Arc<ListenerMetrics>,
) -> io::Result<()> {
    let listener = FiberListener::from_std(listener)?;
    listener.set_accept_timeout(Some(ACCEPT_POLL))?;
    let max_conns = app.cfg.limits.max_connections as u64;
    let mut last_warning: Option<Instant> = None;
    let mut warn = |msg: String| {
        if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
            log::warn!("{msg}");
            last_warning = Some(Instant::now());
        }
    };
    while !app.shutdown.is_set() {
        if lm.open.load(Relaxed) >= max_conns {
            warn(format!(
                "{}: {max_conns} connections open (limits.max_connections); not accepting",
                lm.addr
            ));
            weft_fiber::sleep(ACCEPT_BACKOFF);
            continue;
        }
        match listener.accept() {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let local = stream.local_addr().unwrap_or(lm.addr);
                let guard = OpenGuard::new(lm.clone());
                let app = app.clone();
                let lm = lm.clone();
                weft_fiber::spawn(move || {
                    let _guard = guard;
                    let mut stream = stream;
                    let registration = Some(
                        app.shutdown
                            .register(std::os::fd::AsRawFd::as_raw_fd(&stream)),
                    );
                    let info = ConnInfo {
                        peer,
                        local,
                        listener: lm,
                        registration,
                    };
                    if let Err(e) = conn::serve(&mut stream, &app, &info) {
                        log::debug!("{peer}: connection ended: {e}");
                    }
                    // The registration drops before the stream closes the socket.
                    drop(info);
                });
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                ) => {}
            Err(e) => {
                // EMFILE, ENFILE, ENOBUFS, ENOMEM: keep serving open connections, retry later.
                warn(format!("{}: accept failed: {e}; backing off", lm.addr));
                weft_fiber::sleep(ACCEPT_BACKOFF);
            }
        }
    }
    Ok(())
}

impl crate::net::Transport for FiberStream {
    fn set_read_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        FiberStream::set_read_timeout(self, timeout.map(|d| d.max(Duration::from_millis(1))))
    }

    fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        FiberStream::set_write_timeout(self, timeout.map(|d| d.max(Duration::from_millis(1))))
    }

    fn write_head(&mut self, mut head: &[u8]) -> io::Result<()> {
        while !head.is_empty() {
            match self.write_more(head) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => head = &head[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn send_file(&mut self, file: &std::fs::File, offset: u64, len: u64) -> io::Result<()> {
        self.sendfile_all(file, offset, len)
    }

    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }
}
