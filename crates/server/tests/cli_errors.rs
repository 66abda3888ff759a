//! What `weft serve` says about bad input before it serves anything: a document root that is
//! missing or a file, and configuration values of the wrong type, in the user's terms.

mod common;

use common::launch::RUN_LIMIT;
use common::Launch;

/// Runs `weft serve ARGS` (on port 0, should it get that far) and returns its stderr; the
/// command must fail.
fn refused(args: &[&std::ffi::OsStr]) -> String {
    let out = Launch::new()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .run(RUN_LIMIT);
    assert!(!out.success(), "weft started: {}", out.stderr);
    out.stderr
}

#[test]
fn a_missing_root_does_not_exist_and_a_file_is_not_a_directory() {
    let dir = common::unique_dir("cli-root");
    let missing = dir.join("nonexistent");
    let err = refused(&["--root".as_ref(), missing.as_os_str()]);
    assert!(
        err.contains(&format!(
            "document root {} does not exist",
            missing.display()
        )),
        "{err}"
    );
    let file = dir.join("file.txt");
    std::fs::write(&file, "x").unwrap();
    let err = refused(&["--root".as_ref(), file.as_os_str()]);
    assert!(
        err.contains(&format!(
            "document root {} is not a directory",
            file.display()
        )),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_config_value_of_the_wrong_type_names_file_line_column_and_key() {
    let dir = common::unique_dir("cli-config");
    std::fs::create_dir(dir.join("root")).unwrap();
    let cfg = dir.join("weft.toml");
    std::fs::write(&cfg, "[timeouts]\nsend = \"5s\"\nkeepalive = -3\n").unwrap();
    let err = refused(&[
        "--root".as_ref(),
        dir.join("root").as_os_str(),
        "--config".as_ref(),
        cfg.as_os_str(),
    ]);
    let want = format!(
        "weft: {}: line 3, column 13: timeouts.keepalive: expected a duration like \"75s\" or \
         a number of seconds >= 0, got -3",
        cfg.display()
    );
    assert_eq!(err.trim_end(), want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn zero_threads_and_malformed_listen_addresses_are_refused_in_the_users_terms() {
    let err = refused(&["--threads".as_ref(), "0".as_ref()]);
    assert!(err.contains("--threads") && err.contains("0"), "{err}");
    for bad in [
        "127.0.0.1",
        "localhost",
        ":http",
        "[::1]",
        "127.0.0.1:99999",
    ] {
        let err = refused(&["--listen".as_ref(), bad.as_ref()]);
        assert!(
            err.contains(&format!("bad listen address `{bad}`")) && err.contains(":PORT"),
            "{bad}: {err}"
        );
    }
    let dir = common::unique_dir("cli-threads");
    std::fs::create_dir(dir.join("root")).unwrap();
    let cfg = dir.join("weft.toml");
    std::fs::write(&cfg, "threads = 0\n").unwrap();
    let err = refused(&[
        "--config".as_ref(),
        cfg.as_os_str(),
        "--root".as_ref(),
        dir.join("root").as_os_str(),
    ]);
    assert!(
        err.contains("line 1") && err.contains("threads") && err.contains(">= 1, got 0"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `:PORT`, `PORT`, `localhost:PORT` and `[::1]:PORT` are accepted as nginx's `listen` takes
/// them (`weft check` prints the address each became).
#[test]
fn friendly_listen_addresses_name_what_is_bound() {
    let dir = common::unique_dir("cli-listen");
    std::fs::create_dir(dir.join("root")).unwrap();
    let cfg = dir.join("weft.toml");
    std::fs::write(
        &cfg,
        "[[listen]]\naddr = \"localhost:0\"\n[[listen]]\naddr = \":0\"\nmodel = \"thread\"\n",
    )
    .unwrap();
    // `:0` reaches other hosts: started as root (as CI may be), weft wants a choice.
    let out = Launch::new()
        .args(["check", "--allow-root", "--config"])
        .arg(&cfg)
        .arg("--root")
        .arg(dir.join("root"))
        .run(RUN_LIMIT);
    let text = &out.stdout;
    assert!(out.success(), "{text}{}", out.stderr);
    assert!(text.contains("addr = \"127.0.0.1:0\""), "{text}");
    assert!(text.contains("addr = \"0.0.0.0:0\""), "{text}");
    for (given, bound) in [
        ("8080", "0.0.0.0:8080"),
        (":8080", "0.0.0.0:8080"),
        ("localhost:8080", "127.0.0.1:8080"),
        ("[::1]:8080", "[::1]:8080"),
        ("[::]:8080", "[::]:8080"),
    ] {
        let l: weft::config::Listen = format!("{given}=thread").parse().unwrap();
        assert_eq!(l.addr.to_string(), bound, "{given}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two listeners on one address, or a wildcard beside another address on its port, cannot both
/// bind: `serve` and `check` say so and name both, instead of blaming another process.
#[test]
fn listeners_that_cannot_both_bind_are_named() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = common::unique_dir("cli-twice");
    std::fs::create_dir(dir.join("root")).unwrap();
    let root = dir.join("root");
    let same = format!("127.0.0.1:{port}");
    let err = refused(&[
        "--allow-root".as_ref(),
        "--root".as_ref(),
        root.as_os_str(),
        "--listen".as_ref(),
        same.as_ref(),
        "--listen".as_ref(),
        same.as_ref(),
    ]);
    assert!(
        err.contains(&format!(
            "listen address {same} is configured twice (listeners 2 and 3)"
        )),
        "{err}"
    );
    let any = format!("0.0.0.0:{port}");
    let err = refused(&[
        "--allow-root".as_ref(),
        "--root".as_ref(),
        root.as_os_str(),
        "--listen".as_ref(),
        any.as_ref(),
        "--listen".as_ref(),
        same.as_ref(),
    ]);
    assert!(err.contains(&format!("{any} and {same} overlap")), "{err}");
    // `check` finds it too, in a file.
    let cfg = dir.join("weft.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[listen]]\naddr = \"{same}\"\n[[listen]]\naddr = \"{same}\"\nmodel = \"thread\"\n"
        ),
    )
    .unwrap();
    let out = Launch::new()
        .args(["check", "--allow-root", "--config"])
        .arg(&cfg)
        .arg("--root")
        .arg(&root)
        .run(RUN_LIMIT);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(!out.success(), "{text}");
    assert!(
        text.contains("is configured twice (listeners 1 and 2)"),
        "{text}"
    );
    // Other ports, other families and port 0 are fine.
    use weft::config::{listen_conflicts, Listen};
    let ls = |addrs: &[&str]| -> Vec<Listen> { addrs.iter().map(|a| a.parse().unwrap()).collect() };
    assert!(listen_conflicts(&ls(&[
        "127.0.0.1:8080",
        "127.0.0.1:8081",
        "[::]:8080",
        "0.0.0.0:8082"
    ]))
    .is_ok());
    assert!(listen_conflicts(&ls(&["127.0.0.1:0", "127.0.0.1:0"])).is_ok());
    assert!(listen_conflicts(&ls(&["[::1]:8080", "[::]:8080"])).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `weft check --match URL --host H` says which site and location would answer, and by which
/// of nginx's rules (exact path, `^~` prefix, first regex, longest prefix).
#[test]
fn check_match_names_the_site_and_location_and_why() {
    let dir = common::unique_dir("cli-match");
    std::fs::create_dir(dir.join("root")).unwrap();
    let cfg = dir.join("weft.toml");
    std::fs::write(
        &cfg,
        "[[site]]\nhosts = [\"example.test\", \"*.example.test\"]\nroot = \"/srv\"\n\
         [[site.location]]\nprefix = \"/\"\n\
         [[site.location]]\nprefix = \"/images/\"\nskip_regex = true\n\
         [[site.location]]\nregex = '(?i)\\.jpe?g$'\ndeny = true\n\
         [[site.location]]\npath = \"/exact\"\nredirect = \"301 /elsewhere\"\n",
    )
    .unwrap();
    let explain = |url: &str, host: Option<&str>| {
        let mut l = Launch::new()
            .args(["check", "--config"])
            .arg(&cfg)
            .arg("--root")
            .arg(dir.join("root"))
            .args(["--match", url]);
        if let Some(h) = host {
            l = l.args(["--host", h]);
        }
        let out = l.run(RUN_LIMIT);
        assert!(out.success(), "{}{}", out.stdout, out.stderr);
        out.stdout
    };
    let t = explain("/photos/a.JPG", Some("example.test"));
    assert!(
        t.contains("site[0] (example.test), chosen by its exact name"),
        "{t}"
    );
    assert!(
        t.contains("location[2] (regex (?i)\\.jpe?g$), chosen by the first regex"),
        "{t}"
    );
    assert!(t.contains("403 (deny)"), "{t}");
    let t = explain("http://a.example.test/images/b.jpg", None);
    assert!(t.contains("chosen by a wildcard name"), "{t}");
    assert!(
        t.contains(
            "location[1] (prefix /images/), chosen by the longest prefix, which has skip_regex"
        ),
        "{t}"
    );
    let t = explain("/exact?x=1", Some("example.test"));
    assert!(t.contains("chosen by its exact path: 301 redirect"), "{t}");
    let t = explain("/x", Some("other.test"));
    assert!(t.contains("the top-level settings answer /x"), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Command-line values in the user's terms, and `weft check`'s exit status 1 for anything it
/// refuses (the command line included); `serve` keeps 2 for a usage error.
#[test]
fn command_line_values_are_refused_in_the_users_terms_and_check_exits_1() {
    let out = Launch::new()
        .args(["check", "--threads", "many"])
        .run(RUN_LIMIT);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("expected a number of worker threads >= 1 (at most 65535), got `many`")
            && !out.stderr.contains("invalid digit"),
        "{}",
        out.stderr
    );
    let out = Launch::new()
        .args(["serve", "--keepalive-requests", "lots"])
        .run(RUN_LIMIT);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("expected a whole number like 4, got `lots`"),
        "{}",
        out.stderr
    );
    let out = Launch::new().args(["check", "--help"]).run(RUN_LIMIT);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    // A certificate with no HTTPS listener to use it is a mistake, not ignored.
    let err = refused(&["--tls-cert".as_ref(), "cert.pem".as_ref()]);
    assert!(
        err.contains("--tls-cert given, but no listener serves HTTPS: add --https ADDR"),
        "{err}"
    );
}

/// Every problem of a configuration file is reported, each with its line and key; an nginx
/// directive is answered with weft's key, a typo with the key it is nearest.
#[test]
fn every_problem_of_a_config_is_reported_with_nginx_names_and_typos_answered() {
    let dir = common::unique_dir("cli-many");
    let cfg = dir.join("weft.toml");
    std::fs::write(
        &cfg,
        "worker_processes = 4\nthreads = \"many\"\n[timeouts]\nkeepalive_timeout = \"5s\"\n\
         sned = \"5s\"\n[limits]\nmax_connections = \"x\"\n",
    )
    .unwrap();
    let out = Launch::new()
        .arg("check")
        .arg("--config")
        .arg(&cfg)
        .run(RUN_LIMIT);
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    let f = cfg.display();
    for want in [
        format!("{f}: line 1, column 1: worker_processes: unknown field `worker_processes`"),
        "`worker_processes` is nginx's name: weft's is `threads`".to_string(),
        format!("{f}: line 2, column 1: threads: expected a number of worker threads >= 1"),
        format!("{f}: line 4, column 1: timeouts.keepalive_timeout: unknown field"),
        "`keepalive_timeout` is nginx's name: weft's is `timeouts.keepalive`".to_string(),
        format!("{f}: line 5, column 1: timeouts.sned: unknown field `sned`"),
        "did you mean `send`?".to_string(),
        format!("{f}: line 7, column 1: limits.max_connections: invalid type"),
    ] {
        assert!(
            out.stderr.contains(&want),
            "no {want:?} in:\n{}",
            out.stderr
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A certificate named in `[tls]` that cannot be read is reported at its setting's line.
#[test]
fn a_missing_certificate_is_reported_at_its_setting() {
    let dir = common::unique_dir("cli-cert");
    std::fs::create_dir(dir.join("root")).unwrap();
    let cfg = dir.join("weft.toml");
    std::fs::write(
        &cfg,
        format!(
            "root = {:?}\n[[listen]]\naddr = \"127.0.0.1:0\"\ntls = true\n\n[tls]\n\
             cert = \"missing.pem\"\nkey = \"missing.key\"\n",
            dir.join("root").to_str().unwrap()
        ),
    )
    .unwrap();
    for cmd in ["check", "serve"] {
        let out = Launch::new()
            .arg(cmd)
            .arg("--config")
            .arg(&cfg)
            .run(RUN_LIMIT);
        assert!(!out.success(), "{cmd}: {}", out.stderr);
        let want = format!(
            "{}: line 7: tls.cert: TLS certificate missing.pem: cannot read",
            cfg.display()
        );
        assert!(out.stderr.contains(&want), "{cmd}: {}", out.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
