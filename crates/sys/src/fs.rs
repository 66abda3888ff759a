//! Files: opening a path beneath a directory with the kernel refusing any escape
//! (`openat2(RESOLVE_BENEATH)`), and whether this process may search a directory.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

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
            if NO_OPENAT2.load(Ordering::Relaxed) {
                return beneath_by_proc(dir, &path, flags);
            }
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
            match crate::cvt_long(r) {
                Ok(fd) => fd as RawFd,
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    if !NO_OPENAT2.swap(true, Ordering::Relaxed) {
                        log::warn!(
                            "openat2 is not available (kernel before 5.6, or a sandbox refusing \
                             it): files are opened with openat and checked to lie beneath their \
                             root through /proc/self/fd"
                        );
                    }
                    return beneath_by_proc(dir, &path, flags);
                }
                Err(e) => return Err(e),
            }
        }
        Resolve::Follow => {
            // SAFETY: as above: a valid C string and a live directory descriptor.
            cvt(unsafe { libc::openat(dir.as_raw_fd(), path.as_ptr(), flags) })?
        }
    };
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Set once `openat2` answered `ENOSYS`: [`open_beneath`] then uses [`beneath_by_proc`].
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// `Resolve::Beneath` without `openat2`: opens `path` under `dir` with `openat` (symlinks
/// followed), then asks the kernel where the opened file is (`/proc/self/fd`) and refuses it
/// (`EXDEV`, as `openat2` would) unless it lies in `dir`'s tree. The check is of the opened
/// file itself, so a path changed between the open and the check cannot slip through. Where
/// `/proc` is not mounted nothing can be checked and the open fails with `ENOSYS`.
fn beneath_by_proc(dir: &File, path: &std::ffi::CStr, flags: i32) -> io::Result<File> {
    // SAFETY: a valid C string and a live directory descriptor.
    let fd = cvt(unsafe { libc::openat(dir.as_raw_fd(), path.as_ptr(), flags) })?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
    let file = unsafe { File::from_raw_fd(fd) };
    let place = |fd: RawFd| {
        std::fs::read_link(format!("/proc/self/fd/{fd}"))
            .map_err(|_| io::Error::from_raw_os_error(libc::ENOSYS))
    };
    let base = place(dir.as_raw_fd())?;
    let at = place(file.as_raw_fd())?;
    if at.starts_with(&base) {
        Ok(file)
    } else {
        Err(io::Error::from_raw_os_error(libc::EXDEV))
    }
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
    #[cfg_attr(miri, ignore)] // openat and /proc: not supported by miri
    fn without_openat2_the_opened_file_is_checked_to_lie_beneath() {
        let d = tmpdir("by-proc");
        std::fs::create_dir_all(d.join("root/sub")).unwrap();
        std::fs::write(d.join("root/sub/f.txt"), b"inside").unwrap();
        std::fs::write(d.join("secret.txt"), b"outside").unwrap();
        std::fs::write(d.join("root-sibling"), b"a prefix, not beneath").unwrap();
        std::os::unix::fs::symlink(d.join("secret.txt"), d.join("root/out-abs")).unwrap();
        std::os::unix::fs::symlink("../secret.txt", d.join("root/out-rel")).unwrap();
        std::os::unix::fs::symlink("../root-sibling", d.join("root/sibling")).unwrap();
        std::os::unix::fs::symlink("sub/f.txt", d.join("root/in-rel")).unwrap();
        std::os::unix::fs::symlink("/proc/self/root/etc", d.join("root/magic")).unwrap();
        let root = File::open(d.join("root")).unwrap();
        let open = |rel: &str| {
            let c = CString::new(rel).unwrap();
            beneath_by_proc(&root, &c, libc::O_RDONLY | libc::O_CLOEXEC)
        };
        let mut s = String::new();
        open("in-rel").unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "inside");
        assert!(open("sub/f.txt").is_ok());
        assert!(open("sub").is_ok(), "a directory beneath");
        for bad in [
            "../secret.txt",
            "out-abs",
            "out-rel",
            "sibling",
            "magic",
            "sub/../../secret.txt",
        ] {
            let e = open(bad).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{bad}: {e}");
        }
        assert_eq!(open("missing").unwrap_err().kind(), io::ErrorKind::NotFound);
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
