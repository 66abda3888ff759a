use std::path::PathBuf;
use std::time::Duration;

use super::*;

#[test]
fn fiber_linger_parses_and_is_capped_at_half_the_keepalive_timeout() {
    assert_eq!(Config::default().fiber.linger, Duration::from_millis(100));
    assert_eq!(Config::default().fiber.linger_max, 64);
    let c = Config::from_toml("[fiber]\nlinger_max = 5\n").unwrap();
    assert_eq!(c.fiber.linger_max, 5);
    let c = Config::from_toml("[fiber]\nlinger = \"250ms\"\n").unwrap();
    assert_eq!(c.fiber.linger, Duration::from_millis(250));
    assert_eq!(crate::conn::linger_period(&c), Duration::from_millis(250));
    let c = Config::from_toml("[fiber]\nlinger = \"2s\"\n[timeouts]\nkeepalive = 1\n").unwrap();
    assert_eq!(crate::conn::linger_period(&c), Duration::from_millis(500));
    let c = Config::from_toml("[fiber]\nlinger = \"0s\"\n").unwrap();
    assert!(crate::conn::linger_period(&c).is_zero());
}

#[test]
fn parses_a_full_config() {
    let c = Config::from_toml(
        r#"
        root = "/srv/www"
        access_log = "stdout"
        [[listen]]
        addr = "127.0.0.1:9000"
        model = "thread"
        [timeouts]
        header_read = "5s"
        keepalive = 3
        send = "1500ms"
        [limits]
        max_body = 10
        [echo]
        path = ""
        [status]
        enabled = true
        allow = ["10.0.0.0/8"]
        "#,
    )
    .unwrap();
    assert_eq!(c.root, PathBuf::from("/srv/www"));
    assert_eq!(c.access_log, AccessLogTarget::Stdout);
    assert_eq!(c.listen[0].addr, "127.0.0.1:9000".parse().unwrap());
    assert_eq!(c.timeouts.header_read, Duration::from_secs(5));
    assert_eq!(c.timeouts.keepalive, Duration::from_secs(3));
    assert_eq!(c.timeouts.send, Duration::from_millis(1500));
    assert_eq!(c.timeouts.body_read, Duration::from_secs(60));
    assert_eq!(c.limits.max_body, 10);
    assert_eq!(c.echo.path.as_deref(), Some(""));
    assert_eq!(c.echo.mount_path(&c.root), None);
    assert!(c.status.allow[0].contains("10.1.2.3".parse().unwrap()));
    assert!(!c.status.allow[0].contains("11.1.2.3".parse().unwrap()));
}

/// `[SECTION]` (or `[[SECTION]]`) with `key = value` on line 2 (plus what a proxy needs).
fn one_setting(section: &str, key: &str, value: &str) -> String {
    match section {
        "proxy" => format!(
            "[[proxy]]\n{key} = {value}\nprefix = \"/a/\"\nupstream = \"http://127.0.0.1:1\"\n"
        ),
        _ => format!("[{section}]\n{key} = {value}\n"),
    }
}

