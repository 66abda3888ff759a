//! Serving as an unprivileged user after binding (nginx `user`, Apache `User`/`Group`).
//!
//! To bind a port below 1024 the server starts as root; once every listener is bound (or
//! taken over from systemd or an upgrading predecessor), the access log is open and the
//! configuration's files are read, `drop_privileges` sets the supplementary groups, the group
//! and the user of `user = "NAME[:GROUP]"` for the whole process, before the `process` model's
//! master is forked and before any thread starts, and checks that root cannot be regained.
//! Everything started afterwards (the master, connection processes, CGI scripts, the process
//! an upgrade starts) runs as that user.
//!
//! The rule for a server started as root ([`root_policy`], applied by `weft serve`):
//! with `user`, it drops to that user; with `allow_root = true` and no `user`, it serves as
//! root; with neither, it refuses to start if any listener is reachable from another host (an
//! address that is not loopback, the wildcard included), and serves with a warning if every
//! listener is on loopback (a developer's `weft serve`, the test suite). nginx instead drops to
//! `nobody` when started as root without `user`; weft refuses because a document root that
//! `nobody` cannot read would turn into 403s at the first request rather than a clear error at
//! start.
//!
//! Trade-offs, as nginx's worker processes have them: SIGUSR1 reopens the access log as the
//! user (the log's directory must let it create the file), SIGHUP re-reads the configuration as
//! the user, and the process a SIGUSR2 upgrade starts runs as the user: it takes the listening
//! sockets over and needs no privilege, but a configuration that adds a port below 1024 takes
//! effect only at a restart as root.

use std::io;

use crate::config::Config;
use weft_sys::fs::searchable;
use weft_sys::user::{self as users, Gid, Uid, UserIds};

/// The user and group `spec` (`NAME`, `NAME:GROUP`, or numeric ids) names: the group is the
/// user's primary group unless given.
pub(crate) fn resolve(spec: &str) -> Result<(UserIds, Gid), String> {
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    if user.is_empty() || group.is_some_and(str::is_empty) {
        return Err(format!("user `{spec}`: expected NAME or NAME:GROUP"));
    }
    let ids = match users::lookup_user(user) {
        Ok(Some(ids)) => ids,
        Ok(None) => match user.parse::<Uid>() {
            // A numeric id with no entry (a container's arbitrary uid): its group is its own
            // number unless given.
            Ok(uid) => UserIds {
                name: user.to_string(),
                uid,
                gid: uid,
            },
            Err(_) => return Err(format!("user `{user}` does not exist")),
        },
        Err(e) => return Err(format!("user `{user}`: cannot look it up: {e}")),
    };
    let gid = match group {
        None => ids.gid,
        Some(g) => match users::lookup_group(g) {
            Ok(Some(gid)) => gid,
            Ok(None) => g
                .parse::<Gid>()
                .map_err(|_| format!("group `{g}` does not exist"))?,
            Err(e) => return Err(format!("group `{g}`: cannot look it up: {e}")),
        },
    };
    Ok((ids, gid))
}

/// True if the process runs with root's effective user id.
pub(crate) fn is_root() -> bool {
    users::ids().1 == 0
}

/// The rule for a server started as root (see the module doc): `Err` with a message naming both
/// ways out when it must not start. An unknown `user` is refused here too, before anything is
/// bound.
pub fn root_policy(cfg: &Config) -> Result<(), String> {
    if let Some(spec) = &cfg.user {
        resolve(spec)?;
    }
    if !is_root() || cfg.user.is_some() {
        return Ok(());
    }
    if cfg.allow_root {
        log::warn!("serving as root (allow_root): every request is handled with root's rights");
        return Ok(());
    }
    let listeners = cfg.listeners();
    let exposed: Vec<String> = listeners
        .iter()
        .filter(|l| !l.addr.ip().is_loopback())
        .map(|l| l.addr.to_string())
        .collect();
    if exposed.is_empty() {
        log::warn!(
            "running as root on loopback only; set `user = \"NAME\"` (--user NAME) to serve as an \
             unprivileged user, or `allow_root = true` (--allow-root) to say root is meant"
        );
        return Ok(());
    }
    Err(format!(
        "started as root with {} reachable from other hosts: set `user = \"NAME\"` (--user \
         NAME, e.g. www-data) to serve as that user once the ports are bound, or `allow_root = \
         true` (--allow-root) to serve as root",
        exposed.join(", ")
    ))
}

