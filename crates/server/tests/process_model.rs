//! The `process` model's own promises (issue 5), black-box: every connection process is
//! reaped (no zombies), `process.max_children` bounds the live ones, and SIGTERM reaches them
//! and the server waits for them.
//!
//! The process tree: the test starts `weft` (the server process), which forks the model's
//! master before it starts any thread; the master forks one child per connection. The tree is
//! read from `/proc/<pid>/stat` (parent id and state).

/// The model every server of this binary is started with.
const MODEL: Model = Model::PROCESS;

mod common;

use std::time::{Duration, Instant};

use common::{Builder, Model, Server, INDEX_HTML};

/// Longest wait for the process tree to reach an expected shape.
const TREE_DEADLINE: Duration = Duration::from_secs(5);

/// One process as `/proc/<pid>/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proc {
    pid: i32,
    ppid: i32,
    state: char,
}

/// Every process whose parent is `parent`.
fn children_of(parent: i32) -> Vec<Proc> {
    common::processes()
        .into_iter()
        .filter(|&(_, ppid, _)| ppid as i32 == parent)
        .map(|(pid, ppid, state)| Proc {
            pid: pid as i32,
            ppid: ppid as i32,
            state,
        })
        .collect()
}

/// `n` connections whose `POST /echo` body is still arriving (2 of its 4 bytes sent), each
/// holding a child: a request whose body is still arriving holds its child (an idle connection
/// would not: the master keeps those itself, and with `client_body_buffer = 0`, which the
/// server must be configured with, it reads no body ahead). Sending `cd` completes one.
fn hold_children(srv: &Server, n: usize) -> Vec<common::Conn> {
    (0..n)
        .map(|_| {
            let mut c = srv.connect();
            c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab");
            c
        })
        .collect()
}

