//! Users and groups: looking them up in the password and group databases (NSS), this
//! process's ids and supplementary groups, and dropping root for good.

use std::ffi::CString;
use std::io;

use crate::cvt;

/// A user id.
pub type Uid = libc::uid_t;
/// A group id.
pub type Gid = libc::gid_t;

/// A user's ids and name from the password database (`getpwnam_r`: files, LDAP, whatever NSS
/// is configured with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserIds {
    /// The name looked up.
    pub name: String,
    /// The user's id.
    pub uid: Uid,
    /// The user's primary group.
    pub gid: Gid,
}

/// Looks up user `name`; `Ok(None)` if there is none.
pub fn lookup_user(name: &str) -> io::Result<Option<UserIds>> {
    let cname = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: an all-zero passwd (null pointers, zero ids) is a valid value to be filled.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `cname` is a NUL-terminated string; `pw`, `buf` (of `buf.len()` bytes) and
        // `out` are valid for writes for the whole call; the strings `pw` points to live in
        // `buf`, which outlives their use below.
        let r = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pw,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut out,
            )
        };
        if r == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        if out.is_null() {
            return Ok(None);
        }
        return Ok(Some(UserIds {
            name: name.to_string(),
            uid: pw.pw_uid,
            gid: pw.pw_gid,
        }));
    }
}

/// Looks up group `name`'s id; `Ok(None)` if there is none.
pub fn lookup_group(name: &str) -> io::Result<Option<Gid>> {
    let cname = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: an all-zero group (null pointers, zero id) is a valid value to be filled.
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut out: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as in `lookup_user`: every pointer is valid for the call's duration.
        let r = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut gr,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut out,
            )
        };
        if r == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        return Ok((!out.is_null()).then_some(gr.gr_gid));
    }
}

/// The real and effective user ids and the real and effective group ids.
pub fn ids() -> (Uid, Uid, Gid, Gid) {
    // SAFETY: these four calls take no arguments and cannot fail.
    unsafe {
        (
            libc::getuid(),
            libc::geteuid(),
            libc::getgid(),
            libc::getegid(),
        )
    }
}

/// Becomes `user` with group `gid` for good: the supplementary groups from the group database
/// (`initgroups`, as nginx), then `setgid` and `setuid` (real, effective and saved ids, so
/// nothing can be regained), in that order since after `setuid` the others are refused.
/// glibc applies each call to every thread of the process.
pub fn become_user(user: &UserIds, gid: Gid) -> io::Result<()> {
    let cname = CString::new(user.name.as_str())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `cname` is NUL-terminated; initgroups reads the group database and sets this
    // process's supplementary groups; it takes no other pointer.
    cvt(unsafe { libc::initgroups(cname.as_ptr(), gid) })?;
    // SAFETY: setgid and setuid take plain ids.
    cvt(unsafe { libc::setgid(gid) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::setuid(user.uid) })?;
    Ok(())
}

/// True if the process can make itself root again (`setuid(0)` succeeds): after
/// [`become_user`] to anyone else, it must not. Only called to verify a drop; if it does
/// succeed, the caller stops the process.
pub fn can_regain_root() -> bool {
    // SAFETY: setuid takes a plain id; as a non-root process without CAP_SETUID it fails and
    // changes nothing.
    unsafe { libc::setuid(0) == 0 }
}

/// The supplementary groups of this process.
pub fn groups() -> io::Result<Vec<Gid>> {
    // SAFETY: with size 0 getgroups only returns the count and writes nothing.
    let n = cvt(unsafe { libc::getgroups(0, std::ptr::null_mut()) })?;
    let mut out = vec![0 as Gid; n as usize];
    // SAFETY: `out` has room for `n` gids.
    let n = cvt(unsafe { libc::getgroups(n, out.as_mut_ptr()) })?;
    out.truncate(n as usize);
    Ok(out)
}

/// The effective user id (0: this process is root).
pub fn euid() -> Uid {
    ids().1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_its_group_are_found_and_nobody_else_is() {
        let root = lookup_user("root").unwrap().unwrap();
        assert_eq!((root.name.as_str(), root.uid, root.gid), ("root", 0, 0));
        assert_eq!(lookup_group("root").unwrap(), Some(0));
        assert_eq!(lookup_user("weft-no-such-user").unwrap(), None);
        assert_eq!(lookup_group("weft-no-such-group").unwrap(), None);
        assert!(lookup_user("a\0b").is_err());
        assert!(lookup_group("a\0b").is_err());
    }

    #[test]
    fn this_process_has_ids_and_groups() {
        let (ruid, euid_, rgid, egid) = ids();
        assert_eq!(euid(), euid_);
        // SAFETY: getuid and getegid take no arguments and cannot fail.
        assert_eq!((ruid, egid), unsafe { (libc::getuid(), libc::getegid()) });
        let _ = rgid;
        let groups = groups().unwrap();
        assert!(groups.len() < 65536);
        // Only root (with CAP_SETUID) can make itself root.
        assert_eq!(can_regain_root(), euid_ == 0);
    }

    const CHILD: &str = "WEFT_SYS_BECOME_USER_CHILD";

    /// Dropping root changes every id of the process for good; it runs in a child (this test
    /// binary re-executed), as root. Not root: dropping is refused, and nothing changes.
    #[test]
    fn dropping_root_is_for_good() {
        let nobody = lookup_user("nobody").unwrap().expect("a `nobody` user");
        if euid() != 0 {
            let e = become_user(&nobody, nobody.gid).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "user::tests::become_nobody", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("became nobody"),
            "{}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let bad = UserIds {
            name: "a\0b".into(),
            uid: 0,
            gid: 0,
        };
        assert!(become_user(&bad, 0).is_err());
    }

    /// The child of [`dropping_root_is_for_good`]; does nothing in a normal run.
    #[test]
    fn become_nobody() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        let nobody = lookup_user("nobody").unwrap().unwrap();
        become_user(&nobody, nobody.gid).unwrap();
        let (u, g) = (nobody.uid, nobody.gid);
        assert_eq!(ids(), (u, u, g, g));
        assert!(!can_regain_root());
        assert_eq!(ids(), (u, u, g, g), "the failed setuid(0) changed nothing");
        let groups = groups().unwrap();
        assert!(!groups.contains(&0) || g == 0, "{groups:?}");
        println!("became nobody");
    }
}