#[test]
fn every_duration_size_and_rate_setting_says_what_is_wrong_where() {
    let durations = [
        ("timeouts", "header_read"),
        ("timeouts", "body_read"),
        ("timeouts", "keepalive"),
        ("timeouts", "send"),
        ("timeouts", "shutdown_grace"),
        ("timeouts", "min_rate_grace"),
        ("fiber", "linger"),
        ("cache", "revalidate"),
        ("cgi", "timeout"),
        ("cgi", "stderr_settle"),
        ("pipeline", "period"),
        ("proxy", "connect_timeout"),
        ("proxy", "read_timeout"),
        ("proxy", "tunnel_idle"),
        ("proxy", "idle_timeout"),
    ];
    let sizes = [
        ("limits", "max_request_line"),
        ("limits", "max_head_bytes"),
        ("limits", "max_body"),
        ("limits", "max_chunk_line"),
        ("limits", "max_trailer_bytes"),
        ("limits", "client_body_buffer"),
        ("fiber", "stack_size"),
        ("cache", "max_bytes"),
        ("cache", "max_object_bytes"),
        ("cgi", "max_header_bytes"),
        ("cgi", "output_buffer"),
        ("cgi", "max_stderr_line"),
        ("thread", "stack_size"),
    ];
    let rates = [
        ("pipeline", "c1"),
        ("pipeline", "c2"),
        ("pipeline", "min_idle_cpu"),
    ];
    let expected = |section: &str, key: &str| match (section, key) {
        (_, "c1" | "c2") => "a number of seconds >= 0 like 1.5e-5",
        (_, "min_idle_cpu") => "a fraction from 0 to 1 like 0.1",
        _ if durations.contains(&(section, key)) => {
            "a duration like \"75s\" or a number of seconds >= 0"
        }
        _ => "a number of bytes >= 0 or a size like \"64k\" or \"1m\"",
    };
    for (section, key) in durations.iter().chain(&sizes).chain(&rates) {
        let path = match *section {
            "proxy" => format!("proxy[0].{key}"),
            s => format!("{s}.{key}"),
        };
        // The value starts at column len(key) + 4 of line 2.
        let col = key.len() + 4;
        for (value, got) in [
            ("-3", "-3"),
            ("\"5 parsecs\"", "\"5 parsecs\""),
            ("true", "true"),
            ("[1]", "an array"),
        ] {
            let err = Config::from_toml(&one_setting(section, key, value))
                .unwrap_err()
                .to_string();
            let want = format!(
                "line 2, column {col}: {path}: expected {}, got {got}",
                expected(section, key)
            );
            assert_eq!(err, want, "{section}.{key} = {value}");
        }
    }
    // What each kind does take.
    let c = Config::from_toml("[timeouts]\nkeepalive = 1.5\nsend = 3\n").unwrap();
    assert_eq!(c.timeouts.keepalive, Duration::from_millis(1500));
    assert_eq!(c.timeouts.send, Duration::from_secs(3));
    let c = Config::from_toml(
        "[limits]\nmax_body = \"1m\"\nmax_head_bytes = \"64k\"\nmax_headers = 7\n\
         [cache]\nmax_bytes = \"1G\"\nmax_object_bytes = 4096\n",
    )
    .unwrap();
    assert_eq!(c.limits.max_body, 1 << 20);
    assert_eq!(c.limits.max_head_bytes, 64 << 10);
    assert_eq!(c.cache.max_bytes, 1 << 30);
    assert_eq!(c.cache.max_object_bytes, 4096);
    let c = Config::from_toml("[pipeline]\nc1 = 0\nc2 = 2e-10\nmin_idle_cpu = 1\n").unwrap();
    assert_eq!((c.pipeline.c1, c.pipeline.c2), (0.0, 2e-10));
    assert_eq!(c.pipeline.min_idle_cpu, 1.0);
    for bad in ["\"1t\"", "1.5", "\"99999999999g\""] {
        let err = Config::from_toml(&format!("[limits]\nmax_body = {bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("line 2, column 12: limits.max_body: expected"),
            "{err}"
        );
    }
    let err = Config::from_toml("[pipeline]\nmin_idle_cpu = 1.5\n")
        .unwrap_err()
        .to_string();
    assert!(err.ends_with("got 1.5"), "{err}");
}

#[test]
fn other_errors_name_their_line_column_and_key() {
    let err = Config::from_toml("root = \"www\"\n[timeouts]\nkeeplive = \"5s\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("line 3, column 1: timeouts.keeplive: unknown field `keeplive`"),
        "{err}"
    );
    let err = Config::from_toml("[[listen]]\naddr = \"127.0.0.1:1\"\nmodel = \"bogus\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("line 3, column 9: listen[0].model: "),
        "{err}"
    );
    let err = Config::from_toml("[status]\nallow = [\"::1\", \"nonsense\"]\n")
        .unwrap_err()
        .to_string();
    // toml points at the whole array for a bad element.
    assert_eq!(
        err,
        "line 2, column 9: status.allow: bad address in `nonsense`: invalid IP address syntax"
    );
    // A file that is not TOML at all still gets its position.
    let err = Config::from_toml("[timeouts\n").unwrap_err().to_string();
    assert!(err.starts_with("line 1, column "), "{err}");
}

#[test]
fn listener_name_proxy_protocol_and_real_ip_from() {
    let c = Config::from_toml(
        "real_ip_from = [\"10.0.0.0/8\", \"::1\"]\n\
         [[listen]]\naddr = \"127.0.0.1:1\"\nname = \"web\"\nproxy_protocol = true\n\
         [[listen]]\naddr = \"127.0.0.1:2\"\n",
    )
    .unwrap();
    assert_eq!(c.listen[0].name.as_deref(), Some("web"));
    assert!(c.listen[0].proxy_protocol);
    assert_eq!(c.listen[1].name, None);
    assert!(!c.listen[1].proxy_protocol);
    assert!(c.real_ip_from[0].contains("10.2.3.4".parse().unwrap()));
    assert!(c.real_ip_from[1].contains("::1".parse().unwrap()));
    assert!(Config::default().real_ip_from.is_empty());
    assert!(Config::from_toml("real_ip_from = [\"10.0.0.0/33\"]").is_err());
}

#[test]
fn refuses_unknown_keys_and_models() {
    assert!(Config::from_toml("rot = \"x\"").is_err());
    assert!(Config::from_toml("[[listen]]\naddr = \"127.0.0.1:1\"\nmodel = \"bogus\"").is_err());
    assert!(Config::from_toml("[timeouts]\nsend = \"5 parsecs\"").is_err());
}

#[test]
fn listen_syntax() {
    let l: Listen = "127.0.0.1:8081=thread".parse().unwrap();
    assert_eq!(l.model, Model::Thread);
    assert!("127.0.0.1:8081=nope".parse::<Listen>().is_err());
    let p: Listen = "127.0.0.1:8082=process".parse().unwrap();
    assert_eq!(p.model, Model::Process);
    let p: Listen = "127.0.0.1:8083=pipeline".parse().unwrap();
    assert_eq!(p.model, Model::Pipeline);
    assert!("nothost".parse::<Listen>().is_err());
    assert_eq!(
        Config::default().listeners()[0].addr,
        "127.0.0.1:8080".parse().unwrap()
    );
}

#[test]
fn cache_and_process_sections() {
    let c = Config::default();
    assert!(c.cache.enabled);
    assert_eq!(c.cache.revalidate, Duration::from_secs(1));
    let c = Config::from_toml(
        "[cache]\nenabled = false\nmax_bytes = 1000\nmax_object_bytes = 10\nrevalidate = \"250ms\"\n[process]\nmax_children = 3",
    )
    .unwrap();
    assert!(!c.cache.enabled);
    assert_eq!(c.cache.max_bytes, 1000);
    assert_eq!(c.cache.max_object_bytes, 10);
    assert_eq!(c.cache.revalidate, Duration::from_millis(250));
    assert_eq!(c.process.max_children, 3);
    assert!(Config::from_toml("[cache]\nsize = 1").is_err());
}

#[test]
fn cgi_section() {
    let c = Config::default();
    assert_eq!(c.cgi.dir, None);
    assert_eq!(c.cgi.prefix, "/cgi-bin/");
    assert_eq!(c.cgi.timeout, Duration::from_secs(60));
    let c = Config::from_toml("[cgi]\ndir = \"/srv/cgi\"\nprefix = \"/run/\"\ntimeout = \"2s\"")
        .unwrap();
    assert_eq!(c.cgi.dir, Some(PathBuf::from("/srv/cgi")));
    assert_eq!(c.cgi.prefix, "/run/");
    assert_eq!(c.cgi.timeout, Duration::from_secs(2));
    assert!(Config::from_toml("[cgi]\nscripts = 1").is_err());
    let c = Config::from_toml(
        "[cgi]\nmax_header_bytes = \"8k\"\noutput_buffer = 0\nmax_stderr_line = 80\n\
         stderr_settle = \"1s\"\n[limits]\nmax_internal_redirects = 3\n\
         [thread]\nstack_size = \"1m\"",
    )
    .unwrap();
    assert_eq!(c.cgi.max_header_bytes, 8 << 10);
    assert_eq!((c.cgi.output_buffer, c.cgi.max_stderr_line), (0, 80));
    assert_eq!(c.cgi.stderr_settle, Duration::from_secs(1));
    assert_eq!(c.limits.max_internal_redirects, 3);
    assert_eq!(c.thread.stack_size, 1 << 20);
    // The defaults are the values these limits had as constants.
    let d = Config::default();
    assert_eq!(
        (d.cgi.max_header_bytes, d.cgi.output_buffer),
        (32 << 10, 64 << 10)
    );
    assert_eq!(d.cgi.max_stderr_line, 4096);
    assert_eq!(d.cgi.stderr_settle, Duration::from_millis(200));
    assert_eq!(d.limits.max_internal_redirects, 10);
    assert_eq!(d.thread.stack_size, 256 << 10);
    let c = Config::from_toml("[cgi]\nextensions = [\".cgi\", \".pl\"]").unwrap();
    assert_eq!(c.cgi.extensions, [".cgi", ".pl"]);
    assert!(c.cgi.dir.is_none());
}

#[test]
fn pipeline_section() {
    let c = Config::default();
    assert!(c.pipeline.validate().is_ok());
    assert_eq!(c.pipeline.period, Duration::from_millis(250));
    let c = Config::from_toml(
        "[pipeline]\nthreads_total = 8\naccept = 1\nreceive = 1\nprocess = 3\nsend = 3\nperiod = \"100ms\"\ncontroller = false\nc1 = 0.001\nc2 = 2e-9",
    )
    .unwrap();
    assert_eq!(c.pipeline.initial(), [1, 1, 3, 3]);
    assert!(!c.pipeline.controller);
    assert_eq!(c.pipeline.c1, 0.001);
    assert!(c.pipeline.validate().is_ok());
    let mut bad = c.pipeline.clone();
    bad.threads_total = 7;
    let err = bad.validate().unwrap_err();
    assert_eq!(
        err,
        PipelineError::TooManyThreads {
            initial: 8,
            total: 7
        }
    );
    assert_eq!(
        err.to_string(),
        "[pipeline] the initial threads (8) exceed threads_total (7)"
    );
    bad.threads_total = 8;
    bad.accept = 0;
    assert_eq!(bad.validate(), Err(PipelineError::StageWithoutThread));
    let mut bad = c.pipeline.clone();
    bad.queue = 0;
    assert_eq!(bad.validate(), Err(PipelineError::NotPositive));
    let mut bad = c.pipeline.clone();
    bad.c2 = f64::NAN;
    assert_eq!(bad.validate(), Err(PipelineError::BadCost));
    let mut bad = c.pipeline.clone();
    bad.min_idle_cpu = 1.5;
    assert_eq!(bad.validate(), Err(PipelineError::BadIdleCpu));
    assert!(Config::from_toml("[pipeline]\nstages = 4").is_err());
}

#[test]
fn pipeline_stages_not_given_take_their_default_share_of_threads_total() {
    assert_eq!(PipelineConfig::default().initial(), [1, 1, 4, 4]);
    for (total, initial) in [(4, [1, 1, 1, 1]), (8, [1, 1, 3, 3]), (10, [1, 1, 4, 4])] {
        let c = Config::from_toml(&format!("[pipeline]\nthreads_total = {total}")).unwrap();
        assert_eq!(c.pipeline.initial(), initial, "threads_total = {total}");
        assert!(c.pipeline.validate().is_ok(), "threads_total = {total}");
    }
    let c = Config::from_toml("[pipeline]\nthreads_total = 12\nreceive = 3").unwrap();
    assert_eq!(c.pipeline.initial(), [1, 3, 4, 4]);
    let c = Config::from_toml("[pipeline]\nqueue = 7").unwrap();
    assert_eq!(c.pipeline.queue, 7);
    assert_eq!(c.pipeline.threads_total, 16);
    assert_eq!(c.pipeline.period, Duration::from_millis(250));
}

#[test]
fn proxy_section_and_flag() {
    let c = Config::from_toml(
        "[[proxy]]\nprefix = \"/api/\"\nupstream = \"http://127.0.0.1:9000\"\n\
         read_timeout = \"2s\"\nhost = \"upstream\"\n\
         [[proxy]]\nupstream = \"http://127.0.0.1:9001\"\nfallback = true",
    )
    .unwrap();
    assert_eq!(c.proxy.len(), 2);
    assert_eq!(c.proxy[0].prefix, "/api/");
    assert_eq!(c.proxy[0].read_timeout, Duration::from_secs(2));
    assert_eq!(c.proxy[0].connect_timeout, Duration::from_secs(5));
    assert_eq!(c.proxy[0].host, ProxyHost::Upstream);
    assert!(c.proxy[1].fallback && c.proxy[1].host == ProxyHost::Client);
    assert!(Config::from_toml("[[proxy]]\nupstream = \"x\"\nretries = 3").is_err());
    let p: ProxyConfig = "/api/=http://127.0.0.1:9000".parse().unwrap();
    assert_eq!((p.prefix.as_str(), p.fallback), ("/api/", false));
    assert_eq!(p.upstream, "http://127.0.0.1:9000");
    let f: ProxyConfig = "*=http://backend:8000".parse().unwrap();
    assert!(f.fallback && f.prefix.is_empty());
    assert!("api=http://x".parse::<ProxyConfig>().is_err());
    assert!("/api".parse::<ProxyConfig>().is_err());
}

#[test]
fn cidr_matching() {
    let lo: Cidr = "127.0.0.0/8".parse().unwrap();
    assert!(lo.contains("127.9.9.9".parse().unwrap()));
    assert!(lo.contains("::ffff:127.0.0.1".parse().unwrap()));
    assert!(!lo.contains("::1".parse().unwrap()));
    let all: Cidr = "0.0.0.0/0".parse().unwrap();
    assert!(all.contains("8.8.8.8".parse().unwrap()));
    assert!("1.2.3.4/33".parse::<Cidr>().is_err());
}

#[test]
fn a_config_written_as_toml_reads_back_the_same() {
    let mut c = Config::from_toml(
        r#"
        root = "/srv/www"
        threads = 3
        access_log = "/var/log/weft/access.log"
        [[listen]]
        addr = "[::1]:9000"
        model = "pipeline"
        [timeouts]
        send = "1500ms"
        [echo]
        path = ""
        [status]
        allow = ["10.0.0.0/8", "::1"]
        [cgi]
        dir = "/srv/cgi"
        [pipeline]
        period = "100ms"
        c1 = 2e-5
        [[proxy]]
        prefix = "/api/"
        upstream = "http://127.0.0.1:9000"
        "#,
    )
    .unwrap();
    c.timeouts.body_read = Duration::from_micros(1500);
    let text = c.to_toml().unwrap();
    assert_eq!(Config::from_toml(&text).unwrap(), c, "{text}");
    let d = Config::default();
    assert_eq!(Config::from_toml(&d.to_toml().unwrap()).unwrap(), d);
    assert_eq!(format_duration(Duration::from_secs(75)), "75s");
    assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
}

#[test]
fn durations() {
    assert_eq!(parse_duration("75s").unwrap(), Duration::from_secs(75));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
    assert!(parse_duration("-1s").is_err());
    assert!(parse_duration("s").is_err());
}

/// Each nginx directive the errors answer names a weft key that docs/configuration.md lists
/// (as `` `key` `` in its section's table), so the hint cannot point at a key that is gone.
#[test]
fn nginx_names_point_at_documented_keys() {
    let doc = include_str!("../../../../docs/configuration.md");
    for (nginx, key) in super::NGINX_NAMES {
        let (section, last) = key.rsplit_once('.').unwrap_or(("", key));
        let documented = if section.is_empty() {
            doc.contains(&format!("| `{last}` |"))
        } else {
            let heading = doc
                .find(&format!("### `[{section}]`"))
                .or_else(|| doc.find(&format!("### `[[{section}]]`")));
            heading.is_some_and(|at| {
                let table = &doc[at..];
                let end = table[4..].find("\n### ").map_or(table.len(), |e| e + 4);
                table[..end].contains(&format!("| `{last}` |"))
            })
        };
        assert!(
            documented,
            "`{nginx}` -> `{key}`: not in docs/configuration.md"
        );
    }
}

#[test]
fn typos_get_the_nearest_key_and_nothing_far_off() {
    let msg =
        |f: &str| format!("unknown field `{f}`, expected one of `send`, `keepalive`, `body_read`");
    assert_eq!(
        super::unknown_key_hint(&msg("sned")).as_deref(),
        Some("did you mean `send`?")
    );
    assert_eq!(
        super::unknown_key_hint(&msg("keepalve")).as_deref(),
        Some("did you mean `keepalive`?")
    );
    assert_eq!(super::unknown_key_hint(&msg("zzzzzz")), None);
    assert_eq!(super::unknown_key_hint("invalid type: string"), None);
    assert_eq!(super::edit_distance("kitten", "sitting"), 3);
    assert_eq!(super::edit_distance("", "ab"), 2);
}
