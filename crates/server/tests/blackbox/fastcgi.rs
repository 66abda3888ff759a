//! FastCGI with Debian's php-fpm as the real application: each test starts its own php-fpm
//! from a configuration it writes (a Unix socket in the test's directory, two static
//! workers), and weft passes requests to it with `--fastcgi` or `[[fastcgi]]`. A small PHP
//! application covers GET with a query, POST forms and multipart uploads, a 10 MB streamed
//! response, headers and cookies, `Status`, redirects, PATH_INFO, a fatal error, a script
//! past the timeout, php-fpm stopped and restarted, and a front controller serving pretty URLs.
//!
//! Without php-fpm installed (`apt-get install php-fpm`; `.ci/run` installs it) each test
//! says so on stderr and passes without running.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::php_fpm::{php_fpm, PhpFpm};
use crate::common::{Builder, Model, Server};

per_model! {
    except fiber_nocache:
    php_scripts_get_their_variables_query_and_forms,
    uploads_and_a_streamed_10_mb_response,
    status_headers_cookies_and_redirects,
    path_info_index_and_the_front_controller,
    php_source_is_never_served,
    a_fatal_error_is_logged_and_answered,
    a_script_past_the_timeout_gets_504_and_the_next_request_its_own_answer,
    php_fpm_stopped_gets_502_and_restarted_is_reconnected,
    connections_are_kept_and_reused,
    sites_locations_and_the_real_client_address,
    a_generic_responder_local_redirects_stderr_and_failures,
}

/// The PHP application every test serves.
const APP: &[(&str, &str)] = &[
    (
        "index.php",
        r#"<?php
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
if (preg_match('#^/users/(\d+)$#', $path, $m)) {
    echo "user {$m[1]} via {$_SERVER['SCRIPT_NAME']} query=" . ($_SERVER['QUERY_STRING'] ?? '');
    exit;
}
if ($path === '/' || $path === '/index.php') {
    echo "home";
    exit;
}
http_response_code(404);
echo "no route for $path";
"#,
    ),
    (
        "env.php",
        r#"<?php
header('Content-Type: text/plain');
foreach ($_SERVER as $k => $v) {
    if (is_string($v)) { echo "$k=$v\n"; }
}
"#,
    ),
    (
        "form.php",
        r#"<?php
header('Content-Type: text/plain');
echo "method=", $_SERVER['REQUEST_METHOD'], "\n";
echo "get.a=", $_GET['a'] ?? '', "\n";
echo "post.b=", $_POST['b'] ?? '', "\n";
echo "post.c=", $_POST['c'] ?? '', "\n";
foreach ($_FILES as $name => $f) {
    $sum = array_sum(unpack('C*', file_get_contents($f['tmp_name'])));
    echo "file.$name=", $f['name'], " ", $f['size'], " ", $sum, "\n";
}
"#,
    ),
    (
        "big.php",
        r#"<?php
header('Content-Type: application/octet-stream');
$piece = str_repeat('0123456789abcdef', 4096);
for ($i = 0; $i < 160; $i++) { echo $piece; flush(); }
"#,
    ),
    (
        "headers.php",
        r#"<?php
header('X-App: weft-test');
setcookie('first', 'one');
setcookie('second', 'two');
echo "cookies ", $_COOKIE['in'] ?? 'none';
"#,
    ),
    (
        "missing.php",
        "<?php\nheader('Status: 404 Not Found');\necho 'php says not here';\n",
    ),
    (
        "redirect.php",
        "<?php\nheader('Location: /index.html');\n",
    ),
    (
        "teapot.php",
        "<?php\nhttp_response_code(418);\necho 'short and stout';\n",
    ),
    (
        "info.php",
        "<?php\necho 'PATH_INFO=', $_SERVER['PATH_INFO'] ?? '', ' SCRIPT_NAME=', $_SERVER['SCRIPT_NAME'];\n",
    ),
    (
        "fatal.php",
        "<?php\nerror_log('about to fail');\nundefined_function_weft();\n",
    ),
    (
        "sleep.php",
        "<?php\nsleep(3);\necho 'late';\n",
    ),
    (
        "pid.php",
        "<?php\necho getmypid();\n",
    ),
    (
        "hold.php",
        "<?php\nusleep(300000);\necho getmypid();\n",
    ),
    ("blog/index.php", "<?php\necho 'blog index';\n"),
    ("docs/readme.txt", "plain text\n"),
];

