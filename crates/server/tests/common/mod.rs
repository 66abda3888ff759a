//! What the tests that start the `weft` binary share: the one launcher ([`launch`]), a raw
//! HTTP/1.1 client ([`client`]), the black-box server ([`Builder`], [`Server`]: a private
//! temporary directory with a document root, on 127.0.0.1 with a free port), systemd's way of
//! starting it ([`handover`]), a test once per model (`per_model!`, for a test file that
//! declares this module `#[macro_use]`), and readings of `/proc`.

// Each test file compiles this module on its own and uses a different part of it.
#![allow(dead_code, unused_imports, unused_macros)]

pub mod client;
pub mod handover;
pub mod launch;
pub mod php_fpm;
pub mod staple;

use std::fs;
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

pub use client::{chunked, find, Conn, ReadError, Response, READ_TIMEOUT, RESPONSE_DEADLINE};
pub use launch::{Launch, Ran, Weft};

/// The file every test root has; `GET /` answers it.
pub const INDEX_HTML: &[u8] = b"<!DOCTYPE html>\n<title>weft test</title>\n<p>index</p>\n";
/// A file outside the document root that no request may ever read.
pub const SECRET: &[u8] = b"TOP-SECRET-7f3a9c1e: this file lies outside the document root\n";

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory under the system temp dir, unique to this process and call.
pub fn unique_dir(name: &str) -> PathBuf {
    let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("weft-test-{}-{name}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create test dir");
    dir
}

/// The model a black-box server serves with, and the options it gets with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    /// `thread`, `fiber`, `pipeline` or `process`.
    pub name: &'static str,
    /// Arguments every server of this model gets after `serve`.
    pub args: &'static [&'static str],
}

impl Model {
    pub const THREAD: Model = Model::plain("thread");
    pub const FIBER: Model = Model::plain("fiber");
    pub const PIPELINE: Model = Model::plain("pipeline");
    pub const PROCESS: Model = Model::plain("process");
    /// The fiber model with the response cache off: every file read from disk and sent with
    /// sendfile.
    pub const FIBER_NOCACHE: Model = Model {
        name: "fiber",
        args: &["--cache", "off"],
    };

    const fn plain(name: &'static str) -> Model {
        Model { name, args: &[] }
    }

    /// True if the response cache is off (`--cache off`).
    pub fn cache_off(self) -> bool {
        self.args.windows(2).any(|w| w == ["--cache", "off"])
    }

    /// The model of `per_model!`'s module `name`: `thread`, `fiber`, `pipeline`, `process` or
    /// `fiber_nocache` ([`Model::FIBER_NOCACHE`]).
    pub fn of_module(name: &str) -> Model {
        match name {
            "thread" => Model::THREAD,
            "fiber" => Model::FIBER,
            "pipeline" => Model::PIPELINE,
            "process" => Model::PROCESS,
            "fiber_nocache" => Model::FIBER_NOCACHE,
            other => panic!("per_model!: no model {other:?}"),
        }
    }
}

