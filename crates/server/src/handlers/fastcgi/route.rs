//! Which requests a FastCGI mount takes, and which script each one runs.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weft_http::Method;

use super::client::Backend;
use crate::body::RequestBody;
use crate::config::FastcgiConfig;
use crate::handlers::cgi::Outcome;
use crate::handlers::path::{normalize, PathError};
use crate::handlers::under_prefix;
use crate::response::Response;
use crate::Request;
use weft_sys::errno::{ENOENT, ENOTDIR};
use weft_sys::fs::{metadata_beneath, Resolve};

/// Every FastCGI mount of the application (or of a site).
#[derive(Debug)]
pub struct FastCgi {
    mounts: Vec<Mount>,
}

/// One `[[fastcgi]]`.
#[derive(Debug)]
pub(crate) struct Mount {
    prefix: String,
    /// Canonical path of the scripts' root.
    root: PathBuf,
    /// The same directory, open: the base of `openat2(RESOLVE_BENEATH)`.
    root_file: File,
    php: bool,
    split_path: Vec<String>,
    index: String,
    front_controller: bool,
    pub(super) backend: Arc<Backend>,
    /// What paths under the root were when last looked at (see [`KIND_VALID`]).
    kinds: Mutex<Kinds>,
}

/// Paths under a root, what each was and when that was seen.
type Kinds = HashMap<Box<[u8]>, (Kind, Instant)>;

/// How long what a path under the root is (a script, a directory, nothing) is taken as known
/// (nginx's `open_file_cache_valid`, 60 s there): a script added or removed is seen within it,
/// and a request spends three system calls on the question at most once per path per period.
const KIND_VALID: Duration = Duration::from_secs(1);
/// Paths remembered per mount at most; past it the memory starts again.
const KINDS_MAX: usize = 4096;

/// What a mount does with a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Run this script.
    Script(Script),
    /// A file or directory that is not a script: the static files answer.
    Static,
    /// Refused with this status.
    Status(u16),
}

/// A script a request runs, as the application is told of it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Script {
    /// `SCRIPT_NAME`: its URL path (decoded, normalised).
    pub(super) name: Vec<u8>,
    /// `PATH_INFO`: the decoded path after it (`""` or starting with `/`).
    pub(super) path_info: Vec<u8>,
    /// `SCRIPT_FILENAME`.
    pub(super) filename: PathBuf,
}

impl FastCgi {
    /// The mounts `cfgs` describe (`None` if there are none), their roots defaulting to
    /// `doc_root`; connects to nothing yet (a `HOST:PORT` is resolved).
    pub fn new(cfgs: &[FastcgiConfig], doc_root: &Path) -> io::Result<Option<FastCgi>> {
        if cfgs.is_empty() {
            return Ok(None);
        }
        let mounts = cfgs
            .iter()
            .map(|c| Mount::new(c, doc_root))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Some(FastCgi { mounts }))
    }

    /// The mount whose prefix `path` (still percent-encoded) is under, also once normalised.
    pub(crate) fn route(&self, path: &str) -> Option<&Mount> {
        self.mounts.iter().find(|m| under_prefix(path, &m.prefix))
    }
}

impl Mount {
    fn new(cfg: &FastcgiConfig, doc_root: &Path) -> io::Result<Mount> {
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        if !cfg.prefix.starts_with('/') {
            return Err(invalid(format!(
                "fastcgi prefix `{}` must start with `/`",
                cfg.prefix
            )));
        }
        if let Some(bad) = cfg
            .split_path
            .iter()
            .find(|e| e.len() < 2 || !e.starts_with('.') || e.contains('/'))
        {
            return Err(invalid(format!(
                "fastcgi.split_path: `{bad}` must be a file ending such as `.php`"
            )));
        }
        if cfg.php && cfg.split_path.is_empty() {
            return Err(invalid(
                "fastcgi with `php = true` needs a `split_path` ending".into(),
            ));
        }
        if cfg.index.is_empty() || cfg.index.contains('/') {
            return Err(invalid(format!(
                "fastcgi.index `{}` must be a file name",
                cfg.index
            )));
        }
        let root = cfg.root.as_deref().unwrap_or(doc_root);
        let (canonical, root_file) = crate::handlers::open_dir(root, "fastcgi root")?;
        Ok(Mount {
            prefix: cfg.prefix.clone(),
            root: canonical,
            root_file,
            php: cfg.php,
            split_path: cfg.split_path.clone(),
            index: cfg.index.clone(),
            front_controller: cfg.front_controller,
            backend: Arc::new(Backend::new(cfg)?),
            kinds: Mutex::new(HashMap::new()),
        })
    }

    /// Answers `req` if this mount takes it (`None`: the static files answer).
    pub(crate) fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> Option<Outcome> {
        match self.target(req) {
            Target::Static => None,
            Target::Status(s) => Some(Outcome::Response(Response::error(s))),
            Target::Script(script) => Some(self.backend.run(req, body, &script, &self.root)),
        }
    }

