//! The access log: Combined Log Format lines, flushed at least once a second and at exit.

use std::time::{Duration, Instant};

use crate::common::{Builder, Model, INDEX_HTML};

per_model! {
    combined_log_format_flushed_within_a_second_and_at_exit,
    sigusr1_reopens_the_log_at_its_path_after_a_rename,
    refused_heads_are_logged_with_their_first_line,
    a_body_that_stops_or_is_cut_short_is_answered_and_logged,
    a_response_cut_short_is_logged_with_the_bytes_sent,
    json_and_template_formats,
    request_and_upstream_times_through_the_proxy,
}

/// Checks one Combined Log Format line:
/// `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1" 200 2326 "ref" "agent"`.
fn check_line(line: &str, request: &str, status: u16, bytes: usize, referer: &str, agent: &str) {
    let rest = line
        .strip_prefix("127.0.0.1 - - [")
        .unwrap_or_else(|| panic!("{line}"));
    let (time, rest) = rest.split_once("] ").unwrap_or_else(|| panic!("{line}"));
    // dd/Mon/yyyy:hh:mm:ss +0000
    let b = time.as_bytes();
    assert_eq!(time.len(), 26, "{time}");
    assert!(
        b[0..2].iter().all(u8::is_ascii_digit) && b[2] == b'/',
        "{time}"
    );
    assert!(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            .contains(&&time[3..6]),
        "{time}"
    );
    assert!(b[7..11].iter().all(u8::is_ascii_digit), "{time}");
    assert_eq!(&time[11..12], ":");
    assert_eq!(&time[20..], " +0000", "{time}");
    assert_eq!(
        rest,
        format!("\"{request}\" {status} {bytes} \"{referer}\" \"{agent}\""),
        "{line}"
    );
}