/// Makes each named test, a `fn TEST(model: Model)` of the module that invokes it, a test once
/// per model: `thread::TEST`, `fiber::TEST`, `pipeline::TEST`, `process::TEST` and
/// `fiber_nocache::TEST` (the fiber model with the response cache off), so that a failure
/// names its model and `::fiber::` runs one model's tests.
///
/// * `per_model!(TEST, ...)`: every model and `fiber_nocache`;
/// * `per_model!(except fiber_nocache: TEST, ...)`: the four models;
/// * `per_model!(#[ATTR]... [MODULE, ...] with RUNNER: TEST, ...)`: the models named (module
///   names as above), each test with the attributes given (`#[ignore = "why"]`), and, with
///   `with RUNNER`, run as `RUNNER(TEST, model)` (a `fn(fn(&'static str), Model)` of the
///   invoking module, for tests that take the model's name and need a guard around them);
///   `with RUNNER` may be left out.
macro_rules! per_model {
    (except fiber_nocache: $($test:ident),* $(,)?) => {
        per_model!([thread, fiber, pipeline, process]: $($test),*);
    };
    (
        $(#[$attr:meta])* [$($module:ident),* $(,)?] $(with $runner:ident)?:
        $($test:ident),* $(,)?
    ) => {
        per_model!(@modules [$($module),*] [$(#[$attr])*] [$($runner)?] $($test),*);
    };
    (@modules [] $attrs:tt $runner:tt $($test:ident),*) => {};
    (@modules [$module:ident $(, $modules:ident)*] $attrs:tt $runner:tt $($test:ident),*) => {
        mod $module {
            $(per_model!(@test $attrs $runner $module $test);)*
        }
        per_model!(@modules [$($modules),*] $attrs $runner $($test),*);
    };
    (@test [$($attr:tt)*] [] $module:ident $test:ident) => {
        #[test]
        $($attr)*
        fn $test() {
            super::$test($crate::common::Model::of_module(stringify!($module)));
        }
    };
    (@test [$($attr:tt)*] [$runner:ident] $module:ident $test:ident) => {
        #[test]
        $($attr)*
        fn $test() {
            super::$runner(super::$test, $crate::common::Model::of_module(stringify!($module)));
        }
    };
    ($($test:ident),* $(,)?) => {
        per_model!([thread, fiber, pipeline, process, fiber_nocache]: $($test),*);
    };
}

/// How to start a black-box server.
#[derive(Debug)]
pub struct Builder {
    model: Model,
    dir: PathBuf,
    config: Option<String>,
    args: Vec<String>,
    /// RLIMIT_NOFILE (soft and hard) for the server process.
    nofile: Option<u64>,
    /// Mount `/echo` (`--echo /echo`): test roots are not the sample site, where it is the
    /// default. Off when the test's config has an `[echo]` section, or with `no_echo`.
    echo: bool,
    /// Pass `--listen 127.0.0.1:0=MODEL` (off: the test's config has its own `[[listen]]`,
    /// on 127.0.0.1 port 0, with the builder's model).
    listen: bool,
    /// A wrapper run instead of weft, with weft's path and arguments after its own.
    wrapper: Option<PathBuf>,
}

impl Builder {
    /// A server on `model` with its own directory: `root/` (with `index.html`) is the
    /// document root, `secret.txt` lies beside it, outside the root.
    pub fn new(model: Model, name: &str) -> Builder {
        let dir = unique_dir(name);
        fs::create_dir(dir.join("root")).expect("create root");
        fs::write(dir.join("root/index.html"), INDEX_HTML).expect("write index");
        fs::write(dir.join("secret.txt"), SECRET).expect("write secret");
        Builder {
            model,
            dir,
            config: None,
            args: Vec::new(),
            nofile: None,
            echo: true,
            listen: true,
            wrapper: None,
        }
    }

    /// Runs `wrapper WEFT ARGS...` instead of `WEFT ARGS...` (a script that sets up a
    /// namespace, then execs weft: the process keeps its pid).
    pub fn wrapped(mut self, wrapper: &Path) -> Builder {
        self.wrapper = Some(wrapper.to_path_buf());
        self
    }

    /// Starts the server with the listener of its config (which must listen on 127.0.0.1,
    /// port 0, with the builder's model) instead of `--listen`.
    pub fn listen_from_config(mut self) -> Builder {
        self.listen = false;
        self
    }

    /// Starts the server without `--echo /echo` (the default a user's root gets).
    pub fn no_echo(mut self) -> Builder {
        self.echo = false;
        self
    }

    /// The test directory (the root is `dir()/root`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `contents` at `rel` under the document root, creating directories.
    pub fn file(self, rel: &str, contents: &[u8]) -> Builder {
        let p = self.dir.join("root").join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("create parent");
        }
        fs::write(p, contents).expect("write file");
        self
    }

    /// Creates an empty directory `rel` under the document root.
    pub fn mkdir(self, rel: &str) -> Builder {
        fs::create_dir_all(self.dir.join("root").join(rel)).expect("mkdir");
        self
    }

    /// Creates a symlink `rel` under the root pointing at `target` (taken as is).
    pub fn symlink(self, rel: &str, target: impl AsRef<Path>) -> Builder {
        std::os::unix::fs::symlink(target, self.dir.join("root").join(rel)).expect("symlink");
        self
    }

    /// Uses `toml` as the configuration file (`--root` and `--listen` still come from the
    /// command line).
    pub fn config(mut self, toml: &str) -> Builder {
        self.config = Some(toml.to_string());
        self
    }

    /// Starts the server with at most `n` open descriptors (soft and hard limit, so the
    /// server cannot raise it).
    pub fn nofile(mut self, n: u64) -> Builder {
        self.nofile = Some(n);
        self
    }

    /// Adds command-line arguments after `serve`.
    pub fn args(mut self, args: &[&str]) -> Builder {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// Starts the server and waits until it prints its address.
    pub fn start(self) -> Server {
        let mut launch = Launch::serve(&self.dir).owns_dir();
        if let Some(w) = &self.wrapper {
            // `serve` is the first argument: the weft path goes before it.
            launch = Launch::serve(&self.dir)
                .owns_dir()
                .exe(w)
                .pre_arg(crate::common::launch::exe());
        }
        if self.listen {
            launch = launch
                .arg("--listen")
                .arg(format!("127.0.0.1:0={}", self.model.name));
        }
        launch = launch
            .arg("--root")
            .arg(self.dir.join("root"))
            .args(self.model.args);
        if let Some(cfg) = &self.config {
            launch = launch.config(cfg);
        }
        let configures_echo = self.config.as_deref().is_some_and(|c| c.contains("[echo]"))
            || self.args.iter().any(|a| a == "--echo");
        if self.echo && !configures_echo {
            launch = launch.args(["--echo", "/echo"]);
        }
        launch = launch.args(&self.args);
        if let Some(n) = self.nofile {
            launch = launch.nofile(n);
        }
        let weft = launch.start();
        Server {
            model: self.model,
            addr: weft.addr_of("http"),
            weft,
        }
    }
}

/// A running black-box server (a [`Weft`], killed on drop), its model and its address.
#[derive(Debug)]
pub struct Server {
    weft: Weft,
    pub model: Model,
    pub addr: SocketAddr,
}

impl Deref for Server {
    type Target = Weft;

    fn deref(&self) -> &Weft {
        &self.weft
    }
}

impl DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Weft {
        &mut self.weft
    }
}

impl Server {
    /// Starts a server on `model` with the default configuration and the standard root.
    pub fn start(model: Model, name: &str) -> Server {
        Builder::new(model, name).start()
    }

    /// A new connection to the server.
    pub fn connect(&self) -> Conn {
        Conn::connect(self.addr)
    }

    /// Sends `raw` on a new connection and reads one response (for a request other than HEAD).
    pub fn send(&self, raw: &[u8]) -> Response {
        let mut c = self.connect();
        c.send(raw);
        c.read_response()
            .unwrap_or_else(|e| panic!("no response to {:?}: {e:?}", String::from_utf8_lossy(raw)))
    }

    /// `GET path` with `Connection: close` on a new connection.
    pub fn get(&self, path: &str) -> Response {
        self.send(
            format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
        )
    }

    /// Counter `name` of the response cache in `/_weft/status.json` (the server must serve
    /// it: `--status`).
    pub fn cache_counter(&self, name: &str) -> u64 {
        let r = self.get("/_weft/status.json");
        assert_eq!(r.status, 200, "{r:?}");
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("status.json is JSON");
        v["cache"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("no cache counter {name} in {v}"))
    }

    /// Asserts the server still answers a fresh client: `GET /` gives 200 and the index.
    #[track_caller]
    pub fn assert_alive(&self) {
        let r = self.get("/");
        assert_eq!(r.status, 200, "server no longer serves GET /: {r:?}");
        assert_eq!(r.body, INDEX_HTML);
    }
}

/// Every process on the machine as `/proc/*/stat` shows it: (pid, parent pid, state).
pub fn processes() -> Vec<(u32, u32, char)> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The command name may hold spaces and parentheses: the fields after it follow the
        // last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        if let Some(ppid) = f.next().and_then(|p| p.parse().ok()) {
            out.push((pid, ppid, state));
        }
    }
    out
}