    /// Whether [`Mount::handle`] would pass `req` to the application.
    pub(crate) fn takes(&self, req: &Request) -> bool {
        matches!(self.target(req), Target::Script(_))
    }

    /// What this mount does with `req`.
    pub(crate) fn target(&self, req: &Request) -> Target {
        if req.method() == Method::Connect {
            return Target::Status(405);
        }
        let norm = match normalize(req.path()) {
            Ok(n) => n,
            Err(PathError::AboveRoot) => return Target::Status(404),
            Err(_) => return Target::Status(400),
        };
        if !self.php {
            // The whole prefix is the script; what follows it, the path info.
            let name = self.prefix.trim_end_matches('/');
            let below = &norm.rel[(name.len().saturating_sub(1)).min(norm.rel.len())..];
            let mut path_info = Vec::with_capacity(below.len() + 2);
            if !below.is_empty() {
                if !below.starts_with(b"/") {
                    path_info.push(b'/');
                }
                path_info.extend_from_slice(below);
            }
            if norm.trailing_slash && !path_info.is_empty() {
                path_info.push(b'/');
            }
            return Target::Script(self.script(name.as_bytes().to_vec(), path_info));
        }
        let rel: &[u8] = &norm.rel;
        let segments: Vec<&[u8]> = if rel.is_empty() {
            Vec::new()
        } else {
            rel.split(|&b| b == b'/').collect()
        };
        // The first segment with a script's ending ends the script's path.
        if let Some(i) = segments.iter().position(|s| self.is_script_name(s)) {
            if segments[..=i].iter().any(|s| s.starts_with(b".")) {
                return Target::Status(404);
            }
            let script_rel = segments[..=i].join(&b'/');
            match self.kind(&script_rel) {
                Kind::File => {
                    let path_info = crate::handlers::path_info(&segments, i, norm.trailing_slash);
                    return Target::Script(self.script(slash(&script_rel), path_info));
                }
                Kind::Missing => return self.front(),
                Kind::Refused => return Target::Status(403),
                // A directory named like a script: what is below it is looked up as usual.
                Kind::Dir => {}
            }
        }
        match self.kind(rel) {
            Kind::File => Target::Static,
            // A dot-directory's index is not run (its files are the static files' to refuse).
            Kind::Dir if norm.has_dot_segment => Target::Static,
            Kind::Dir if norm.trailing_slash || rel.is_empty() => {
                let mut index = rel.to_vec();
                if !index.is_empty() {
                    index.push(b'/');
                }
                index.extend_from_slice(self.index.as_bytes());
                match self.kind(&index) {
                    Kind::File => Target::Script(self.script(slash(&index), Vec::new())),
                    _ => Target::Static,
                }
            }
            // Without its slash: the static files redirect to it.
            Kind::Dir | Kind::Refused => Target::Static,
            Kind::Missing => self.front(),
        }
    }

    /// The front controller for a path that names nothing, or the static files' 404.
    fn front(&self) -> Target {
        if !self.front_controller {
            return Target::Static;
        }
        let mut rel = self.prefix.trim_start_matches('/').as_bytes().to_vec();
        if !rel.is_empty() && !rel.ends_with(b"/") {
            rel.push(b'/');
        }
        rel.extend_from_slice(self.index.as_bytes());
        match self.kind(&rel) {
            Kind::File => Target::Script(self.script(slash(&rel), Vec::new())),
            _ => Target::Static,
        }
    }

    fn script(&self, name: Vec<u8>, path_info: Vec<u8>) -> Script {
        use std::os::unix::ffi::OsStrExt;
        let mut filename = self.root.as_os_str().as_bytes().to_vec();
        filename.extend_from_slice(if self.root == Path::new("/") {
            &name[1..]
        } else {
            &name
        });
        Script {
            name,
            path_info,
            filename: PathBuf::from(std::ffi::OsStr::from_bytes(&filename)),
        }
    }

    fn is_script_name(&self, seg: &[u8]) -> bool {
        self.split_path
            .iter()
            .any(|e| seg.len() > e.len() && seg.ends_with(e.as_bytes()))
    }

    /// What `rel` (normalised, relative to the root) is, as last seen within [`KIND_VALID`].
    fn kind(&self, rel: &[u8]) -> Kind {
        let now = Instant::now();
        let lock = || self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(kind, at)) = lock().get(rel) {
            if now.saturating_duration_since(at) < KIND_VALID {
                return kind;
            }
        }
        let kind = self.look(rel);
        let mut kinds = lock();
        if kinds.len() >= KINDS_MAX {
            kinds.clear();
        }
        kinds.insert(rel.into(), (kind, now));
        kind
    }

    /// What `rel` is now, asked of the file system.
    fn look(&self, rel: &[u8]) -> Kind {
        let meta = if rel.is_empty() {
            self.root_file.metadata()
        } else {
            metadata_beneath(&self.root_file, rel, Resolve::Beneath)
        };
        match meta {
            Ok(m) if m.is_file() => Kind::File,
            Ok(m) if m.is_dir() => Kind::Dir,
            Ok(_) => Kind::Refused,
            Err(e) => match e.raw_os_error() {
                Some(ENOENT | ENOTDIR) => Kind::Missing,
                // Out of the root (EXDEV, ELOOP: a symlink leading out), or not reachable:
                // refused, as the static files do.
                _ => Kind::Refused,
            },
        }
    }
}

