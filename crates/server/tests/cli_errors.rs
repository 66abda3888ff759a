//! What `weft serve` says about bad input before it serves anything: a document root that is
//! missing or a file, and configuration values of the wrong type, in the user's terms.

use std::process::Command;

#[path = "common/mod.rs"]
mod common;

/// The model the shared helpers would start servers with (none is started here).
const MODEL: &str = "fiber";

/// Runs `weft serve ARGS` (on port 0, should it get that far) and returns its stderr; the
/// command must fail.
fn refused(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .output()
        .expect("run weft");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "weft started: {err}");
    err
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
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["check", "--allow-root", "--config"])
        .arg(&cfg)
        .arg("--root")
        .arg(dir.join("root"))
        .output()
        .expect("run weft check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
