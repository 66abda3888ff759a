//! Serving as an unprivileged user (`user` / `--user`), black-box and as root: every process of
//! the server (the server itself, the `process` model's master and its connection processes,
//! CGI scripts, the process a SIGUSR2 upgrade starts) runs with the user's ids, read from
//! `/proc/PID/status`; root refuses to serve on an address other hosts reach unless `user` or
//! `allow_root` says how. Skipped, with a line, when the tests do not run as root.

mod common;

use std::fs;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{descendants, unique_dir, Conn, Launch, Weft};

const WAIT: Duration = Duration::from_secs(20);

/// Prints the ids it runs with.
const ID_SH: &str =
    "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nid -u\nid -g\nid -G\n";

fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `nobody`'s uid and primary gid from /etc/passwd.
fn nobody() -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd.lines().find(|l| l.starts_with("nobody:"))?;
    let f: Vec<&str> = line.split(':').collect();
    Some((f[2].parse().ok()?, f[3].parse().ok()?))
}

/// Root, and a `nobody` user to become; else prints why the test is skipped.
fn runnable(test: &str) -> Option<(u32, u32)> {
    if !is_root() {
        println!("{test}: skipped: needs root (the tests do not run as root)");
        return None;
    }
    let ids = nobody();
    if ids.is_none() {
        println!("{test}: skipped: no user `nobody` in /etc/passwd");
    }
    ids
}

/// `weft serve ARGS` in `dir`, once it serves on every `--listen` address of `args` (at least
/// one); else how it ended and its log.
fn start(dir: &Path, args: &[&str]) -> Result<Weft, String> {
    let listeners = args.iter().filter(|a| **a == "--listen").count().max(1);
    Launch::serve(dir)
        .args(args)
        .listeners(listeners)
        .try_start()
}

/// The ids of a process from /proc: (real, effective, saved, filesystem) uids and gids, and
/// the supplementary groups; `None` once it is gone.
fn proc_ids(pid: u32) -> Option<([u32; 4], [u32; 4], Vec<u32>)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect()
    };
    let (uid, gid) = (field("Uid:"), field("Gid:"));
    Some((uid.try_into().ok()?, gid.try_into().ok()?, field("Groups:")))
}

/// Asserts `pid` runs as `uid`/`gid` in all four ids, without root's group.
#[track_caller]
fn assert_runs_as(pid: u32, (uid, gid): (u32, u32), what: &str) {
    let Some((u, g, groups)) = proc_ids(pid) else {
        return; // exited meanwhile
    };
    assert_eq!(u, [uid; 4], "{what} {pid}: Uid");
    assert_eq!(g, [gid; 4], "{what} {pid}: Gid");
    assert!(
        !groups.contains(&0),
        "{what} {pid}: still in group 0: {groups:?}"
    );
}

