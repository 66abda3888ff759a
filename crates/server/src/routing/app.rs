//! The application: routes (built-ins and the embedder's), the static-file fallback, and what
//! every model's connection driver needs to reach (config, metrics, logs, shutdown state).

use std::sync::Arc;

use weft_http::Method;

use crate::body::RequestBody;
use crate::cache::ResponseCache;
use crate::compress::Compression;
use crate::config::{Config, ConfigError};
use crate::handlers::cgi::{self, Cgi};
use crate::handlers::fastcgi::FastCgi;
use crate::handlers::proxy::Proxy;
use crate::handlers::{echo, health, static_files::StaticFiles, status};
use crate::limits_ip::ClientTable;
use crate::log::AccessLog;
use crate::metrics::Metrics;
use crate::response::Response;
use crate::shutdown::Shutdown;
use crate::sites::Sites;
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
            weft_http::same_bytes(path.as_bytes(), self.path.as_bytes())
        }
    }
}

/// A route as the application keeps it: with its method decided once, so that a request's
/// method is compared as the parsed enum rather than as text.
#[derive(Debug)]
struct Mounted {
    route: Route,
    method: MethodMatch,
    /// weft's own route (health, echo, status), which answers from memory; an embedder's
    /// route may wait on anything ([`App::may_block`]).
    own: bool,
}

/// How a route's method matches a request's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MethodMatch {
    /// Any method (`Route::method` is `None`).
    Any,
    /// A method the parser knows, by its enum (methods are case-sensitive: `"get"` is not
    /// `GET` and stays [`MethodMatch::Named`]).
    Known(Method),
    /// An extension method: compared by name.
    Named,
}

impl Mounted {
    fn new(route: Route) -> Mounted {
        let method = match route
            .method
            .as_deref()
            .map(|m| Method::from_bytes(m.as_bytes()))
        {
            None => MethodMatch::Any,
            Some(Method::Other) => MethodMatch::Named,
            Some(known) => MethodMatch::Known(known),
        };
        Mounted {
            route,
            method,
            own: false,
        }
    }

    fn matches(&self, req: &Request, path: &str) -> bool {
        let method = match self.method {
            MethodMatch::Any => true,
            MethodMatch::Known(m) => req.method() == m,
            MethodMatch::Named => self.route.method.as_deref() == Some(req.method_str()),
        };
        method && self.route.matches_path(path)
    }
}

/// Everything a connection needs, shared by all connections of all listeners.
#[derive(Debug)]
pub struct App {
    pub(crate) cfg: Config,
    /// The embedder's routes, kept to build the next generation on reload.
    user_routes: Vec<Route>,
    routes: Vec<Mounted>,
    cgi: Option<Cgi>,
    /// Scripts anywhere under the document root by file ending (`[cgi] extensions`).
    cgi_ext: Option<Cgi>,
    proxy: Option<Proxy>,
    /// `[[fastcgi]]`: FastCGI applications (php-fpm).
    fastcgi: Option<FastCgi>,
    static_files: Option<StaticFiles>,
    /// `[[site]]`: virtual hosts, each with its own handlers; `None` without any.
    sites: Option<Sites>,
    cache: Option<Arc<ResponseCache>>,
    /// `[compression]`, when on: also applied to CGI and proxied responses.
    compression: Option<Arc<Compression>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) access_log: Option<AccessLog>,
    pub(crate) shutdown: Arc<Shutdown>,
    /// Per-client connection counts and request rates (`limits_ip`), shared by every
    /// generation and, through shared memory, every process.
    pub(crate) clients: Arc<ClientTable>,
    /// The `[[upstream]]` groups (their health checks start with [`App::start_checks`]).
    pub(crate) groups: crate::handlers::proxy::Groups,
    /// This generation's certificates, when a listener serves TLS (re-read on reload).
    pub(crate) tls: Option<Arc<crate::tls::Tls>>,
    /// `[acme]`'s HTTP-01 answers, answered ahead of everything else (`conn::policy`).
    pub(crate) acme_http: Option<crate::acme::serve::HttpAnswers>,
    /// The `Arc` this application is served from ([`App::shared`]).
    me: std::sync::OnceLock<std::sync::Weak<App>>,
}

