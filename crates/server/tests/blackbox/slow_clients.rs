//! Slow clients (issue 24): hundreds of connections sending heads or bodies below the minimum
//! rates must not keep a normal client from its answers on any model, and each must be cut by
//! the rate (408 and a log line) long before the header-read and body-read timeouts. The full
//! 1,000 + 1,000 per model, with the normal client's latencies, is
//! `scripts/robustness/slow_min_rate.py`.

use crate::common::{Builder, Conn, Model};

per_model! {
    except fiber_nocache:
    slow_heads_and_bodies_are_cut_by_the_min_rate_and_hold_up_no_one,
    a_body_at_the_min_rate_is_not_cut,
}

/// Slow connections of each kind: enough to hold every process-model child and pipeline
/// process thread of the configuration below many times over, few enough for a loaded 2-core
/// machine.
const SLOW: usize = 150;

/// The timeouts are a minute: only the minimum rates (after a one-second grace) can cut the
/// slow clients within the harness's response deadline. Four children at most, so a child per
/// slow body would starve the normal client.
const CONFIG: &str = "[timeouts]\n\
    header_read = \"60s\"\n\
    body_read = \"60s\"\n\
    min_rate_grace = \"1s\"\n\
    header_min_rate = 100\n\
    body_min_rate = 100\n\
    [process]\n\
    max_children = 4\n";

fn slow_heads_and_bodies_are_cut_by_the_min_rate_and_hold_up_no_one(model: Model) {
    let srv = Builder::new(model, "slow-clients").config(CONFIG).start();
    let mut heads: Vec<Conn> = Vec::with_capacity(SLOW);
    let mut bodies: Vec<Conn> = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        // A slowloris: a head begun and never finished.
        let mut c = srv.connect();
        c.send(b"GET / HTTP/1.1\r\nHost: test\r\nX-a: ");
        heads.push(c);
        // A whole head, then a body that stops after a few bytes (small enough to be read
        // ahead by the process model's master and the pipeline's receive stage).
        let mut c = srv.connect();
        c.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n0123456789");
        bodies.push(c);
    }
    // A body larger than limits.client_body_buffer goes to the handler's reader: cut there.
    let mut big = srv.connect();
    big.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 100000\r\n\r\n0123456789");

    // The normal client, while all of them wait.
    for i in 0..5 {
        let r = srv.get("/");
        assert_eq!(r.status, 200, "normal request {i} beside the slow clients");
        let mut c = srv.connect();
        c.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello");
        let r = c
            .read_response()
            .expect("a normal POST beside the slow clients");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"hello"[..]));
    }

    for (kind, conns) in [("head", &mut heads), ("body", &mut bodies)] {
        for (i, c) in conns.iter_mut().enumerate() {
            let r = c
                .read_response()
                .unwrap_or_else(|e| panic!("slow {kind} {i}: no 408 from the min rate: {e:?}"));
            assert_eq!(r.status, 408, "slow {kind} {i}");
        }
    }
    let r = big.read_response().expect("the slow large body's 408");
    assert_eq!(r.status, 408);
    srv.assert_alive();
    let log = srv.log();
    assert!(
        log.contains("408 request head below timeouts.header_min_rate"),
        "no log line for the slow heads:\n{log}"
    );
    assert!(
        log.contains("timeouts.body_min_rate") || log.contains("TooSlow"),
        "no log line for the slow bodies:\n{log}"
    );
}

fn a_body_at_the_min_rate_is_not_cut(model: Model) {
    // A body that keeps just ahead of the rate (every byte earns 10 ms at 100 bytes/s; 50 are
    // sent every 100 ms) is read whole although it takes longer than the grace.
    let srv = Builder::new(model, "min-rate-ok").config(CONFIG).start();
    let mut c = srv.connect();
    c.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n");
    for _ in 0..20 {
        c.send(&[b'x'; 50]);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let r = c.read_response().expect("the body's answer");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, vec![b'x'; 1000]);
}
