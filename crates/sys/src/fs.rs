//! Files: opening a path beneath a directory with the kernel refusing any escape
//! (`openat2(RESOLVE_BENEATH)`), and whether this process may search a directory.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::Path;

use crate::cvt;

/// `struct open_how` of openat2(2) (libc's is non-exhaustive); the kernel reads exactly the
/// size passed, and these three u64 fields are the whole version-0 struct.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// How [`open_beneath`] resolves a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolve {
    /// The kernel refuses any resolution that leaves `dir` (`..`, absolute symlinks, symlinks
    /// pointing outside): `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
    Beneath,
    /// Plain `openat`: symlinks may point anywhere.
    Follow,
}

/// Opens `rel` (relative, already normalised) under the directory `dir`, read-only,
/// non-blocking (a FIFO must not hang the opener), close-on-exec.
pub fn open_beneath(dir: &File, rel: &[u8], resolve: Resolve) -> io::Result<File> {
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    open_beneath_with(dir, rel, resolve, flags)
}

/// What `rel` (relative, already normalised) under the directory `dir` is, found as
/// [`open_beneath`] finds it but opened `O_PATH` (the file need not be readable by this
/// process, only reachable: a script that only the application serving it may read).
pub fn metadata_beneath(dir: &File, rel: &[u8], resolve: Resolve) -> io::Result<std::fs::Metadata> {
    open_beneath_with(dir, rel, resolve, libc::O_PATH | libc::O_CLOEXEC)?.metadata()
}

fn open_beneath_with(dir: &File, rel: &[u8], resolve: Resolve, flags: i32) -> io::Result<File> {
    let path = CString::new(rel).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let fd = match resolve {
        Resolve::Beneath => {
            let how = OpenHow {
                flags: flags as u64,
                mode: 0,
                resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
            };
            // SAFETY: `path` is a NUL-terminated string alive for the call; `how` is a valid
            // open_how and its exact size is passed; `dir` is a live directory descriptor.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    dir.as_raw_fd(),
                    path.as_ptr(),
                    &how as *const OpenHow,
                    std::mem::size_of::<OpenHow>(),
                )
            };
            crate::cvt_long(r)? as RawFd
        }
        Resolve::Follow => {
            // SAFETY: as above: a valid C string and a live directory descriptor.
            cvt(unsafe { libc::openat(dir.as_raw_fd(), path.as_ptr(), flags) })?
        }
    };
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Whether this process may search directory `path` (look up names in it: what serving files
/// from it needs), by `access(2)` with `X_OK` as the real user (after
/// [`become_user`](crate::user::become_user), the served one).
pub fn searchable(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call; access reads it only.
    cvt(unsafe { libc::access(c.as_ptr(), libc::X_OK) }).map(drop)
}

/// Takes an exclusive `flock(2)` lock on `file` without waiting: `Ok(true)` when taken (held
/// until the file is closed, by every process sharing the open file), `Ok(false)` when another
/// open file holds it.
pub fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock takes a live descriptor (borrowed from `file` for the call) and flags only.
    match cvt(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn tmpdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("weft-sys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_lock_is_exclusive_between_open_files_until_closed() {
        let d = tmpdir("lock");
        let path = d.join("a.lock");
        let first = File::create(&path).unwrap();
        assert!(try_lock(&first).unwrap());
        let second = File::open(&path).unwrap();
        assert!(!try_lock(&second).unwrap(), "a second open file is refused");
        drop(first);
        assert!(try_lock(&second).unwrap(), "closing the holder frees it");
    }

    #[test]
    fn open_beneath_refuses_escapes() {
        let d = tmpdir("beneath");
        std::fs::create_dir_all(d.join("root/sub")).unwrap();
        std::fs::write(d.join("root/sub/f.txt"), b"inside").unwrap();
        std::fs::write(d.join("secret.txt"), b"outside").unwrap();
        std::os::unix::fs::symlink(d.join("secret.txt"), d.join("root/out-abs")).unwrap();
        std::os::unix::fs::symlink("../secret.txt", d.join("root/out-rel")).unwrap();
        std::os::unix::fs::symlink("sub/f.txt", d.join("root/in-rel")).unwrap();
        let root = File::open(d.join("root")).unwrap();
        let mut s = String::new();
        open_beneath(&root, b"sub/f.txt", Resolve::Beneath)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "inside");
        assert!(open_beneath(&root, b"in-rel", Resolve::Beneath).is_ok());
        for bad in [
            &b"../secret.txt"[..],
            b"out-abs",
            b"out-rel",
            b"sub/../../secret.txt",
        ] {
            assert!(
                open_beneath(&root, bad, Resolve::Beneath).is_err(),
                "{:?}",
                bad
            );
        }
        assert!(open_beneath(&root, b"out-rel", Resolve::Follow).is_ok());
        assert!(open_beneath(&root, b"a\0b", Resolve::Follow).is_err());
        let e = open_beneath(&root, b"missing", Resolve::Follow).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = open_beneath(&root, b"missing", Resolve::Beneath).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        // metadata_beneath: the same lookup, O_PATH, so an unreadable file is still seen.
        assert!(metadata_beneath(&root, b"sub/f.txt", Resolve::Beneath)
            .unwrap()
            .is_file());
        assert!(metadata_beneath(&root, b"sub", Resolve::Beneath)
            .unwrap()
            .is_dir());
        assert!(metadata_beneath(&root, b"out-rel", Resolve::Beneath).is_err());
        std::fs::write(d.join("root/sealed.php"), b"<?php").unwrap();
        std::fs::set_permissions(
            d.join("root/sealed.php"),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )
        .unwrap();
        assert!(metadata_beneath(&root, b"sealed.php", Resolve::Beneath)
            .unwrap()
            .is_file());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn searchable_directories() {
        let d = tmpdir("searchable");
        searchable(&d).unwrap();
        let e = searchable(&d.join("missing")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(searchable(Path::new("a\0b")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