/// `[tls] verify_client = "on"` and a connection without a client certificate: 400, as
/// nginx answers it ("No required SSL certificate was sent"), and a log line.
#[cold]
fn no_client_cert(req: &Request) -> Response {
    log::info!(
        "{}: 400 no client certificate (tls.verify_client = \"on\")",
        req.peer_addr()
    );
    Response::text(400, "No required SSL certificate was sent\n")
}

/// What one generation of the application hands to the next on reload.
struct Carried {
    metrics: Arc<Metrics>,
    shutdown: Arc<Shutdown>,
    cache: Option<Arc<ResponseCache>>,
    access_log: Option<AccessLog>,
    clients: Arc<ClientTable>,
    /// The running generation's upstream groups (whose state a group of the same servers
    /// keeps).
    groups: Option<crate::handlers::proxy::Groups>,
}

impl App {
    /// Builds the application: the health check (when configured) first, then the
    /// embedder's routes, then the built-ins the config enables (echo, status), then proxy
    /// prefixes, then CGI scripts under their prefix, then static files from the root, then
    /// the fallback proxy for what is not a file.
    pub(crate) fn new(cfg: Config, user_routes: Vec<Route>) -> std::io::Result<App> {
        let carried = Carried {
            metrics: Arc::new(Metrics::default()),
            shutdown: Arc::new(Shutdown::default()),
            cache: None,
            access_log: None,
            clients: Arc::new(ClientTable::new(cfg.limits.client_zone)),
            groups: None,
        };
        App::assemble(cfg, user_routes, carried)
    }

    /// The next generation for `cfg` (SIGHUP): the same counters, shutdown state and routes
    /// of the embedder; the response cache and the access log are kept when their settings
    /// (and the document root) did not change, and replaced otherwise.
    pub(crate) fn reload(&self, cfg: Config) -> std::io::Result<App> {
        // The cached heads carry the Content-Type, charset included.
        let same_files = cfg.root == self.cfg.root
            && cfg.site == self.cfg.site
            && cfg.cache == self.cfg.cache
            // Heads carry `Vary`, and variants their coding's level.
            && cfg.compression == self.cfg.compression
            && cfg.static_files.charset == self.cfg.static_files.charset;
        if cfg.limits.client_zone != self.cfg.limits.client_zone {
            log::warn!("reload: limits.client_zone takes effect at restart");
        }
        let carried = Carried {
            metrics: self.metrics.clone(),
            shutdown: self.shutdown.clone(),
            cache: self.cache.clone().filter(|_| same_files),
            access_log: self.access_log.clone().filter(|_| {
                cfg.access_log == self.cfg.access_log
                    && cfg.access_log_format == self.cfg.access_log_format
            }),
            clients: self.clients.clone(),
            groups: Some(self.groups.clone()),
        };
        App::assemble(cfg, self.user_routes.clone(), carried)
    }