/// Every process below `root` (pid → state), from `/proc/*/stat`.
pub fn descendants(root: u32) -> std::collections::HashMap<u32, String> {
    let parent: std::collections::HashMap<u32, (u32, char)> = processes()
        .into_iter()
        .map(|(pid, ppid, state)| (pid, (ppid, state)))
        .collect();
    let mut out = std::collections::HashMap::new();
    for (&pid, &(_, state)) in &parent {
        let mut p = pid;
        while let Some((pp, _)) = parent.get(&p) {
            if *pp == root {
                out.insert(pid, state.to_string());
                break;
            }
            p = *pp;
        }
    }
    out
}

/// Counts with `switches` over windows of `window` until one sees none or `within` has passed;
/// the count of each window tried (the last one 0 if a quiet window came). A server that
/// wakes on a timer shorter than the window never has a quiet one; one that sleeps has one
/// once what the test did has settled.
pub fn quiet_window(
    switches: impl Fn() -> u64,
    window: std::time::Duration,
    within: std::time::Duration,
) -> Vec<u64> {
    let end = std::time::Instant::now() + within;
    let mut windows = Vec::new();
    while std::time::Instant::now() < end && windows.last() != Some(&0) {
        let before = switches();
        std::thread::sleep(window);
        // Fewer than before: a thread or process ended in the window, so it was not quiet.
        windows.push(switches().checked_sub(before).unwrap_or(1));
    }
    windows
}

/// Context switches so far of every thread of process `pid` (0 once it is gone: a process or
/// thread that just ended counts nothing).
pub fn thread_switches(pid: u32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        })
        .sum()
}
