//! A server TLS session over rustls' unbuffered API, holding its buffers only while they hold
//! bytes.
//!
//! rustls' buffered `ServerConnection` keeps a 4 KiB receive buffer for the connection's
//! whole life, more than an idle plain connection costs in all. Here the session owns three
//! buffers of its own: records received and not yet processed (`rx`), plaintext decrypted
//! and not yet read (`plain`), records made and not yet written (`tx`); [`Session::trim`]
//! gives back each one that is empty, which the models call before a connection parks to wait
//! for its next request. A parked TLS connection then holds rustls' session state (keys,
//! record counters, the handshake's outcome) and nothing else.
//!
//! The session does no I/O of its own: [`Session::read_tls`] and [`Session::write_tls`] move
//! bytes between it and a `Read`/`Write`, [`Session::process_new_packets`] runs rustls over
//! what was read. The names and meanings follow rustls' `ServerConnection`, which this
//! replaced, so the handshake and stream code read the same.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::server::{ServerConfig, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};

use crate::body::ReadBuf;

/// Records made and not yet written past which [`Session::write_plain`] takes no more
/// plaintext (rustls' default limit for its buffered connection).
const TX_LIMIT: usize = 64 * 1024;

/// Bytes asked of the socket per read when no record says how many it needs.
const READ_CHUNK: usize = 4096;

/// The most bytes held unprocessed: a handshake message of up to 64 KiB (rustls' own bound)
/// and the record around its last part.
const RX_MAX: usize = 0x1_0000 + 18 * 1024;

/// What an empty buffer may keep between requests of a busy connection ([`Session::trim_excess`]):
/// a whole record and its overhead, so a page-sized answer reuses its buffer while a large
/// file's 32 KiB pieces do not stay behind.
const KEEP: usize = 17 * 1024;

/// A TLS record's header: type, version, length.
const RECORD_HEADER: usize = 5;

/// Plaintext gathered into one record by [`Session::write_plain_vectored`]: up to this
/// many bytes a copy costs less than a record of its own.
const GATHER_MAX: usize = 2048;

