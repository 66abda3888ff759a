//! The response cache, black-box (issue 5): a file changed on disk is served fresh within
//! `cache.revalidate`, concurrent readers of an entry that is invalidated get a complete old or
//! new body, the cache stays within its byte bound, with the cache off nothing is counted, and
//! a response from the cache is the response sent from disk (HEAD, 304, 412, ranges, If-Range).
//!
//! Every observation of the cache goes through `/_weft/status.json` (`--status`). A file
//! changed less than a second ago (`cache::SETTLE`) is served from disk, not cached, so the
//! tests poll the `fills` counter until a file is in the cache instead of assuming it is.

/// The model every server of this binary is started with (the default one).
const MODEL: Model = Model::FIBER;

mod common;

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use common::{Builder, Conn, Model, Response, Server};

/// Longest wait for a file to settle and be cached (the settle time is 1 s).
const CACHE_DEADLINE: Duration = Duration::from_secs(10);
/// `cache.revalidate` of these tests.
const REVALIDATE: Duration = Duration::from_millis(200);
/// How much later than `REVALIDATE` a change may show: generous, for a loaded CI machine.
const FRESH_MARGIN: Duration = Duration::from_secs(3);

/// The `cache` object of `/_weft/status.json`.
fn cache_status(srv: &Server) -> serde_json::Value {
    let r = srv.get("/_weft/status.json");
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("status.json is JSON");
    v["cache"].clone()
}

/// One counter of the `cache` object.
fn counter(cache: &serde_json::Value, name: &str) -> u64 {
    cache[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name} in {cache}"))
}