/// php-fpm with the application in the test's root, and weft passing to it; `None` (with a
/// line on stderr) without php-fpm. `config`: extra TOML for the `[[fastcgi]]` entry, or the
/// command line's `--fastcgi /=unix:SOCK` when empty.
fn start(model: Model, name: &str, config: &str) -> Option<(Server, PhpFpm)> {
    let Some(bin) = php_fpm() else {
        eprintln!("fastcgi tests skipped: php-fpm is not installed (apt-get install php-fpm)");
        return None;
    };
    let mut b = Builder::new(model, name);
    for (path, text) in APP {
        b = b.file(path, text.as_bytes());
    }
    let fpm = PhpFpm::start(&bin, b.dir());
    let server = if config.is_empty() {
        let arg = format!("/=unix:{}", fpm.sock.display());
        b.args(&["--fastcgi", &arg]).start()
    } else {
        b.config(&format!(
            "[[fastcgi]]\nserver = \"unix:{}\"\n{config}\n",
            fpm.sock.display()
        ))
        .start()
    };
    Some((server, fpm))
}

/// `KEY=VALUE` lines.
fn vars(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn php_scripts_get_their_variables_query_and_forms(model: Model) {
    let Some((srv, _fpm)) = start(model, "fcgi-vars", "") else {
        return;
    };
    let r = srv.send(
        b"GET /env.php/extra?x=1&y=%20 HTTP/1.1\r\nHost: php.test:8080\r\n\
          Authorization: Bearer token-1\r\nProxy: http://evil.example/\r\nX-Custom: one\r\n\
          Connection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{r:?}\n{}", srv.log());
    let v = vars(&r.text());
    let root = srv.dir().join("root").canonicalize().unwrap();
    let root = root.to_str().unwrap();
    assert_eq!(v["REQUEST_METHOD"], "GET");
    assert_eq!(v["QUERY_STRING"], "x=1&y=%20");
    assert_eq!(v["REQUEST_URI"], "/env.php/extra?x=1&y=%20");
    assert_eq!(v["SCRIPT_NAME"], "/env.php");
    assert_eq!(v["SCRIPT_FILENAME"], format!("{root}/env.php"));
    assert_eq!(v["DOCUMENT_ROOT"], root);
    assert_eq!(v["PATH_INFO"], "/extra");
    assert_eq!(v["SERVER_NAME"], "php.test");
    assert_eq!(v["HTTP_HOST"], "php.test:8080");
    assert_eq!(v["REMOTE_ADDR"], "127.0.0.1");
    assert_eq!(v["SERVER_PROTOCOL"], "HTTP/1.1");
    assert_eq!(v["GATEWAY_INTERFACE"], "CGI/1.1");
    assert_eq!(v["HTTP_AUTHORIZATION"], "Bearer token-1");
    assert_eq!(v["HTTP_X_CUSTOM"], "one");
    assert!(!v.contains_key("HTTP_PROXY"), "httpoxy: {v:?}");
    assert!(!v.contains_key("HTTPS"), "plain HTTP: {v:?}");
    // A query and a urlencoded form.
    let body = "b=two+words&c=%C3%A9";
    let r = srv.send(
        format!(
            "POST /form.php?a=1 HTTP/1.1\r\nHost: t\r\nContent-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let v = vars(&r.text());
    assert_eq!(
        (
            v["method"].as_str(),
            v["get.a"].as_str(),
            v["post.b"].as_str()
        ),
        ("POST", "1", "two words")
    );
    assert_eq!(v["post.c"], "é");
    // A chunked form: read whole, passed on with its CONTENT_LENGTH.
    let r = srv.send(
        format!(
            "POST /form.php HTTP/1.1\r\nHost: t\r\nContent-Type: \
             application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{}",
            String::from_utf8(crate::common::chunked(body.as_bytes(), 5)).unwrap()
        )
        .as_bytes(),
    );
    assert_eq!(vars(&r.text())["post.b"], "two words", "{r:?}");
}

fn uploads_and_a_streamed_10_mb_response(model: Model) {
    // Without request buffering: the body streams to php-fpm as it arrives.
    let Some((srv, _fpm)) = start(model, "fcgi-upload", "request_buffering = false") else {
        return;
    };
    let file: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let digest: u64 = file.iter().map(|&b| u64::from(b)).sum();
    let mut body = Vec::new();
    body.extend_from_slice(
        b"--XyZ\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\nfield\r\n--XyZ\r\n\
          Content-Disposition: form-data; name=\"up\"; filename=\"data.bin\"\r\n\
          Content-Type: application/octet-stream\r\n\r\n",
    );
    body.extend_from_slice(&file);
    body.extend_from_slice(b"\r\n--XyZ--\r\n");
    let mut raw = format!(
        "POST /form.php HTTP/1.1\r\nHost: t\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(&body);
    let r = srv.send(&raw);
    assert_eq!(r.status, 200, "{r:?}\n{}", srv.log());
    let v = vars(&r.text());
    assert_eq!(v["post.b"], "field");
    assert_eq!(v["file.up"], format!("data.bin 300000 {digest}"));
    // 10 MiB streamed out, chunked, every byte as PHP wrote it.
    let r = srv.get("/big.php");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 160 * 65536);
    assert!(
        r.header("Transfer-Encoding").is_some() || r.until_close,
        "{:?}",
        r.headers
    );
    assert!(r.body.chunks(16).all(|c| c == b"0123456789abcdef"));
    assert_eq!(srv.get("/docs/readme.txt").status, 200);
}

fn status_headers_cookies_and_redirects(model: Model) {
    let Some((srv, _fpm)) = start(model, "fcgi-status", "") else {
        return;
    };
    let r = srv.send(
        b"GET /headers.php HTTP/1.1\r\nHost: t\r\nCookie: in=yes\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-App"), Some("weft-test"));
    assert_eq!(r.header_count("Set-Cookie"), 2, "{:?}", r.headers);
    assert_eq!(r.text(), "cookies yes");
    assert!(
        r.header("Content-Length").is_some(),
        "a finished answer has its length"
    );
    let r = srv.get("/missing.php");
    assert_eq!((r.status, r.text().as_str()), (404, "php says not here"));
    let r = srv.get("/teapot.php");
    assert_eq!((r.status, r.text().as_str()), (418, "short and stout"));
    let r = srv.get("/redirect.php");
    assert_eq!(r.status, 302, "PHP makes a Location a client redirect");
    assert_eq!(r.header("Location"), Some("/index.html"));
    // HEAD: the status and headers, no body.
    let mut c = srv.connect();
    c.send(b"HEAD /headers.php HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_head_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-App"), Some("weft-test"));
    assert!(r.body.is_empty());
    // The connection goes on.
    c.send(b"GET /teapot.php HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_response().unwrap().status, 418);
}

fn path_info_index_and_the_front_controller(model: Model) {
    let Some((srv, _fpm)) = start(model, "fcgi-front", "") else {
        return;
    };
    let r = srv.get("/info.php/a/b%20c");
    assert_eq!(r.text(), "PATH_INFO=/a/b c SCRIPT_NAME=/info.php");
    assert_eq!(srv.get("/blog/").text(), "blog index");
    let r = srv.get("/blog");
    assert_eq!(r.status, 301, "a directory without its slash");
    // The front controller: pretty URLs for a path that names no file.
    let r = srv.get("/users/42?tab=posts");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "user 42 via /index.php query=tab=posts");
    let r = srv.get("/nothing/here");
    assert_eq!(
        (r.status, r.text().as_str()),
        (404, "no route for /nothing/here")
    );
    // A directory with index.php runs it (before index.html, as Caddy's php_fastcgi); files
    // that are not scripts are still the static files'.
    assert_eq!(srv.get("/").text(), "home");
    assert_eq!(srv.get("/docs/readme.txt").text(), "plain text\n");
}

fn php_source_is_never_served(model: Model) {
    // Only /app/ goes to php-fpm; the scripts elsewhere under the root are still not files.
    let Some((srv, _fpm)) = start(model, "fcgi-source", "prefix = \"/app/\"") else {
        return;
    };
    for path in ["/env.php", "/ENV.PHP", "/env%2Ephp", "/blog/index.php"] {
        let r = srv.get(path);
        assert_eq!(r.status, 404, "{path}: {r:?}");
        assert!(!r.text().contains("<?php"), "{path}");
    }
    assert!(srv.log().contains("not served as a file"), "{}", srv.log());
    assert_eq!(srv.get("/docs/readme.txt").status, 200);
}

fn a_fatal_error_is_logged_and_answered(model: Model) {
    let Some((srv, _fpm)) = start(model, "fcgi-fatal", "") else {
        return;
    };
    let r = srv.get("/fatal.php");
    assert_eq!(r.status, 500, "PHP's own error status: {r:?}");
    let end = Instant::now() + Duration::from_secs(5);
    while !srv.log().contains("undefined_function_weft") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = srv.log();
    assert!(log.contains("fastcgi /fatal.php: stderr:"), "{log}");
    assert!(log.contains("about to fail"), "{log}");
    assert!(log.contains("undefined_function_weft"), "{log}");
    // The worker served its next request.
    assert_eq!(srv.get("/teapot.php").status, 418);
}

fn a_script_past_the_timeout_gets_504_and_the_next_request_its_own_answer(model: Model) {
    let Some((srv, _fpm)) = start(model, "fcgi-timeout", "read_timeout = \"1s\"") else {
        return;
    };
    let t0 = Instant::now();
    let r = srv.get("/sleep.php");
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        t0.elapsed() < Duration::from_millis(2800),
        "{:?}",
        t0.elapsed()
    );
    assert!(
        srv.log().contains("no header section within"),
        "{}",
        srv.log()
    );
    // The late answer is never read as another request's: the connection was closed.
    for _ in 0..4 {
        assert_eq!(srv.get("/teapot.php").text(), "short and stout");
    }
    // The worker is freed once the script ends (or php-fpm's request_terminate_timeout ends
    // it): then both workers take a request at once.
    std::thread::sleep(Duration::from_millis(2500));
    let addr = srv.addr;
    let both: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = crate::common::Conn::connect(addr);
                c.send(b"GET /hold.php HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                c.read_response().unwrap()
            })
        })
        .collect();
    let pids: std::collections::BTreeSet<String> = both
        .into_iter()
        .map(|t| {
            let r = t.join().unwrap();
            assert_eq!(r.status, 200, "{r:?}");
            r.text()
        })
        .collect();
    assert_eq!(pids.len(), 2, "both workers answered at once: {pids:?}");
}

