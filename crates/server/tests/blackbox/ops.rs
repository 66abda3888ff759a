//! Operating weft: safe defaults (a port in use, the sample site, charsets).

use std::time::{Duration, Instant};

use crate::common::{Builder, Launch, Model};

per_model! {
    except fiber_nocache:
    check_prints_the_effective_configuration_and_exits_0_or_1,
    a_second_server_on_a_port_in_use_fails_at_start_whatever_the_threads,
    sample_files_are_generated_only_into_the_sample_site,
    text_types_are_declared_utf8_and_others_are_not,
    health_answers_ok_then_503_once_the_drain_has_begun,
    health_is_answered_to_any_client_and_logged_when_asked,
    metrics_report_the_process_the_build_and_each_status_code,
}

/// Runs `weft ARGS` to its end (killed after `limit`: a server that started instead of
/// failing); returns its exit code (`None` if it had to be killed) and its stderr.
fn run_weft(args: &[String], limit: Duration) -> (Option<i32>, String) {
    let (code, _, err) = run_weft_out(args, limit);
    (code, err)
}

/// `run_weft`, with its stdout too: (exit code, stdout, stderr).
fn run_weft_out(args: &[String], limit: Duration) -> (Option<i32>, String, String) {
    let ran = Launch::new().args(args).run(limit);
    (ran.code(), ran.stdout, ran.stderr)
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn check_prints_the_effective_configuration_and_exits_0_or_1(model: Model) {
    let site = Builder::new(model, "check").no_echo();
    let root = site.dir().join("root").display().to_string();
    let conf = site.dir().join("weft.toml");
    std::fs::write(
        &conf,
        "[timeouts]\nkeepalive = \"5s\"\n[cache]\nenabled = false\n",
    )
    .unwrap();
    let conf = conf.display().to_string();
    let listen = format!("127.0.0.1:0={}", model.name);
    let limit = Duration::from_secs(20);

    let (code, out, err) = run_weft_out(
        &strings(&[
            "check", "--config", &conf, "--root", &root, "--listen", &listen,
        ]),
        limit,
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("configuration is ok"), "{err}");
    // The file's settings, the command line's and the defaults, as TOML.
    assert!(out.contains("keepalive = \"5s\""), "{out}");
    assert!(out.contains(&format!("root = \"{root}\"")), "{out}");
    assert!(
        out.contains(&format!("model = \"{}\"", model.name)),
        "{out}"
    );
    assert!(out.contains("header_read = \"60s\""), "{out}");
    assert!(
        out.contains("[echo]\npath = \"\""),
        "not the sample site: {out}"
    );

    // A missing root, and a port another process listens on: both named, exit 1.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = format!("{}={}", taken.local_addr().unwrap(), model.name);
    let (code, _, err) = run_weft_out(
        &strings(&["check", "--root", "/nonexistent/weft", "--listen", &busy]),
        limit,
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("/nonexistent/weft"), "{err}");
    assert!(err.contains("address in use"), "{err}");

    // A file that does not parse: exit 1 with the parser's message.
    std::fs::write(&conf, "[timeouts]\nkeepalive = \"5 parsecs\"\n").unwrap();
    let (code, out, err) = run_weft_out(&strings(&["check", "--config", &conf]), limit);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("keepalive") || err.contains("duration"),
        "{err}"
    );
    // No server was started to remove the directory when it drops.
    let _ = std::fs::remove_dir_all(site.dir());
}

fn a_second_server_on_a_port_in_use_fails_at_start_whatever_the_threads(model: Model) {
    for threads in ["1", "2", "4"] {
        let first = Builder::new(model, "port-first")
            .args(&["--threads", threads])
            .start();
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--listen".into(),
            format!("{}={}", first.addr, model.name),
            "--threads".into(),
            threads.into(),
            "--root".into(),
            first.dir().join("root").display().to_string(),
        ];
        args.extend(model.args.iter().map(|a| a.to_string()));
        let (code, err) = run_weft(&args, Duration::from_secs(10));
        assert_eq!(
            code,
            Some(1),
            "threads {threads}: the second server must exit 1; its stderr:\n{err}"
        );
        assert!(err.contains("address in use"), "threads {threads}: {err}");
        // The first one still serves, alone.
        first.assert_alive();
    }
}

fn sample_files_are_generated_only_into_the_sample_site(model: Model) {
    let user = Builder::new(model, "user-site").no_echo().start();
    user.assert_alive();
    assert!(!user.dir().join("root/changes.html").exists());
    assert!(!user.dir().join("root/files").exists());
    assert_eq!(user.get("/echo").status, 404);

    let sample = Builder::new(model, "sample-site")
        .no_echo()
        .file(".weft-sample-site", b"marker\n")
        .start();
    let changes = std::fs::metadata(sample.dir().join("root/changes.html")).expect("generated");
    assert_eq!(changes.len(), 816_378);
    assert!(sample.dir().join("root/files/1k.bin").is_file());
    // The sample site gets echo without configuring it; its marker is never served.
    let r = sample.get("/echo");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"echo"[..]));
    assert_eq!(sample.get("/.weft-sample-site").status, 403);
}