/// The process model's master: the one child of the server process.
fn master(srv: &Server) -> i32 {
    let server = srv.pid() as i32;
    let deadline = Instant::now() + TREE_DEADLINE;
    loop {
        let kids = children_of(server);
        if kids.len() == 1 {
            return kids[0].pid;
        }
        assert!(
            Instant::now() < deadline,
            "the server process should have exactly one child (the master): {kids:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls until `master` has no child left, not even a zombie.
#[track_caller]
fn assert_children_reach_zero(master: i32) {
    let deadline = Instant::now() + TREE_DEADLINE;
    loop {
        let kids = children_of(master);
        if kids.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "connection processes left {TREE_DEADLINE:?} after their connections closed: {kids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True if `pid` is gone (or is no longer one of the weft processes: the id was reused).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Err(_) => true,
        Ok(comm) => !comm.starts_with("weft"),
    }
}

#[test]
fn every_connection_process_is_reaped() {
    let srv = Server::start(MODEL, "process-reap");
    let master = master(&srv);
    // Connections closed by the client after one request, by the server (Connection: close),
    // and after several keep-alive requests.
    for i in 0..12 {
        let mut c = srv.connect();
        let requests = 1 + i % 3;
        for _ in 0..requests {
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            let r = c.read_response().expect("response");
            assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
        }
        if i % 2 == 0 {
            drop(c);
        } else {
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            assert!(c.read_response().expect("response").closes());
            assert!(c.closed_within(Duration::from_secs(5)));
        }
    }
    assert_children_reach_zero(master);
    // Still serving, and that connection's process is reaped too.
    srv.assert_alive();
    assert_children_reach_zero(master);
    let zombies: Vec<Proc> = children_of(srv.pid() as i32)
        .into_iter()
        .filter(|p| p.state == 'Z')
        .collect();
    assert!(zombies.is_empty(), "the master is a zombie: {zombies:?}");
}

#[test]
fn max_children_holds_a_third_request_until_a_child_is_free() {
    let srv = Builder::new(MODEL, "process-limit")
        .config("[process]\nmax_children = 2\n[limits]\nclient_body_buffer = 0\n")
        .start();
    let master = master(&srv);
    let mut held = hold_children(&srv, 2);
    let deadline = Instant::now() + TREE_DEADLINE;
    while children_of(master).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "two requests did not get children"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // The master reads the third head, but no child is free to serve it yet.
    let mut third = srv.connect();
    third.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    third
        .stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0u8; 1];
    match third.stream.peek(&mut byte) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!("a third request was served with max_children = 2: {other:?}"),
    }
    assert_eq!(children_of(master).len(), 2, "more than max_children live");

    // One request ends (its client goes away): its process exits, is reaped, and the third
    // request gets a child.
    drop(held.remove(0));
    let r = third.read_response().expect("the third request is served");
    assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
    assert!(children_of(master).len() <= 2);
    // The one still held is served on as before.
    held[0].send(b"cd");
    let r = held[0].read_response().expect("response");
    assert_eq!((r.status, r.body.as_slice()), (200, b"abcd".as_slice()));
    drop(held);
    drop(third);
    assert_children_reach_zero(master);
}

/// A child lingering for its connection's next request sleeps until the request comes, or
/// until the master says children are scarce (it raises a flag the child waits on), and then
/// gives the connection back at once; the connection is served on.
#[test]
fn a_lingering_child_sleeps_until_its_client_or_the_pressure_comes() {
    // Pressure from 3 live children (three quarters of 4).
    let srv = Builder::new(MODEL, "process-linger")
        .config("[process]\nmax_children = 4\n[limits]\nclient_body_buffer = 0\n")
        .start();
    let master = master(&srv);
    let mut a = srv.connect();
    a.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(a.read_response().expect("response").body, INDEX_HTML);
    let kids = children_of(master);
    assert_eq!(kids.len(), 1, "{kids:?}");
    let child = kids[0].pid;

    // Asleep: no slice of a few milliseconds to look at the pressure (that was 50 wake-ups a
    // second).
    std::thread::sleep(Duration::from_millis(200));
    let before = common::thread_switches(child as u32);
    std::thread::sleep(Duration::from_secs(1));
    let woke = common::thread_switches(child as u32) - before;
    assert_eq!(woke, 0, "the lingering child switched {woke} times in 1 s");
    // Its client's next request wakes it.
    a.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(a.read_response().expect("response").body, INDEX_HTML);
    let pids = |v: Vec<Proc>| v.into_iter().map(|p| p.pid).collect::<Vec<_>>();
    // (By pid: the child's state may read running or sleeping at this moment.)
    assert_eq!(
        pids(children_of(master)),
        [child],
        "served by the same child"
    );

    // Past its first slice (a wait on the connection alone) the child sleeps on the flag too.
    std::thread::sleep(Duration::from_millis(200));
    // Two requests whose bodies are still arriving hold two more children: three live, and
    // the lingering one gives its connection back (a flag it did not see would leave it
    // lingering until the keep-alive timeout).
    let held = hold_children(&srv, 2);
    let deadline = Instant::now() + TREE_DEADLINE;
    while !gone(child) {
        assert!(
            Instant::now() < deadline,
            "the lingering child kept its connection with three children live: {:?}",
            children_of(master)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The master took the connection back: its next request is served.
    a.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(a.read_response().expect("response").body, INDEX_HTML);
    drop(held);
    drop(a);
    assert_children_reach_zero(master);
}

#[test]
fn sigterm_reaches_connection_processes_and_the_server_waits_for_them() {
    // A grace period far longer than the test may take: an exit within it that is also well
    // under it shows the children ended on SIGTERM, not killed when the grace ran out.
    let mut srv = Builder::new(MODEL, "process-sigterm")
        .config("[timeouts]\nshutdown_grace = \"20s\"\n")
        .start();
    let master = master(&srv);
    let mut idle = srv.connect();
    idle.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(idle.read_response().expect("response").body, INDEX_HTML);
    let kids = children_of(master);
    assert_eq!(kids.len(), 1, "{kids:?}");
    let child = kids[0].pid;

    let start = Instant::now();
    srv.signal(libc::SIGTERM);
    assert!(
        idle.closed_within(Duration::from_secs(5)),
        "the idle keep-alive connection is still open after SIGTERM"
    );
    let status = srv
        .wait_exit(Duration::from_secs(10))
        .expect("the server did not exit after SIGTERM");
    assert!(status.success(), "{status:?}; log:\n{}", srv.log());
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "exit took {:?}",
        start.elapsed()
    );
    // The server reaps the master, the master its children: both are gone by now.
    assert!(gone(master), "the master outlived the server");
    assert!(gone(child), "a connection process outlived the server");
    let log = srv.log();
    assert!(
        !log.contains("grace period"),
        "children had to be killed after the grace period:\n{log}"
    );
}

/// SIGTERM to the master alone, or to the whole process group at once (the server and its
/// master each get it, in either order: `kill -TERM -PGID`, or a supervisor that signals every
/// process): the server stops gracefully and exits 0, with no error.
#[test]
fn sigterm_to_the_master_or_the_group_is_a_graceful_stop() {
    for whole_group in [false, true] {
        let mut srv = Builder::new(MODEL, "process-group-term").start();
        let master = master(&srv);
        let mut c = srv.connect();
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.read_response().expect("response").body, INDEX_HTML);
        if whole_group {
            // Both, the master first: what a group signal can look like from the server.
            // SAFETY: kill takes plain integers.
            assert_eq!(unsafe { libc::kill(master, libc::SIGTERM) }, 0);
            srv.signal(libc::SIGTERM);
        } else {
            // SAFETY: as above.
            assert_eq!(unsafe { libc::kill(master, libc::SIGTERM) }, 0);
        }
        let status = srv
            .wait_exit(Duration::from_secs(10))
            .expect("the server did not exit");
        let log = srv.log();
        assert!(
            status.success(),
            "group {whole_group}: {status:?}; log:\n{log}"
        );
        assert!(!log.contains("ERROR"), "group {whole_group}:\n{log}");
        assert!(gone(master), "the master outlived the server");
    }
}

/// The `cache` object of `/_weft/status.json`, asked on a connection of its own (so of a
/// connection process of its own).
fn cache_status(srv: &Server) -> serde_json::Value {
    let r = srv.get("/_weft/status.json");
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("status.json is JSON");
    v["cache"].clone()
}

#[test]
fn connection_processes_fill_no_cache_and_count_their_misses() {
    let body = b"served by a connection process\n".repeat(10);
    let srv = Builder::new(MODEL, "process-cache")
        .args(&["--status"])
        .file("page.txt", &body)
        .start();
    let counter = |c: &serde_json::Value, name: &str| {
        c[name]
            .as_u64()
            .unwrap_or_else(|| panic!("no {name} in {c}"))
    };
    // Wait past the cache's settle time, so a fill would be allowed on every other model.
    std::thread::sleep(Duration::from_millis(1200));
    // A connection process serves one connection and exits: filling its cache would read,
    // copy and drop the file, dearer than sendfile. Every GET is a miss served from disk,
    // counted in the counters every process shares.
    let before = cache_status(&srv);
    let mut c = srv.connect();
    for _ in 0..3 {
        c.send(b"GET /page.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.read_response().expect("response").body, body);
    }
    drop(c);
    let after = cache_status(&srv);
    assert_eq!(
        counter(&after, "fills"),
        counter(&before, "fills"),
        "{after}"
    );
    assert_eq!(counter(&after, "hits"), counter(&before, "hits"), "{after}");
    assert_eq!(
        counter(&after, "misses"),
        counter(&before, "misses") + 3,
        "{before} then {after}"
    );
    assert_eq!(
        (counter(&after, "entries"), counter(&after, "bytes")),
        (0, 0),
        "{after}"
    );
}

/// Open descriptors of process `pid`.
fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The master's descriptors once it is in its loop. It is forked before its setup is done (it
/// closes what it inherited from the server's process and opens its own), so a count taken as
/// soon as it exists can be short by one (seen in CI, 2026-11-28: 7 before, 8 after): one
/// request through it, its child gone, and two counts a sweep period apart that agree.
fn settled_fd_count(srv: &Server, master: i32) -> usize {
    let r = srv.get("/echo");
    assert_eq!((r.status, r.body.as_slice()), (200, b"echo".as_slice()));
    assert_children_reach_zero(master);
    let deadline = Instant::now() + TREE_DEADLINE;
    let mut last = fd_count(master);
    loop {
        std::thread::sleep(Duration::from_millis(60));
        let now = fd_count(master);
        if now == last {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the master's descriptors do not settle"
        );
        last = now;
    }
}

/// What each of `pid`'s descriptors is (`3 -> socket:[123]`, ...), for a failure message.
fn fd_list(pid: i32) -> Vec<String> {
    let mut fds: Vec<(u32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.parse().ok()?;
            let to = std::fs::read_link(e.path()).ok()?;
            Some((n, to.display().to_string()))
        })
        .collect();
    fds.sort();
    fds.into_iter()
        .map(|(n, to)| format!("{n} -> {to}"))
        .collect()
}

/// Raises this test process's open-file limit to at least `n` (within the hard limit).
fn raise_nofile(n: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for getrlimit to fill.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    if lim.rlim_cur < n {
        lim.rlim_cur = n.min(lim.rlim_max);
        // SAFETY: `lim` is a valid rlimit read from the kernel with the soft limit raised.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    }
    assert!(
        lim.rlim_cur >= n,
        "the open-file limit ({}) is below the {n} this test needs",
        lim.rlim_cur
    );
}

/// Issue 29: connections that only hold a socket (idle on keep-alive after a request, or a
/// head without its final CRLF) are held by the master, not by children; 1,000 of each do not
/// keep a normal client from being answered, with only 16 children allowed.
#[test]
fn idle_and_partial_connections_do_not_exhaust_the_children() {
    const IDLE: usize = 1000;
    const PARTIAL: usize = 1000;
    raise_nofile((IDLE + PARTIAL) as u64 + 256);
    let srv = Builder::new(MODEL, "process-idle")
        .config("[process]\nmax_children = 16\n")
        .start();
    let master = master(&srv);
    let fds_before = settled_fd_count(&srv, master);
    let listed_before = fd_list(master);

    let mut idle: Vec<_> = (0..IDLE)
        .map(|_| {
            let mut c = srv.connect();
            c.send(b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
            let r = c.read_response().expect("an idle-to-be client's request");
            assert_eq!((r.status, r.body.as_slice()), (200, b"echo".as_slice()));
            c
        })
        .collect();
    let mut partial: Vec<_> = (0..PARTIAL)
        .map(|_| {
            let mut c = srv.connect();
            c.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
            c
        })
        .collect();
    assert!(
        children_of(master).len() <= 16,
        "more than max_children live"
    );

    // A normal client, on new connections and on one kept alive: every request is answered
    // (the read deadline of `read_response` is the failure condition). Before the master held
    // idle connections, this one waited for the keep-alive timeout of a held child.
    let mut kept = srv.connect();
    for _ in 0..20 {
        let r = srv.get("/echo");
        assert_eq!((r.status, r.body.as_slice()), (200, b"echo".as_slice()));
        kept.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = kept
            .read_response()
            .expect("the normal client's keep-alive request");
        assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
    }

    // The connections the master held are still served: an idle one's next request, and a
    // partial head completed (the bytes the master read reach the child).
    for c in idle.iter_mut().step_by(100) {
        c.send(b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c
            .read_response()
            .expect("an idle connection's next request");
        assert_eq!((r.status, r.body.as_slice()), (200, b"echo".as_slice()));
    }
    for c in partial.iter_mut().step_by(100) {
        c.send(b"\r\n");
        let r = c.read_response().expect("a completed partial head");
        assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
    }

    // Every connection closed: every child exits and the master's descriptors are what they
    // were before (none leaked).
    drop(idle);
    drop(partial);
    drop(kept);
    assert_children_reach_zero(master);
    let deadline = Instant::now() + TREE_DEADLINE;
    while fd_count(master) != fds_before {
        assert!(
            Instant::now() < deadline,
            "the master has {} descriptors open, {fds_before} before the clients came: \
             {:?} now, {listed_before:?} before",
            fd_count(master),
            fd_list(master)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    srv.assert_alive();
}

/// The master applies the header timeout to a partial head it holds (408, one log line) and
/// the keep-alive timeout to an idle connection it took back from a child.
#[test]
fn the_master_times_out_partial_heads_and_idle_connections() {
    // max_children = 1: the one child is always scarce, so it gives its connection back to
    // the master as soon as the response is out.
    let srv = Builder::new(MODEL, "process-timeouts")
        .config(
            "[process]\nmax_children = 1\n[timeouts]\nheader_read = \"1s\"\nkeepalive = \"1s\"\n",
        )
        .start();
    let master = master(&srv);

    let mut partial = srv.connect();
    partial.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
    let r = partial.read_response().expect("408 for a partial head");
    assert_eq!(r.status, 408, "{r:?}");
    assert!(r.closes(), "{r:?}");
    assert!(partial.closed_within(Duration::from_secs(5)));

    let mut idle = srv.connect();
    idle.send(b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(idle.read_response().expect("response").body, b"echo");
    assert_children_reach_zero(master);
    assert!(
        idle.closed_within(Duration::from_secs(5)),
        "an idle connection the master held outlived the keep-alive timeout"
    );
    let log = srv.log();
    assert_eq!(
        log.matches("408 request head not received in time").count(),
        1,
        "{log}"
    );
}

/// SIGTERM drains the connections the master holds as nginx does: idle ones it took back close
/// at once; a request whose head has begun is still read and answered (with `Connection:
/// close`); then the server exits without waiting for the grace period.
#[test]
fn sigterm_closes_idle_connections_and_answers_begun_heads() {
    let mut srv = Builder::new(MODEL, "process-held-sigterm")
        .config("[process]\nmax_children = 1\n[timeouts]\nshutdown_grace = \"20s\"\n")
        .start();
    let master = master(&srv);
    let mut idle: Vec<_> = (0..3)
        .map(|_| {
            let mut c = srv.connect();
            c.send(b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(c.read_response().expect("response").body, b"echo");
            c
        })
        .collect();
    let mut begun: Vec<_> = (0..2)
        .map(|_| {
            let mut c = srv.connect();
            c.send(b"GET /echo HTTP/1.1\r\nHost: t\r\n");
            c
        })
        .collect();
    // With one child allowed, every idle connection went back to the master.
    assert_children_reach_zero(master);

    srv.signal(libc::SIGTERM);
    for c in &mut idle {
        assert!(
            c.closed_within(Duration::from_secs(5)),
            "an idle connection the master held is still open after SIGTERM"
        );
    }
    for c in &mut begun {
        c.send(b"\r\n");
        let r = c.read_response().expect("a begun request is answered");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]));
        assert!(r.closes(), "{r:?}");
        assert!(c.closed_within(Duration::from_secs(5)));
    }
    let status = srv
        .wait_exit(Duration::from_secs(10))
        .expect("the server did not exit after SIGTERM");
    assert!(status.success(), "{status:?}; log:\n{}", srv.log());
    assert!(gone(master), "the master outlived the server");
    assert!(!srv.log().contains("grace period"), "{}", srv.log());
}

/// The status page counts the connections the master holds as open, beside those children
/// serve.
#[test]
fn status_counts_the_connections_the_master_holds() {
    let srv = Builder::new(MODEL, "process-held-status")
        .args(&["--status"])
        .config("[process]\nmax_children = 1\n")
        .start();
    let mut conns: Vec<_> = (0..3)
        .map(|_| {
            let mut c = srv.connect();
            c.send(b"GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
            assert_eq!(c.read_response().expect("response").body, b"echo");
            c
        })
        .collect();
    for _ in 0..2 {
        let mut c = srv.connect();
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n");
        conns.push(c);
    }
    // Five held and the status request's own connection; polled, as the master accepts the
    // partial heads' connections in its own time.
    let deadline = Instant::now() + TREE_DEADLINE;
    loop {
        let r = srv.get("/_weft/status.json");
        assert_eq!(r.status, 200, "{r:?}");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("status.json is JSON");
        let open = v["listeners"][0]["connections_open"]
            .as_u64()
            .unwrap_or_else(|| panic!("no connections_open in {v}"));
        if open == 6 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "connections_open is {open}, not 6"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(conns);
}

/// Connection processes share the server's stderr: each error-log line is written whole, so
/// lines from many at once never interleave.
#[test]
fn error_log_lines_of_concurrent_connection_processes_stay_whole() {
    let srv = Builder::new(MODEL, "process-log-lines").start();
    for _ in 0..5 {
        let clients: Vec<_> = (0..40)
            .map(|_| {
                let mut c = srv.connect();
                // No Host: each connection process answers 400 and logs why.
                c.send(
                    b"GET /index.html HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
                );
                c
            })
            .collect();
        for mut c in clients {
            assert_eq!(c.read_response().expect("an answer").status, 400);
        }
    }
    let log = srv.log();
    let refused = log.lines().filter(|l| l.contains("without Host")).count();
    assert!(refused >= 200, "{refused} lines for 200 refusals:\n{log}");
    for line in log.lines() {
        let days = [
            "Mon, ", "Tue, ", "Wed, ", "Thu, ", "Fri, ", "Sat, ", "Sun, ",
        ];
        assert!(
            days.iter().any(|d| line.starts_with(d)) && line.matches(" GMT [").count() == 1,
            "a broken line: {line:?}"
        );
    }
}
