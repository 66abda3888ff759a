//! Static files under a document root, behaving like nginx's static module: index files,
//! MIME types, `ETag`/`Last-Modified` with RFC 9110's preconditions (304, 412, If-Range),
//! single byte ranges with 206/416, HEAD, 405 with `Allow` for other methods, a redirect for
//! a directory without its slash, no directory listing and no dotfiles unless configured.
//!
//! Preconditions (`weft_http::conditional`) are evaluated for GET and HEAD where the answer
//! would otherwise be 2xx: a file, a directory's index or listing. Every other answer ignores
//! them, as RFC 9110 §13.2.1 requires: 404, 403, the directory redirect, 405 for a method a
//! file does not answer (PUT, DELETE, POST: there is no 2xx they could have had), and
//! OPTIONS, whose 204 is about the server, not a representation.
//!
//! With the response cache, a file's whole `200` response is kept in memory after its first
//! request (see `cache.rs`); a fresh entry answers without a system call, and 304, HEAD and
//! ranges (slices of the cached body) are answered from it exactly as from the file.
//!
//! With `[compression]` (`compress.rs`), a GET or HEAD without `Range` whose client accepts a
//! coding gets, in this order: a cached variant; a precompressed sibling (`file.br`,
//! `file.zst`, `file.gz`, served whenever it exists, whatever its age, as nginx's
//! `gzip_static`: the site's build writes both); a variant compressed once from the cached
//! identity entry; for a file the cache does not hold, the file compressed as it is sent
//! (chunked, with a weak ETag: its bytes are not promised to be the same each time, as
//! nginx's `gzip on` weakens ETags). A request with `Range` gets identity, so ranges, If-Range
//! and 206 work on the identity bytes only. Every response of a file that has or may have a
//! variant carries `Vary: Accept-Encoding`, 304s included (RFC 9110 §15.4.5).

use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use weft_http::conditional::{self, Conditions, Current, EntityTag, Outcome};
use weft_http::encoding::{AcceptEncoding, Coding};
use weft_http::Method;

use super::path::normalize;
use super::range::{parse_range, RangeSpec};
use crate::cache::{variant_key, Entry, Lookup, ResponseCache, Validators};
use crate::compress::{variant_etag, Compression};
use crate::config::StaticConfig;
use crate::response::{Body, BodyStream, Response};
use crate::Request;
use weft_sys::errno::{EACCES, ELOOP, ENAMETOOLONG, ENOENT, ENOTDIR, EPERM, EXDEV};
use weft_sys::fs::{open_beneath, Resolve};

/// Methods a static file answers.
pub const ALLOW: &str = "GET, HEAD, OPTIONS";

/// The static-file handler for one document root.
#[derive(Debug)]
pub struct StaticFiles {
    root: File,
    root_path: PathBuf,
    cfg: StaticConfig,
    resolve: Resolve,
    cache: Option<Arc<ResponseCache>>,
    /// `charset = "utf-8"`: text types are declared UTF-8.
    utf8: bool,
    /// Put before every cache key: a site's number, so that the roots of several sites
    /// sharing the process's cache never share an entry (see `sites.rs`). Empty for the
    /// top-level root.
    key_prefix: Box<[u8]>,
    /// `[compression]`, when on.
    compression: Option<Arc<Compression>>,
    /// File name endings never served (FastCGI's scripts, `.php`, where a PHP mount runs
    /// them): a request for one is 404, its source never sent.
    hidden: Vec<String>,
}

/// A prefixed cache key up to this long is built on the stack.
const STACK_KEY: usize = 256;

/// Where a response's body comes from.
enum Source {
    File(File),
    Cached(Arc<Entry>),
    /// A file compressed as it is sent.
    Stream(BodyStream),
}

/// The coding a response is in, and whether it varies with `Accept-Encoding`.
#[derive(Clone, Copy)]
struct Coded {
    coding: Coding,
    vary: bool,
}

impl Coded {
    fn identity(vary: bool) -> Coded {
        Coded {
            coding: Coding::Identity,
            vary,
        }
    }

    fn variant(coding: Coding) -> Coded {
        Coded { coding, vary: true }
    }
}