thread_local! {
    /// The server name of the ClientHello being answered on this thread, set by the
    /// certificate resolver from inside [`Session::process_new_packets`] and taken by that
    /// same session when the call returns (rustls' unbuffered connection does not say which
    /// name the client asked for). No fiber switch happens inside the call, so no other
    /// session can see it.
    static HELLO_NAME: RefCell<Option<Option<String>>> = const { RefCell::new(None) };

    /// Where [`Session::write_plain_vectored`] gathers a head and a small body into one
    /// record. Never held across a yield.
    static GATHER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Called by the certificate resolver with the name a ClientHello asked for.
pub(crate) fn hello_name(name: Option<&str>) {
    HELLO_NAME.with(|n| *n.borrow_mut() = Some(name.map(str::to_owned)));
}

/// The server side of one TLS connection.
pub(crate) struct Session {
    conn: UnbufferedServerConnection,
    /// Received records, from the first one not yet processed.
    rx: ReadBuf,
    /// Decrypted application data not yet read.
    plain: ReadBuf,
    /// Records to send, in order.
    tx: ReadBuf,
    /// The name the client's ClientHello asked for.
    sni: Option<String>,
    /// Bytes arrived since rustls last ran over `rx`.
    unprocessed: bool,
    /// The peer sent close_notify.
    peer_closed: bool,
    /// The error that ended the session; every later call reports it.
    failed: Option<rustls::Error>,
    /// A client certificate was asked for (`[tls] verify_client`).
    asks_client: bool,
}

impl Session {
    pub(crate) fn new(config: Arc<ServerConfig>) -> Result<Session, rustls::Error> {
        Ok(Session {
            conn: UnbufferedServerConnection::new(config)?,
            rx: ReadBuf::new(0),
            plain: ReadBuf::new(0),
            tx: ReadBuf::new(0),
            sni: None,
            unprocessed: false,
            peer_closed: false,
            failed: None,
            asks_client: false,
        })
    }

    /// A session of `tls` on `listener`: its configuration, and whether it asks for a client
    /// certificate.
    pub(crate) fn of(
        tls: &super::Tls,
        listener: &crate::metrics::ListenerMetrics,
    ) -> Result<Session, rustls::Error> {
        let mut s = Session::new(tls.config_for(listener))?;
        s.asks_client = tls.asks_client;
        Ok(s)
    }

    /// What the handshake said of the client's certificate.
    pub(crate) fn client_auth(&self) -> crate::request::ClientAuth {
        use crate::request::ClientAuth;
        if !self.asks_client {
            return ClientAuth::NotAsked;
        }
        match self
            .conn
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| super::client_cert(leaf))
        {
            Some(c) => ClientAuth::Verified(std::sync::Arc::new(c)),
            None => ClientAuth::None,
        }
    }

    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The server name the client asked for (SNI), lower-cased by rustls.
    pub(crate) fn server_name(&self) -> Option<&str> {
        self.sni.as_deref()
    }

    pub(crate) fn protocol_version(&self) -> Option<rustls::ProtocolVersion> {
        self.conn.protocol_version()
    }

    pub(crate) fn alpn_protocol(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    pub(crate) fn handshake_kind(&self) -> Option<rustls::HandshakeKind> {
        self.conn.handshake_kind()
    }

    /// Takes bytes already read off the socket (after a PROXY header, or the first read that
    /// told a ClientHello from plain HTTP).
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.rx.push(bytes);
        self.unprocessed = true;
    }

    /// Reads once from `rd` into the receive buffer: as many bytes as the record being
    /// received still needs, at least [`READ_CHUNK`]. `Ok(0)` at the end of the stream.
    pub(crate) fn read_tls(&mut self, rd: &mut dyn Read) -> io::Result<usize> {
        let held = self.rx.len();
        if held >= RX_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "TLS message too large",
            ));
        }
        let record = match self.rx.data() {
            [_, _, _, hi, lo, ..] => RECORD_HEADER + usize::from(u16::from_be_bytes([*hi, *lo])),
            _ => 0,
        };
        let want = record
            .saturating_sub(held)
            .max(READ_CHUNK)
            .min(RX_MAX - held);
        let spare = self.rx.spare(want);
        let n = rd.read(&mut spare[..want])?;
        self.rx.filled(n);
        self.unprocessed |= n > 0;
        Ok(n)
    }

    /// Runs rustls over the received bytes: handshake messages are answered (into the send
    /// queue), application data is decrypted for [`Session::read_plain`].
    pub(crate) fn process_new_packets(&mut self) -> Result<(), rustls::Error> {
        // Nothing new arrived: rustls would find what its last run left (the session's own
        // writes run it themselves).
        if !self.unprocessed {
            return self.failed.clone().map_or(Ok(()), Err);
        }
        self.run(None, false).map(drop)
    }

    /// Whether records wait to be written.
    pub(crate) fn wants_write(&self) -> bool {
        !self.tx.is_empty()
    }

    /// Writes queued records to `wr` with one write; the bytes written.
    pub(crate) fn write_tls(&mut self, wr: &mut dyn Write) -> io::Result<usize> {
        let n = wr.write(self.tx.data())?;
        self.tx.consume(n);
        Ok(n)
    }

    /// Decrypted bytes into `buf`: `Some(n > 0)`, `Some(0)` once the peer sent close_notify
    /// and everything before it was read, `None` when none are here yet.
    pub(crate) fn read_plain(&mut self, buf: &mut [u8]) -> Option<usize> {
        if self.plain.is_empty() {
            return self.peer_closed.then_some(0);
        }
        let n = buf.len().min(self.plain.len());
        buf[..n].copy_from_slice(&self.plain.data()[..n]);
        self.plain.consume(n);
        Some(n)
    }

    /// Whether decrypted bytes (or the peer's close) wait to be read.
    pub(crate) fn has_plain(&self) -> bool {
        !self.plain.is_empty() || self.peer_closed
    }

    /// Encrypts as much of `data` as the send queue takes (all of it while the queue holds
    /// less than 64 KiB); the bytes taken, 0 when the queue is full or the handshake is
    /// not done.
    pub(crate) fn write_plain(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = TX_LIMIT.saturating_sub(self.tx.len());
        if data.is_empty() || room == 0 {
            return Ok(0);
        }
        let take = data.len().min(room);
        match self.run(Some(&data[..take]), false) {
            Ok(true) => Ok(take),
            Ok(false) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "TLS session not open for writing",
            )),
            Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        }
    }

    /// [`Session::write_plain`] for several slices, all encrypted before anything is
    /// written. Slices of at most [`GATHER_MAX`] bytes in all go into one record (a response
    /// head and a small body); larger ones each make their own records, which costs less
    /// than copying them together.
    pub(crate) fn write_plain_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if bufs.len() > 1 && total <= GATHER_MAX {
            return GATHER.with(|g| {
                let mut g = g.borrow_mut();
                g.clear();
                for b in bufs {
                    g.extend_from_slice(b);
                }
                self.write_plain(&g)
            });
        }
        let mut taken = 0;
        for b in bufs.iter().filter(|b| !b.is_empty()) {
            let n = self.write_plain(b)?;
            taken += n;
            if n < b.len() {
                break;
            }
        }
        Ok(taken)
    }

    /// Queues close_notify after everything written so far.
    pub(crate) fn send_close_notify(&mut self) {
        let _ = self.run(None, true);
    }

    /// Gives back the empty buffers that grew past a record (a large file, a large upload):
    /// called before each wait for bytes, so a connection that waits in a blocking read (the
    /// thread and process models, which never park it) keeps no more than that.
    pub(crate) fn trim_excess(&mut self) {
        self.rx.release_if_idle(KEEP);
        self.plain.release_if_idle(KEEP);
        self.tx.release_if_idle(KEEP);
    }

    /// Gives back the buffers that hold nothing: called before the connection waits for its
    /// next request.
    pub(crate) fn trim(&mut self) {
        self.rx.release_if_idle(0);
        self.plain.release_if_idle(0);
        self.tx.release_if_idle(0);
        GATHER.with(|g| {
            if let Ok(mut g) = g.try_borrow_mut() {
                if g.capacity() > GATHER_MAX {
                    *g = Vec::new();
                }
            }
        });
    }

    /// Drives rustls until it needs more bytes: decrypts application data into `plain`,
    /// queues what it has to send in `tx`, and once it may send application data, encrypts
    /// `app` and (if `close`) close_notify. True if `app` was encrypted (false: the handshake
    /// is not done, or the session has closed).
    fn run(&mut self, mut app: Option<&[u8]>, mut close: bool) -> Result<bool, rustls::Error> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut sent = false;
        loop {
            let UnbufferedStatus { discard, state } =
                self.conn.process_tls_records(self.rx.data_mut());
            let mut stop = false;
            let result = match state {
                Err(e) => Err(e),
                Ok(ConnectionState::ReadTraffic(mut r)) => {
                    let mut result = Ok(());
                    while let Some(record) = r.next_record() {
                        match record {
                            Ok(record) => self.plain.push(record.payload),
                            Err(e) => {
                                result = Err(e);
                                break;
                            }
                        }
                    }
                    result
                }
                Ok(ConnectionState::EncodeTlsData(mut e)) => encode(&mut self.tx, &mut e),
                Ok(ConnectionState::TransmitTlsData(t)) => {
                    // The records stay in `tx` until the owner writes them; nothing made
                    // later can overtake them.
                    t.done();
                    Ok(())
                }
                Ok(ConnectionState::WriteTraffic(mut w)) => {
                    stop = true;
                    let mut result = Ok(());
                    if let Some(data) = app.take() {
                        result = encrypt(&mut self.tx, data, |d, out| w.encrypt(d, out));
                        sent = result.is_ok();
                    }
                    if result.is_ok() && close {
                        close = false;
                        result = encrypt(&mut self.tx, &[], |_, out| w.queue_close_notify(out));
                    }
                    result
                }
                Ok(ConnectionState::BlockedHandshake) => {
                    stop = true;
                    Ok(())
                }
                Ok(ConnectionState::PeerClosed) => {
                    self.peer_closed = true;
                    Ok(())
                }
                Ok(ConnectionState::Closed) => {
                    self.peer_closed = true;
                    stop = true;
                    Ok(())
                }
                Ok(ConnectionState::ReadEarlyData(_)) => Err(rustls::Error::General(
                    "early data is not accepted".to_string(),
                )),
                Ok(_) => Err(rustls::Error::General(
                    "unknown TLS connection state".to_string(),
                )),
            };
            self.rx.consume(discard);
            if let Some(name) = HELLO_NAME.with(|n| n.borrow_mut().take()) {
                self.sni = name;
            }
            if let Err(e) = result {
                self.fail(e.clone());
                return Err(e);
            }
            if stop {
                self.unprocessed = false;
                return Ok(sent);
            }
        }
    }

    /// Ends the session with `e`, queuing the alert rustls made for it. One more turn hands
    /// the alert over (rustls gives up what it queued before it looks at any input); a second
    /// would read the failing bytes again. The received bytes stay as they are: rustls may
    /// hold offsets into them.
    fn fail(&mut self, e: rustls::Error) {
        self.failed = Some(e);
        let UnbufferedStatus { discard, state } = self.conn.process_tls_records(self.rx.data_mut());
        if let Ok(ConnectionState::EncodeTlsData(mut e)) = state {
            let _ = encode(&mut self.tx, &mut e);
        }
        self.rx.consume(discard);
    }
}

