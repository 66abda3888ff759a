//! Static files under a document root, behaving like nginx's static module: index files,
//! MIME types, `ETag`/`Last-Modified` with 304, single byte ranges with 206/416, HEAD,
//! 405 with `Allow` for other methods, a redirect for a directory without its slash, no
//! directory listing and no dotfiles unless configured.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use weft_http::Method;

use super::path::normalize;
use super::range::{parse_range, RangeSpec};
use crate::config::StaticConfig;
use crate::response::{Body, Response};
use crate::sys::{self, Resolve};
use crate::Request;

/// Methods a static file answers.
pub const ALLOW: &str = "GET, HEAD, OPTIONS";

/// The static-file handler for one document root.
#[derive(Debug)]
pub struct StaticFiles {
    root: File,
    root_path: PathBuf,
    cfg: StaticConfig,
    resolve: Resolve,
}

impl StaticFiles {
    /// Opens `root` (which must be a directory).
    pub fn new(root: &Path, cfg: StaticConfig) -> io::Result<StaticFiles> {
        let dir = File::open(root)?;
        if !dir.metadata()?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        let resolve = if cfg.symlinks_outside_root {
            Resolve::Follow
        } else {
            Resolve::Beneath
        };
        Ok(StaticFiles {
            root: dir,
            root_path: root.to_path_buf(),
            cfg,
            resolve,
        })
    }

    /// The document root as configured.
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// Answers `req` from the document root.
    pub fn handle(&self, req: &Request) -> Response {
        match req.method() {
            Method::Get | Method::Head => {}
            Method::Options => return Response::new(204).header("Allow", ALLOW),
            _ => return Response::error(405).header("Allow", ALLOW),
        }
        let norm = match normalize(req.path()) {
            Ok(n) => n,
            Err(e) => {
                log::info!("{}: refused path {:?}: {e:?}", req.peer_addr(), req.path());
                return Response::error(400);
            }
        };
        if norm.has_dot_segment && !self.cfg.dotfiles {
            return Response::error(403);
        }
        let rel: &[u8] = if norm.rel.is_empty() { b"." } else { &norm.rel };
        let file = match self.open(rel) {
            Ok(f) => f,
            Err(status) => return Response::error(status),
        };
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(e) => {
                log::error!("fstat failed for {:?}: {e}", String::from_utf8_lossy(rel));
                return Response::error(500);
            }
        };
        if meta.is_dir() {
            return self.directory(req, &norm.rel, norm.trailing_slash);
        }
        if !meta.is_file() {
            return Response::error(403);
        }
        if norm.trailing_slash {
            // "/file.txt/" names a directory that does not exist (nginx: 404).
            return Response::error(404);
        }
        self.file(req, rel, file, &meta)
    }

    fn open(&self, rel: &[u8]) -> Result<File, u16> {
        sys::open_beneath(&self.root, rel, self.resolve).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => 404,
            Some(libc::EACCES | libc::EPERM) => 403,
            Some(libc::EXDEV | libc::ELOOP) => {
                log::warn!(
                    "refused {:?}: resolves outside the document root",
                    String::from_utf8_lossy(rel)
                );
                403
            }
            _ => {
                log::error!("open {:?} failed: {e}", String::from_utf8_lossy(rel));
                500
            }
        })
    }

    fn directory(&self, req: &Request, rel: &[u8], trailing_slash: bool) -> Response {
        if !trailing_slash {
            let mut location = format!("{}/", req.path());
            if let Some(q) = req.query() {
                location.push('?');
                location.push_str(q);
            }
            return Response::error(301).header("Location", location);
        }
        let mut index = rel.to_vec();
        if !index.is_empty() {
            index.push(b'/');
        }
        index.extend_from_slice(self.cfg.index.as_bytes());
        match self.open(&index) {
            Ok(f) => match f.metadata() {
                Ok(m) if m.is_file() => self.file(req, &index, f, &m),
                _ => Response::error(403),
            },
            Err(404) if self.cfg.autoindex => self.listing(req, rel),
            Err(404) => Response::error(403),
            Err(status) => Response::error(status),
        }
    }

    fn file(&self, req: &Request, rel: &[u8], file: File, meta: &std::fs::Metadata) -> Response {
        let size = meta.len();
        let mtime = meta.mtime().max(0) as u64;
        let etag = format!("\"{:x}-{:x}\"", mtime, size);
        let last_modified = weft_http::date::format(UNIX_EPOCH + Duration::from_secs(mtime));
        let base = |status: u16| {
            Response::new(status)
                .header("Last-Modified", last_modified.to_vec())
                .header("ETag", etag.clone())
        };
        if not_modified(req, &etag, mtime) {
            return base(304);
        }
        let content_type = content_type(rel);
        let whole = |file: File| {
            base(200)
                .header("Content-Type", content_type)
                .header("Accept-Ranges", "bytes")
                .body(Body::File {
                    file: Arc::new(file),
                    offset: 0,
                    len: size,
                })
        };
        let range = match req.header("Range") {
            Some(r) if req.method() == Method::Get && if_range_holds(req, &etag, mtime) => {
                parse_range(r, size)
            }
            _ => RangeSpec::Full,
        };
        match range {
            RangeSpec::Full => whole(file),
            RangeSpec::Single { start, end } => base(206)
                .header("Content-Type", content_type)
                .header("Accept-Ranges", "bytes")
                .header("Content-Range", format!("bytes {start}-{end}/{size}"))
                .body(Body::File {
                    file: Arc::new(file),
                    offset: start,
                    len: end - start + 1,
                }),
            RangeSpec::Unsatisfiable => Response::error(416)
                .header("Content-Range", format!("bytes */{size}"))
                .header("Accept-Ranges", "bytes"),
        }
    }

    fn listing(&self, req: &Request, rel: &[u8]) -> Response {
        let dir_path = self
            .root_path
            .join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(rel));
        let mut names: Vec<(String, bool)> = match std::fs::read_dir(&dir_path) {
            Ok(rd) => rd
                .filter_map(Result::ok)
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.file_type().map(|t| t.is_dir()).unwrap_or(false),
                    )
                })
                .filter(|(n, _)| self.cfg.dotfiles || !n.starts_with('.'))
                .collect(),
            Err(_) => return Response::error(403),
        };
        names.sort();
        let title = html_escape(req.path());
        let mut page = format!("<html>\r\n<head><title>Index of {title}</title></head>\r\n<body>\r\n<h1>Index of {title}</h1><hr><pre><a href=\"../\">../</a>\r\n");
        for (name, is_dir) in names {
            let slash = if is_dir { "/" } else { "" };
            page.push_str(&format!(
                "<a href=\"{}{slash}\">{}{slash}</a>\r\n",
                percent_encode(&name),
                html_escape(&name)
            ));
        }
        page.push_str("</pre><hr></body>\r\n</html>\r\n");
        Response::new(200)
            .header("Content-Type", "text/html")
            .body(page)
    }
}