/// Polls the status until `fills` exceeds `before` (a file was read into the cache).
fn wait_for_fill(srv: &Server, before: u64) {
    let deadline = Instant::now() + CACHE_DEADLINE;
    loop {
        let c = cache_status(srv);
        if counter(&c, "fills") > before {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nothing cached after {CACHE_DEADLINE:?}: {c}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// GETs `path` (whose file was just written: it cannot have been cached yet) until it is
/// read into the cache, then checks the next GET is a hit. Every body must be `body`.
fn wait_until_cached(srv: &Server, path: &str, body: &[u8]) {
    let fills = counter(&cache_status(srv), "fills");
    let deadline = Instant::now() + CACHE_DEADLINE;
    while counter(&cache_status(srv), "fills") == fills {
        let r = srv.get(path);
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body, body, "{path} served with the wrong body");
        assert!(
            Instant::now() < deadline,
            "{path} not cached after {CACHE_DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let hits = counter(&cache_status(srv), "hits");
    assert_eq!(srv.get(path).body, body);
    let c = cache_status(srv);
    assert!(
        counter(&c, "hits") > hits,
        "a GET of a just cached file was not a hit: {c}"
    );
}

/// Asserts a 200 response's validators describe its body: `Content-Length` and the size in
/// the `ETag` (`"<mtime hex>-<size hex>"`) are the body's length.
#[track_caller]
fn assert_consistent(r: &Response) {
    assert_eq!(r.status, 200, "{r:?}");
    let len = r.body.len();
    assert_eq!(r.header("Content-Length"), Some(len.to_string().as_str()));
    let etag = r.header("ETag").expect("ETag");
    assert!(
        etag.ends_with(&format!("-{len:x}\"")),
        "ETag {etag} does not describe a body of {len} bytes"
    );
}

/// GETs `path` until it answers `new`: every answer before must be exactly `old`, the change
/// must show within `REVALIDATE` + margin, and once `new` is served it stays.
fn assert_fresh_within_revalidate(srv: &Server, path: &str, old: &[u8], new: &[u8]) {
    let changed = Instant::now();
    loop {
        let r = srv.get(path);
        assert_consistent(&r);
        if r.body == new {
            break;
        }
        assert!(
            r.body == old,
            "{path}: a body that is neither the old nor the new file: {:?}",
            r.text()
        );
        assert!(
            changed.elapsed() < REVALIDATE + FRESH_MARGIN,
            "{path} still served stale {:?} after it changed (revalidate {REVALIDATE:?})",
            changed.elapsed()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..5 {
        let r = srv.get(path);
        assert_consistent(&r);
        assert_eq!(
            r.body, new,
            "{path}: the old body came back after the new one"
        );
    }
}

/// A server with `revalidate` at [`REVALIDATE`] and `page.txt` = `body` in its root, with
/// `page.txt` already in the cache.
fn server_with_cached_page(name: &str, body: &[u8]) -> Server {
    let srv = Builder::new(MODEL, name)
        .config(&format!(
            "[cache]\nrevalidate = \"{}ms\"\n",
            REVALIDATE.as_millis()
        ))
        .args(&["--status"])
        .file("page.txt", body)
        .start();
    wait_until_cached(&srv, "/page.txt", body);
    srv
}

fn page(srv: &Server) -> std::path::PathBuf {
    srv.dir().join("root/page.txt")
}

#[test]
fn a_file_rewritten_with_another_size_is_served_fresh_within_revalidate() {
    let old = b"version one\n";
    let new = b"version two, which is longer\n";
    let srv = server_with_cached_page("fresh-size", old);
    fs::write(page(&srv), new).unwrap();
    assert_fresh_within_revalidate(&srv, "/page.txt", old, new);
}

#[test]
fn a_file_rewritten_in_place_with_the_same_size_is_served_fresh_within_revalidate() {
    let old = b"version one\n";
    let new = b"version 2!!\n";
    assert_eq!(old.len(), new.len());
    let srv = server_with_cached_page("fresh-mtime", old);
    let before = fs::metadata(page(&srv)).unwrap();
    fs::write(page(&srv), new).unwrap();
    let after = fs::metadata(page(&srv)).unwrap();
    assert_eq!(
        (after.len(), std_ino(&after)),
        (before.len(), std_ino(&before)),
        "only the content and mtime may change"
    );
    assert_fresh_within_revalidate(&srv, "/page.txt", old, new);
}

#[test]
fn a_file_replaced_by_rename_is_served_fresh_within_revalidate() {
    let old = b"version one\n";
    let new = b"version 2!!\n";
    let srv = server_with_cached_page("fresh-inode", old);
    // Same size and same mtime as the cached file: only the inode (and ctime) tell them apart.
    let mtime = fs::metadata(page(&srv)).unwrap().modified().unwrap();
    let tmp = srv.dir().join("root/page.txt.tmp");
    fs::write(&tmp, new).unwrap();
    set_mtime(&tmp, mtime);
    fs::rename(&tmp, page(&srv)).unwrap();
    let m = fs::metadata(page(&srv)).unwrap();
    assert_eq!((m.len(), m.modified().unwrap()), (old.len() as u64, mtime));
    assert_fresh_within_revalidate(&srv, "/page.txt", old, new);
}

fn std_ino(m: &fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(m)
}

fn set_mtime(path: &Path, t: SystemTime) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// How the writer of the concurrent test replaces the file.
#[derive(Debug, Clone, Copy)]
enum Replace {
    /// A complete new file renamed over the old one (readers are never held back).
    Rename,
    /// Truncated and rewritten in place. A file being written in place is a mix of old and
    /// new bytes for any reader of the disk, so this waits for the requests in flight and
    /// holds new ones back for the few microseconds of the write (a lock the readers share).
    InPlace,
}

const READERS: usize = 64;

/// The two versions of the big file: different bytes and different sizes, so a body, its
/// length and its `ETag` each tell which version they belong to.
fn version(which: u8) -> Vec<u8> {
    match which {
        b'a' => vec![b'a'; 256 * 1024],
        _ => vec![b'b'; 256 * 1024 + 4096],
    }
}

/// Which version `r` carries (`a` or `b`), or why it is neither.
fn classify(r: &Response) -> Result<u8, String> {
    if r.status != 200 {
        return Err(format!("status {} {}", r.status, r.reason));
    }
    let first = *r.body.first().ok_or("an empty body")?;
    if !matches!(first, b'a' | b'b') || r.body != version(first) {
        let a = r.body.iter().filter(|&&b| b == b'a').count();
        return Err(format!(
            "a mixed or partial body: {} bytes, {a} of them 'a'",
            r.body.len()
        ));
    }
    let len = r.body.len();
    if r.header("Content-Length") != Some(len.to_string().as_str()) {
        return Err(format!("Content-Length {:?}", r.header("Content-Length")));
    }
    let etag = r.header("ETag").unwrap_or("");
    if !etag.ends_with(&format!("-{len:x}\"")) {
        return Err(format!("ETag {etag} with a body of {len} bytes"));
    }
    Ok(first)
}

/// One reader: GETs `/big.bin` on a keep-alive connection until `stop`; returns how many
/// responses carried each version and the first bad one.
fn reader(
    srv_addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    gate: Arc<RwLock<()>>,
) -> ([u64; 2], Option<String>) {
    let mut seen = [0u64; 2];
    let mut conn = Conn::connect(srv_addr);
    while !stop.load(Ordering::Relaxed) {
        let _in_flight = gate.read().unwrap();
        conn.send(b"GET /big.bin HTTP/1.1\r\nHost: test\r\n\r\n");
        let r = match conn.read_response() {
            Ok(r) => r,
            Err(e) => return (seen, Some(format!("no response: {e:?}"))),
        };
        match classify(&r) {
            Ok(v) => seen[usize::from(v - b'a')] += 1,
            Err(e) => return (seen, Some(e)),
        }
        if r.closes() {
            conn = Conn::connect(srv_addr);
        }
    }
    (seen, None)
}

#[test]
fn concurrent_readers_of_an_invalidated_entry_get_a_whole_old_or_new_body() {
    let srv = Builder::new(MODEL, "cache-readers")
        .config(&format!(
            "[cache]\nrevalidate = \"{}ms\"\n",
            REVALIDATE.as_millis()
        ))
        .args(&["--status"])
        .file("big.bin", &version(b'a'))
        .start();
    wait_until_cached(&srv, "/big.bin", &version(b'a'));

    let stop = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(RwLock::new(()));
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (stop, gate, addr) = (stop.clone(), gate.clone(), srv.addr);
            std::thread::spawn(move || reader(addr, stop, gate))
        })
        .collect();

    let path = srv.dir().join("root/big.bin");
    let tmp = srv.dir().join("root/big.bin.tmp");
    let mut current = b'a';
    for replace in [Replace::Rename, Replace::InPlace] {
        // Readers are being served the cached entry: replace the file under them.
        let c = cache_status(&srv);
        let (hits, fills) = (counter(&c, "hits"), counter(&c, "fills"));
        let deadline = Instant::now() + CACHE_DEADLINE;
        while counter(&cache_status(&srv), "hits") < hits + READERS as u64 {
            assert!(Instant::now() < deadline, "readers get no cache hits");
            std::thread::sleep(Duration::from_millis(10));
        }
        let next = if current == b'a' { b'b' } else { b'a' };
        match replace {
            Replace::Rename => {
                fs::write(&tmp, version(next)).unwrap();
                fs::rename(&tmp, &path).unwrap();
            }
            Replace::InPlace => {
                let _writing = gate.write().unwrap();
                fs::write(&path, version(next)).unwrap();
            }
        }
        current = next;
        // Once settled (a second after the change), the readers read the new version into
        // the cache; from then on it is what every GET gets.
        wait_for_fill(&srv, fills);
        let r = srv.get("/big.bin");
        assert_eq!(
            classify(&r),
            Ok(current),
            "after the new version was cached"
        );
    }
    stop.store(true, Ordering::Relaxed);

    let mut total = [0u64; 2];
    for (i, t) in readers.into_iter().enumerate() {
        let (seen, err) = t.join().expect("reader panicked");
        if let Some(e) = err {
            panic!(
                "reader {i}, after {} 'a' and {} 'b' bodies: {e}",
                seen[0], seen[1]
            );
        }
        total[0] += seen[0];
        total[1] += seen[1];
    }
    assert!(
        total[0] > 0 && total[1] > 0,
        "both versions must have been served: {total:?}"
    );
    let c = cache_status(&srv);
    eprintln!("bodies served: {total:?}; cache: {c}");
    assert!(counter(&c, "fills") >= 3, "{c}");
}

/// A server whose cache holds at most `max_bytes`, objects up to `max_object`.
fn bounded_server(
    name: &str,
    max_bytes: u64,
    max_object: u64,
    files: &[(String, Vec<u8>)],
) -> Server {
    let mut b = Builder::new(MODEL, name)
        .config(&format!(
            "[cache]\nmax_bytes = {max_bytes}\nmax_object_bytes = {max_object}\n"
        ))
        .args(&["--status"]);
    for (name, body) in files {
        b = b.file(name, body);
    }
    b.start()
}

/// Requests `count` distinct files of `size` bytes, three times over, from a cache of
/// `max_bytes` (objects up to `max_object`), checking the bound after every response.
fn assert_bound_holds(name: &str, max_bytes: u64, max_object: u64, size: usize, count: usize) {
    let files: Vec<(String, Vec<u8>)> = (0..count)
        .map(|i| (format!("f{i:03}.bin"), vec![b'0' + (i % 10) as u8; size]))
        .collect();
    assert!((size * count) as u64 > 2 * max_bytes);
    let srv = bounded_server(name, max_bytes, max_object, &files);
    // Files are written in order: once the last one is cached, every one has settled (writing
    // hundreds of files on a loaded machine can take longer than the settle time).
    let (last, last_body) = files.last().unwrap();
    wait_until_cached(&srv, &format!("/{last}"), last_body);
    let mut largest = 0;
    for round in 0..3 {
        for (name, body) in &files {
            let r = srv.get(&format!("/{name}"));
            assert_consistent(&r);
            assert_eq!(&r.body, body, "{name}, round {round}");
            let c = cache_status(&srv);
            assert_eq!(counter(&c, "max_bytes"), max_bytes);
            let bytes = counter(&c, "bytes");
            assert!(bytes <= max_bytes, "the cache holds {bytes} bytes: {c}");
            largest = largest.max(bytes);
        }
    }
    let c = cache_status(&srv);
    assert!(counter(&c, "evictions") > 0, "{c}");
    assert!(counter(&c, "fills") > count as u64 / 2, "{c}");
    assert!(
        largest > max_bytes / 2,
        "the cache was never even half full: {largest} of {max_bytes}: {c}"
    );
}

#[test]
fn the_cache_stays_within_max_bytes_and_evicts() {
    // Objects nearly as large as the cache allows: few shards.
    assert_bound_holds("cache-bound-large", 64 * 1024, 16 * 1024, 8 * 1024, 40);
}

#[test]
fn the_cache_stays_within_max_bytes_with_many_small_objects() {
    // Small objects: the most shards, each a small part of the bound.
    assert_bound_holds("cache-bound-small", 256 * 1024, 8 * 1024, 1000, 600);
}

#[test]
fn a_file_larger_than_max_object_bytes_is_never_cached() {
    let small = vec![b's'; 1000];
    let big = vec![b'B'; 20 * 1024];
    let files = vec![
        ("big.bin".to_string(), big.clone()),
        ("small.bin".to_string(), small.clone()),
    ];
    let srv = bounded_server("cache-max-object", 1 << 20, 16 * 1024, &files);
    // Once the small file is cached, the big one (written before it) has settled too.
    wait_until_cached(&srv, "/small.bin", &small);
    let before = cache_status(&srv);
    for _ in 0..5 {
        let r = srv.get("/big.bin");
        assert_consistent(&r);
        assert_eq!(r.body, big);
    }
    let after = cache_status(&srv);
    for name in ["fills", "bytes", "entries", "hits"] {
        assert_eq!(
            counter(&before, name),
            counter(&after, name),
            "{name}: {before} then {after}"
        );
    }
    assert_eq!(
        counter(&after, "misses"),
        counter(&before, "misses") + 5,
        "{before} then {after}"
    );
    // Ranges and HEAD of the uncached file come from disk.
    let r = srv.send(
        b"GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=10-19\r\nConnection: close\r\n\r\n",
    );
    assert_eq!((r.status, r.body.as_slice()), (206, &big[10..20]));
}

/// Serves a few files every way (200, range, HEAD, 304, a change) with the cache off and
/// checks the status shows no cache.
fn assert_served_without_cache(mut srv: Server) {
    let body = b"not cached\n".repeat(100);
    fs::write(srv.dir().join("root/a.txt"), &body).unwrap();
    for _ in 0..3 {
        let r = srv.get("/a.txt");
        assert_consistent(&r);
        assert_eq!(r.body, body);
    }
    let r = srv.get("/a.txt");
    let etag = r.header("ETag").unwrap().to_string();
    let r = srv.send(
        format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: {etag}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 304, "{r:?}");
    let r = srv
        .send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-9\r\nConnection: close\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (206, &body[..10]));
    let mut c = srv.connect();
    c.send(b"HEAD /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = c.read_head_response().unwrap();
    assert_eq!(
        r.header("Content-Length"),
        Some(body.len().to_string().as_str())
    );
    assert!(c.closed_within(Duration::from_secs(5)), "HEAD sent a body");
    // Without a cache a change shows at once.
    fs::write(srv.dir().join("root/a.txt"), b"changed\n").unwrap();
    assert_eq!(srv.get("/a.txt").body, b"changed\n");

    let status = srv.get("/_weft/status.json");
    let v: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
    assert_eq!(v["cache"], serde_json::json!({ "enabled": false }), "{v}");
    let metrics = srv.get("/_weft/metrics").text();
    assert!(
        !metrics.contains("weft_cache_"),
        "cache metrics with the cache off:\n{metrics}"
    );
    srv.assert_alive();
    srv.signal(libc::SIGTERM);
    let exit = srv.wait_exit(Duration::from_secs(5)).expect("no exit");
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn cache_off_on_the_command_line_counts_nothing_and_serves_files() {
    let srv = Builder::new(MODEL, "cache-off-cli")
        .args(&["--status", "--cache", "off"])
        .start();
    assert_served_without_cache(srv);
}

#[test]
fn cache_off_in_the_config_counts_nothing_and_serves_files() {
    let srv = Builder::new(MODEL, "cache-off-config")
        .config("[cache]\nenabled = false\n")
        .args(&["--status"])
        .start();
    assert_served_without_cache(srv);
}

/// Requests whose answers must not depend on where the body came from, each followed on the
/// same connection by a GET that closes it (so a HEAD or 304 that sent a body shows up).
const SAME_ANSWERS: &[(&str, &str)] = &[
    ("GET", "/page.html HTTP/1.1\r\n"),
    ("HEAD", "/page.html HTTP/1.1\r\n"),
    ("GET", "/page.html HTTP/1.0\r\n"),
    ("GET", "/page.html HTTP/1.0\r\nConnection: keep-alive\r\n"),
    ("GET", "/page.html HTTP/1.1\r\nConnection: close\r\n"),
    ("GET", "/page.html HTTP/1.1\r\nIf-None-Match: ETAG\r\n"),
    ("GET", "/page.html HTTP/1.1\r\nIf-None-Match: \"other\"\r\n"),
    (
        "GET",
        "/page.html HTTP/1.1\r\nIf-Modified-Since: LASTMOD\r\n",
    ),
    ("HEAD", "/page.html HTTP/1.1\r\nIf-None-Match: ETAG\r\n"),
    ("GET", "/page.html HTTP/1.1\r\nRange: bytes=5-9\r\n"),
    ("GET", "/page.html HTTP/1.1\r\nRange: bytes=-7\r\n"),
    ("GET", "/page.html HTTP/1.1\r\nRange: bytes=100-\r\n"),
    ("GET", "/page.html HTTP/1.1\r\nRange: bytes=99999-\r\n"),
    ("HEAD", "/page.html HTTP/1.1\r\nRange: bytes=5-9\r\n"),
    (
        "GET",
        "/page.html HTTP/1.1\r\nRange: bytes=5-9\r\nIf-Range: ETAG\r\n",
    ),
    (
        "GET",
        "/page.html HTTP/1.1\r\nRange: bytes=5-9\r\nIf-Range: \"other\"\r\n",
    ),
    (
        "GET",
        "/page.html HTTP/1.1\r\nRange: bytes=5-9\r\nIf-Range: LASTMOD\r\n",
    ),
    ("GET", "/dir/ HTTP/1.1\r\n"),
    ("HEAD", "/dir/ HTTP/1.1\r\n"),
    ("GET", "/dir/ HTTP/1.1\r\nIf-None-Match: DIRETAG\r\n"),
    ("GET", "/dir HTTP/1.1\r\n"),
    ("GET", "/page.html/ HTTP/1.1\r\n"),
    ("OPTIONS", "/page.html HTTP/1.1\r\n"),
];

/// Conditional requests (RFC 9110 §13.2.2) and the status each must get, from disk and from
/// the cache alike.
const PRECONDITIONS: &[(&str, &str, u16)] = &[
    ("GET", "/page.html HTTP/1.1\r\nIf-Match: ETAG\r\n", 200),
    ("GET", "/page.html HTTP/1.1\r\nIf-Match: *\r\n", 200),
    ("GET", "/page.html HTTP/1.1\r\nIf-Match: \"nope\"\r\n", 412),
    ("HEAD", "/page.html HTTP/1.1\r\nIf-Match: W/ETAG\r\n", 412),
    (
        "GET",
        "/page.html HTTP/1.1\r\nIf-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n",
        412,
    ),
    (
        "GET",
        "/page.html HTTP/1.1\r\nIf-Unmodified-Since: LASTMOD\r\n",
        200,
    ),
    (
        "GET",
        "/page.html HTTP/1.1\r\nIf-Match: ETAG\r\nIf-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n",
        200,
    ),
    (
        "GET",
        "/page.html HTTP/1.1\r\nIf-Match: \"x\"\r\nIf-None-Match: ETAG\r\n",
        412,
    ),
    ("GET", "/page.html HTTP/1.1\r\nIf-None-Match: W/ETAG\r\n", 304),
    (
        "GET",
        "/page.html HTTP/1.1\r\nIf-None-Match: \"x\"\r\nIf-Modified-Since: LASTMOD\r\n",
        200,
    ),
    (
        "GET",
        "/page.html HTTP/1.1\r\nRange: bytes=5-9\r\nIf-Range: W/ETAG\r\n",
        200,
    ),
    (
        "GET",
        "/page.html HTTP/1.1\r\nRange: bytes=5-9\r\nIf-Match: ETAG\r\n",
        206,
    ),
    ("GET", "/dir/ HTTP/1.1\r\nIf-Match: \"nope\"\r\n", 412),
    ("GET", "/dir/ HTTP/1.1\r\nIf-Match: DIRETAG\r\n", 200),
    ("DELETE", "/page.html HTTP/1.1\r\nIf-Match: \"nope\"\r\n", 405),
];

/// A response without `Date`, its fields sorted: what must be equal with and without cache.
fn comparable(r: &Response) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut h: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("Date"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    h.sort();
    (r.status, h, r.body.clone())
}

/// Sends `method target extra-fields` then a closing GET; returns both answers.
fn exchange(srv: &Server, method: &str, rest: &str, subst: &[(&str, String)]) -> Vec<Response> {
    let mut rest = rest.to_string();
    for (from, to) in subst {
        rest = rest.replace(from, to);
    }
    let mut c = srv.connect();
    let raw = format!(
        "{method} {rest}Host: t\r\n\r\nGET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    );
    c.send(raw.as_bytes());
    let first = c
        .read_response_for(method == "HEAD")
        .unwrap_or_else(|e| panic!("{method} {rest}: {e:?}"));
    let mut out = vec![first];
    if !out[0].closes() {
        let second = c
            .read_response()
            .unwrap_or_else(|e| panic!("after {method} {rest}: {e:?}"));
        assert_eq!(second.body, common::INDEX_HTML, "after {method} {rest}");
        out.push(second);
    }
    assert!(c.closed_within(Duration::from_secs(5)), "{method} {rest}");
    out
}

#[test]
fn cached_responses_are_the_responses_sent_from_disk() {
    let body: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
    let index = b"<p>the directory's index</p>\n";
    // Two servers on identical roots (same bytes, same mtime): one without a cache, one with
    // every file in it.
    let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let start = |name: &str, args: &[&str]| {
        let b = Builder::new(MODEL, name)
            .args(args)
            .file("page.html", &body)
            .file("dir/index.html", index);
        set_mtime(&b.dir().join("root/page.html"), mtime);
        set_mtime(&b.dir().join("root/dir/index.html"), mtime);
        set_mtime(&b.dir().join("root/index.html"), mtime);
        b.start()
    };
    let disk = start("answers-disk", &["--cache", "off"]);
    let cached = start("answers-cached", &["--status"]);
    wait_until_cached(&cached, "/page.html", &body);
    wait_until_cached(&cached, "/dir/", index);

    let page = disk.get("/page.html");
    let dir = disk.get("/dir/");
    let subst = [
        ("DIRETAG", dir.header("ETag").unwrap().to_string()),
        ("ETAG", page.header("ETag").unwrap().to_string()),
        ("LASTMOD", page.header("Last-Modified").unwrap().to_string()),
    ];
    let hits = counter(&cache_status(&cached), "hits");
    for (method, rest) in SAME_ANSWERS {
        let want = exchange(&disk, method, rest, &subst);
        let got = exchange(&cached, method, rest, &subst);
        assert_eq!(
            want.iter().map(comparable).collect::<Vec<_>>(),
            got.iter().map(comparable).collect::<Vec<_>>(),
            "{method} {rest}: from disk (left) and from the cache (right)"
        );
        assert!(
            got.iter().all(|r| r.header("Date").is_some()),
            "{method} {rest}: no Date: {got:?}"
        );
    }
    for (method, rest, status) in PRECONDITIONS {
        let want = exchange(&disk, method, rest, &subst);
        let got = exchange(&cached, method, rest, &subst);
        assert_eq!(want[0].status, *status, "{method} {rest}: {:?}", want[0]);
        assert_eq!(
            want.iter().map(comparable).collect::<Vec<_>>(),
            got.iter().map(comparable).collect::<Vec<_>>(),
            "{method} {rest}: from disk (left) and from the cache (right)"
        );
    }
    let c = cache_status(&cached);
    assert!(
        counter(&c, "hits") >= hits + 15 + PRECONDITIONS.len() as u64 - 1,
        "the requests were not answered from the cache: {c}"
    );
}

/// Regression: quick_cache admits no item heavier than its hot section (97% of a shard) and
/// reports the refusal as an eviction. A file under `max_object_bytes` but over that share was
/// read into memory on every request, counted as a fill and an eviction, and never kept.
#[test]
fn a_file_the_cache_cannot_keep_is_not_read_filled_or_evicted_on_every_request() {
    let small = vec![b's'; 100];
    let big = vec![b'B'; 98_000];
    let files = vec![
        ("big.bin".to_string(), big.clone()),
        ("small.bin".to_string(), small.clone()),
    ];
    let srv = bounded_server("cache-refused", 100_000, 100_000, &files);
    wait_until_cached(&srv, "/small.bin", &small);
    let before = cache_status(&srv);
    for _ in 0..4 {
        let r = srv.get("/big.bin");
        assert_consistent(&r);
        assert_eq!(r.body, big);
    }
    let after = cache_status(&srv);
    let kept = counter(&after, "entries") > counter(&before, "entries");
    if kept {
        // Admitted after all: then it is answered from the cache.
        assert_eq!(counter(&after, "fills"), counter(&before, "fills") + 1);
        assert!(counter(&after, "hits") >= counter(&before, "hits") + 3);
    } else {
        for name in ["fills", "evictions", "hits"] {
            assert_eq!(
                counter(&before, name),
                counter(&after, name),
                "{name}: {before} then {after}"
            );
        }
        assert_eq!(counter(&after, "misses"), counter(&before, "misses") + 4);
    }
    assert!(counter(&after, "bytes") <= 100_000, "{after}");
}

/// A request for a file that does not exist is neither a hit nor a miss: once `/` is cached,
/// 49 requests for it and 50 for `/nope` count 49 hits and no miss; before that, each `/`
/// served from the file counted a miss.
#[test]
fn a_404_is_not_counted_as_a_cache_miss() {
    let srv = Builder::new(MODEL, "cache-404").args(&["--status"]).start();
    let index = srv.get("/").body;
    wait_until_cached(&srv, "/", &index);
    let before = cache_status(&srv);
    assert!(counter(&before, "misses") >= 1, "{before}");
    for _ in 0..49 {
        assert_eq!(srv.get("/").status, 200);
    }
    for _ in 0..50 {
        assert_eq!(srv.get("/nope").status, 404);
    }
    let after = cache_status(&srv);
    let delta = |name: &str| counter(&after, name) - counter(&before, name);
    assert_eq!(
        (delta("hits"), delta("misses")),
        (49, 0),
        "{before} {after}"
    );
}
