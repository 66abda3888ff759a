//! systemd integration, black-box: socket activation (a listening socket handed to the `weft`
//! binary at descriptor 3 with `LISTEN_PID`/`LISTEN_FDS`/`LISTEN_FDNAMES`, as systemd does) and
//! `sd_notify` (READY=1, RELOADING=1, STOPPING=1 received on a `NOTIFY_SOCKET` datagram socket
//! the test binds).

mod common;

use std::fs;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;

use common::handover::{get_index, recv_notify, serve, site, WAIT};
use common::{Launch, INDEX_HTML};

#[test]
fn a_socket_handed_over_is_matched_by_address_and_served() {
    let dir = site("activation-addr");
    // The test binds; weft must serve on this very socket (it cannot bind the port itself
    // while the test holds it, having no SO_REUSEPORT on this one).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = serve(&dir, &format!("{addr}=thread"), listener.as_raw_fd())
        .env("LISTEN_FDNAMES", "http")
        .start();
    let r = get_index(addr, &server);
    assert_eq!(r.status, 200, "log:\n{}", server.log());
    assert_eq!(r.body, INDEX_HTML);
    assert!(
        server.log().contains("handed-over socket"),
        "log:\n{}",
        server.log()
    );
}

#[test]
fn a_socket_handed_over_is_matched_by_name_on_the_fiber_model() {
    let dir = site("activation-name");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // A different address in the configuration: only the name ties the socket to it.
    let root = dir.join("root");
    fs::write(
        dir.join("weft.toml"),
        format!(
            "root = {:?}\n[[listen]]\naddr = \"127.0.0.1:9\"\nmodel = \"fiber\"\nname = \"web\"\n",
            root.to_str().unwrap()
        ),
    )
    .unwrap();
    let config = dir.join("weft.toml");
    let server = Launch::serve(&dir)
        .arg("--config")
        .arg(&config)
        .args(["--threads", "2"])
        .hand_over(&[listener.as_raw_fd()])
        .env("LISTEN_FDNAMES", "web")
        .start();
    // Several connections: with two workers sharing the one socket, all are served.
    for _ in 0..4 {
        let r = get_index(addr, &server);
        assert_eq!(r.status, 200, "log:\n{}", server.log());
        assert_eq!(r.body, INDEX_HTML);
    }
}

#[test]
fn a_descriptor_that_is_not_a_listening_socket_stops_the_start_with_a_clear_error() {
    let dir = site("activation-bad");
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let unlistened =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let file = fs::File::open(dir.join("root/index.html")).unwrap();
    for fd in [udp.as_raw_fd(), unlistened.as_raw_fd(), file.as_raw_fd()] {
        let mut server = serve(&dir, "127.0.0.1:0", fd).start();
        let exit = server.exit_within(WAIT);
        assert_eq!(exit.code(), Some(1), "log:\n{}", server.log());
        assert!(
            server
                .log()
                .contains("descriptor 3 (unknown) is not a listening stream socket"),
            "log:\n{}",
            server.log()
        );
    }
}

#[test]
fn names_that_do_not_match_the_count_stop_the_start() {
    let dir = site("activation-names");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut server = serve(&dir, "127.0.0.1:0", listener.as_raw_fd())
        .env("LISTEN_FDNAMES", "a:b")
        .start();
    assert_eq!(server.exit_within(WAIT).code(), Some(1));
    assert!(
        server
            .log()
            .contains("socket activation: invalid LISTEN_FDNAMES"),
        "log:\n{}",
        server.log()
    );
}

#[test]
fn sd_notify_tells_ready_reloading_and_stopping() {
    let dir = site("activation-notify");
    let path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(WAIT)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut server = serve(&dir, &format!("{addr}=thread"), listener.as_raw_fd())
        .env("NOTIFY_SOCKET", &path)
        .start();
    assert_eq!(recv_notify(&sock, &server).trim(), "READY=1");
    assert_eq!(get_index(addr, &server).status, 200);
    server.signal(libc::SIGHUP);
    let reloading = recv_notify(&sock, &server);
    let mut lines = reloading.lines();
    assert_eq!(lines.next(), Some("RELOADING=1"), "{reloading}");
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading}"
    );
    assert_eq!(recv_notify(&sock, &server).trim(), "READY=1");
    server.signal(libc::SIGTERM);
    assert_eq!(recv_notify(&sock, &server).trim(), "STOPPING=1");
    assert_eq!(server.exit_within(WAIT).code(), Some(0));
}