    fn assemble(cfg: Config, user_routes: Vec<Route>, carried: Carried) -> std::io::Result<App> {
        let Carried {
            metrics,
            shutdown,
            cache,
            access_log,
            clients,
            groups,
        } = carried;
        shutdown.set_drain_idle(cfg.timeouts.drain_idle);
        let mut routes = Vec::new();
        if !cfg.health.path.is_empty() {
            if !cfg.health.path.starts_with('/') {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("health path `{}` must start with `/`", cfg.health.path),
                ));
            }
            // First: an operator's probe must reach it whatever else is mounted.
            let sd = shutdown.clone();
            routes.push(Route {
                method: None,
                path: cfg.health.path.clone(),
                prefix: false,
                handler: Arc::new(move |req, _| health::handle(req, &sd)),
            });
        }
        let users = routes.len()..routes.len() + user_routes.len();
        routes.extend(user_routes.iter().cloned());
        if let Some(path) = cfg.echo.mount_path(&cfg.root) {
            routes.push(Route {
                method: None,
                path: path.into(),
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
        let cache = match cache {
            Some(c) if cfg.static_files.enabled => Some(c),
            _ => (cfg.static_files.enabled && cfg.cache.enabled)
                .then(|| Arc::new(ResponseCache::new(&cfg.cache))),
        };
        metrics.set_cache(cache.clone());
        metrics.set_timing(cfg.timing.on());
        metrics.set_clients(clients.clone());
        let static_files = if cfg.static_files.enabled {
            Some(
                StaticFiles::with_cache(&cfg.root, cfg.static_files.clone(), cache.clone())
                    .map_err(|e| {
                        std::io::Error::new(
                            e.kind(),
                            format!("document root {}: {e}", cfg.root.display()),
                        )
                    })?,
            )
        } else {
            None
        };
        let compression = Compression::new(&cfg.compression)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?
            .map(Arc::new);
        let static_files = static_files.map(|s| {
            s.with_compression(compression.clone())
                .with_hidden_endings(crate::config::FastcgiConfig::script_endings(&cfg.fastcgi))
        });
        let cgi = Cgi::new(&cfg.cgi, &cfg.root)?;
        let cgi_ext = Cgi::by_extension(&cfg.cgi, &cfg.root)?;
        let groups =
            crate::handlers::proxy::Groups::new(&cfg.upstream, groups.as_ref(), shutdown.clone())?;
        metrics.set_upstreams(Arc::new(groups.clone()));
        let proxy = Proxy::new(&cfg.proxy, &groups)?;
        let fastcgi = FastCgi::new(&cfg.fastcgi, &cfg.root)?;
        let sites = Sites::new(&cfg, cache.as_ref(), compression.as_ref(), &groups)?;
        let access_log = match access_log {
            Some(l) => Some(l),
            None => AccessLog::open(&cfg.access_log, &cfg.access_log_format)?,
        };
        let tls = crate::tls::Tls::from_config(&cfg)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let acme_http = cfg.acme.answers("http-01").then(|| {
            crate::acme::serve::HttpAnswers::new(&crate::acme::store::Store::new(&cfg.acme))
        });
        metrics.set_certificates(
            tls.as_ref()
                .map(|t| t.certificates.clone() as Arc<dyn crate::metrics::Exposed>),
        );
        Ok(App {
            cfg,
            user_routes,
            routes: routes
                .into_iter()
                .enumerate()
                .map(|(i, r)| Mounted {
                    own: !users.contains(&i),
                    ..Mounted::new(r)
                })
                .collect(),
            cgi,
            cgi_ext,
            proxy,
            fastcgi,
            static_files,
            sites,
            cache,
            compression,
            metrics,
            access_log,
            shutdown,
            clients,
            tls,
            acme_http,
            groups,
            me: std::sync::OnceLock::new(),
        })
    }

    /// Starts what the application runs in the background once it serves: the upstream
    /// groups' health checks (threads; never in the `process` model's master, which forks).
    pub(crate) fn start_checks(&self) {
        self.groups.start_checks();
    }

    /// Readies this application for a `process`-model connection process: no cache fills, no
    /// FastCGI connection kept past its request.
    pub(crate) fn enter_connection_process(&self) {
        if let Some(c) = &self.cache {
            c.set_fills(false);
        }
        crate::handlers::fastcgi::enter_connection_process();
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Whether `req`'s handler may wait on something besides this machine's memory and
    /// files: a proxied upstream, a CGI script, or an embedder's route (its code may do
    /// anything). A connection that multiplexes requests (HTTP/2) runs such a handler away
    /// from its other streams (`conn::h2`). Conservative: true where routing cannot tell
    /// without running the handler (an internal redirect to anywhere dynamic).
    pub(crate) fn may_block(&self, req: &Request) -> bool {
        let path = req.path();
        if let Some(r) = self.routes.iter().find(|r| r.matches(req, path)) {
            return !r.own;
        }
        if let Some(b) = self.sites.as_ref().and_then(|s| s.may_block(req)) {
            return b;
        }
        self.top().may_block(req)
    }

    /// This application as the `Arc` the server shares it in, for work that outlives a
    /// borrow (a handler run on a fiber of its own); `None` for an application used
    /// without one (some unit tests).
    pub(crate) fn shared(&self) -> Option<Arc<App>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    /// Wraps this application in the `Arc` it is served from ([`App::shared`]).
    pub(crate) fn into_shared(self) -> Arc<App> {
        let app = Arc::new(self);
        let _ = app.me.set(Arc::downgrade(&app));
        app
    }

    /// Routes `req` to its handler.
    pub(crate) fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> Response {
        if self
            .access_log
            .as_ref()
            .is_some_and(AccessLog::needs_arrival)
        {
            req.mark_arrival();
        }
        if let Some(t) = req.tls() {
            if matches!(t.client, crate::request::ClientAuth::None)
                && self.cfg.tls.verify_client == crate::config::VerifyClient::On
            {
                return no_client_cert(req);
            }
        }
        let site_rate = self.sites.as_ref().and_then(|s| s.rate_limit(req));
        if let Some(refused) =
            crate::limits_ip::check_request(&self.clients, &self.cfg, site_rate, req)
        {
            return refused;
        }
        self.handle_redirected(req, body)
    }

    /// Routes `req` and every request an internal redirect (a `try_files` URI, a `rewrite`,
    /// a script's local redirect) serves in its place, one after the other in a loop rather
    /// than nested calls, so a fiber's small stack holds any chain; more than
    /// `limits.max_internal_redirects` in a row (a loop in the configuration) is 500.
    pub(crate) fn handle_redirected(&self, req: &Request, body: &mut RequestBody<'_>) -> Response {
        let mut next: Option<Request> = None;
        let mut hops = 0;
        loop {
            let cur = next.as_ref().unwrap_or(req);
            match self.route_once(cur, body) {
                Routed::Done(resp) => {
                    // What the request served in its place learnt of an upstream is the
                    // original's to log.
                    if let Some(d) = next.as_ref().and_then(Request::upstream_time) {
                        req.set_upstream_time(d);
                    }
                    return resp;
                }
                Routed::Again(again) => {
                    if hops >= self.cfg.limits.max_internal_redirects {
                        log::error!(
                            "{}: internal redirect to {:?} refused: more than {} in a row \
                             (limits.max_internal_redirects); answering 500",
                            req.peer_addr(),
                            again.target(),
                            self.cfg.limits.max_internal_redirects
                        );
                        return Response::error(500);
                    }
                    hops += 1;
                    next = Some(again);
                }
            }
        }
    }

    /// One routing of `req`: its answer, or the request to serve in its place.
    fn route_once(&self, req: &Request, body: &mut RequestBody<'_>) -> Routed {
        let path = req.path();
        for r in &self.routes {
            if r.matches(req, path) {
                return Routed::Done((r.route.handler)(req, body));
            }
        }
        if let Some(routed) = self.sites.as_ref().and_then(|s| s.handle(self, req, body)) {
            return routed;
        }
        if !self.cfg.access.is_empty()
            && !crate::config::AccessRule::allows(&self.cfg.access, req.peer_addr().ip())
        {
            log::info!(
                "{}: {} refused by the access rules; answering 403",
                req.peer_addr(),
                req.path()
            );
            return Routed::Done(Response::error(403));
        }
        self.dispatch(self.top(), req, body)
    }

    /// The top-level handlers (those of no site).
    fn top(&self) -> HandlersRef<'_> {
        HandlersRef {
            proxy: self.proxy.as_ref(),
            fastcgi: self.fastcgi.as_ref(),
            cgi: self.cgi.as_ref(),
            cgi_ext: self.cgi_ext.as_ref(),
            static_files: self.static_files.as_ref(),
        }
    }

    /// Answers `req` with handlers `h` (the top-level ones or a site's): proxy prefixes, CGI,
    /// static files, the fallback proxy.
    pub(crate) fn dispatch(
        &self,
        h: HandlersRef<'_>,
        req: &Request,
        body: &mut RequestBody<'_>,
    ) -> Routed {
        let path = req.path();
        if let Some(up) = h.proxy.and_then(|p| p.route(path)) {
            return Routed::Done(self.dynamic(req, up.forward(req, body)));
        }
        // `None`: a file that is not a script, for the static files.
        if let Some(outcome) = h
            .fastcgi
            .and_then(|f| f.route(path))
            .and_then(|m| m.handle(req, body))
        {
            return self.outcome(req, outcome);
        }
        let script = [h.cgi, h.cgi_ext]
            .into_iter()
            .flatten()
            .find(|c| c.matches(path));
        // `None` from an extension mount: no script there, the static files answer.
        if let Some(outcome) = script.and_then(|cgi| cgi.handle(req, body)) {
            return self.outcome(req, outcome);
        }
        let fallback = h.proxy.and_then(|p| p.fallback());
        if let Some(up) = fallback {
            // Everything that is not a file: methods a file does not answer, and 404s.
            if !matches!(req.method(), Method::Get | Method::Head) {
                return Routed::Done(self.dynamic(req, up.forward(req, body)));
            }
        } else if req.method() == Method::Other {
            // RFC 9110 §9.1: an unrecognised method gets 501.
            return Routed::Done(Response::error(501));
        }
        // A PHP script's source is never served: the static files refuse its ending
        // (`StaticFiles::with_hidden_endings`), wherever it is asked for (a try_files, an
        // error page, a path outside the mount's prefix).
        let resp = match h.static_files {
            Some(s) => s.handle_path(req, path),
            None => Response::error(404),
        };
        Routed::Done(match fallback {
            Some(up) if resp.status == 404 => self.dynamic(req, up.forward(req, body)),
            _ => resp,
        })
    }

    /// A CGI or FastCGI answer: the response, or the request a local redirect names
    /// (RFC 3875 §6.2.2), served in its place.
    fn outcome(&self, req: &Request, outcome: cgi::Outcome) -> Routed {
        match outcome {
            cgi::Outcome::Response(r) => Routed::Done(self.dynamic(req, r)),
            cgi::Outcome::LocalRedirect(target) => {
                match cgi::redirected_request(req, &target, self.cfg.limits.http()) {
                    Some(next) => Routed::Again(next),
                    None => {
                        log::error!(
                            "{}: local redirect to {target:?} refused (not a request target); \
                             answering 500",
                            req.peer_addr(),
                        );
                        Routed::Done(Response::error(500))
                    }
                }
            }
        }
    }

    /// A CGI, FastCGI or proxied response, compressed where `[compression]` allows.
    fn dynamic(&self, req: &Request, resp: Response) -> Response {
        match &self.compression {
            Some(z) => z.dynamic(req, resp),
            None => resp,
        }
    }
}

/// What one routing of a request came to.
#[derive(Debug)]
pub(crate) enum Routed {
    /// The answer.
    Done(Response),
    /// An internal redirect: serve this request in its place ([`App::handle_redirected`]).
    Again(Request),
}

/// The handlers one request is answered with: the top-level ones, or a site's (with a
/// location's own proxy, FastCGI or CGI mount in place of the site's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HandlersRef<'a> {
    pub(crate) proxy: Option<&'a Proxy>,
    pub(crate) fastcgi: Option<&'a FastCgi>,
    pub(crate) cgi: Option<&'a Cgi>,
    pub(crate) cgi_ext: Option<&'a Cgi>,
    pub(crate) static_files: Option<&'a StaticFiles>,
}