fn text_types_are_declared_utf8_and_others_are_not(model: Model) {
    let srv = Builder::new(model, "charset")
        .file("a.txt", "héllo\n".as_bytes())
        .file("a.css", b"p{}")
        .file("a.bin", b"\x00\x01")
        .start();
    // Twice: the first answer is filled into the response cache, the second comes from it.
    for _ in 0..2 {
        let r = srv.get("/");
        assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
        let r = srv.get("/a.txt");
        assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
        let r = srv.get("/a.css");
        assert_eq!(r.header("Content-Type"), Some("text/css; charset=utf-8"));
        let r = srv.get("/a.bin");
        assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    }
    let off = Builder::new(model, "charset-off")
        .config("[static_files]\ncharset = \"\"\n")
        .start();
    assert_eq!(off.get("/").header("Content-Type"), Some("text/html"));
}

fn health_answers_ok_then_503_once_the_drain_has_begun(model: Model) {
    let log = crate::common::unique_dir("health-log").join("access.log");
    let mut srv = Builder::new(model, "health")
        .args(&["--health", "/healthz"])
        .args(&["--access-log", &log.display().to_string()])
        .config("[timeouts]\nshutdown_grace = \"8s\"\n")
        .start();
    let r = srv.get("/healthz");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok\n"[..]));
    assert_eq!(r.header("Cache-Control"), Some("no-store"));
    let r = srv.send(b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(srv.get("/").status, 200);

    // A probe in flight when SIGTERM comes: its head has begun, so it is finished, with 503.
    let mut probe = srv.connect();
    probe.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
    std::thread::sleep(Duration::from_millis(200));
    srv.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    probe.send(b"\r\n");
    let r = probe
        .read_response()
        .expect("the probe in flight is answered");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (503, &b"draining\n"[..]),
        "{r:?}"
    );
    let status = srv.wait_exit(Duration::from_secs(10)).expect("exits");
    assert!(status.success(), "{status:?}");

    // Health requests stay out of the access log ([health] log = false); the others do not.
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("\"GET / HTTP/1.1\" 200"), "{text}");
    assert!(!text.contains("healthz"), "{text}");
    let _ = std::fs::remove_dir_all(log.parent().unwrap());
}

fn health_is_answered_to_any_client_and_logged_when_asked(model: Model) {
    let log = crate::common::unique_dir("health-log2").join("access.log");
    let srv = Builder::new(model, "health-log")
        .args(&["--access-log", &log.display().to_string()])
        // status.allow admits nobody: the health check does not depend on it.
        .config("[health]\npath = \"/up\"\nlog = true\n[status]\nenabled = true\nallow = [\"10.9.9.9/32\"]\n")
        .start();
    let r = srv.get("/up");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok\n"[..]));
    assert_eq!(srv.get("/_weft/metrics").status, 403);
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("\"GET /up HTTP/1.1\" 200") {
            break;
        }
        assert!(Instant::now() < end, "no access-log line for /up: {text:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(log.parent().unwrap());
}

fn metrics_report_the_process_the_build_and_each_status_code(model: Model) {
    let srv = Builder::new(model, "metrics").args(&["--status"]).start();
    assert_eq!(srv.get("/").status, 200);
    assert_eq!(srv.get("/missing").status, 404);
    assert_eq!(srv.get("/missing-too").status, 404);
    // A response is counted once it is written, which the client may see first: ask again
    // until both 404s are in.
    let end = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let r = srv.get("/_weft/metrics");
        assert_eq!(r.status, 200);
        let text = r.text();
        if text.contains("code=\"404\"} 2\n") || Instant::now() >= end {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    assert!(value("process_resident_memory_bytes") > 0.0);
    assert!(value("process_open_fds") >= 3.0);
    assert!(value("process_cpu_seconds_total") >= 0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value("process_start_time_seconds");
    assert!(
        started <= now + 1.0 && started > now - 600.0,
        "{started} vs {now}"
    );
    assert!(text.contains("weft_build_info{version=\""), "{text}");
    let by_code = |code: u16| {
        text.lines()
            .find(|l| {
                l.starts_with("weft_http_responses_total{")
                    && l.contains(&format!("code=\"{code}\"}}"))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    assert_eq!(by_code(404), Some(2), "{text}");
    assert!(by_code(200).is_some_and(|n| n >= 1), "{text}");
}
