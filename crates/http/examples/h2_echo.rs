//! A small HTTP/2 server over `weft_http::h2::Connection`, for conformance runs (h2spec) and
//! for trying the connection by hand: plain TCP, HTTP/2 with prior knowledge, a thread per
//! connection, blocking reads and writes.
//!
//! Every request is answered 200 `text/plain` with the request's body echoed, or `hello\n`
//! when it has none (a HEAD request gets the head only; a request head over the limit, 431).
//!
//! ```text
//! cargo run -p weft-http --example h2_echo -- 8080
//! h2spec -h 127.0.0.1 -p 8080
//! ```

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use weft_http::h2::{Config, Connection, Event, StreamId};

/// The largest request body echoed; more is answered 413.
const MAX_BODY: usize = 1 << 20;

fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(8080);
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind 127.0.0.1");
    eprintln!("h2_echo on 127.0.0.1:{port}");
    for sock in listener.incoming() {
        let Ok(sock) = sock else { continue };
        std::thread::spawn(move || {
            if let Err(e) = serve(sock) {
                eprintln!("connection: {e}");
            }
        });
    }
}

/// A request whose body is still arriving.
struct Upload {
    head_only: bool,
    body: Vec<u8>,
}

/// A response whose body is still being sent as flow control allows.
struct Download {
    id: StreamId,
    body: Vec<u8>,
    sent: usize,
}

fn serve(mut sock: TcpStream) -> io::Result<()> {
    sock.set_nodelay(true)?;
    let mut conn = Connection::new(Config::default());
    let mut buf = vec![0; 64 * 1024];
    let mut uploads: HashMap<StreamId, Upload> = HashMap::new();
    let mut downloads: Vec<Download> = Vec::new();
    loop {
        flush(&mut sock, &mut conn)?;
        if conn.is_finished() {
            break;
        }
        let n = sock.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        let result = conn.recv(&buf[..n], Instant::now());
        while let Some(event) = conn.poll_event() {
            handle(&mut conn, event, &mut uploads, &mut downloads);
        }
        // A WINDOW_UPDATE or SETTINGS may have opened the windows.
        downloads.retain_mut(|d| {
            d.sent += conn.send_data(d.id, &d.body[d.sent..], true);
            d.sent < d.body.len()
        });
        if let Err(e) = result {
            eprintln!("connection error {:?}: {}", e.code, e.reason);
            flush(&mut sock, &mut conn)?;
            break;
        }
    }
    // Half-close, then read what the client still sends, so that closing does not reset
    // the connection before the client has read our last frames.
    sock.shutdown(Shutdown::Write)?;
    sock.set_read_timeout(Some(Duration::from_secs(1)))?;
    while matches!(sock.read(&mut buf), Ok(n) if n > 0) {}
    Ok(())
}

fn flush(sock: &mut TcpStream, conn: &mut Connection) -> io::Result<()> {
    while !conn.output().is_empty() {
        let n = sock.write(conn.output())?;
        conn.written(n);
    }
    Ok(())
}

fn handle(
    conn: &mut Connection,
    event: Event,
    uploads: &mut HashMap<StreamId, Upload>,
    downloads: &mut Vec<Download>,
) {
    match event {
        Event::Request {
            id,
            head,
            end_stream,
            too_large,
        } => {
            let head_only = head.get(&head.method) == b"HEAD";
            conn.recycle(head);
            if too_large {
                conn.send_headers(id, 431, [], true);
            } else if end_stream {
                respond(conn, id, head_only, Vec::new(), downloads);
            } else {
                uploads.insert(
                    id,
                    Upload {
                        head_only,
                        body: Vec::new(),
                    },
                );
            }
        }
        Event::Data {
            id,
            data,
            end_stream,
        } => {
            conn.release(id, data.len());
            if let Some(u) = uploads.get_mut(&id) {
                if u.body.len() + data.len() > MAX_BODY {
                    uploads.remove(&id);
                    conn.send_headers(id, 413, [], true);
                    conn.reset(id, weft_http::h2::ErrorCode::NoError);
                } else {
                    u.body.extend_from_slice(&data);
                    if end_stream {
                        let u = uploads.remove(&id).expect("upload");
                        respond(conn, id, u.head_only, u.body, downloads);
                    }
                }
            }
            conn.recycle_data(data);
        }
        Event::Trailers { id } => {
            if let Some(u) = uploads.remove(&id) {
                respond(conn, id, u.head_only, u.body, downloads);
            }
        }
        Event::Reset { id, .. } => {
            uploads.remove(&id);
            downloads.retain(|d| d.id != id);
        }
        Event::GoAway { .. } => {}
    }
}

fn respond(
    conn: &mut Connection,
    id: StreamId,
    head_only: bool,
    body: Vec<u8>,
    downloads: &mut Vec<Download>,
) {
    let body = if body.is_empty() {
        b"hello\n".to_vec()
    } else {
        body
    };
    let length = body.len().to_string();
    let fields = [
        (&b"content-type"[..], &b"text/plain"[..]),
        (&b"content-length"[..], length.as_bytes()),
    ];
    conn.send_headers(id, 200, fields, head_only);
    if head_only {
        return;
    }
    let sent = conn.send_data(id, &body, true);
    if sent < body.len() {
        downloads.push(Download { id, body, sent });
    }
}
