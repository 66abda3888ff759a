//! Limits under pressure (hardening): the connection limit closes idle keep-alive connections
//! for a waiting client and otherwise pauses accepting without dropping anyone, running out of descriptors backs off without a busy loop and recovers, and slow
//! clients that trickle a request head do not starve normal ones.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::common::{Builder, Conn, Model, Server};

per_model! {
    the_connection_limit_pauses_accepting_until_a_connection_closes,
    idle_keep_alive_connections_make_room_at_the_limit,
    running_out_of_descriptors_backs_off_and_recovers,
    slow_clients_trickling_a_head_do_not_starve_normal_ones,
    an_unread_body_is_discarded_up_to_max_discard_body,
}

const ECHO: &[u8] = b"GET /echo HTTP/1.1\r\nHost: test\r\n\r\n";

/// A keep-alive connection that has been served once (so the server holds it open).
fn served_conn(srv: &Server) -> Conn {
    let mut c = srv.connect();
    c.send(ECHO);
    let r = c.read_response().expect("echo response");
    assert_eq!(r.status, 200);
    c
}

/// True if a response starts arriving on `c` within `wait`.
fn answered_within(c: &mut Conn, wait: Duration) -> bool {
    c.stream.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 1];
    let got = matches!(c.stream.peek(&mut b), Ok(n) if n > 0);
    c.stream
        .set_read_timeout(Some(crate::common::READ_TIMEOUT))
        .unwrap();
    got
}

/// utime + stime of the server (every thread), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("server stat");
    // The command name may hold spaces: count fields after the last ')'.
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn the_connection_limit_pauses_accepting_until_a_connection_closes(model: Model) {
    let srv = Builder::new(model, "conn-limit")
        .config("[limits]\nmax_connections = 4\n")
        .start();
    // Four connections that have not sent a request yet: none is idle between requests, so
    // none is closed to make room.
    let mut held: Vec<Conn> = (0..4).map(|_| srv.connect()).collect();
    // Each accepted before the next (the process model's master reads none of them yet).
    std::thread::sleep(Duration::from_millis(200));
    // The fifth client completes its TCP handshake (the listen backlog) but is not served.
    let mut fifth = srv.connect();
    fifth.send(ECHO);
    assert!(
        !answered_within(&mut fifth, Duration::from_millis(600)),
        "a fifth connection was served past max_connections = 4"
    );
    drop(held.pop());
    let r = fifth.read_response().expect("served once a slot freed");
    assert_eq!(r.status, 200);
    for c in &mut held {
        c.send(ECHO);
        assert_eq!(c.read_response().expect("held connection").status, 200);
    }
    assert!(
        srv.log().contains("limits.max_connections"),
        "{}",
        srv.log()
    );
}

/// At `max_connections`, a new client is served by closing an idle keep-alive connection, the
/// longest idle first (nginx reuses idle connections so), not left in the backlog.
fn idle_keep_alive_connections_make_room_at_the_limit(model: Model) {
    let srv = Builder::new(model, "conn-reclaim")
        .config("[limits]\nmax_connections = 3\n")
        .args(&["--status"])
        .start();
    let mut oldest = served_conn(&srv);
    // Idle since a second earlier than the others (the order is kept in whole seconds).
    std::thread::sleep(Duration::from_millis(1100));
    let mut others: Vec<Conn> = (0..2).map(|_| served_conn(&srv)).collect();
    let t0 = Instant::now();
    let mut fourth = srv.connect();
    fourth.send(ECHO);
    let r = fourth
        .read_response()
        .unwrap_or_else(|e| panic!("the fourth client: {e:?}\n{}", srv.log()));
    assert_eq!(r.status, 200);
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "served only after {:?}",
        t0.elapsed()
    );
    assert!(
        oldest.closed_within(Duration::from_secs(3)),
        "the longest idle connection is still open"
    );
    for c in &mut others {
        c.send(ECHO);
        assert_eq!(
            c.read_response().expect("a newer idle connection").status,
            200
        );
    }
    // On one of the connections held (a new one would take another's place).
    others[0].send(b"GET /_weft/metrics HTTP/1.1\r\nHost: test\r\n\r\n");
    let metrics = others[0].read_response().expect("metrics");
    let text = String::from_utf8_lossy(&metrics.body).to_string();
    assert!(
        text.lines()
            .any(|l| l.starts_with("weft_connections_reclaimed_total") && !l.ends_with(" 0")),
        "{text}"
    );
}

/// The process model: a keep-alive connection a lingering child gives back under pressure
/// keeps the keep-alive timeout from its last data, not a new one from the hand-back.
#[test]
fn process_keepalive_runs_from_the_last_data_across_a_hand_back() {
    let srv = Builder::new(Model::PROCESS, "keepalive-hand-back")
        .config("[timeouts]\nkeepalive = \"4s\"\n[process]\nmax_children = 4\n")
        .start();
    let mut idle = served_conn(&srv);
    // Its child lingers for the next request, three of the four seconds.
    std::thread::sleep(Duration::from_secs(3));
    // Pressure: two more children, busy reading bodies (larger than the master reads ahead),
    // make three live (the mark for four): the lingering child gives the connection back.
    let post = b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 100000\r\n\r\n01234";
    let mut busy: Vec<Conn> = (0..2)
        .map(|_| {
            let mut c = srv.connect();
            c.send(post);
            c
        })
        .collect();
    // About a second of the timeout is left (four, were it counted from the hand-back).
    assert!(
        idle.closed_within(Duration::from_millis(2500)),
        "the keep-alive timeout began again at the hand-back\n{}",
        srv.log()
    );
    let rest = vec![b'x'; 100000 - 5];
    for c in &mut busy {
        c.send(&rest);
        let r = c.read_response().expect("a busy connection's answer");
        assert_eq!((r.status, r.body.len()), (200, 100000));
    }
}