fn php_fpm_stopped_gets_502_and_restarted_is_reconnected(model: Model) {
    // One kept connection: the one left from before a restart is dead, and its place must be
    // given back before a new one is made.
    let Some((srv, mut fpm)) = start(model, "fcgi-restart", "max_conns = 1") else {
        return;
    };
    let bin = php_fpm().unwrap();
    assert_eq!(srv.get("/teapot.php").status, 418);
    // Restarted between two requests: a POST on the kept connection of the old php-fpm fails
    // its first write before anything is delivered (a Unix socket), so it goes again on a new
    // connection whatever its method.
    fpm.kill();
    let _ = fs::remove_file(&fpm.sock);
    let mut fpm = PhpFpm::start(&bin, srv.dir());
    let r = srv.send(
        b"POST /form.php HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\n\
          Content-Length: 3\r\nConnection: close\r\n\r\nb=1",
    );
    assert_eq!(r.status, 200, "{r:?}\n{}", srv.log());
    assert_eq!(vars(&r.text())["post.b"], "1");
    // Stopped: 502 at once, no hang.
    fpm.kill();
    let t0 = Instant::now();
    let r = srv.get("/teapot.php");
    assert_eq!(r.status, 502, "{r:?}");
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "no hang: {:?}",
        t0.elapsed()
    );
    assert_eq!(srv.get("/teapot.php").status, 502);
    // Started again on the same socket.
    let _ = fs::remove_file(&fpm.sock);
    let _again = PhpFpm::start(&bin, srv.dir());
    for _ in 0..3 {
        let r = srv.get("/teapot.php");
        assert_eq!(r.status, 418, "{r:?}\n{}", srv.log());
    }
}

