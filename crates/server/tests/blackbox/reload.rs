//! SIGHUP re-reads the configuration: new connections get the new settings, open connections
//! keep theirs and are not dropped, and a broken file changes nothing (hardening).

use std::time::{Duration, Instant};

use crate::common::{Builder, Model};

per_model! {
    sighup_applies_the_new_config_to_new_connections_and_drops_none,
}

const ECHO: &[u8] = b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n";

/// Polls fresh connections until `GET path` answers `status` (a reload is asynchronous).
fn wait_for_status(srv: &crate::common::Server, path: &str, status: u16) {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let got = srv.get(path).status;
        if got == status {
            return;
        }
        assert!(
            Instant::now() < end,
            "GET {path} still {got}, not {status}; log:\n{}",
            srv.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sighup_applies_the_new_config_to_new_connections_and_drops_none(model: Model) {
    let srv = Builder::new(model, "reload")
        .config("[echo]\npath = \"/echo\"\n")
        .start();
    let config = srv.dir().join("weft.toml");
    let mut old = srv.connect();
    old.send(ECHO);
    assert_eq!(old.read_response().expect("echo").status, 200);

    std::fs::write(&config, "[echo]\npath = \"/ping\"\n").unwrap();
    srv.signal(libc::SIGHUP);
    wait_for_status(&srv, "/ping", 200);
    assert_eq!(srv.get("/ping").body, b"echo");
    assert_eq!(srv.get("/echo").status, 404);

    // The connection opened before the reload keeps its settings and was not dropped.
    old.send(ECHO);
    let r = old.read_response().expect("old connection still served");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]));

    // A broken file is refused and the running configuration stays.
    std::fs::write(&config, "[echo\npath = ").unwrap();
    srv.signal(libc::SIGHUP);
    let end = Instant::now() + Duration::from_secs(10);
    while !srv.log().contains("reload failed") {
        assert!(
            Instant::now() < end,
            "no reload error logged:\n{}",
            srv.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.get("/ping").status, 200);
    srv.assert_alive();
}