/// A document root and CGI directory that `nobody` can read.
fn site(name: &str) -> std::path::PathBuf {
    let dir = unique_dir(name);
    for d in ["root", "cgi"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    fs::write(dir.join("root/index.html"), common::INDEX_HTML).unwrap();
    fs::write(dir.join("cgi/id.sh"), ID_SH).unwrap();
    fs::set_permissions(dir.join("cgi/id.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    for d in [dir.clone(), dir.join("root"), dir.join("cgi")] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

fn get(addr: SocketAddr, path: &str, keep: bool) -> (common::Response, Conn) {
    let mut c = Conn::connect(addr);
    let conn = if keep { "keep-alive" } else { "close" };
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: {conn}\r\n\r\n").as_bytes());
    (c.read_response().expect("a response"), c)
}

#[test]
fn every_process_of_every_model_runs_as_the_user() {
    let Some(ids) = runnable("every_process_of_every_model_runs_as_the_user") else {
        return;
    };
    let dir = site("privdrop-models");
    let (root, cgi) = (dir.join("root"), dir.join("cgi"));
    let mut args = vec![
        "--root",
        root.to_str().unwrap(),
        "--cgi",
        cgi.to_str().unwrap(),
    ];
    args.extend(["--user", "nobody", "--threads", "2"]);
    for l in [
        "127.0.0.1:0=fiber",
        "127.0.0.1:0=thread",
        "127.0.0.1:0=process",
        "127.0.0.1:0=pipeline",
    ] {
        args.extend(["--listen", l]);
    }
    let weft = start(&dir, &args).expect("weft serves as nobody");
    let mut held = Vec::new();
    for serving in weft.serving() {
        let (addr, model) = (serving.addr, &serving.model);
        let (r, _) = get(addr, "/", false);
        assert_eq!(r.status, 200, "{model}: the root is readable as nobody");
        // A CGI script reports the ids it was started with.
        let (r, _) = get(addr, "/cgi-bin/id.sh", false);
        assert_eq!(r.status, 200, "{model}: {r:?}");
        let text = r.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], ids.0.to_string(), "{model}: CGI uid");
        assert_eq!(lines[1], ids.1.to_string(), "{model}: CGI gid");
        assert!(
            !lines[2].split(' ').any(|g| g == "0"),
            "{model}: CGI groups {}",
            lines[2]
        );
        // A keep-alive connection stays open: the process model keeps a child for it.
        let (r, c) = get(addr, "/", true);
        assert_eq!(r.status, 200);
        held.push(c);
    }
    let pid = weft.pid();
    assert_runs_as(pid, ids, "the server");
    let all = descendants(pid);
    // The process model's master, and at least one connection process under it.
    assert!(!all.is_empty(), "no master process; log:\n{}", weft.log());
    for p in all.keys() {
        assert_runs_as(*p, ids, "a process of the server");
    }
    assert!(
        weft.log().contains("serving as user nobody"),
        "{}",
        weft.log()
    );
    drop(held);
    drop(weft);
    fs::remove_dir_all(&dir).ok();
}

#[test]
fn root_is_refused_on_an_exposed_address_without_user_or_allow_root() {
    if runnable("root_is_refused_on_an_exposed_address_without_user_or_allow_root").is_none() {
        return;
    }
    let dir = site("privdrop-refuse");
    let root = dir.join("root");
    let base = ["--root", root.to_str().unwrap(), "--listen", "0.0.0.0:0"];
    let e = start(&dir, &base).expect_err("root on 0.0.0.0 is refused");
    assert!(
        e.contains("--user") && e.contains("--allow-root") && e.contains("0.0.0.0:0"),
        "{e}"
    );
    // Either choice serves: as root when allowed, as the user otherwise.
    let mut allowed = base.to_vec();
    allowed.push("--allow-root");
    let weft = start(&dir, &allowed).expect("--allow-root serves");
    let (u, _, _) = proc_ids(weft.pid()).unwrap();
    assert_eq!(u, [0; 4]);
    drop(weft);
    let mut user = base.to_vec();
    user.extend(["--user", "nobody"]);
    let weft = start(&dir, &user).expect("--user nobody serves");
    assert_ne!(proc_ids(weft.pid()).unwrap().0[0], 0);
    drop(weft);
    // A user that does not exist is refused before anything is bound.
    let mut unknown = base.to_vec();
    unknown.extend(["--user", "no-such-user-weft"]);
    let e = start(&dir, &unknown).expect_err("an unknown user is refused");
    assert!(e.contains("user `no-such-user-weft` does not exist"), "{e}");
    fs::remove_dir_all(&dir).ok();
}

/// A document root the user cannot search is refused once the user is taken, naming the root,
/// instead of answering every request with 403 (and a file the user may not read is a 403 with
/// a log line).
#[test]
fn a_root_the_user_cannot_search_is_refused_at_start() {
    if runnable("a_root_the_user_cannot_search_is_refused_at_start").is_none() {
        return;
    }
    let dir = site("privdrop-root-mode");
    let root = dir.join("root");
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
    let args = [
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--user",
        "nobody",
    ];
    let e = start(&dir, &args).expect_err("a root nobody cannot search is refused");
    assert!(
        e.contains(&format!(
            "document root {} cannot be searched by user `nobody`",
            root.display()
        )),
        "{e}"
    );
    // Searchable, with one file the user may not read.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(root.join("secret.txt"), b"root only\n").unwrap();
    fs::set_permissions(root.join("secret.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    let weft = start(&dir, &args).expect("a searchable root serves");
    let addr = weft.serving()[0].addr;
    let mut c = Conn::connect(addr);
    c.send(b"GET /secret.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_response().expect("an answer").status, 403);
    let deadline = Instant::now() + WAIT;
    while !weft
        .log()
        .contains("open \"secret.txt\" failed: Permission denied")
    {
        assert!(Instant::now() < deadline, "no log line: {}", weft.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(weft);
    fs::remove_dir_all(&dir).ok();
}

/// The upgrade's new process is started by the dropped one: it takes the sockets over (no bind
/// needed) and serves as the user.
#[test]
fn an_upgrade_after_the_drop_serves_as_the_user() {
    let Some(ids) = runnable("an_upgrade_after_the_drop_serves_as_the_user") else {
        return;
    };
    let dir = site("privdrop-upgrade");
    let root = dir.join("root");
    let args = [
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0=fiber",
        "--user",
        "nobody",
    ];
    let mut weft = start(&dir, &args).expect("weft serves as nobody");
    let addr = weft.serving()[0].addr;
    let old = weft.pid();
    weft.signal(libc::SIGUSR2);
    let end = Instant::now() + WAIT;
    // The old process names the new one in its log (it may have drained and exited by the
    // time this looks, and the new one is then no longer its descendant).
    let new = loop {
        let log = weft.log();
        let named = log
            .split("upgraded: process ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next()?.parse::<u32>().ok());
        if let Some(p) = named.or_else(|| descendants(old).keys().next().copied()) {
            break p;
        }
        assert!(Instant::now() < end, "no new process; log:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    };
    // Stopped however the test ends.
    struct Stop(u32);
    impl Drop for Stop {
        fn drop(&mut self) {
            // SAFETY: kill takes no pointers; the upgraded server, which this test stops.
            unsafe { libc::kill(self.0 as i32, libc::SIGTERM) };
        }
    }
    let _stop = Stop(new);
    assert_runs_as(new, ids, "the upgraded process");
    // The old process drains and exits; the new one serves on the same port.
    let status = weft.exit_within(WAIT);
    assert!(status.success(), "old: {status}; log:\n{}", weft.log());
    let (r, _) = get(addr, "/", false);
    assert_eq!(r.status, 200);
    assert_runs_as(new, ids, "the upgraded process");
    assert!(
        weft.log().contains("upgraded: process"),
        "log:\n{}",
        weft.log()
    );
    drop(weft);
    fs::remove_dir_all(&dir).ok();
}