fn wait_for_lines(path: &std::path::Path, n: usize, within: Duration) -> Vec<String> {
    let end = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n || Instant::now() >= end {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn combined_log_format_flushed_within_a_second_and_at_exit(model: Model) {
    let b = Builder::new(model, "access");
    let log = b.dir().join("access.log");
    let mut srv = b.args(&["--access-log", log.to_str().unwrap()]).start();
    srv.send(b"GET /index.html?q=1 HTTP/1.1\r\nHost: x\r\nReferer: http://ref.example/\r\nUser-Agent: weft-test/1.0\r\nConnection: close\r\n\r\n");
    // Flushed by the once-a-second flusher (allow scheduling slack).
    let lines = wait_for_lines(&log, 1, Duration::from_secs(3));
    assert_eq!(lines.len(), 1, "{lines:?}");
    check_line(
        &lines[0],
        "GET /index.html?q=1 HTTP/1.1",
        200,
        INDEX_HTML.len(),
        "http://ref.example/",
        "weft-test/1.0",
    );

    // A 404, a HEAD (no body bytes) and a quote in the agent (escaped).
    srv.send(b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut c = srv.connect();
    c.send(b"HEAD / HTTP/1.0\r\nUser-Agent: a\"b\r\n\r\n");
    c.read_head_response().unwrap();
    // Flushed at exit even if the flusher has not run yet.
    srv.signal(libc::SIGTERM);
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exit")
        .success());
    let lines = wait_for_lines(&log, 3, Duration::ZERO);
    assert_eq!(lines.len(), 3, "{lines:?}");
    // The line is written after the response, so two connections may log in either order.
    let find = |what: &str| {
        lines[1..]
            .iter()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what} line in {lines:?}"))
    };
    let (_, tail) = find("\"GET /nope ").split_once("] ").unwrap();
    assert!(tail.starts_with("\"GET /nope HTTP/1.1\" 404 "), "{tail}");
    check_line(find("\"HEAD / "), "HEAD / HTTP/1.0", 200, 0, "-", "a\\x22b");
}

fn sigusr1_reopens_the_log_at_its_path_after_a_rename(model: Model) {
    let b = Builder::new(model, "reopen");
    let log = b.dir().join("access.log");
    let rotated = b.dir().join("access.log.1");
    let srv = b
        .args(&["--access-log", &log.display().to_string()])
        .start();
    assert_eq!(srv.get("/?before").status, 200);
    let lines = wait_for_lines(&log, 1, Duration::from_secs(5));
    assert!(lines.iter().any(|l| l.contains("/?before")), "{lines:?}");

    // logrotate: rename, then signal.
    std::fs::rename(&log, &rotated).unwrap();
    srv.signal(libc::SIGUSR1);
    // The signal is handled asynchronously (and by the process model's master between
    // accepts), so requests go on until one lands in a new file at the configured path.
    let end = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    loop {
        n += 1;
        assert_eq!(srv.get(&format!("/?after-{n}")).status, 200);
        // Lines are flushed once a second: any of the requests since the signal will do.
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("/?after-") {
            break;
        }
        assert!(Instant::now() < end, "no new file at {}", log.display());
        std::thread::sleep(Duration::from_millis(100));
    }
    // From then on every line goes to the new file, none to the renamed one.
    assert_eq!(srv.get("/?later").status, 200);
    let lines = wait_for_lines(&log, n + 1, Duration::from_secs(5));
    assert!(lines.iter().any(|l| l.contains("/?later ")), "{lines:?}");
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(old.contains("/?before "), "{old}");
    assert!(!old.contains("/?later"), "{old}");
    assert!(!lines.iter().any(|l| l.contains("/?before")), "{lines:?}");
    srv.assert_alive();
}

/// A head refused before it was read whole (no Host, an unsupported version, a header field
/// too large, one too slow) gets its access-log line too, as nginx logs them: the first line
/// as received and the error answer's body bytes.
fn refused_heads_are_logged_with_their_first_line(model: Model) {
    let b = Builder::new(model, "access-refused").config("[timeouts]\nheader_read = \"1s\"\n");
    let log = b.dir().join("access.log");
    let mut srv = b.args(&["--access-log", log.to_str().unwrap()]).start();
    let cases: [(&[u8], &str, u16); 3] = [
        (b"GET /t.txt HTTP/1.1\r\n\r\n", "GET /t.txt HTTP/1.1", 400),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", "GET / HTTP/2.0", 505),
        (
            b"\x16\x03\x01\x00\x05hello\r\n\r\n",
            "\\x16\\x03\\x01\\x00\\x05hello",
            400,
        ),
    ];
    let mut bodies = Vec::new();
    for (raw, _, status) in cases {
        let r = srv.send(raw);
        assert_eq!(r.status, status, "{raw:?}");
        bodies.push(r.body.len());
    }
    let big = format!(
        "GET /big HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(70_000)
    );
    let r = srv.send(big.as_bytes());
    assert_eq!(r.status, 431);
    let big_body = r.body.len();
    // Half a head, then silence past the header-read timeout: 408.
    let mut slow = srv.connect();
    slow.send(b"GET /slow HTTP/1.1\r\nHo");
    let r = slow.read_response().expect("a 408");
    assert_eq!(r.status, 408);
    let slow_body = r.body.len();
    srv.signal(libc::SIGTERM);
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exit")
        .success());
    let lines = wait_for_lines(&log, 5, Duration::ZERO);
    assert_eq!(lines.len(), 5, "{lines:?}");
    let find = |what: &str| {
        lines
            .iter()
            .find(|l| l.contains(&format!("\"{what}\"")))
            .unwrap_or_else(|| panic!("no line for {what}: {lines:?}"))
            .clone()
    };
    for ((_, line, status), body) in cases.iter().zip(bodies) {
        check_line(&find(line), line, *status, body, "-", "-");
    }
    check_line(
        &find("GET /big HTTP/1.1"),
        "GET /big HTTP/1.1",
        431,
        big_body,
        "-",
        "-",
    );
    check_line(
        &find("GET /slow HTTP/1.1"),
        "GET /slow HTTP/1.1",
        408,
        slow_body,
        "-",
        "-",
    );
}