/// RFC 9110 §13.1.2 and §13.1.3: If-None-Match wins over If-Modified-Since.
fn not_modified(req: &Request, etag: &str, mtime: u64) -> bool {
    if let Some(inm) = req.header("If-None-Match") {
        return etag_list_matches(inm, etag);
    }
    if let Some(ims) = req
        .header("If-Modified-Since")
        .and_then(weft_http::date::parse)
    {
        let ims = ims
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        return mtime <= ims;
    }
    false
}

/// Weak comparison of a list of entity tags (or `*`) against ours.
fn etag_list_matches(list: &[u8], etag: &str) -> bool {
    let list = String::from_utf8_lossy(list);
    list.trim() == "*"
        || list
            .split(',')
            .map(str::trim)
            .any(|t| t.strip_prefix("W/").unwrap_or(t) == etag)
}

/// If-Range: the range applies only if the validator still matches (strong comparison for an
/// entity tag, exact date for a date).
fn if_range_holds(req: &Request, etag: &str, mtime: u64) -> bool {
    match req.header("If-Range") {
        None => true,
        Some(v) if v.starts_with(b"\"") => v == etag.as_bytes(),
        Some(v) if v.starts_with(b"W/") => false,
        Some(v) => weft_http::date::parse(v)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .is_some_and(|d| d.as_secs() == mtime),
    }
}

/// The MIME type from the file extension; `application/octet-stream` when unknown.
/// Text types carry no charset, as nginx's defaults.
pub fn content_type(rel: &[u8]) -> &'static str {
    let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
    let ext = match name.iter().rposition(|&b| b == b'.') {
        Some(i) if i > 0 => &name[i + 1..],
        _ => return "application/octet-stream",
    };
    let ext = std::str::from_utf8(ext).unwrap_or("");
    mime_guess::from_ext(ext)
        .first_raw()
        .unwrap_or("application/octet-stream")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Seconds since the epoch of a modification time (for tests and logs).
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_types() {
        assert_eq!(content_type(b"index.html"), "text/html");
        assert_eq!(content_type(b"a/b/style.css"), "text/css");
        assert_eq!(content_type(b"x.png"), "image/png");
        assert_eq!(content_type(b"noext"), "application/octet-stream");
        assert_eq!(content_type(b".hidden"), "application/octet-stream");
    }

    #[test]
    fn etag_matching() {
        assert!(etag_list_matches(b"\"a-1\"", "\"a-1\""));
        assert!(etag_list_matches(b"W/\"a-1\"", "\"a-1\""));
        assert!(etag_list_matches(b"\"x\", \"a-1\"", "\"a-1\""));
        assert!(etag_list_matches(b"*", "\"a-1\""));
        assert!(!etag_list_matches(b"\"a-2\"", "\"a-1\""));
    }

    #[test]
    fn escaping() {
        assert_eq!(html_escape("<a&\">"), "&lt;a&amp;&quot;&gt;");
        assert_eq!(percent_encode("a b/ü"), "a%20b%2F%C3%BC");
    }
}