/// Becomes `cfg.user` for good if the process runs as root (see the module doc for when this
/// is called); a no-op without `user`. Not root: a `user` naming another user is ignored with a
/// warning (only root can switch users; nginx does the same). Fails, and the server must not
/// serve, if any step fails or root can be regained afterwards.
pub(crate) fn drop_privileges(cfg: &Config) -> io::Result<()> {
    let Some(spec) = &cfg.user else {
        return Ok(());
    };
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
    let (user, gid) = resolve(spec).map_err(invalid)?;
    let (uid, euid, cur_gid, egid) = users::ids();
    if euid != 0 {
        if (uid, euid, cur_gid, egid) != (user.uid, user.uid, gid, gid) {
            log::warn!(
                "user `{spec}` ignored: only a server started as root can change its user \
                 (running as uid {euid})"
            );
        }
        return Ok(());
    }
    if user.uid == 0 && !cfg.allow_root {
        return Err(invalid(format!(
            "user `{spec}` is root: set `allow_root = true` (--allow-root) to serve as root"
        )));
    }
    users::become_user(&user, gid).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot become user `{spec}` (uid {}, gid {gid}): {e}",
                user.uid
            ),
        )
    })?;
    let now = users::ids();
    if now != (user.uid, user.uid, gid, gid) || (user.uid != 0 && users::can_regain_root()) {
        // Nothing may be served in a half-dropped state.
        return Err(io::Error::other(format!(
            "after becoming user `{spec}` the process has ids {now:?} or can regain root; not \
             serving"
        )));
    }
    // A document root the user cannot search would answer every request with 403: refuse to
    // serve instead, naming it (nginx's workers find out at the first request).
    let roots = std::iter::once(&cfg.root).chain(cfg.site.iter().filter_map(|s| s.root.as_ref()));
    for root in roots {
        searchable(root).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "document root {} cannot be searched by user `{spec}` (uid {}): {e}; not \
                     serving (give the user read and search rights on it)",
                    root.display(),
                    user.uid
                ),
            )
        })?;
    }
    log::info!(
        "serving as user {} (uid {}, gid {gid}, groups {:?})",
        user.name,
        user.uid,
        users::groups().unwrap_or_default()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_names_and_numbers() {
        let (root, gid) = resolve("root").unwrap();
        assert_eq!((root.uid, gid), (0, 0));
        let (u, gid) = resolve("root:root").unwrap();
        assert_eq!((u.uid, gid), (0, 0));
        let (u, gid) = resolve("4242:4343").unwrap();
        assert_eq!((u.uid, gid), (4242, 4343));
        let (u, gid) = resolve("4242").unwrap();
        assert_eq!((u.uid, gid), (4242, 4242));
        assert!(resolve("no-such-user-weft")
            .unwrap_err()
            .contains("does not exist"));
        assert!(resolve("root:no-such-group-weft")
            .unwrap_err()
            .contains("group `no-such-group-weft` does not exist"));
        assert!(resolve("").unwrap_err().contains("expected NAME"));
        assert!(resolve("root:").unwrap_err().contains("expected NAME"));
    }

    #[test]
    fn root_policy_refuses_exposed_root_without_a_choice() {
        if !is_root() {
            println!("skipped: the root rule applies to root only (not running as root)");
            return;
        }
        let mut cfg = Config::default();
        // The default listener is loopback: allowed, with a warning.
        assert!(root_policy(&cfg).is_ok());
        cfg.listen = vec!["0.0.0.0:8080".parse().unwrap()];
        let e = root_policy(&cfg).unwrap_err();
        assert!(e.contains("--user") && e.contains("--allow-root"), "{e}");
        assert!(e.contains("0.0.0.0:8080"), "{e}");
        cfg.allow_root = true;
        assert!(root_policy(&cfg).is_ok());
        cfg.allow_root = false;
        cfg.user = Some("nobody".into());
        assert!(root_policy(&cfg).is_ok());
        cfg.user = Some("no-such-user-weft".into());
        assert!(root_policy(&cfg).is_err());
    }
}