/// A request whose body stops coming (408) or is cut short by the client closing its side
/// (400) is answered and logged the same on every model: the answer, an error-log line, an
/// access-log line with the request line.
fn a_body_that_stops_or_is_cut_short_is_answered_and_logged(model: Model) {
    let b = Builder::new(model, "access-body").config("[timeouts]\nbody_read = \"1s\"\n");
    let log = b.dir().join("access.log");
    let mut srv = b.args(&["--access-log", log.to_str().unwrap()]).start();
    let head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc";
    let mut stalled = srv.connect();
    stalled.send(head);
    let r = stalled
        .read_response()
        .expect("an answer to the stalled body");
    assert_eq!(r.status, 408);
    assert!(r.closes(), "{r:?}");
    let mut cut = srv.connect();
    cut.send(head);
    cut.shutdown_write();
    let r = cut.read_response().expect("an answer to the cut body");
    assert_eq!(r.status, 400);
    srv.signal(libc::SIGTERM);
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exit")
        .success());
    let lines = wait_for_lines(&log, 2, Duration::ZERO);
    assert_eq!(lines.len(), 2, "{lines:?}");
    for status in [408, 400] {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("\"POST /echo HTTP/1.1\" {status} "))),
            "{status}: {lines:?}"
        );
    }
    let errors = srv.log();
    assert!(errors.contains(": 408 request body"), "{errors}");
    assert!(
        errors.contains(": 400 request body cut short: the client closed its side"),
        "{errors}"
    );
}

/// A response cut short, by a client that stops reading (past the send timeout) or that goes
/// away, is logged with the body bytes that went out (as nginx's `$body_bytes_sent`), and the
/// error log says why.
fn a_response_cut_short_is_logged_with_the_bytes_sent(model: Model) {
    use std::io::Read;
    const SIZE: usize = 24 << 20;
    let big: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    let b = Builder::new(model, "access-cut")
        .config("[timeouts]\nsend = \"1s\"\n")
        .file("big.bin", &big);
    let log = b.dir().join("access.log");
    let srv = b.args(&["--access-log", log.to_str().unwrap()]).start();
    let fetch_some = |target: &str| {
        let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
        s.write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        let mut got = vec![0u8; 64 * 1024];
        s.read_exact(&mut got).unwrap();
        s
    };
    use std::io::Write;
    // Stops reading: the send timeout ends the response.
    let stalled = fetch_some("/big.bin?stalled");
    // Goes away.
    drop(fetch_some("/big.bin?gone"));
    let end = Instant::now() + Duration::from_secs(15);
    let lines = loop {
        let lines = wait_for_lines(&log, 2, Duration::from_secs(1));
        if lines.len() >= 2 || Instant::now() > end {
            break lines;
        }
    };
    drop(stalled);
    assert_eq!(lines.len(), 2, "{lines:?}\n{}", srv.log());
    for which in ["stalled", "gone"] {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("\"GET /big.bin?{which} HTTP/1.1\" 200 ")))
            .unwrap_or_else(|| panic!("no line for {which}: {lines:?}"));
        let bytes: u64 = line
            .split("\" 200 ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        // The process model's write completion: a child whose client fell behind hands the
        // rest to the master and logs what it handed over (the whole body here); the master's
        // error-log line says how much of it did not go.
        let handed = model.name == "process" && bytes == SIZE as u64;
        assert!(
            bytes > 0 && (bytes < SIZE as u64 || handed),
            "{which}: {bytes} bytes: {line}"
        );
    }
    // (The master's line comes when it meets the stalled client's close.)
    let cuts = |errors: &str| {
        errors.matches("200 response cut short").count()
            + errors.matches("bytes unsent by the master").count()
    };
    let end = Instant::now() + Duration::from_secs(5);
    while cuts(&srv.log()) < 2 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let errors = srv.log();
    assert_eq!(cuts(&errors), 2, "{errors}");
}

