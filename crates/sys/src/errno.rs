//! The `errno` values the workspace's crates match on (`io::Error::raw_os_error`), so that
//! none of them needs the `libc` crate for a number.

pub use libc::{
    EACCES, EAGAIN, EBADF, ECHILD, EINPROGRESS, EINVAL, ELOOP, ENAMETOOLONG, ENOENT, ENOTCONN,
    ENOTDIR, EPERM, EXDEV,
};