/// Copies a handshake message or alert rustls made into `tx`.
fn encode(
    tx: &mut ReadBuf,
    e: &mut rustls::unbuffered::EncodeTlsData<'_, rustls::server::ServerConnectionData>,
) -> Result<(), rustls::Error> {
    let mut need = 1024;
    loop {
        match e.encode(tx.spare(need)) {
            Ok(n) => {
                tx.filled(n);
                return Ok(());
            }
            Err(EncodeError::InsufficientSize(s)) => need = s.required_size,
            Err(other) => return Err(rustls::Error::General(other.to_string())),
        }
    }
}

/// Runs `f` (an encryption into an output buffer) with room in `tx` for what it makes.
fn encrypt(
    tx: &mut ReadBuf,
    data: &[u8],
    mut f: impl FnMut(&[u8], &mut [u8]) -> Result<usize, EncryptError>,
) -> Result<(), rustls::Error> {
    let mut need = data.len() + 64;
    loop {
        match f(data, tx.spare(need)) {
            Ok(n) => {
                tx.filled(n);
                return Ok(());
            }
            Err(EncryptError::InsufficientSize(s)) => need = s.required_size,
            Err(e) => return Err(rustls::Error::General(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{CertificateDer, ServerName};
    use rustls::{ClientConfig, ClientConnection, RootCertStore};

    /// A server config made as `weft serve` makes it (through the SNI resolver), for a
    /// self-signed certificate of `a.test`, and a client config that trusts it.
    fn configs(
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> (Arc<ServerConfig>, Arc<ClientConfig>) {
        let dir = std::env::temp_dir().join(format!(
            "weft-session-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert =
            rcgen::CertificateParams::new(vec!["a.test".to_string(), "127.0.0.1".to_string()])
                .unwrap()
                .self_signed(&key)
                .unwrap();
        std::fs::write(dir.join("c.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("k.pem"), key.serialize_pem()).unwrap();
        let cfg = crate::config::Config::from_toml(&format!(
            "[[listen]]\naddr = \"127.0.0.1:8443\"\ntls = true\n[tls]\ncert = {:?}\nkey = {:?}\n",
            dir.join("c.pem"),
            dir.join("k.pem")
        ))
        .unwrap();
        let tls = crate::tls::Tls::from_config(&cfg).unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from(cert.der().to_vec()))
            .unwrap();
        let client =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(versions)
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        (tls.server.clone(), Arc::new(client))
    }

    /// Moves the client's bytes to the server `chunk` bytes at a time (each a separate
    /// `read_tls`, as a socket may deliver them), runs the server over each, and moves the
    /// server's records back.
    fn exchange(client: &mut ClientConnection, server: &mut Session, chunk: usize) {
        let mut wire = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut wire).unwrap();
        }
        for piece in wire.chunks(chunk) {
            let mut rd = piece;
            while !rd.is_empty() {
                server.read_tls(&mut rd).unwrap();
            }
            server.process_new_packets().unwrap();
        }
        let mut back = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut back).unwrap();
        }
        let mut rd = &back[..];
        while !rd.is_empty() {
            client.read_tls(&mut rd).unwrap();
        }
        client.process_new_packets().unwrap();
    }

    fn handshake(
        versions: &[&'static rustls::SupportedProtocolVersion],
        chunk: usize,
    ) -> (ClientConnection, Session) {
        let (server_cfg, client_cfg) = configs(versions);
        handshake_with(&server_cfg, &client_cfg, chunk)
    }

    fn handshake_with(
        server_cfg: &Arc<ServerConfig>,
        client_cfg: &Arc<ClientConfig>,
        chunk: usize,
    ) -> (ClientConnection, Session) {
        let (server_cfg, client_cfg) = (server_cfg.clone(), client_cfg.clone());
        let mut client =
            ClientConnection::new(client_cfg, ServerName::try_from("a.test").unwrap()).unwrap();
        let mut server = Session::new(server_cfg).unwrap();
        for _ in 0..6 {
            if !client.is_handshaking() && !server.is_handshaking() {
                break;
            }
            exchange(&mut client, &mut server, chunk);
        }
        assert!(!client.is_handshaking() && !server.is_handshaking());
        (client, server)
    }

    fn read_all_plain(server: &mut Session) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 7];
        while let Some(n) = server.read_plain(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    #[test]
    fn a_request_and_its_answer_go_through_and_an_idle_session_holds_no_buffer() {
        for versions in [
            &[&rustls::version::TLS13][..],
            &[&rustls::version::TLS12][..],
        ] {
            let (mut client, mut server) = handshake(versions, usize::MAX);
            assert_eq!(server.server_name(), Some("a.test"));
            let request = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
            client.writer().write_all(request).unwrap();
            exchange(&mut client, &mut server, usize::MAX);
            assert_eq!(read_all_plain(&mut server), request);
            assert_eq!(server.read_plain(&mut [0u8; 4]), None, "nothing more yet");
            let head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
            let n = server
                .write_plain_vectored(&[io::IoSlice::new(head), io::IoSlice::new(b"hello")])
                .unwrap();
            assert_eq!(n, head.len() + 5);
            exchange(&mut client, &mut server, usize::MAX);
            let mut answer = Vec::new();
            let _ = client.reader().read_to_end(&mut answer);
            assert_eq!(answer, [&head[..], b"hello"].concat());
            server.trim();
            assert_eq!(
                (
                    server.rx.allocated(),
                    server.plain.allocated(),
                    server.tx.allocated()
                ),
                (0, 0, 0)
            );
        }
    }

    /// A resumed session (a ticket on TLS 1.3, a session ID on TLS 1.2) still knows the
    /// name its client asked for: the virtual-host check (421) depends on it.
    #[test]
    fn a_resumed_session_knows_its_server_name() {
        for versions in [
            &[&rustls::version::TLS13][..],
            &[&rustls::version::TLS12][..],
        ] {
            let (server_cfg, client_cfg) = configs(versions);
            let (mut client, mut server) = handshake_with(&server_cfg, &client_cfg, usize::MAX);
            // TLS 1.3 tickets travel after the handshake; one exchange delivers them.
            client.writer().write_all(b"x").unwrap();
            exchange(&mut client, &mut server, usize::MAX);
            let (_, again) = handshake_with(&server_cfg, &client_cfg, usize::MAX);
            assert_eq!(
                again.handshake_kind(),
                Some(rustls::HandshakeKind::Resumed),
                "{versions:?}"
            );
            assert_eq!(again.server_name(), Some("a.test"), "{versions:?}");
        }
    }

    #[test]
    fn records_split_into_single_bytes_and_records_of_16_kib_are_reassembled() {
        let (mut client, mut server) = handshake(&[&rustls::version::TLS13], 1);
        let body: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        client.writer().write_all(&body).unwrap();
        exchange(&mut client, &mut server, 3);
        assert_eq!(read_all_plain(&mut server), body);
        // A whole record arrives in one read sized by its header.
        client.writer().write_all(&body[..16 * 1024]).unwrap();
        let mut wire = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut wire).unwrap();
        }
        let mut rd = &wire[..];
        server.read_tls(&mut rd).unwrap(); // the first READ_CHUNK bytes
        let second = server.read_tls(&mut rd).unwrap();
        assert!(
            second > READ_CHUNK,
            "the rest of the record in one read, got {second}"
        );
        server.process_new_packets().unwrap();
        assert_eq!(read_all_plain(&mut server), &body[..16 * 1024]);
    }

    #[test]
    fn garbage_fails_the_session_with_an_alert_and_every_later_call_reports_it() {
        let (_client, mut server) = handshake(&[&rustls::version::TLS13], usize::MAX);
        server.feed(&[23, 3, 3, 0, 20]);
        server.feed(&[0xAA; 20]);
        assert!(server.process_new_packets().is_err());
        assert!(server.wants_write(), "the alert is queued");
        assert!(server.process_new_packets().is_err());
        assert!(server.write_plain(b"x").is_err());
    }

    #[test]
    fn close_notify_reads_as_the_end_after_the_data_before_it() {
        let (mut client, mut server) = handshake(&[&rustls::version::TLS13], usize::MAX);
        client.writer().write_all(b"last").unwrap();
        client.send_close_notify();
        exchange(&mut client, &mut server, usize::MAX);
        assert!(server.has_plain());
        let mut buf = [0u8; 16];
        assert_eq!(server.read_plain(&mut buf), Some(4));
        assert_eq!(server.read_plain(&mut buf), Some(0));
        server.send_close_notify();
        assert!(server.wants_write());
    }

    #[test]
    fn the_send_queue_takes_no_more_than_its_limit() {
        let (_client, mut server) = handshake(&[&rustls::version::TLS13], usize::MAX);
        let big = vec![7u8; 3 * TX_LIMIT];
        let first = server.write_plain(&big).unwrap();
        assert_eq!(first, TX_LIMIT);
        assert_eq!(server.write_plain(&big).unwrap(), 0, "full until written");
        let mut sink = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut sink).unwrap();
        }
        assert_eq!(server.write_plain(&big).unwrap(), TX_LIMIT);
    }

    /// Mutated ClientHellos and random bytes, fed in random pieces: the session never
    /// panics, never holds more than its bound, and once failed stays failed.
    #[test]
    fn mangled_handshakes_fail_cleanly() {
        let (server_cfg, client_cfg) = configs(&[&rustls::version::TLS13, &rustls::version::TLS12]);
        let mut hello = Vec::new();
        let mut client =
            ClientConnection::new(client_cfg, ServerName::try_from("a.test").unwrap()).unwrap();
        while client.wants_write() {
            client.write_tls(&mut hello).unwrap();
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..400 {
            let mut wire = if case % 4 == 0 {
                (0..(next() % 600) as usize)
                    .map(|_| next() as u8)
                    .collect::<Vec<u8>>()
            } else {
                hello.clone()
            };
            for _ in 0..1 + next() % 4 {
                if !wire.is_empty() {
                    let at = (next() as usize) % wire.len();
                    wire[at] = next() as u8;
                }
            }
            let mut server = Session::new(server_cfg.clone()).unwrap();
            let mut rd = &wire[..];
            let mut failed = false;
            while !rd.is_empty() {
                let piece = 1 + (next() as usize) % 300;
                let (now, rest) = rd.split_at(piece.min(rd.len()));
                rd = rest;
                let mut now = now;
                while !now.is_empty() && server.read_tls(&mut now).is_ok() {}
                match server.process_new_packets() {
                    Err(_) => failed = true,
                    Ok(()) => assert!(!failed, "case {case}: a failed session came back"),
                }
                assert!(server.rx.len() <= RX_MAX);
            }
            let mut out = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut out).unwrap();
            }
        }
    }

    #[test]
    fn the_byte_queue_keeps_its_data_in_order_as_it_grows_and_compacts() {
        let mut q = ReadBuf::new(0);
        q.push(b"hello ");
        q.consume(2);
        q.push(&[b'w'; 10_000]);
        assert_eq!(q.len(), 4 + 10_000);
        assert_eq!(&q.data()[..5], b"llo w");
        q.consume(q.len());
        assert!(q.is_empty());
        // Emptied, the whole buffer is room again: no growth for as much as it held.
        let allocated = q.allocated();
        assert!(q.spare(4 + 10_000).len() >= 4 + 10_000);
        assert_eq!(q.allocated(), allocated);
        q.release_if_idle(KEEP);
        assert_ne!(q.allocated(), 0, "a record's worth stays");
        q.push(&[0; KEEP + 1]);
        q.consume(KEEP + 1);
        q.release_if_idle(KEEP);
        assert_eq!(q.allocated(), 0, "past a record's worth it goes");
        q.push(b"x");
        q.release_if_idle(0);
        assert_ne!(q.allocated(), 0, "a buffer that holds bytes stays");
        q.consume(1);
        q.release_if_idle(0);
        assert_eq!(q.allocated(), 0);
    }
}
