//! The application: routes (built-ins and the embedder's), the static-file fallback, and what
//! every model's connection driver needs to reach (config, metrics, logs, shutdown state).

use std::sync::Arc;

use weft_http::Method;

use crate::body::RequestBody;
use crate::cache::ResponseCache;
use crate::config::Config;
use crate::handlers::{echo, static_files::StaticFiles, status};
use crate::log::AccessLog;
use crate::metrics::Metrics;
use crate::response::Response;
use crate::shutdown::Shutdown;
use crate::Request;

/// A request handler: plain blocking code that reads the body if it wants one and returns a
/// response. It runs on whatever the model provides (a thread, a fiber, a process).
pub type Handler = Arc<dyn Fn(&Request, &mut RequestBody<'_>) -> Response + Send + Sync>;

/// Where a handler is mounted.
#[derive(Clone)]
pub struct Route {
    /// `None`: any method.
    pub method: Option<String>,
    /// Exact path, or a prefix if `prefix` is set.
    pub path: String,
    pub prefix: bool,
    pub handler: Handler,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl Route {
    fn matches_path(&self, path: &str) -> bool {
        if self.prefix {
            path.starts_with(&self.path)
        } else {
            path == self.path
        }
    }
}

/// Everything a connection needs, shared by all connections of all listeners.
#[derive(Debug)]
pub struct App {
    pub(crate) cfg: Config,
    routes: Vec<Route>,
    static_files: Option<StaticFiles>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) access_log: Option<AccessLog>,
    pub(crate) shutdown: Arc<Shutdown>,
}

impl App {
    /// Builds the application: the embedder's routes first, then the built-ins the config
    /// enables (echo, status), then static files from the root.
    pub fn new(cfg: Config, user_routes: Vec<Route>) -> std::io::Result<App> {
        let metrics = Arc::new(Metrics::default());
        let mut routes = user_routes;
        if !cfg.echo.path.is_empty() {
            routes.push(Route {
                method: None,
                path: cfg.echo.path.clone(),
                prefix: false,
                handler: Arc::new(echo::handle),
            });
        }
        if cfg.status.enabled {
            let m = metrics.clone();
            let allow = cfg.status.allow.clone();
            routes.push(Route {
                method: None,
                path: status::PREFIX.into(),
                prefix: true,
                handler: Arc::new(move |req, _| status::handle(req, &m, &allow)),
            });
        }
        let static_files = if cfg.static_files.enabled {
            let cache = cfg
                .cache
                .enabled
                .then(|| Arc::new(ResponseCache::new(&cfg.cache)));
            metrics.set_cache(cache.clone());
            Some(
                StaticFiles::with_cache(&cfg.root, cfg.static_files.clone(), cache).map_err(
                    |e| {
                        std::io::Error::new(
                            e.kind(),
                            format!("document root {}: {e}", cfg.root.display()),
                        )
                    },
                )?,
            )
        } else {
            None
        };
        let access_log = AccessLog::open(&cfg.access_log)?;
        Ok(App {
            cfg,
            routes,
            static_files,
            metrics,
            access_log,
            shutdown: Arc::new(Shutdown::default()),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Routes `req` to its handler.
    pub fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> Response {
        let path = req.path();
        for r in &self.routes {
            if r.matches_path(path) && r.method.as_deref().is_none_or(|m| m == req.method_str()) {
                return (r.handler)(req, body);
            }
        }
        if req.method() == Method::Other {
            // RFC 9110 §9.1: an unrecognised method gets 501.
            return Response::error(501);
        }
        match &self.static_files {
            Some(s) => s.handle(req),
            None => Response::error(404),
        }
    }
}