impl HandlersRef<'_> {
    /// Whether [`App::dispatch`] with these handlers may wait on another process for `req`.
    pub(crate) fn may_block(&self, req: &Request) -> bool {
        let path = req.path();
        self.proxy
            .is_some_and(|p| p.route(path).is_some() || p.fallback().is_some())
            || self
                .fastcgi
                .and_then(|f| f.route(path))
                .is_some_and(|m| m.takes(req))
            || [self.cgi, self.cgi_ext]
                .into_iter()
                .flatten()
                .any(|c| c.matches(path))
    }

    /// Whether any of these handlers may wait on another process.
    pub(crate) fn any_dynamic(&self) -> bool {
        self.proxy.is_some()
            || self.fastcgi.is_some()
            || self.cgi.is_some()
            || self.cgi_ext.is_some()
    }
}

/// Re-reads the configuration for a reload (the command line's file and flags again).
pub type ReloadFn = Box<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// Why a reload was refused; the running configuration serves on.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReloadError {
    /// The server was built without a configuration source (`ServerBuilder::reload_with`).
    NoSource,
    /// The configuration source refused: the file could not be read, or a setting is wrong.
    Config(ConfigError),
    /// The new configuration could not be put in place (a certificate, a log file, a CGI
    /// directory).
    Apply(std::io::Error),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::NoSource => f.write_str("no configuration source to reload from"),
            ReloadError::Config(e) => e.fmt(f),
            ReloadError::Apply(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReloadError::NoSource => None,
            ReloadError::Config(e) => Some(e),
            ReloadError::Apply(e) => Some(e),
        }
    }
}