fn connections_are_kept_and_reused(model: Model) {
    // Two php-fpm workers, two kept connections.
    let Some((srv, fpm)) = start(model, "fcgi-keep", "max_conns = 2\nread_timeout = \"5s\"") else {
        return;
    };
    let mut c = srv.connect();
    for i in 0..20 {
        c.send(format!("GET /users/{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let r = c.read_response().unwrap();
        assert_eq!(r.text(), format!("user {i} via /index.php query="));
    }
    let mut held = unix_connections_to(&fpm.sock);
    if model.name == "process" {
        // A connection process keeps none past its request: it would hold a worker while its
        // client idles, and the other processes' requests would wait behind it. It closes
        // its FastCGI connection just after the last response byte went out, which the
        // client may read first on a busy machine: a moment to settle.
        let end = Instant::now() + Duration::from_secs(2);
        while held != 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
            held = unix_connections_to(&fpm.sock);
        }
        assert_eq!(held, 0, "connections held by a connection process");
    } else {
        assert!(
            (1..=2).contains(&held),
            "{held} kept connections (max_conns = 2)"
        );
    }
    drop(c);
    // More clients at once than workers and kept connections: each request waits its turn
    // (for a connection in weft, or in php-fpm's backlog), none for a worker that sits on a
    // kept connection.
    let t0 = Instant::now();
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let addr = srv.addr;
            std::thread::spawn(move || {
                let mut c = crate::common::Conn::connect(addr);
                (0..5)
                    .map(|_| {
                        c.send(b"GET /pid.php HTTP/1.1\r\nHost: t\r\n\r\n");
                        let r = c.read_response().unwrap();
                        assert_eq!(r.status, 200, "{r:?}");
                        r.text()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let pids: std::collections::BTreeSet<String> = clients
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert!(
        pids.len() <= 2,
        "answered by {pids:?}: php-fpm has two workers"
    );
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert!(!srv.log().contains("answering 50"), "{}", srv.log());
}

/// Connected Unix stream sockets whose peer is the socket at `path` (from /proc/net/unix:
/// the listener's path appears on the accepted ends; count those, minus the listener).
fn unix_connections_to(path: &Path) -> usize {
    let text = fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let p = path.to_str().unwrap();
    text.lines()
        .filter(|l| l.ends_with(p))
        .filter(|l| l.split_whitespace().nth(5) == Some("03"))
        .count()
}

fn sites_locations_and_the_real_client_address(model: Model) {
    let Some(bin) = php_fpm() else {
        eprintln!("fastcgi tests skipped: php-fpm is not installed (apt-get install php-fpm)");
        return;
    };
    let mut b = Builder::new(model, "fcgi-sites");
    for (path, text) in APP {
        b = b.file(&format!("site/{path}"), text.as_bytes());
    }
    let fpm = PhpFpm::start(&bin, b.dir());
    let site_root = b.dir().join("root/site");
    let srv = b
        .config(&format!(
            "real_ip_from = [\"127.0.0.1/32\"]\n\
             [[site]]\nhosts = [\"php.test\"]\nroot = {root:?}\n\
             [[site.fastcgi]]\nserver = \"unix:{sock}\"\nprefix = \"/\"\n\
             [[site]]\nhosts = [\"loc.test\"]\nroot = {root:?}\n\
             [[site.location]]\nprefix = \"/blog/\"\nfastcgi = \"unix:{sock}\"\n\
             [[site.location]]\nprefix = \"/\"\ntry_files = [\"$path\", \"=404\"]\n",
            root = site_root.display().to_string(),
            sock = fpm.sock.display()
        ))
        .start();
    // The site's mount: its root is the site's, the client the one X-Forwarded-For names.
    let r = srv.send(
        b"GET /env.php HTTP/1.1\r\nHost: php.test\r\nX-Forwarded-For: 203.0.113.9\r\n\
          Connection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{r:?}\n{}", srv.log());
    let v = vars(&r.text());
    let root = site_root.canonicalize().unwrap();
    assert_eq!(v["DOCUMENT_ROOT"], root.to_str().unwrap());
    assert_eq!(v["REMOTE_ADDR"], "203.0.113.9", "after real_ip_from");
    assert_eq!(
        srv.send(b"GET /users/7 HTTP/1.1\r\nHost: php.test\r\nConnection: close\r\n\r\n")
            .text(),
        "user 7 via /index.php query="
    );
    // A location's mount: PHP under /blog/ only, its front controller /blog/index.php.
    let get = |host: &str, path: &str| {
        srv.send(
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
    };
    assert_eq!(get("loc.test", "/blog/").text(), "blog index");
    assert_eq!(get("loc.test", "/blog/2024/hello").text(), "blog index");
    assert_eq!(get("loc.test", "/docs/readme.txt").text(), "plain text\n");
    // Outside the FastCGI location, through a try_files, a script is still not a file.
    let r = get("loc.test", "/info.php");
    assert_eq!(r.status, 404, "{r:?}");
    assert!(!r.text().contains("<?php"));
}

/// A FastCGI application that is not PHP (`php = false`), written in Python for the tests
/// (`fastcgi/responder.py`): the whole prefix is the script, a local redirect is followed, its
/// STDERR is logged a line at a time, and what it does wrong is answered as it should be.
fn a_generic_responder_local_redirects_stderr_and_failures(model: Model) {
    let Some(py) = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    let b = Builder::new(model, "fcgi-generic");
    let script = b.dir().join("responder.py");
    fs::write(&script, include_str!("fastcgi/responder.py")).unwrap();
    let sock = b.dir().join("app.sock");
    let _app = Reaped(
        std::process::Command::new(py)
            .arg(&script)
            .arg(&sock)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the responder"),
    );
    let end = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(Instant::now() < end, "the responder did not listen");
        std::thread::sleep(Duration::from_millis(10));
    }
    let srv = b
        .config(&format!(
            "[[fastcgi]]\nprefix = \"/app/\"\nphp = false\nserver = \"unix:{}\"\n\
             max_conns = 2\nread_timeout = \"5s\"\n",
            sock.display()
        ))
        .start();
    let r = srv.send(
        b"POST /app/env?x=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    );
    assert_eq!(r.status, 200, "{r:?}\n{}", srv.log());
    let v = vars(&r.text());
    assert_eq!(v["SCRIPT_NAME"], "/app");
    assert_eq!(v["PATH_INFO"], "/env");
    assert_eq!(v["QUERY_STRING"], "x=1");
    assert_eq!(v["CONTENT_LENGTH"], "5");
    assert_eq!(v["BODY"], "hello");
    // Location: /index.html without a Status: the server answers GET /index.html itself.
    let r = srv.get("/app/redirect");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, crate::common::INDEX_HTML)
    );
    let r = srv.get("/app/stderr");
    assert_eq!((r.status, r.text().as_str()), (201, "ok"));
    let r = srv.get("/app/slowbody");
    assert_eq!(r.text(), "piece 0\npiece 1\npiece 2\n");
    assert_eq!(srv.get("/app/nothing").status, 404);
    assert_eq!(srv.get("/app/bad").status, 502, "another protocol version");
    assert_eq!(srv.get("/app/overloaded").status, 503, "FCGI_OVERLOADED");
    assert_eq!(
        srv.get("/app/bighead").status,
        502,
        "header section past the limit"
    );
    // An answer cut short after it began: the client sees it unfinished, not complete.
    let mut c = srv.connect();
    c.send(b"GET /app/cut HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    if let Ok(r) = c.read_response() {
        assert!(r.body.len() < 300_000, "a cut answer passed as whole");
    }
    // Still serving, on kept connections.
    assert_eq!(srv.get("/app/stderr").status, 201);
    let log = srv.log();
    for line in [
        "fastcgi /app: stderr: first line from the app",
        "fastcgi /app: stderr: second line from the app",
        "the application's records",
        "header section too large",
    ] {
        assert!(log.contains(line), "{line:?} not in the log:\n{log}");
    }
}

/// A child process killed and reaped on drop, a failed assertion included.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
