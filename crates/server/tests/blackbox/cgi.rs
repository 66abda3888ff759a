//! CGI/1.1 with real scripts (a shell script and Python 3 scripts written into the test's
//! directory, mounted with `--cgi DIR` or the `[cgi]` config): the RFC 3875 meta-variables and
//! nothing of the server's environment, no `HTTP_PROXY` (httpoxy), bodies in with either
//! framing and out streamed, local and client redirects, 502 and 504, path safety, and a count
//! of the server's descendant processes showing every script reaped.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{chunked, descendants, Builder, Model, ReadError, Server, INDEX_HTML};

per_model! {
    except fiber_nocache:
    meta_variables_of_rfc_3875_and_a_clean_environment,
    get_with_query_and_post_with_either_framing,
    status_local_and_client_redirects,
    bad_scripts_get_502_and_bad_paths_404_or_403,
    a_script_past_its_timeout_is_killed_with_its_children_and_gets_504,
    no_zombie_or_stray_process_is_left,
    the_writes_of_a_streamed_response_are_not_held_back,
    scripts_by_file_ending_under_the_document_root,
    header_and_redirect_limits_come_from_the_configuration,
}

/// Prints the environment, then the body it was given (`CONTENT_LENGTH` bytes).
const ENV_SH: &str = r#"#!/bin/sh
printf 'Content-Type: text/plain\r\n\r\n'
env
if [ -n "$CONTENT_LENGTH" ]; then printf 'BODY='; head -c "$CONTENT_LENGTH"; echo; fi
echo "env.sh says hello on stderr" >&2
"#;

/// The echo service of the CGI paper: method, query and length on the first line, then the
/// body it read.
const ECHO_PY: &str = r#"
import os, sys
n = int(os.environ.get("CONTENT_LENGTH") or 0)
data = sys.stdin.buffer.read(n) if n else b""
out = sys.stdout.buffer
out.write(b"Content-Type: application/x-www-form-urlencoded\r\n\r\n")
out.write(("%s %s %d\n" % (os.environ["REQUEST_METHOD"], os.environ["QUERY_STRING"], len(data))).encode())
out.write(data)
"#;

/// Prints the environment as `KEY=VALUE` lines.
const ENV_PY: &str = r#"
import os, sys
sys.stdout.write("Content-Type: text/plain\n\n")
for k in sorted(os.environ):
    sys.stdout.write("%s=%s\n" % (k, os.environ[k]))
"#;

/// A body larger than the pipe and the server's "already finished" buffer: streamed chunked.
const BIG_PY: &str = r#"
import sys
out = sys.stdout.buffer
out.write(b"Content-Type: application/octet-stream\n\n")
for i in range(200):
    out.write(bytes([i % 251]) * 1000)
    out.flush()
"#;

fn python3() -> Option<&'static str> {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