/// The application connections are handed now: each connection keeps the generation it was
/// accepted with for its whole life, so a reload (SIGHUP) changes new connections only and
/// drops none.
pub struct LiveApp {
    current: std::sync::RwLock<Arc<App>>,
    reload: Option<ReloadFn>,
    /// Held while a new generation is built from the current one and put in its place
    /// (SIGHUP's reload, the certificate keeper's refresh): one never undoes the other.
    building: std::sync::Mutex<()>,
}

impl std::fmt::Debug for LiveApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveApp")
            .field("reloadable", &self.reload.is_some())
            .finish()
    }
}

impl LiveApp {
    /// Starts with `app`; `reload` re-reads the configuration on [`LiveApp::reload`].
    pub fn new(app: Arc<App>, reload: Option<ReloadFn>) -> LiveApp {
        LiveApp {
            current: std::sync::RwLock::new(app),
            reload,
            building: std::sync::Mutex::new(()),
        }
    }

    /// The generation new connections get.
    pub fn current(&self) -> Arc<App> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-reads the configuration and makes it the current generation. On any error the
    /// running configuration stays and the error is returned (and logged by the caller).
    /// Listening addresses, worker threads and fiber settings need a restart: a change to
    /// them is reported and otherwise ignored.
    pub fn reload(&self) -> Result<(), ReloadError> {
        let Some(read) = &self.reload else {
            return Err(ReloadError::NoSource);
        };
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        let mut cfg = read().map_err(ReloadError::Config)?;
        let old = self.current();
        if cfg.listeners() != old.cfg.listeners() {
            log::warn!("reload: listening addresses changed; they take effect at restart");
        }
        if cfg.threads != old.cfg.threads || cfg.fiber != old.cfg.fiber {
            log::warn!("reload: threads and [fiber] settings take effect at restart");
        }
        cfg.listen = old.cfg.listen.clone();
        cfg.threads = old.cfg.threads;
        cfg.fiber = old.cfg.fiber.clone();
        let next = old.reload(cfg).map_err(ReloadError::Apply)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next.into_shared();
        Ok(())
    }

