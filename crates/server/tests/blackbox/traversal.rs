//! Path traversal: no encoding of `..`, no symlink and no absolute-form target reads the secret
//! file that lies beside (outside) the document root; dotfiles are refused.

use crate::common::{find, Builder, Model, INDEX_HTML, SECRET};

per_model! {
    encoded_dot_dot_never_leaves_the_root,
    symlinks_out_of_the_root_are_refused,
    dotfiles_are_refused,
    a_client_cannot_flood_the_error_log_with_warnings,
}

/// The part of the secret that must never appear in a response.
const MARKER: &[u8] = b"TOP-SECRET-7f3a9c1e";

fn encoded_dot_dot_never_leaves_the_root(model: Model) {
    let srv = Builder::new(model, "traversal")
        .file("sub/file.txt", b"inside\n")
        .start();
    assert!(srv.dir().join("secret.txt").is_file());
    assert_eq!(std::fs::read(srv.dir().join("secret.txt")).unwrap(), SECRET);
    let targets = [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/..%2fsecret.txt",
        "/..%2Fsecret.txt",
        "/.%2e/secret.txt",
        "/%2e./secret.txt",
        // Double encoding: one decode gives the literal name `%2e%2e`, never `..`.
        "/%252e%252e/secret.txt",
        "/%252e%252e%252fsecret.txt",
        "/..\\secret.txt",
        "/%5c..%5csecret.txt",
        "/..%5csecret.txt",
        "/%2e%2e%5csecret.txt",
        "/a/../../secret.txt",
        "/sub/../../secret.txt",
        "/sub/%2e%2e/%2e%2e/secret.txt",
        "/sub/..%2f..%2fsecret.txt",
        "/./../secret.txt",
        "/..",
        "/../",
        "/%00",
        "/secret.txt%00",
        "/..%00/secret.txt",
        "/index.html%00.txt",
        "//../secret.txt",
        "///..//..//secret.txt",
        // Overlong UTF-8 for `.` and `/`: just bytes in a name here.
        "/%c0%ae%c0%ae/secret.txt",
        "/%c0%ae%c0%ae%c0%afsecret.txt",
        "/..;/secret.txt",
        "/%2e%2e",
        "/%",
        "/%2",
        "/%zz/secret.txt",
    ];
    let mut requests: Vec<(String, Vec<u8>)> = targets
        .iter()
        .map(|t| {
            (
                t.to_string(),
                format!("GET {t} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").into_bytes(),
            )
        })
        .collect();
    for t in [
        "http://x/../secret.txt",
        "http://x/%2e%2e/secret.txt",
        "http://x/sub/../../secret.txt",
        "http://x//../secret.txt",
    ] {
        requests.push((
            t.to_string(),
            format!("GET {t} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").into_bytes(),
        ));
    }
    for (t, raw) in &requests {
        let mut c = srv.connect();
        c.send(raw);
        match c.read_response() {
            Ok(r) => {
                assert!(
                    find(&r.body, MARKER).is_none(),
                    "{t}: the secret leaked: {r:?}"
                );
                assert!(
                    [400, 403, 404].contains(&r.status),
                    "{t}: status {} (want 400, 403 or 404)",
                    r.status
                );
            }
            Err(e) => panic!("{t}: no response: {e:?}"),
        }
        srv.assert_alive();
    }
    // The same file is reachable by a path that stays inside.
    let r = srv.get("/sub/%2e%2e/sub/file.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "inside\n"));
    let r = srv.get("/sub/./file.txt");
    assert_eq!(r.status, 200);
}

fn symlinks_out_of_the_root_are_refused(model: Model) {
    let b = Builder::new(model, "symlinks");
    let secret = b.dir().join("secret.txt");
    let parent = b.dir().to_path_buf();
    let srv = b
        .file("sub/file.txt", b"inside\n")
        .symlink("out-abs", &secret)
        .symlink("out-rel", "../secret.txt")
        .symlink("out-dir", &parent)
        .symlink("in-rel", "index.html")
        .symlink("in-dir", "sub")
        .start();
    for t in [
        "/out-abs",
        "/out-rel",
        "/out-dir/secret.txt",
        "/out-dir/root/index.html",
    ] {
        let r = srv.get(t);
        assert_eq!(r.status, 403, "{t}: {r:?}");
        assert!(find(&r.body, MARKER).is_none(), "{t}: the secret leaked");
        srv.assert_alive();
    }
    let r = srv.get("/in-rel");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, INDEX_HTML);
    let r = srv.get("/in-dir/file.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "inside\n"));
}

fn dotfiles_are_refused(model: Model) {
    let srv = Builder::new(model, "dotfiles")
        .file(".env", b"PASSWORD=hunter2\n")
        .file(".git/config", b"[core]\n")
        .file("sub/.htpasswd", b"admin:x\n")
        .start();
    for t in [
        "/.env",
        "/.git/config",
        "/.git/",
        "/.git",
        "/sub/.htpasswd",
        "/%2eenv",
        "/%2egit/config",
        "/sub/../.env",
    ] {
        let r = srv.get(t);
        assert_eq!(r.status, 403, "{t}: {r:?}");
        assert!(!r.text().contains("hunter2") && !r.text().contains("[core]"));
    }
    srv.assert_alive();
}

/// Each refused symlink is a WARN line a client causes at will; past `BURST` (10) lines in 10 s
/// from one place the rest are counted, not written (`weft_log_lines_suppressed_total`). On the
/// process model every request here is a connection process of its own: the budget is shared.
fn a_client_cannot_flood_the_error_log_with_warnings(model: Model) {
    let b = Builder::new(model, "log-flood").args(&["--status"]);
    let secret = b.dir().join("secret.txt");
    let srv = b.symlink("out-abs", &secret).start();
    for _ in 0..40 {
        assert_eq!(srv.get("/out-abs").status, 403);
    }
    let log = srv.log();
    let lines = log.matches("resolves outside the document root").count();
    assert!((1..=10).contains(&lines), "{lines} warning lines:\n{log}");
    let metrics = srv.get("/_weft/metrics").text();
    let suppressed: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("weft_log_lines_suppressed_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no counter:\n{metrics}"));
    assert!(suppressed >= 30, "{suppressed} counted, {lines} written");
}