fn script(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    fs::write(&p, text).expect("write script");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn python_script(dir: &Path, name: &str, body: &str) -> bool {
    match python3() {
        Some(py) => {
            script(dir, name, &format!("#!{py}\n{body}"));
            true
        }
        None => false,
    }
}

/// A server with `cgi/` mounted at `/cgi-bin/` holding every script of these tests;
/// `timeout`: through the config file with that `cgi.timeout`, else with `--cgi DIR`.
fn start(model: Model, name: &str, timeout: Option<&str>) -> (Server, PathBuf) {
    let b = Builder::new(model, name);
    let cgi = b.dir().join("cgi");
    fs::create_dir_all(cgi.join("sub")).unwrap();
    script(&cgi, "env.sh", ENV_SH);
    python_script(&cgi, "echo.py", ECHO_PY);
    python_script(&cgi, "env.py", ENV_PY);
    python_script(&cgi, "big.py", BIG_PY);
    script(
        &cgi,
        "fail.sh",
        "#!/bin/sh\necho 'fail.sh: about to fail' >&2\nexit 1\n",
    );
    script(
        &cgi,
        "badheader.sh",
        "#!/bin/sh\necho 'this is no header'\necho\necho body\n",
    );
    script(
        &cgi,
        "nobreak.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n'\n",
    );
    script(
        &cgi,
        "local.sh",
        "#!/bin/sh\nprintf 'Location: /index.html\\n\\n'\n",
    );
    script(
        &cgi,
        "tocgi.sh",
        "#!/bin/sh\nprintf 'Location: /cgi-bin/env.sh?from=redirect\\n\\n'\n",
    );
    script(
        &cgi,
        "loop.sh",
        "#!/bin/sh\nprintf 'Location: /cgi-bin/loop.sh\\n\\n'\n",
    );
    script(
        &cgi,
        "client.sh",
        "#!/bin/sh\nprintf 'Location: http://example.com/elsewhere\\n\\n'\n",
    );
    script(
        &cgi,
        "status.sh",
        "#!/bin/sh\nprintf 'Status: 418 Teapot\\nContent-Type: text/plain\\nX-Script: yes\\n\\nshort and stout\\n'\n",
    );
    // Records its pid and its child's, then outlives any short timeout.
    script(
        &cgi,
        "slow.sh",
        "#!/bin/sh\necho $$ > slow.pid\nsleep 30 &\necho $! > slow-child.pid\nwait\n",
    );
    // Answers, leaves a child in its group holding its output open, and exits.
    script(
        &cgi,
        "bgchild.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nbg\\n'\nsleep 30 &\necho $! > bgchild.pid\nexit 0\n",
    );
    // Starts its response, then stalls.
    script(
        &cgi,
        "stall.sh",
        "#!/bin/sh\necho $$ > stall.pid\nprintf 'Content-Type: text/plain\\n\\nfirst part\\n'\nexec sleep 30\n",
    );
    script(
        &cgi,
        "sub/inner.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\ninner\\n'\n",
    );
    fs::write(cgi.join("noexec.sh"), "#!/bin/sh\necho\n").unwrap();
    fs::write(cgi.join(".hidden.sh"), "#!/bin/sh\necho\n").unwrap();
    fs::set_permissions(cgi.join(".hidden.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(b.dir().join("outside.sh"), cgi.join("escape.sh")).unwrap();
    script(
        b.dir(),
        "outside.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nescaped\\n'\n",
    );
    let server = match timeout {
        Some(t) => b
            .config(&format!(
                "[cgi]\ndir = {:?}\ntimeout = {t:?}\n",
                cgi.display().to_string()
            ))
            .start(),
        None => b.args(&["--cgi", cgi.to_str().unwrap()]).start(),
    };
    (server, cgi)
}

/// `KEY=VALUE` lines of a body (the environment a script printed).
fn env_of(body: &[u8]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const REQUEST_HEADERS: &str = "Host: cgi.test:8080\r\nProxy: http://evil.example:3128/\r\n\
     Authorization: Basic c2VjcmV0\r\nX-Custom: one\r\nX-Custom: two\r\nX_Under: smuggled\r\n\
     User-Agent: weft-test\r\nConnection: close\r\n";

fn meta_variables_of_rfc_3875_and_a_clean_environment(model: Model) {
    let (srv, _) = start(model, "cgi-env", None);
    let mut scripts = vec!["env.sh"];
    if python3().is_some() {
        scripts.push("env.py");
    }
    for name in scripts {
        let mut c = srv.connect();
        let client_port = c.stream.local_addr().unwrap().port();
        c.send(
            format!(
                "GET /cgi-bin/{name}/extra/p%20ath?x=1&y=two HTTP/1.1\r\n{REQUEST_HEADERS}\r\n"
            )
            .as_bytes(),
        );
        let r = c.read_response().unwrap();
        assert_eq!(r.status, 200, "{name}: {r:?}");
        assert_eq!(r.header("Content-Type"), Some("text/plain"));
        let env = env_of(&r.body);
        let root = srv.dir().join("root").canonicalize().unwrap();
        let expect = [
            ("GATEWAY_INTERFACE", "CGI/1.1".to_string()),
            ("SERVER_PROTOCOL", "HTTP/1.1".into()),
            ("REQUEST_METHOD", "GET".into()),
            ("QUERY_STRING", "x=1&y=two".into()),
            ("SCRIPT_NAME", format!("/cgi-bin/{name}")),
            ("PATH_INFO", "/extra/p ath".into()),
            ("PATH_TRANSLATED", format!("{}/extra/p ath", root.display())),
            ("SERVER_NAME", "cgi.test".into()),
            ("SERVER_PORT", srv.addr.port().to_string()),
            ("REMOTE_ADDR", "127.0.0.1".into()),
            ("REMOTE_PORT", client_port.to_string()),
            ("HTTP_HOST", "cgi.test:8080".into()),
            ("HTTP_USER_AGENT", "weft-test".into()),
            ("HTTP_X_CUSTOM", "one, two".into()),
            (
                "REQUEST_URI",
                format!("/cgi-bin/{name}/extra/p%20ath?x=1&y=two"),
            ),
        ];
        for (k, v) in expect {
            assert_eq!(env.get(k), Some(&v), "{name}: {k} in {env:#?}");
        }
        assert!(
            env.get("SERVER_SOFTWARE")
                .is_some_and(|s| s.starts_with("weft/")),
            "{env:#?}"
        );
        assert!(env.contains_key("PATH"));
        // Apache's REQUEST_SCHEME; HTTPS only over TLS (tests/tls.rs).
        assert_eq!(
            env.get("REQUEST_SCHEME").map(String::as_str),
            Some("http"),
            "{name}"
        );
        // httpoxy, credentials, ambiguous names, and bodies that are not there.
        for absent in [
            "HTTP_PROXY",
            "HTTP_AUTHORIZATION",
            "HTTP_X_UNDER",
            "HTTP_CONNECTION",
            "CONTENT_LENGTH",
            "CONTENT_TYPE",
            "HTTPS",
        ] {
            assert!(!env.contains_key(absent), "{name}: {absent} in {env:#?}");
        }
        // Nothing of the server's own environment (the harness starts it with WEFT_LOG set).
        for leaked in ["WEFT_LOG", "HOME", "CARGO", "RUST_TEST_THREADS"] {
            assert!(
                !env.contains_key(leaked),
                "{name}: {leaked} leaked: {env:#?}"
            );
        }
        if name == "env.py" {
            // Python adds nothing: the whole environment is ours.
            let allowed = [
                "PATH",
                "GATEWAY_INTERFACE",
                "SERVER_SOFTWARE",
                "SERVER_PROTOCOL",
                "SERVER_NAME",
                "SERVER_PORT",
                "SERVER_ADDR",
                "REQUEST_METHOD",
                "REQUEST_URI",
                "QUERY_STRING",
                "SCRIPT_NAME",
                "SCRIPT_FILENAME",
                "DOCUMENT_ROOT",
                "PATH_INFO",
                "PATH_TRANSLATED",
                "REMOTE_ADDR",
                "REMOTE_HOST",
                "REMOTE_PORT",
                "REQUEST_SCHEME",
                // Set by Python itself.
                "LC_CTYPE",
            ];
            for k in env.keys() {
                assert!(
                    k.starts_with("HTTP_") || allowed.contains(&k.as_str()),
                    "unexpected variable {k}"
                );
            }
        }
    }
    // HTTP/1.0 without Host: SERVER_NAME is the address, the protocol 1.0; a body is given
    // with its length and type.
    let r = srv.send(
        b"POST /cgi-bin/env.sh HTTP/1.0\r\nContent-Type: text/x-test\r\nContent-Length: 5\r\n\r\nhello",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let env = env_of(&r.body);
    assert_eq!(
        env.get("SERVER_NAME").map(String::as_str),
        Some("127.0.0.1")
    );
    assert_eq!(
        env.get("SERVER_PROTOCOL").map(String::as_str),
        Some("HTTP/1.0")
    );
    assert_eq!(env.get("CONTENT_LENGTH").map(String::as_str), Some("5"));
    assert_eq!(
        env.get("CONTENT_TYPE").map(String::as_str),
        Some("text/x-test")
    );
    assert_eq!(env.get("BODY").map(String::as_str), Some("hello"));
    // stderr reached the error log.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !srv.log().contains("env.sh says hello on stderr") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        srv.log().contains("env.sh says hello on stderr"),
        "{}",
        srv.log()
    );
}

/// The paper's request: ten header lines and 542 bytes of url-encoded form data.
pub fn paper_body() -> Vec<u8> {
    let mut body = b"ECHO_ARG=".to_vec();
    while body.len() < 542 {
        body.extend_from_slice(b"hello%20world%21+");
    }
    body.truncate(542);
    body
}

fn get_with_query_and_post_with_either_framing(model: Model) {
    if python3().is_none() {
        eprintln!("no python3: the Python echo script is skipped; shell tests cover CGI");
        return;
    }
    let (srv, _) = start(model, "cgi-echo", None);
    let body = paper_body();
    let mut c = srv.connect();
    // Keep-alive across CGI responses, whatever their framing.
    c.send(b"GET /cgi-bin/echo.py?a=1&b=%20 HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!((r.status, r.text()), (200, "GET a=1&b=%20 0\n".to_string()));
    let mut raw = format!(
        "POST /cgi-bin/echo.py HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(&body);
    c.send(&raw);
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let mut want = b"POST  542\n".to_vec();
    want.extend_from_slice(&body);
    assert_eq!(r.body, want);
    // Chunked in uneven pieces: the script still gets CONTENT_LENGTH and the plain bytes.
    let mut raw =
        b"POST /cgi-bin/echo.py?chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    raw.extend_from_slice(&chunked(&body, 100));
    c.send(&raw);
    let r = c.read_response().unwrap();
    let mut want = b"POST chunked 542\n".to_vec();
    want.extend_from_slice(&body);
    assert_eq!((r.status, &r.body), (200, &want));
    // A large output streams back chunked and the connection stays usable.
    c.send(b"GET /cgi-bin/big.py HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = c.read_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Transfer-Encoding"),
        Some("chunked"),
        "{:?}",
        r.headers
    );
    assert_eq!(r.body.len(), 200_000);
    assert!(r
        .body
        .chunks(1000)
        .enumerate()
        .all(|(i, c)| c.iter().all(|&b| b == (i % 251) as u8)));
    c.send(b"GET /cgi-bin/echo.py?again HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_response().unwrap().text(), "GET again 0\n");
    // HTTP/1.0: the same large output is delimited by the close.
    let r = srv.send(b"GET /cgi-bin/big.py HTTP/1.0\r\n\r\n");
    assert_eq!((r.status, r.body.len()), (200, 200_000));
    assert!(
        r.until_close || r.header("Content-Length") == Some("200000"),
        "{:?}",
        r.headers
    );
    // HEAD runs the script but sends no body.
    let mut c = srv.connect();
    c.send(b"HEAD /cgi-bin/big.py HTTP/1.1\r\nHost: x\r\n\r\nGET /cgi-bin/echo.py?after-head HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let r = c.read_head_response().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(c.read_response().unwrap().text(), "GET after-head 0\n");
}

fn status_local_and_client_redirects(model: Model) {
    let (srv, _) = start(model, "cgi-redirect", None);
    let r = srv.get("/cgi-bin/status.sh");
    assert_eq!((r.status, r.text().as_str()), (418, "short and stout\n"));
    assert_eq!(r.header("X-Script"), Some("yes"));
    assert_eq!(r.header_count("Status"), 0);
    // A local redirect serves the other path in place of the script's answer.
    let r = srv.get("/cgi-bin/local.sh");
    assert_eq!((r.status, r.body.as_slice()), (200, INDEX_HTML));
    assert_eq!(r.header("Location"), None);
    // ... also to another script, as GET with the new query and without the old body.
    let r = srv.send(b"POST /cgi-bin/tocgi.sh HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
    assert_eq!(r.status, 200, "{r:?}");
    let env = env_of(&r.body);
    assert_eq!(env.get("REQUEST_METHOD").map(String::as_str), Some("GET"));
    assert_eq!(
        env.get("QUERY_STRING").map(String::as_str),
        Some("from=redirect")
    );
    assert_eq!(env.get("CONTENT_LENGTH"), None);
    assert_eq!(
        env.get("SCRIPT_NAME").map(String::as_str),
        Some("/cgi-bin/env.sh")
    );
    // A redirect loop ends in 500, not in a hang.
    assert_eq!(srv.get("/cgi-bin/loop.sh").status, 500);
    // A client redirect is a 302 with the location.
    let r = srv.get("/cgi-bin/client.sh");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("Location"), Some("http://example.com/elsewhere"));
    // Scripts in subdirectories.
    assert_eq!(srv.get("/cgi-bin/sub/inner.sh").text(), "inner\n");
}

fn bad_scripts_get_502_and_bad_paths_404_or_403(model: Model) {
    let (srv, _) = start(model, "cgi-502", None);
    let r = srv.get("/cgi-bin/fail.sh");
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(srv.get("/cgi-bin/badheader.sh").status, 502);
    assert_eq!(srv.get("/cgi-bin/nobreak.sh").status, 502);
    let log = srv.log();
    assert!(log.contains("exited with status 1"), "{log}");
    assert!(log.contains("fail.sh: about to fail"), "{log}");
    for (path, status) in [
        ("/cgi-bin/missing.sh", 404),
        ("/cgi-bin/noexec.sh", 403),
        ("/cgi-bin/sub", 403),
        ("/cgi-bin/sub/", 403),
        ("/cgi-bin/", 403),
        ("/cgi-bin/.hidden.sh", 404),
        ("/cgi-bin/escape.sh", 404),
        ("/cgi-bin/%2e%2e/outside.sh", 404),
        ("/cgi-bin/sub/%2e%2e/%2e%2e/outside.sh", 404),
        ("/cgi-bin/env.sh%00", 400),
    ] {
        let r = srv.get(path);
        assert_eq!(r.status, status, "{path}: {r:?}");
        assert!(!r.text().contains("escaped"), "{path}");
    }
    // An unregistered extension method is not given to a script.
    let r = srv.send(b"FROB /cgi-bin/env.sh HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 501);
    srv.assert_alive();
}

/// True while process `pid` exists and is not a zombie.
fn running(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn read_pid(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(pid) = fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn gone_within(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while running(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

fn a_script_past_its_timeout_is_killed_with_its_children_and_gets_504(model: Model) {
    let (srv, cgi) = start(model, "cgi-504", Some("1s"));
    let t = Instant::now();
    let r = srv.get("/cgi-bin/slow.sh");
    let took = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        took >= Duration::from_millis(900),
        "answered after {took:?}"
    );
    assert!(took < Duration::from_secs(8), "answered after {took:?}");
    let (script, child) = (
        read_pid(&cgi.join("slow.pid")),
        read_pid(&cgi.join("slow-child.pid")),
    );
    assert!(
        gone_within(script, Duration::from_secs(5)),
        "script {script} still runs"
    );
    assert!(
        gone_within(child, Duration::from_secs(5)),
        "its child {child} still runs"
    );
    // Timed out after the response began: the body is cut off without its last chunk.
    let mut c = srv.connect();
    c.send(b"GET /cgi-bin/stall.sh HTTP/1.1\r\nHost: x\r\n\r\n");
    match c.read_response() {
        Err(ReadError::Truncated(_)) => {}
        other => panic!("expected a truncated response, got {other:?}"),
    }
    assert!(
        srv.log().contains("timed out in the middle of its output"),
        "{}",
        srv.log()
    );
    let stall = read_pid(&cgi.join("stall.pid"));
    assert!(
        gone_within(stall, Duration::from_secs(5)),
        "stalled script {stall} still runs"
    );
    assert!(srv.log().contains("timed out"), "{}", srv.log());
    // A script that exited leaving a child that holds its output open: the output never ends,
    // and at the timeout its group (the child) is killed too.
    let mut c = srv.connect();
    c.send(b"GET /cgi-bin/bgchild.sh HTTP/1.1\r\nHost: x\r\n\r\n");
    match c.read_response() {
        Err(ReadError::Truncated(_)) => {}
        other => panic!("expected a truncated response, got {other:?}"),
    }
    let bg = read_pid(&cgi.join("bgchild.pid"));
    assert!(
        gone_within(bg, Duration::from_secs(5)),
        "the exited script's child {bg} still runs"
    );
    srv.assert_alive();
}

fn no_zombie_or_stray_process_is_left(model: Model) {
    let (srv, _) = start(model, "cgi-zombies", Some("1s"));
    let pid = srv.pid();
    srv.assert_alive();
    std::thread::sleep(Duration::from_millis(200));
    let before = descendants(pid);
    assert!(
        before.values().all(|s| s != "Z"),
        "zombies before: {before:?}"
    );
    let mut handles = Vec::new();
    for path in [
        "/cgi-bin/env.sh",
        "/cgi-bin/fail.sh",
        "/cgi-bin/badheader.sh",
        "/cgi-bin/local.sh",
        "/cgi-bin/status.sh",
        "/cgi-bin/slow.sh",
        "/cgi-bin/env.sh",
    ] {
        let addr = srv.addr;
        handles.push(std::thread::spawn(move || {
            let mut c = crate::common::Conn::connect(addr);
            c.send(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            );
            c.read_response().map(|r| r.status).unwrap_or(0)
        }));
    }
    let statuses: Vec<u16> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(statuses, [200, 502, 502, 200, 418, 504, 200]);
    // A client that goes away in the middle of a streamed response.
    if python3().is_some() {
        let mut c = srv.connect();
        c.send(b"GET /cgi-bin/big.py HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut first = [0u8; 64];
        let _ = std::io::Read::read(&mut c.stream, &mut first);
        drop(c);
    }
    // Every script reaped: back to the processes there were before (the process model's
    // connection processes are reaped by its master within its poll interval).
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut after = descendants(pid);
    while (after.len() != before.len() || after.values().any(|s| s == "Z"))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
        after = descendants(pid);
    }
    assert!(after.values().all(|s| s != "Z"), "zombies: {after:?}");
    assert_eq!(
        after.len(),
        before.len(),
        "processes below the server before {before:?}, after {after:?}"
    );
    srv.assert_alive();
}

/// A streamed response goes out in several writes (head, then each chunk, then the last
/// chunk): with Nagle's algorithm on the server, the small last chunk would wait for the
/// client's delayed ACK of the chunk before it (up to 40 ms). TCP_NODELAY sends it at once.
fn the_writes_of_a_streamed_response_are_not_held_back(model: Model) {
    let b = Builder::new(model, "cgi-nodelay");
    let cgi = b.dir().join("cgi");
    fs::create_dir_all(&cgi).unwrap();
    script(
        &cgi,
        "late.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\nsleep 0.05\nprintf 'late body\\n'\n",
    );
    let srv = b.args(&["--cgi", cgi.to_str().unwrap()]).start();
    let mut c = srv.connect();
    let mut gaps = Vec::new();
    for _ in 0..10 {
        c.send(b"GET /cgi-bin/late.sh HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut got = Vec::new();
        let mut body_at = None;
        let end = loop {
            let mut buf = [0u8; 4096];
            let n = std::io::Read::read(&mut c.stream, &mut buf).expect("read");
            assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if body_at.is_none() && text.contains("late body") {
                body_at = Some(Instant::now());
            }
            if text.contains("late body") && text.ends_with("\r\n0\r\n\r\n") {
                break Instant::now();
            }
        };
        let text = String::from_utf8_lossy(&got);
        assert!(text.contains("Transfer-Encoding: chunked"), "{text}");
        gaps.push(end - body_at.expect("body seen"));
    }
    gaps.sort();
    let median = gaps[gaps.len() / 2];
    assert!(
        median < Duration::from_millis(30),
        "median gap {median:?} of {gaps:?}"
    );
}

/// `[cgi] extensions`: an executable file with a script ending anywhere under the document
/// root runs as CGI (its source is never served), other files stay static.
fn scripts_by_file_ending_under_the_document_root(model: Model) {
    let b = Builder::new(model, "cgi-ext")
        .config("[cgi]\nextensions = [\".cgi\"]\n")
        .mkdir("app")
        .mkdir("app/tools.cgi")
        .file("app/readme.txt", b"plain text\n")
        .file(
            "app/tools.cgi/index.html",
            b"<p>a directory named like a script</p>\n",
        );
    let root = b.dir().join("root");
    script(&root.join("app"), "env.cgi", ENV_SH);
    fs::write(root.join("app/source.cgi"), ENV_SH).unwrap(); // not executable
    let srv = b.start();

    let r = srv.get("/app/env.cgi/extra/info?q=1");
    assert_eq!(r.status, 200, "{r:?}");
    let env = r.text();
    for want in [
        "SCRIPT_NAME=/app/env.cgi",
        "PATH_INFO=/extra/info",
        "QUERY_STRING=q=1",
        "GATEWAY_INTERFACE=CGI/1.1",
    ] {
        assert!(env.lines().any(|l| l == want), "{want} missing:\n{env}");
    }
    // Decoding cannot turn a script into a file to read.
    let r = srv.get("/app/env%2Ecgi");
    assert_eq!(r.status, 200);
    assert!(
        r.text().contains("SCRIPT_NAME=/app/env.cgi"),
        "{}",
        r.text()
    );
    // A script ending without the execute bit: refused, never its source.
    let r = srv.get("/app/source.cgi");
    assert_eq!(r.status, 403);
    assert!(!r.text().contains("printf"), "{}", r.text());
    // Everything else is static: a plain file, and a directory whose name has the ending.
    assert_eq!(srv.get("/app/readme.txt").body, b"plain text\n");
    let r = srv.get("/app/tools.cgi/");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"<p>a directory named like a script</p>\n"[..])
    );
}

/// `cgi.max_header_bytes` and `limits.max_internal_redirects` are read from the configuration:
/// the same scripts pass under one setting and are refused under a smaller one.
fn header_and_redirect_limits_come_from_the_configuration(model: Model) {
    let start = |name: &str, max_header_bytes: &str, max_internal_redirects: u32| {
        let b = Builder::new(model, name);
        let cgi = b.dir().join("cgi");
        fs::create_dir_all(&cgi).unwrap();
        // A 20,000-byte header field: more than one pipe read before its blank line.
        let long = "x".repeat(20_000);
        script(
            &cgi,
            "longhead.sh",
            &format!(
                "#!/bin/sh\nprintf 'Content-Type: text/plain\\nX-Long: {long}\\n\\nlong\\n'\n"
            ),
        );
        script(
            &cgi,
            "short.sh",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\nshort\\n'\n",
        );
        // r3 -> r2 -> r1 -> short.sh: n local redirects in a row from rN.
        let mut to = "short.sh".to_string();
        for n in 1..=3 {
            let text = format!("#!/bin/sh\nprintf 'Location: /cgi-bin/{to}\\n\\n'\n");
            to = format!("r{n}.sh");
            script(&cgi, &to, &text);
        }
        b.config(&format!(
            "[cgi]\ndir = {:?}\nmax_header_bytes = {max_header_bytes}\n\
             [limits]\nmax_internal_redirects = {max_internal_redirects}\n",
            cgi.display().to_string()
        ))
        .start()
    };

    let tight = start("cgi-limits-tight", "1000", 2);
    assert_eq!(tight.get("/cgi-bin/short.sh").text(), "short\n");
    let r = tight.get("/cgi-bin/longhead.sh");
    assert_eq!(r.status, 502, "{r:?}");
    let log = tight.log();
    assert!(log.contains("header section too large"), "{log}");
    assert_eq!(tight.get("/cgi-bin/r2.sh").text(), "short\n");
    assert_eq!(tight.get("/cgi-bin/r3.sh").status, 500);
    tight.assert_alive();

    let roomy = start("cgi-limits-roomy", "\"64k\"", 3);
    let r = roomy.get("/cgi-bin/longhead.sh");
    assert_eq!((r.status, r.text().as_str()), (200, "long\n"), "{r:?}");
    assert_eq!(r.header("X-Long").map(str::len), Some(20_000));
    assert_eq!(roomy.get("/cgi-bin/r3.sh").text(), "short\n");
}