/// In this process (the only test here that touches the environment): the variables are
/// removed whatever they held, so no child or later upgrade mistakes them for its own.
#[test]
fn taking_the_sockets_removes_the_variables() {
    use weft::activation::{Activation, READY_FD};
    let vars = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", READY_FD];
    // Ours, no sockets, and a ready descriptor that is no number: an error, variables gone.
    std::env::set_var("LISTEN_PID", std::process::id().to_string());
    std::env::set_var("LISTEN_FDS", "0");
    std::env::set_var(READY_FD, "x");
    let err = Activation::from_env().expect_err("bad ready descriptor");
    assert!(err.to_string().contains("bad descriptor `x`"), "{err}");
    for v in vars {
        assert!(std::env::var_os(v).is_none(), "{v} left set");
    }
    // Another process's sockets: none taken (their names not even checked), variables gone.
    std::env::set_var("LISTEN_PID", "1");
    std::env::set_var("LISTEN_FDS", "2");
    std::env::set_var("LISTEN_FDNAMES", "a:b:c");
    let a = Activation::from_env().expect("not ours");
    assert!(a.listeners.is_empty());
    for v in vars {
        assert!(std::env::var_os(v).is_none(), "{v} left set");
    }
}

/// `ListenStream=` and `FileDescriptorName=` of the shipped `deploy/systemd/weft.socket`.
fn shipped_socket() -> (String, String) {
    let unit = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/systemd/weft.socket"
    ))
    .unwrap();
    let key = |k: &str| {
        unit.lines()
            .find_map(|l| l.trim().strip_prefix(k)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("weft.socket has no {k}"))
            .trim()
            .to_string()
    };
    (key("ListenStream"), key("FileDescriptorName"))
}

/// The shipped systemd files work together: `systemd-socket-activate` binds what
/// `deploy/systemd/weft.socket` binds (its address, on a free port here) with its
/// `FileDescriptorName`, and starts weft with `deploy/systemd/weft.toml` as `weft.service`
/// does; weft claims the socket (by name: the port differs from the file's) and serves on it.
#[test]
fn the_shipped_socket_unit_and_configuration_serve_under_systemd_socket_activate() {
    let Ok(activate) = which("systemd-socket-activate") else {
        println!("skipped: systemd-socket-activate is not installed (apt-get install systemd)");
        return;
    };
    let (listen, name) = shipped_socket();
    let host = listen.rsplit_once(':').expect("host:port").0.to_string();
    let port = TcpListener::bind(format!("{host}:0"))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("{host}:{port}").parse().unwrap();
    let dir = site("activation-shipped");
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/systemd/weft.toml"
    );
    // systemd-socket-activate starts the program at the first connection: one waits.
    let first = std::thread::spawn(move || loop {
        if let Ok(mut c) = std::net::TcpStream::connect(addr) {
            use std::io::{Read, Write};
            c.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut got = String::new();
            let _ = c.read_to_string(&mut got);
            return got;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    });
    let server = Launch::serve(&dir)
        .exe(&activate)
        .arg("--config")
        .arg(config)
        .arg("--root")
        .arg(dir.join("root"))
        .pre_arg(common::launch::exe())
        .pre_arg(format!("--fdname={name}"))
        .pre_arg(format!("--listen={addr}"))
        .pre_arg("-EWEFT_LOG=debug")
        .start();
    let health = first.join().unwrap();
    assert!(
        health.starts_with("HTTP/1.1 200"),
        "{health}\n{}",
        server.log()
    );
    let r = get_index(addr, &server);
    assert_eq!(r.status, 200, "log:\n{}", server.log());
    assert!(
        server.log().contains("handed-over socket"),
        "{}",
        server.log()
    );
}

/// A socket handed over that no `[[listen]]` claims, on the port a listener wants: the error
/// names that socket and how to claim it, not "another process".
#[test]
fn a_handed_over_socket_no_listener_claims_is_named_in_the_error() {
    let dir = site("activation-unclaimed");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // All addresses, as the container's configuration listens (so, as root, --allow-root).
    let mut server = serve(&dir, &format!("0.0.0.0:{port}"), listener.as_raw_fd())
        .arg("--allow-root")
        .env("LISTEN_FDNAMES", "http")
        .start();
    assert_eq!(server.exit_within(WAIT).code(), Some(1));
    let log = server.log();
    assert!(
        log.contains(&format!(
            "it is the socket handed over on 127.0.0.1:{port} (FileDescriptorName=http), which \
             no [[listen]] claims: give this listener addr = \"127.0.0.1:{port}\" or name = \"http\""
        )),
        "{log}"
    );
}

fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or(())
}