/// A request that may get a coding: the settings and what the client accepts.
type Wants<'a> = Option<(&'a Compression, AcceptEncoding)>;

/// The field every response of a file with (possible) variants carries.
const VARY: &[u8] = b"Vary: Accept-Encoding\r\n";

impl StaticFiles {
    /// Opens `root`, answering from `cache` where it can.
    pub fn with_cache(
        root: &Path,
        cfg: StaticConfig,
        cache: Option<Arc<ResponseCache>>,
    ) -> io::Result<StaticFiles> {
        let dir = File::open(root)?;
        if !dir.metadata()?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        let utf8 = match cfg.charset.to_ascii_lowercase().as_str() {
            "utf-8" | "utf8" => true,
            "" | "off" => false,
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("[static_files] charset `{other}`: only \"utf-8\" or \"\" (none)"),
                ))
            }
        };
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
            cache,
            utf8,
            key_prefix: Box::default(),
            compression: None,
            hidden: Vec::new(),
        })
    }

    /// Answers with content codings as `compression` says (`None`: identity only).
    pub fn with_compression(mut self, compression: Option<Arc<Compression>>) -> StaticFiles {
        self.compression = compression;
        self
    }

    /// True if a file of `content_type` and `size` has or may have a variant: the response
    /// then varies with `Accept-Encoding`.
    fn varies(&self, content_type: &str, size: u64) -> bool {
        self.compression.as_ref().is_some_and(|z| {
            z.precompressed() || (size >= z.min_length() && z.compressible(content_type.as_bytes()))
        })
    }

    /// The same handler refusing files whose names end with one of `endings` (compared
    /// without case), as what a FastCGI mount runs must never be sent as a file.
    pub(crate) fn with_hidden_endings(mut self, endings: Vec<String>) -> StaticFiles {
        self.hidden = endings;
        self
    }

    /// True if the last segment of `rel` ends with a hidden ending.
    fn hidden(&self, rel: &[u8]) -> bool {
        let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
        self.hidden.iter().any(|e| {
            name.len() >= e.len() && name[name.len() - e.len()..].eq_ignore_ascii_case(e.as_bytes())
        })
    }

    /// The same handler with cache keys starting with `prefix` (which no request path
    /// starts with).
    pub(crate) fn with_key_prefix(mut self, prefix: Vec<u8>) -> StaticFiles {
        self.key_prefix = prefix.into();
        self
    }

    /// Answers `req`, whose path (without query) the caller already holds.
    pub fn handle_path(&self, req: &Request, path: &str) -> Response {
        match req.method() {
            Method::Get | Method::Head => {}
            Method::Options => return Response::new(204).header("Allow", ALLOW),
            _ => return Response::error(405).header("Allow", ALLOW),
        }
        let conds = req.conditions();
        let norm = match normalize(path) {
            Ok(n) => n,
            Err(e) => {
                log::info!("{}: refused path {:?}: {e:?}", req.peer_addr(), req.path());
                return Response::error(400);
            }
        };
        if norm.has_dot_segment && !self.cfg.dotfiles && !well_known(&norm.rel) {
            return Response::error(403);
        }
        if !self.hidden.is_empty() && self.hidden(&norm.rel) {
            log::info!(
                "{}: {path}: a FastCGI script is not served as a file; answering 404",
                req.peer_addr()
            );
            return Response::error(404);
        }
        let rel: &[u8] = if norm.rel.is_empty() { b"." } else { &norm.rel };
        // The key is the request's resolved path; a trailing slash names a directory's index.
        // A path that needed no normalisation is its own key (it is `rel` plus that slash).
        let key: Cow<'_, [u8]> = match &norm.rel {
            Cow::Borrowed(r) if !r.is_empty() => Cow::Borrowed(&path.as_bytes()[1..]),
            _ => {
                let mut key = Vec::with_capacity(rel.len() + 1);
                key.extend_from_slice(rel);
                if norm.trailing_slash {
                    key.push(b'/');
                }
                Cow::Owned(key)
            }
        };
        let mut stack = [0u8; STACK_KEY];
        let long;
        let key: &[u8] = if self.key_prefix.is_empty() {
            &key
        } else if self.key_prefix.len() + key.len() <= STACK_KEY {
            let n = self.key_prefix.len();
            stack[..n].copy_from_slice(&self.key_prefix);
            stack[n..n + key.len()].copy_from_slice(&key);
            &stack[..n + key.len()]
        } else {
            long = [&self.key_prefix[..], &key].concat();
            &long
        };
        // A range is served from the identity bytes (the only ones it can name reliably).
        let wants: Wants<'_> = match &self.compression {
            Some(z) if conds.range.is_none() => z.accepted(req).map(|ae| (&**z, ae)),
            _ => None,
        };
        let (cached, miss_counted) = self.cached(key);
        if let Some(entry) = cached {
            if let Some((z, ae)) = &wants {
                if let Some(resp) = self.cached_variant(req, &conds, key, &entry, z, ae) {
                    return resp;
                }
            }
            // The common request (no precondition, no range) is the prepared answer as it
            // stands: nothing to compare, nothing to copy.
            if conds.range.is_none() && conds.is_unconditional() {
                return Response::new(200).body(Body::Prepared(entry));
            }
            let v = entry.validators();
            let vary = self.varies(v.content_type, v.size);
            return answer(
                req,
                &conds,
                v.clone(),
                Source::Cached(entry),
                Coded::identity(vary),
            );
        }
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
        // A miss is a file (or a directory's index) answered that the cache did not hold;
        // a request for none is not one.
        let count_miss = || {
            if let (Some(c), false) = (&self.cache, miss_counted) {
                c.count_miss();
            }
        };
        if meta.is_dir() {
            let index = self.directory(req, &conds, &norm.rel, norm.trailing_slash, key, wants);
            if index.1 {
                count_miss();
            }
            return index.0;
        }
        if !meta.is_file() {
            return Response::error(403);
        }
        if norm.trailing_slash {
            // "/file.txt/" names a directory that does not exist (nginx: 404).
            return Response::error(404);
        }
        count_miss();
        self.file(req, &conds, rel, file, &meta, key, wants)
    }

    /// A current cache entry for `key`: fresh, or stale and confirmed unchanged by one open
    /// and fstat of its file; and whether a miss was counted already (an entry whose file
    /// changed or went away).
    fn cached(&self, key: &[u8]) -> (Option<Arc<Entry>>, bool) {
        let Some(cache) = self.cache.as_ref() else {
            return (None, false);
        };
        match cache.lookup(key) {
            Lookup::Fresh(e) => (Some(e), false),
            Lookup::Miss => (None, false),
            Lookup::Stale(e) => {
                let current = self.open(e.file_rel()).ok().and_then(|f| f.metadata().ok());
                match current {
                    Some(meta) if cache.revalidate(key, &e, &meta) => (Some(e), false),
                    Some(_) => (None, true),
                    None => {
                        cache.forget(key, &e);
                        (None, true)
                    }
                }
            }
        }
    }

    fn open(&self, rel: &[u8]) -> Result<File, u16> {
        open_beneath(&self.root, rel, self.resolve).map_err(|e| match e.raw_os_error() {
            Some(ENOENT | ENOTDIR | ENAMETOOLONG) => 404,
            Some(EACCES | EPERM) => {
                // As nginx's `open() failed (13: Permission denied)`: a 403 the operator
                // may not have meant (file modes, the served user) is found in the log.
                log::error!("open {:?} failed: {e}", String::from_utf8_lossy(rel));
                403
            }
            Some(EXDEV | ELOOP) => {
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

    /// A directory's answer, and whether it is its index file (a file the cache may hold).
    fn directory(
        &self,
        req: &Request,
        conds: &Conditions<'_>,
        rel: &[u8],
        trailing_slash: bool,
        key: &[u8],
        wants: Wants<'_>,
    ) -> (Response, bool) {
        if !trailing_slash {
            let to = directory_location(rel, req.query());
            return (Response::error(301).header("Location", to), false);
        }
        let mut index = rel.to_vec();
        if !index.is_empty() {
            index.push(b'/');
        }
        index.extend_from_slice(self.cfg.index.as_bytes());
        let answer = match self.open(&index) {
            Ok(f) => match f.metadata() {
                Ok(m) if m.is_file() => {
                    return (self.file(req, conds, &index, f, &m, key, wants), true);
                }
                _ => Response::error(403),
            },
            Err(404) if self.cfg.autoindex => {
                super::unvalidated_preconditions(req).unwrap_or_else(|| self.listing(req, rel))
            }
            Err(404) => Response::error(403),
            Err(status) => Response::error(status),
        };
        (answer, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn file(
        &self,
        req: &Request,
        conds: &Conditions<'_>,
        rel: &[u8],
        file: File,
        meta: &std::fs::Metadata,
        key: &[u8],
        wants: Wants<'_>,
    ) -> Response {
        let mut ct = content_type(rel);
        if self.utf8 {
            ct = with_charset(ct);
        }
        let v = Validators::new(meta, ct);
        let vary = self.varies(ct, v.size);
        if let Some(cache) = &self.cache {
            let extra = if vary { VARY } else { b"" };
            if let Some(entry) = cache.fill_with(key, rel, &file, meta, v.clone(), extra) {
                if let Some((z, ae)) = &wants {
                    if let Some(resp) = self.cached_variant(req, conds, key, &entry, z, ae) {
                        return resp;
                    }
                }
                return answer(req, conds, v, Source::Cached(entry), Coded::identity(vary));
            }
        }
        if let Some((z, ae)) = &wants {
            if let Some(resp) = self.uncached_variant(req, conds, rel, &file, &v, z, ae) {
                return resp;
            }
        }
        answer(req, conds, v, Source::File(file), Coded::identity(vary))
    }

    /// The answer from a variant of the cached `entry` (key `key`) in the coding the client
    /// prefers among those it may have: cached, read from a precompressed sibling, or
    /// compressed once from the entry; `None` when identity is the answer. A coding found to
    /// have no variant is remembered on the entry until its next revalidation.
    fn cached_variant(
        &self,
        req: &Request,
        conds: &Conditions<'_>,
        key: &[u8],
        entry: &Arc<Entry>,
        z: &Compression,
        ae: &AcceptEncoding,
    ) -> Option<Response> {
        let cache = self.cache.as_ref()?;
        loop {
            let mut offered = [Coding::Identity; 3];
            let mut n = 0;
            for &c in z.codings() {
                if !entry.variant_absent(c) && n < offered.len() {
                    offered[n] = c;
                    n += 1;
                }
            }
            let coding = ae.choose(&offered[..n]);
            if coding == Coding::Identity {
                return None;
            }
            let vkey = variant_key(key, coding);
            let reopen = |rel: &[u8]| self.open(rel).ok().and_then(|f| f.metadata().ok());
            // A variant made from an older version of the file is not served (and is
            // replaced below); a sibling's is checked against the sibling itself.
            let found = cache
                .variant(&vkey, reopen)
                .filter(|v| v.file_rel() != entry.file_rel() || entry.same_file_version(v));
            if let Some(v) = found {
                cache.variant_hit();
                let vv = v.validators().clone();
                return Some(answer(
                    req,
                    conds,
                    vv,
                    Source::Cached(v),
                    Coded::variant(coding),
                ));
            }
            if let Some(resp) = self.make_variant(req, conds, &vkey, entry, coding, z) {
                return Some(resp);
            }
            entry.mark_variant_absent(coding);
        }
    }

    /// Makes the variant of `entry` in `coding` (its sibling file, or its body compressed),
    /// keeps it in the cache and answers from it; `None` if there is none.
    fn make_variant(
        &self,
        req: &Request,
        conds: &Conditions<'_>,
        vkey: &[u8],
        entry: &Arc<Entry>,
        coding: Coding,
        z: &Compression,
    ) -> Option<Response> {
        let cache = self.cache.as_ref()?;
        let base = entry.validators();
        if z.precompressed() {
            if let Some((file, meta, sib_rel, v)) = self.sibling(entry.file_rel(), base, coding) {
                let coded = Coded::variant(coding);
                return Some(
                    match cache.fill_sibling(vkey, &sib_rel, &file, &meta, v.clone(), coding) {
                        Some(e) => answer(req, conds, v, Source::Cached(e), coded),
                        None => answer(req, conds, v, Source::File(file), coded),
                    },
                );
            }
        }
        if base.size < z.min_length() || !z.compressible(base.content_type.as_bytes()) {
            return None;
        }
        let body = match z.compress(coding, entry.body().clone()) {
            Ok(b) if (b.len() as u64) < base.size => b,
            Ok(_) => return None,
            Err(e) => {
                log::error!(
                    "compressing {:?} failed: {e}",
                    String::from_utf8_lossy(entry.file_rel())
                );
                return None;
            }
        };
        let etag = variant_etag(&base.etag, coding);
        let v = cache.insert_variant(vkey, entry, coding, body.into(), etag)?;
        let vv = v.validators().clone();
        Some(answer(
            req,
            conds,
            vv,
            Source::Cached(v),
            Coded::variant(coding),
        ))
    }

    /// The precompressed sibling of `rel` in `coding`, if it is a regular file: the file, its
    /// metadata, its path and its validators (the original's type, its own tag per coding).
    fn sibling(
        &self,
        rel: &[u8],
        base: &Validators,
        coding: Coding,
    ) -> Option<(File, std::fs::Metadata, Vec<u8>, Validators)> {
        let mut sib_rel = rel.to_vec();
        sib_rel.extend_from_slice(coding.suffix()?.as_bytes());
        let file = self.open(&sib_rel).ok()?;
        let meta = file.metadata().ok().filter(|m| m.is_file())?;
        let mut v = Validators::new(&meta, base.content_type);
        v.etag = variant_etag(&v.etag, coding);
        Some((file, meta, sib_rel, v))
    }

    /// The answer in a coding for a file the cache does not hold: its sibling from disk, or
    /// the file compressed as it is sent; `None` when identity is the answer.
    #[allow(clippy::too_many_arguments)]
    fn uncached_variant(
        &self,
        req: &Request,
        conds: &Conditions<'_>,
        rel: &[u8],
        file: &File,
        v: &Validators,
        z: &Compression,
        ae: &AcceptEncoding,
    ) -> Option<Response> {
        let on_the_fly = v.size >= z.min_length() && z.compressible(v.content_type.as_bytes());
        let mut offered: Vec<Coding> = z.codings().to_vec();
        loop {
            let coding = ae.choose(&offered);
            if coding == Coding::Identity {
                return None;
            }
            if z.precompressed() {
                if let Some((sib, _, _, sv)) = self.sibling(rel, v, coding) {
                    return Some(answer(
                        req,
                        conds,
                        sv,
                        Source::File(sib),
                        Coded::variant(coding),
                    ));
                }
            }
            if on_the_fly {
                let file = file.try_clone().ok()?;
                let mut sv = v.clone();
                // Weak: streamed output is not promised to be the same bytes each time.
                sv.etag = format!("W/{}", variant_etag(&v.etag, coding));
                let body = BodyStream::new(z.encoder(coding, file));
                return Some(answer(
                    req,
                    conds,
                    sv,
                    Source::Stream(body),
                    Coded::variant(coding),
                ));
            }
            offered.retain(|&c| c != coding);
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
        // The names were converted to UTF-8 above, whatever the charset setting.
        Response::new(200)
            .header("Content-Type", "text/html; charset=utf-8")
            .body(page)
    }
}

/// The answer for a file with validators `v`: 304, 412, 200, 206 or 416, the same whether the
/// body comes from the file (sendfile) or from the cache (the entry, or a slice of it).
fn answer(
    req: &Request,
    conds: &Conditions<'_>,
    v: Validators,
    src: Source,
    coded: Coded,
) -> Response {
    let Validators {
        size,
        mtime,
        etag,
        last_modified,
        content_type,
    } = v;
    let mut range = conds.range.filter(|_| req.method() == Method::Get);
    // Without a precondition field (the common request) nothing is parsed or compared.
    if !conds.is_unconditional() {
        let current = Current {
            etag: EntityTag::parse(etag.as_bytes()),
            last_modified: Some(mtime),
        };
        match conditional::evaluate(req.method(), conds, Some(&current)) {
            Outcome::Proceed => {}
            // RFC 9110 §15.4.5: a 304 carries the validators a 200 would have.
            Outcome::NotModified => {
                let resp = Response::new(304)
                    .header("Last-Modified", last_modified.to_vec())
                    .header("ETag", etag);
                return if coded.vary {
                    resp.header("Vary", "Accept-Encoding")
                } else {
                    resp
                };
            }
            Outcome::PreconditionFailed => return Response::error(412),
            Outcome::IgnoreRange => range = None,
        }
    }
    let range = match range {
        Some(r) => parse_range(r, size),
        None => RangeSpec::Full,
    };
    let with_validators = |status: u16| {
        let resp = Response::new(status)
            .header("Last-Modified", last_modified.to_vec())
            .header("ETag", etag.clone());
        if coded.vary {
            resp.header("Vary", "Accept-Encoding")
        } else {
            resp
        }
    };
    // A variant is never sent in ranges: it does not say it accepts them.
    let coded_head = |resp: Response| match coded.coding {
        Coding::Identity => resp.header("Accept-Ranges", "bytes"),
        c => resp.header("Content-Encoding", c.token()),
    };
    match (range, src) {
        (RangeSpec::Multi(ranges), src) => {
            let (content_type_value, body) = match multipart(&ranges, size, content_type, src) {
                Some(m) => m,
                // Not reached: a coded response is only made for a request without a range.
                None => return Response::error(500),
            };
            with_validators(206)
                .header("Content-Type", content_type_value)
                .header("Accept-Ranges", "bytes")
                .body(body)
        }
        (RangeSpec::Full, Source::Cached(e)) => Response::new(200).body(Body::Prepared(e)),
        (RangeSpec::Full, Source::File(file)) => {
            coded_head(with_validators(200).header("Content-Type", content_type)).body(Body::File {
                file: Arc::new(file),
                offset: 0,
                len: size,
            })
        }
        (RangeSpec::Full, Source::Stream(body)) => {
            coded_head(with_validators(200).header("Content-Type", content_type))
                .body(Body::Stream(body))
        }
        (RangeSpec::Single { start, end }, src) => {
            let len = end - start + 1;
            let body = match src {
                Source::File(file) => Body::File {
                    file: Arc::new(file),
                    offset: start,
                    len,
                },
                Source::Cached(e) => {
                    Body::Bytes(e.body().slice(start as usize..(end + 1) as usize))
                }
                // Not reached: a coded response is only made for a request without a range.
                Source::Stream(_) => return Response::error(500),
            };
            with_validators(206)
                .header("Content-Type", content_type)
                .header("Accept-Ranges", "bytes")
                .header("Content-Range", format!("bytes {start}-{end}/{size}"))
                .body(body)
        }
        (RangeSpec::Unsatisfiable, _) => Response::error(416)
            .header("Content-Range", format!("bytes */{size}"))
            .header("Accept-Ranges", "bytes"),
    }
}

/// A `multipart/byteranges` body (RFC 9110 §14.6) of `ranges` (sorted, apart) of a
/// representation of `size` bytes and `content_type`: its `Content-Type` value and the body,
/// built whole from a cached entry, or read from the file part by part as it is sent (never
/// held whole). `None` for a body coded on the fly, which is never sent in ranges.
fn multipart(
    ranges: &[(u64, u64)],
    size: u64,
    content_type: &str,
    src: Source,
) -> Option<(String, Body)> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let boundary = format!("weft{stamp:016x}{n:08x}");
    let part_head = |start: u64, end: u64| {
        format!(
            "\r\n--{boundary}\r\nContent-Type: {content_type}\r\n\
             Content-Range: bytes {start}-{end}/{size}\r\n\r\n"
        )
        .into_bytes()
    };
    let mut parts: Vec<Part> = Vec::with_capacity(ranges.len() * 2 + 1);
    for &(start, end) in ranges {
        parts.push(Part::Text(part_head(start, end)));
        parts.push(Part::File {
            offset: start,
            len: end - start + 1,
        });
    }
    parts.push(Part::Text(format!("\r\n--{boundary}--\r\n").into_bytes()));
    let total: u64 = parts.iter().map(Part::len).sum();
    let value = format!("multipart/byteranges; boundary={boundary}");
    let body = match src {
        Source::Cached(e) => {
            let whole = e.body();
            let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
            for p in &parts {
                match p {
                    Part::Text(t) => out.extend_from_slice(t),
                    Part::File { offset, len } => {
                        out.extend_from_slice(&whole[*offset as usize..(*offset + *len) as usize])
                    }
                }
            }
            Body::Bytes(bytes::Bytes::from(out))
        }
        Source::File(file) => Body::Stream(BodyStream::with_len(
            Parts {
                file,
                parts: parts.into(),
                done: 0,
            },
            total,
        )),
        Source::Stream(_) => return None,
    };
    Some((value, body))
}

/// A piece of a `multipart/byteranges` body.
#[derive(Debug)]
enum Part {
    /// A boundary line and a part's header fields.
    Text(Vec<u8>),
    /// Bytes of the file.
    File { offset: u64, len: u64 },
}

impl Part {
    fn len(&self) -> u64 {
        match self {
            Part::Text(t) => t.len() as u64,
            Part::File { len, .. } => *len,
        }
    }
}

/// A `multipart/byteranges` body read from its file part by part.
struct Parts {
    file: File,
    parts: std::collections::VecDeque<Part>,
    /// Bytes of the front part already read.
    done: u64,
}

impl std::io::Read for Parts {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        loop {
            let Some(part) = self.parts.front() else {
                return Ok(0);
            };
            let left = part.len() - self.done;
            if left == 0 {
                self.parts.pop_front();
                self.done = 0;
                continue;
            }
            let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = match part {
                Part::Text(t) => {
                    let from = self.done as usize;
                    buf[..want].copy_from_slice(&t[from..from + want]);
                    want
                }
                Part::File { offset, .. } => {
                    let n = self.file.read_at(&mut buf[..want], offset + self.done)?;
                    if n == 0 {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "the file is shorter than when the ranges were chosen",
                        ));
                    }
                    n
                }
            };
            self.done += n as u64;
            return Ok(n);
        }
    }
}

/// The `Location` of the redirect from a directory named without its trailing slash: an
/// absolute path (RFC 9110 §10.2.2 allows any URI reference; a path does not depend on the
/// `Host` the client sent) built from the normalised path, so `//dir` cannot become the
/// network-path reference `//dir/` and dot segments are gone, percent-encoded where a path
/// segment needs it (RFC 3986 §3.3), with the request's query kept as sent.
fn directory_location(rel: &[u8], query: Option<&str>) -> String {
    let mut out = String::with_capacity(rel.len() + 2 + query.map_or(0, |q| q.len() + 1));
    out.push('/');
    for &b in rel {
        let keep = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if !rel.is_empty() {
        out.push('/');
    }
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// True for a path under `/.well-known/` (RFC 8615: ACME's HTTP-01 challenges, security.txt)
/// with no other dot segment: served although dotfiles are not, as nginx setups that deny
/// dotfiles keep `location ^~ /.well-known/` open.
fn well_known(rel: &[u8]) -> bool {
    let mut segments = rel.split(|&b| b == b'/');
    segments.next() == Some(b".well-known") && segments.all(|s| s.first() != Some(&b'.'))
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
    // JavaScript modules are JavaScript (RFC 9239: text/javascript, as for `.js`).
    if ext.eq_ignore_ascii_case("mjs") {
        return "text/javascript";
    }
    mime_guess::from_ext(ext)
        .first_raw()
        .unwrap_or("application/octet-stream")
}

/// `content_type` with `; charset=utf-8` where it is a text type: `text/*` and the textual
/// `application/` and `image/svg+xml` types (a superset of nginx's default `charset_types`).
/// Static strings, so the head costs nothing more to build; a cached response has it in
/// its prepared head anyway.
pub fn with_charset(content_type: &'static str) -> &'static str {
    match content_type {
        "text/html" => "text/html; charset=utf-8",
        "text/plain" => "text/plain; charset=utf-8",
        "text/css" => "text/css; charset=utf-8",
        "text/javascript" => "text/javascript; charset=utf-8",
        "text/xml" => "text/xml; charset=utf-8",
        "text/csv" => "text/csv; charset=utf-8",
        "text/markdown" => "text/markdown; charset=utf-8",
        "text/x-markdown" => "text/x-markdown; charset=utf-8",
        "text/calendar" => "text/calendar; charset=utf-8",
        "text/vtt" => "text/vtt; charset=utf-8",
        "text/tab-separated-values" => "text/tab-separated-values; charset=utf-8",
        "application/javascript" => "application/javascript; charset=utf-8",
        "application/x-javascript" => "application/x-javascript; charset=utf-8",
        "application/json" => "application/json; charset=utf-8",
        "application/ld+json" => "application/ld+json; charset=utf-8",
        "application/manifest+json" => "application/manifest+json; charset=utf-8",
        "application/xml" => "application/xml; charset=utf-8",
        "application/rss+xml" => "application/rss+xml; charset=utf-8",
        "application/atom+xml" => "application/atom+xml; charset=utf-8",
        "application/xhtml+xml" => "application/xhtml+xml; charset=utf-8",
        "image/svg+xml" => "image/svg+xml; charset=utf-8",
        other => other,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_types_get_the_charset_and_others_do_not() {
        for (file, ct) in [
            ("index.html", "text/html; charset=utf-8"),
            ("a.css", "text/css; charset=utf-8"),
            ("a.js", "text/javascript; charset=utf-8"),
            ("a.json", "application/json; charset=utf-8"),
            ("a.svg", "image/svg+xml; charset=utf-8"),
            ("a.txt", "text/plain; charset=utf-8"),
            ("a.png", "image/png"),
            ("a.bin", "application/octet-stream"),
            ("noext", "application/octet-stream"),
        ] {
            assert_eq!(with_charset(content_type(file.as_bytes())), ct, "{file}");
        }
    }

    #[test]
    fn well_known_paths_are_not_dotfiles() {
        assert!(well_known(b".well-known/acme-challenge/tok-EN_1"));
        assert!(well_known(b".well-known/security.txt"));
        assert!(well_known(b".well-known"));
        assert!(!well_known(b".well-known/.secret"));
        assert!(!well_known(b".well-known/a/.git/config"));
        assert!(!well_known(b".git/config"));
        assert!(!well_known(b"a/.well-known/x"));
        assert!(!well_known(b".well-knownx/y"));
    }

    #[test]
    fn mime_types() {
        assert_eq!(content_type(b"index.html"), "text/html");
        assert_eq!(content_type(b"a/b/style.css"), "text/css");
        assert_eq!(content_type(b"x.png"), "image/png");
        assert_eq!(content_type(b"noext"), "application/octet-stream");
        assert_eq!(content_type(b".hidden"), "application/octet-stream");
        assert_eq!(content_type(b"app.js"), "text/javascript");
        assert_eq!(content_type(b"mod.mjs"), "text/javascript");
        assert_eq!(content_type(b"MOD.MJS"), "text/javascript");
    }

    #[test]
    fn directory_locations_are_absolute_paths() {
        assert_eq!(directory_location(b"sub", None), "/sub/");
        assert_eq!(directory_location(b"a/b", Some("x=1&y")), "/a/b/?x=1&y");
        assert_eq!(directory_location(b"a b/%/?#", None), "/a%20b/%25/%3F%23/");
        assert_eq!(directory_location("ü".as_bytes(), Some("")), "/%C3%BC/?");
        assert_eq!(directory_location(b"", None), "/");
    }

    #[test]
    fn escaping() {
        assert_eq!(html_escape("<a&\">"), "&lt;a&amp;&quot;&gt;");
        assert_eq!(percent_encode("a b/ü"), "a%20b%2F%C3%BC");
    }
}