/// What a path under the root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Missing,
    /// Neither a file nor a directory, out of the root, or not readable.
    Refused,
}

/// `/` + `rel`.
fn slash(rel: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(rel.len() + 1);
    v.push(b'/');
    v.extend_from_slice(rel);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn request(path: &str) -> Request {
        let raw = format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n");
        let mut p = weft_http::Parser::new(weft_http::Limits::default());
        p.parse(raw.as_bytes()).unwrap().expect("a whole head");
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        Request::new(raw.into_bytes(), p.take_head(), addr, addr)
    }

    fn site(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("weft-fcgi-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for d in ["blog", "docs", "app.php", "lib"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "index.php",
            "info.php",
            "style.css",
            "blog/index.php",
            "blog/post.php",
            "docs/readme.txt",
            "app.php/data.txt",
            "lib/.hidden.php",
        ] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        root
    }

    fn mount(root: &Path, cfg: FastcgiConfig) -> Mount {
        Mount::new(
            &FastcgiConfig {
                server: "127.0.0.1:9".into(),
                ..cfg
            },
            root,
        )
        .unwrap()
    }

    fn script(name: &str, info: &str, root: &Path) -> Target {
        let root = root.canonicalize().unwrap();
        Target::Script(Script {
            name: name.as_bytes().to_vec(),
            path_info: info.as_bytes().to_vec(),
            filename: PathBuf::from(format!("{}{name}", root.display())),
        })
    }

    /// PHP's defaults, path by path, as Caddy's php_fastcgi routes them.
    #[test]
    fn php_paths_route_as_caddys_php_fastcgi() {
        let root = site("php");
        let m = mount(&root, FastcgiConfig::default());
        let t = |p: &str| m.target(&request(p));
        assert_eq!(t("/info.php"), script("/info.php", "", &root));
        assert_eq!(
            t("/info.php/a/b"),
            script("/info.php", "/a/b", &root),
            "PATH_INFO split at .php"
        );
        assert_eq!(t("/info.php/a/"), script("/info.php", "/a/", &root));
        assert_eq!(t("/%69nfo.php"), script("/info.php", "", &root), "decoded");
        assert_eq!(t("/"), script("/index.php", "", &root), "index.php");
        assert_eq!(t("/blog/"), script("/blog/index.php", "", &root));
        assert_eq!(t("/blog"), Target::Static, "the static files add the slash");
        assert_eq!(t("/style.css"), Target::Static);
        assert_eq!(
            t("/docs/"),
            Target::Static,
            "no index.php: the static index"
        );
        assert_eq!(
            t("/users/42"),
            script("/index.php", "", &root),
            "front controller"
        );
        assert_eq!(t("/missing.php"), script("/index.php", "", &root));
        assert_eq!(
            t("/app.php/data.txt"),
            Target::Static,
            "a directory named like a script is a directory"
        );
        assert_eq!(t("/lib/.hidden.php"), Target::Status(404));
        assert_eq!(t("/../index.php"), Target::Status(404));
        let no_front = mount(
            &root,
            FastcgiConfig {
                front_controller: false,
                ..FastcgiConfig::default()
            },
        );
        assert_eq!(no_front.target(&request("/users/42")), Target::Static);
        // Under a prefix, the front controller is the prefix's index.php.
        let blog = mount(
            &root,
            FastcgiConfig {
                prefix: "/blog/".into(),
                ..FastcgiConfig::default()
            },
        );
        assert_eq!(
            blog.target(&request("/blog/2024/hello")),
            script("/blog/index.php", "", &root)
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn without_php_the_prefix_is_the_script() {
        let root = site("app");
        let m = mount(
            &root,
            FastcgiConfig {
                prefix: "/app/".into(),
                php: false,
                ..FastcgiConfig::default()
            },
        );
        assert_eq!(
            m.target(&request("/app/users/42")),
            script("/app", "/users/42", &root)
        );
        assert_eq!(m.target(&request("/app/")), script("/app", "", &root));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_prefix_holds_once_the_path_is_normalised() {
        let root = site("prefix");
        let cfgs = [FastcgiConfig {
            prefix: "/blog/".into(),
            server: "127.0.0.1:9".into(),
            ..FastcgiConfig::default()
        }];
        let f = FastCgi::new(&cfgs, &root).unwrap().unwrap();
        assert!(f.route("/blog/x").is_some());
        assert!(f.route("/blog/../info.php").is_none());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