    /// Builds the current configuration again, as it is (the file is not read): what a
    /// generation reads when it is made (`[acme]`'s certificates) is read anew. On an error
    /// the running generation stays.
    pub fn refresh(&self) -> Result<(), ReloadError> {
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.current();
        let next = old.reload(old.cfg.clone()).map_err(ReloadError::Apply)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next.into_shared();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused reload says why, with a type a caller can match, and the running generation
    /// serves on.
    #[test]
    fn a_refused_reload_says_why_and_keeps_the_generation() {
        let cfg = Config {
            root: std::env::temp_dir(),
            ..Config::default()
        };
        let app = Arc::new(App::new(cfg, Vec::new()).unwrap());
        let live = LiveApp::new(app.clone(), None);
        assert!(matches!(live.reload(), Err(ReloadError::NoSource)));
        let bad: ReloadFn = Box::new(|| Config::from_toml("[timeouts]\nheader_read = \"soon\"\n"));
        let live = LiveApp::new(app.clone(), Some(bad));
        match live.reload() {
            Err(ReloadError::Config(e)) => {
                assert_eq!(e.key.as_deref(), Some("timeouts.header_read"), "{e}");
                assert_eq!(e.line, Some(2));
            }
            other => panic!("{other:?}"),
        }
        assert!(Arc::ptr_eq(&live.current(), &app));
        let gone: ReloadFn = Box::new(|| Config::from_toml("root = \"/nonexistent/weft-root\"\n"));
        let live = LiveApp::new(app.clone(), Some(gone));
        assert!(matches!(live.reload(), Err(ReloadError::Apply(_))));
        assert!(Arc::ptr_eq(&live.current(), &app));
        let text: ReloadFn = Box::new(|| Err(ConfigError::from("gone".to_string())));
        let live = LiveApp::new(app.clone(), Some(text));
        assert_eq!(live.reload().unwrap_err().to_string(), "gone");
    }

    fn request(method: &str, path: &str) -> Request {
        let raw = format!("{method} {path} HTTP/1.1\r\nHost: h\r\n\r\n");
        let mut p = weft_http::Parser::new(weft_http::Limits::default());
        p.parse(raw.as_bytes()).unwrap().expect("a whole head");
        let addr: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        Request::new(raw.into_bytes(), p.take_head(), addr, addr)
    }

    fn route(method: Option<&str>, path: &str, prefix: bool) -> Route {
        Route {
            method: method.map(str::to_string),
            path: path.into(),
            prefix,
            handler: Arc::new(|_, _| Response::new(200)),
        }
    }

    /// A route matches exactly when its method is absent or names the request's method (as
    /// text, case-sensitively: the rule before methods were compared as enums) and its path
    /// matches; for known methods, extension methods, a lowercase name, and paths of every
    /// length around eight bytes.
    #[test]
    fn mounted_routes_match_as_method_text_and_path() {
        let methods = ["GET", "HEAD", "POST", "PATCH", "get", "PURGE", "OPTIONS"];
        let paths = [
            "/",
            "/a",
            "/plain",
            "/plaintx",
            "/plaintex",
            "/plaintext",
            "/plaintexu",
        ];
        for route_method in [None, Some("GET"), Some("get"), Some("PURGE"), Some("PATCH")] {
            for route_path in ["/plaintext", "/plaintex", "/a"] {
                for prefix in [false, true] {
                    let r = route(route_method, route_path, prefix);
                    let m = Mounted::new(r.clone());
                    for method in methods {
                        for path in paths {
                            let req = request(method, path);
                            let want = route_method.is_none_or(|x| x == req.method_str())
                                && if prefix {
                                    path.starts_with(route_path)
                                } else {
                                    path == route_path
                                };
                            assert_eq!(
                                m.matches(&req, req.path()),
                                want,
                                "{route_method:?} {route_path} prefix={prefix}: {method} {path}"
                            );
                        }
                    }
                }
            }
        }
        assert_eq!(
            Mounted::new(route(Some("GET"), "/", false)).method,
            MethodMatch::Known(Method::Get)
        );
        assert_eq!(
            Mounted::new(route(Some("get"), "/", false)).method,
            MethodMatch::Named
        );
    }
}