fn running_out_of_descriptors_backs_off_and_recovers(model: Model) {
    // Few enough descriptors that 60 clients exhaust them (the server itself needs ~15).
    let srv = Builder::new(model, "emfile").nofile(48).start();
    let mut early: Vec<Conn> = Vec::new();
    let mut pending: Vec<Conn> = Vec::new();
    // A few clients beyond the limit, fewer than those served: once the served ones go, every
    // waiting one must get in (however many descriptors the server keeps for itself).
    for _ in 0..60 {
        if pending.len() == 4 {
            break;
        }
        let mut c = srv.connect();
        c.send(ECHO);
        if answered_within(&mut c, Duration::from_millis(300)) {
            assert_eq!(c.read_response().expect("response").status, 200);
            early.push(c);
        } else {
            pending.push(c);
        }
    }
    // The process model's master keeps a descriptor of every connection too (it holds idle
    // ones itself and takes back those its children give back), so it runs out like the
    // others.
    assert!(
        !pending.is_empty(),
        "all 60 clients were served with 48 descriptors"
    );
    // Out of descriptors the accept loop backs off instead of spinning on EMFILE.
    let t0 = cpu_ticks(srv.pid());
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(srv.pid()) - t0;
    // SAFETY: sysconf takes no pointers.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap_or(100);
    assert!(
        spent * 4 < hz,
        "{spent} ticks of CPU in 1 s while out of descriptors (busy loop?)"
    );
    // Connections already open are still served.
    early[0].send(ECHO);
    assert_eq!(early[0].read_response().expect("open conn").status, 200);
    // Freeing descriptors lets the waiting clients in.
    drop(early);
    for c in &mut pending {
        let r = c.read_response().expect("served after descriptors freed");
        assert_eq!(r.status, 200);
    }
    // Those clients keep their connections open, and a server near its limit may have no
    // descriptor left for another (the process model's master holds one of each, beside its
    // own): a new client is let in once they go.
    drop(pending);
    srv.assert_alive();
    // The process model's master stops accepting a few descriptors before the limit (it
    // needs one for each fork), the other models when accept fails.
    let log = srv.log();
    assert!(
        log.contains("accept failed") || log.contains("(open-file limit); not accepting"),
        "{log}"
    );
}

fn slow_clients_trickling_a_head_do_not_starve_normal_ones(model: Model) {
    const SLOW: usize = 200;
    let srv = Server::start(model, "slow-clients");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let addr = srv.addr;
    let st = stop.clone();
    let trickler = std::thread::spawn(move || {
        let mut slow: Vec<Conn> = (0..SLOW).map(|_| Conn::connect(addr)).collect();
        for c in &mut slow {
            c.send(b"GET / HTTP/1.1\r\nHost: test\r\nX-Slow: ");
        }
        let mut sent = 0;
        while !st.load(std::sync::atomic::Ordering::Relaxed) {
            for c in &mut slow {
                let _ = c.try_send(b"a");
            }
            sent += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        // Every slow connection is still open and waiting (none was answered or dropped).
        for c in &mut slow {
            c.stream.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            let r = c.stream.read(&mut b);
            assert!(
                matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
                "a slow connection got {r:?}"
            );
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(300));
    let normal: Vec<_> = (0..10)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                let mut slowest = Duration::ZERO;
                for _ in 0..20 {
                    let t = Instant::now();
                    c.send(ECHO);
                    let r = c.read_response().expect("echo");
                    assert_eq!(r.status, 200);
                    slowest = slowest.max(t.elapsed());
                }
                slowest
            })
        })
        .collect();
    let slowest = normal
        .into_iter()
        .map(|h| h.join().expect("normal client"))
        .max()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = trickler.join().expect("trickler");
    assert!(rounds > 0);
    // A generous bound: starved clients would wait for a slow head's 60 s timeout.
    assert!(
        slowest < Duration::from_secs(3),
        "a normal request took {slowest:?} beside {SLOW} slow clients"
    );
}

/// `limits.max_discard_body`: a body the handler did not read (a GET of a file with a body) is
/// dropped to keep the connection when it is within the limit, and closes the connection when
/// it is over it; either way the answer to the request itself is the file.
fn an_unread_body_is_discarded_up_to_max_discard_body(model: Model) {
    for (limit, body, kept) in [(4096u64, 3000usize, true), (1024, 3000, false)] {
        let srv = Builder::new(model, "discard-body")
            .file("f.txt", b"file\n")
            .config(&format!("[limits]\nmax_discard_body = {limit}\n"))
            .start();
        let mut c = srv.connect();
        let mut req = format!("GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {body}\r\n\r\n")
            .into_bytes();
        req.extend(std::iter::repeat_n(b'x', body));
        c.send(&req);
        let r = c.read_response().expect("the file");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"file\n"[..]),
            "limit {limit}"
        );
        if kept {
            assert!(!r.closes(), "limit {limit}: the connection should stay");
            c.send(b"GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(
                c.read_response().expect("second").status,
                200,
                "limit {limit}"
            );
        } else {
            assert!(
                r.closes() || c.closed_within(Duration::from_secs(5)),
                "limit {limit}: an over-limit unread body must close the connection"
            );
        }
    }
}