/// `access_log_format = "json"`: a JSON object a line, valid whatever bytes the client sent;
/// a template: nginx's variables, escaped.
fn json_and_template_formats(model: Model) {
    let b = Builder::new(model, "access-json");
    let log = b.dir().join("access.log");
    let mut srv = b
        .config(&format!(
            "access_log = {:?}\naccess_log_format = \"json\"\n",
            log.display().to_string()
        ))
        .start();
    let mut req = b"GET /index.html?q=%FF HTTP/1.1\r\nHost: json.test\r\nUser-Agent: a\"b\\c\xc3\xa9\xff\xfe\r\n\
        Referer: http://ref.example/\r\nConnection: close\r\n\r\n"
        .to_vec();
    assert_eq!(srv.send(&req).status, 200);
    srv.signal(libc::SIGTERM);
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exit")
        .success());
    let lines = wait_for_lines(&log, 1, Duration::ZERO);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let v: serde_json::Value = serde_json::from_str(&lines[0]).expect("a JSON line");
    assert_eq!(v["status"], 200);
    assert_eq!(v["request"], "GET /index.html?q=%FF HTTP/1.1");
    assert_eq!(v["host"], "json.test");
    assert_eq!(v["remote_addr"], "127.0.0.1");
    assert_eq!(v["body_bytes_sent"], INDEX_HTML.len());
    // Text as text (é), the bytes that are not UTF-8 as \xHH.
    assert_eq!(v["http_user_agent"], "a\"b\\cé\\xFF\\xFE");
    assert_eq!(v["http_referer"], "http://ref.example/");
    assert_eq!(v["scheme"], "http");
    assert!(v["ssl_protocol"].is_null());
    // A template.
    let b = Builder::new(model, "access-template");
    let log = b.dir().join("access.log");
    let mut srv = b
        .config(&format!(
            "access_log = {:?}\n\
             access_log_format = '$remote_addr $host \"$request_method $uri?$args\" $status $http_x_request_id'\n",
            log.display().to_string()
        ))
        .start();
    req = b"GET /index.html?a=1 HTTP/1.1\r\nHost: t.test\r\nX-Request-Id: r-42\r\nConnection: close\r\n\r\n"
        .to_vec();
    assert_eq!(srv.send(&req).status, 200);
    srv.signal(libc::SIGTERM);
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exit")
        .success());
    let lines = wait_for_lines(&log, 1, Duration::ZERO);
    assert_eq!(lines, ["127.0.0.1 t.test \"GET /index.html?a=1\" 200 r-42"]);
}

/// `$request_time` and `$upstream_response_time` (nginx's) for a proxied request and for a
/// file: the upstream's time is there for the first, `-` for the second.
fn request_and_upstream_times_through_the_proxy(model: Model) {
    let upstream = Builder::new(model, "access-upstream").start();
    // Its own /echo off: the upstream's answers.
    let b = Builder::new(model, "access-times").no_echo();
    let log = b.dir().join("access.log");
    let proxy = format!("/echo=http://{}", upstream.addr);
    let mut srv = b
        .config(&format!(
            "access_log = {:?}\n\
             access_log_format = '$uri $status $request_time $upstream_response_time'\n",
            log.display().to_string()
        ))
        .args(&["--proxy", &proxy])
        .start();
    assert_eq!(srv.get("/echo").body, b"echo");
    assert_eq!(srv.get("/index.html").status, 200);
    srv.signal(libc::SIGTERM);
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exit")
        .success());
    let mut lines = wait_for_lines(&log, 2, Duration::ZERO);
    assert_eq!(lines.len(), 2, "{lines:?}");
    // In the order the responses went out, which the client cannot see.
    lines.sort();
    let fields: Vec<Vec<&str>> = lines.iter().map(|l| l.split(' ').collect()).collect();
    let secs = |s: &str| -> f64 {
        assert!(s.len() >= 5 && s.as_bytes()[s.len() - 4] == b'.', "{s}");
        s.parse().unwrap()
    };
    assert_eq!(&fields[0][..2], ["/echo", "200"], "{lines:?}");
    assert!(secs(fields[0][2]) < 10.0, "{lines:?}");
    assert!(secs(fields[0][3]) <= secs(fields[0][2]), "{lines:?}");
    assert_eq!(&fields[1][..2], ["/index.html", "200"], "{lines:?}");
    assert!(secs(fields[1][2]) < 10.0, "{lines:?}");
    assert_eq!(fields[1][3], "-", "{lines:?}");
}
