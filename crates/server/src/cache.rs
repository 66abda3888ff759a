//! The response cache of static files, shared by every connection of every model in a process.
//!
//! An entry is a whole `200` response: its head, encoded once except for `Date` (spliced in at
//! send time) and `Connection`, and its body. Both are reference counted (`Arc`, `Bytes`), so
//! any number of connections send one entry at once without copying it, and an entry that is
//! replaced or evicted while being sent stays valid until its last sender drops it (the
//! paper's "cache v2"). Ranges are slices of the cached body; 304 and HEAD answers come from
//! the entry's validators without touching the file.
//!
//! Promises:
//! - the entries' weight (body + head + key + a fixed overhead) never exceeds `max_bytes`, and
//!   no file larger than `max_object_bytes` is cached;
//! - a file changed on disk (inode, size, mtime or ctime) is served stale for at most
//!   `revalidate`: an entry is served without a system call while it was checked less than
//!   `revalidate` ago, then the next request re-opens and `fstat`s the file once;
//! - a file changed less than [`SETTLE`] before it would be cached is not cached (served from
//!   disk), so an edit within the file system's timestamp granularity cannot leave a stale
//!   entry whose metadata still matches ("racy" files, as git calls them);
//! - a file that changed while it was being read into the cache is not cached.
//!
//! Compressed variants (`[compression]`, `compress.rs`) are entries of their own, keyed by the
//! file's key, a NUL (which no request path holds) and the coding's name: a variant made from
//! the identity entry's body ([`ResponseCache::insert_variant`]) counts as a `compression`,
//! one read from a precompressed sibling file ([`ResponseCache::fill_sibling`]) as a fill. The
//! same byte bound covers them; a variant made from an identity entry is served only while its
//! file identity matches that entry's, so it is never staler than the identity entry.
//!
//! Admission and eviction: quick_cache's S3-FIFO with a byte weigher (no background threads).
//! In the `process` model each child has its own cache, empty at fork and gone at exit; the
//! hit, miss and eviction counters are shared by all processes, the byte and entry gauges are
//! those of the process that answers the status request.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use weft_http::encoding::Coding;
use weft_http::response as enc;

use crate::config::CacheConfig;
use weft_sys::shm::{AtomicsOnly, Shared};

/// A file whose ctime is less than this before now is not cached: its timestamps may not yet
/// tell a further write apart (coarse file-system clocks tick every few milliseconds).
pub const SETTLE: Duration = Duration::from_secs(1);
/// Bytes an entry is charged beyond its body, head and key (the entry, the map slot).
const ENTRY_OVERHEAD: u64 = 256;
/// quick_cache's share of a shard for its hot section (its default, set explicitly because it
/// also bounds what is admitted: an item heavier than this share of a shard is refused).
const HOT_ALLOCATION: f64 = 0.97;

/// What the static-file handler needs to answer conditional and range requests.
// Reached from the public API only through `Body::Prepared`, which is hidden: only the cache
// builds it.
#[allow(unnameable_types)]
#[derive(Debug, Clone)]
pub struct Validators {
    pub size: u64,
    /// Modification time, whole seconds (the resolution of `Last-Modified`).
    pub mtime: u64,
    pub etag: String,
    pub last_modified: [u8; weft_http::date::DATE_LEN],
    pub content_type: &'static str,
}

impl Validators {
    /// The validators of a file with metadata `meta` and MIME type `content_type`.
    pub fn new(meta: &std::fs::Metadata, content_type: &'static str) -> Validators {
        let size = meta.len();
        let mtime = meta.mtime().max(0) as u64;
        // nginx's form (mtime-size) with the nanoseconds of the mtime added, so a same-size
        // change within one second still changes the tag on file systems that keep them.
        let nsec = meta.mtime_nsec().clamp(0, 999_999_999);
        Validators {
            size,
            mtime,
            etag: format!("\"{mtime:x}.{nsec:x}-{size:x}\""),
            last_modified: weft_http::date::format(UNIX_EPOCH + Duration::from_secs(mtime)),
            content_type,
        }
    }
}

/// What identifies one version of a file: any change to its content changes one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// One cached response.
// Reached from the public API only through the hidden `Body::Prepared` (see `Validators`).
#[allow(unnameable_types)]
#[derive(Debug)]
pub struct Entry {
    /// Header fields after `Date`, each ending in CRLF, `Content-Length` last; no blank line.
    fields: Box<[u8]>,
    body: Bytes,
    validators: Validators,
    /// The file that was read, relative to the root (the index file for a directory).
    file_rel: Box<[u8]>,
    identity: Identity,
    /// When the entry was last checked against the file, ms of the coarse monotonic clock.
    checked: AtomicU64,
    /// Codings known to have no variant of this entry (a bit per `Coding`), so that a client
    /// asking for one does not look for a sibling file again until the next revalidation.
    absent: std::sync::atomic::AtomicU8,
    /// `fields` as an HTTP/2 header block (HPACK without a dynamic table, so one encoding
    /// serves every connection), made the first time an HTTP/2 client asks.
    h2_block: std::sync::OnceLock<Box<[u8]>>,
}

impl Entry {
    /// [`Entry::fields`] HPACK-encoded for HTTP/2 (names in lower case, none of the
    /// connection-specific ones), made once.
    pub fn h2_block(&self) -> &[u8] {
        self.h2_block.get_or_init(|| {
            let mut enc = weft_http::h2::hpack::Encoder::new();
            let mut out = Vec::new();
            let mut name = Vec::new();
            for (n, v) in self.header_fields() {
                name.clear();
                name.extend(n.iter().map(u8::to_ascii_lowercase));
                enc.field(&name, v, &mut out);
            }
            out.into_boxed_slice()
        })
    }

    /// Header fields after `Date` (`Last-Modified` … `Content-Length`), each ending in CRLF.
    pub fn fields(&self) -> &[u8] {
        &self.fields
    }

    /// The head's fields as (name, value) pairs, `Content-Length` included: [`Entry::fields`]
    /// read back (the cache wrote them, one `Name: value` line each).
    pub fn header_fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.split(|&b| b == b'\n').filter_map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let colon = line.iter().position(|&b| b == b':')?;
            Some((&line[..colon], line[colon + 1..].trim_ascii()))
        })
    }

    /// The whole body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Validators for conditional and range requests.
    pub fn validators(&self) -> &Validators {
        &self.validators
    }

    /// The file the entry was read from, relative to the document root.
    pub fn file_rel(&self) -> &[u8] {
        &self.file_rel
    }

    /// True if `coding` was found to have no variant of this entry (since its last check).
    pub fn variant_absent(&self, coding: Coding) -> bool {
        self.absent.load(Relaxed) & coding_bit(coding) != 0
    }

    /// Remembers that `coding` has no variant of this entry.
    pub fn mark_variant_absent(&self, coding: Coding) {
        self.absent.fetch_or(coding_bit(coding), Relaxed);
    }

    /// True if `variant` was made from this entry's version of its file.
    pub fn same_file_version(&self, variant: &Entry) -> bool {
        self.identity == variant.identity && self.file_rel == variant.file_rel
    }

    fn weight(&self, key: &[u8]) -> u64 {
        self.body.len() as u64 + self.fields.len() as u64 + key.len() as u64 + ENTRY_OVERHEAD
    }
}

/// Hits, misses and evictions: in shared memory, so the `process` model's children add up.
#[derive(Debug)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
    /// Files read into the cache.
    fills: AtomicU64,
    /// Compressed variants made from identity entries.
    compressions: AtomicU64,
    /// Requests answered from a compressed variant.
    variant_hits: AtomicU64,
}

// SAFETY: only AtomicU64 fields; all zero is every counter at 0.
unsafe impl AtomicsOnly for Counters {}

#[derive(Clone)]
struct Weigh;

impl quick_cache::Weighter<Box<[u8]>, Arc<Entry>> for Weigh {
    fn weight(&self, key: &Box<[u8]>, val: &Arc<Entry>) -> u64 {
        val.weight(key)
    }
}

/// Counts evictions (quick_cache reports them here, outside its shard lock).
#[derive(Clone)]
struct Evictions(Arc<Shared<Counters>>);

impl quick_cache::Lifecycle<Box<[u8]>, Arc<Entry>> for Evictions {
    type RequestState = ();
    fn on_evict(&self, _: &mut (), _key: Box<[u8]>, _val: Arc<Entry>) {
        self.0.evictions.fetch_add(1, Relaxed);
    }
}

type Map = quick_cache::sync::Cache<Box<[u8]>, Arc<Entry>, Weigh, KeyHash, Evictions>;

/// The cache's hash of its keys (request paths): a folded multiply over 16 bytes a step with
/// two random 64-bit keys drawn once per cache (from std's `RandomState`, so the table's
/// layout is not predictable from outside), about a tenth of SipHash-1-3's work on a
/// 10-30-byte path. A key only enters the table once its file was found, so a client cannot
/// fill it with colliding keys; the random keys keep even that from being planned.
#[derive(Clone)]
struct KeyHash {
    k0: u64,
    k1: u64,
}

impl Default for KeyHash {
    fn default() -> KeyHash {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new();
        KeyHash {
            k0: seed.hash_one(0x243f_6a88_85a3_08d3_u64) | 1,
            k1: seed.hash_one(0x1319_8a2e_0370_7344_u64),
        }
    }
}

impl std::hash::BuildHasher for KeyHash {
    type Hasher = KeyHasher;
    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            acc: self.k0,
            k1: self.k1,
        }
    }
}

/// [`KeyHash`]'s hasher.
struct KeyHasher {
    acc: u64,
    k1: u64,
}

/// The 128-bit product of `a` and `b`, its halves xored: every input bit reaches the output.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

impl KeyHasher {
    #[inline]
    fn mix(&mut self, a: u64, b: u64) {
        self.acc = fold(a ^ self.acc, b ^ self.k1);
    }
}

impl std::hash::Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let half = |at: usize| {
            u64::from(u32::from_le_bytes(
                bytes[at..at + 4].try_into().expect("4 bytes"),
            ))
        };
        if n <= 16 {
            let (a, b) = if n >= 8 {
                (word(0), word(n - 8))
            } else if n >= 4 {
                (half(0), half(n - 4))
            } else if n > 0 {
                (
                    u64::from(bytes[0]) << 16
                        | u64::from(bytes[n / 2]) << 8
                        | u64::from(bytes[n - 1]),
                    0,
                )
            } else {
                (0, 0)
            };
            self.mix(a, b ^ n as u64);
            return;
        }
        let mut at = 0;
        while n - at > 16 {
            self.mix(word(at), word(at + 8));
            at += 16;
        }
        // The last 16 bytes (overlapping the previous step where `n` is not a multiple of 16).
        self.mix(word(n - 16), word(n - 8) ^ n as u64);
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.mix(x, 0);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.mix(x as u64, 0);
    }

    #[inline]
    fn finish(&self) -> u64 {
        fold(self.acc, self.k1 ^ 0x9e37_79b9_7f4a_7c15)
    }
}

/// A snapshot of the cache's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub fills: u64,
    /// Compressed variants made from identity entries (a hot file: once).
    pub compressions: u64,
    /// Requests answered from a compressed variant (the lookup of their identity entry, which
    /// comes first, counts in `hits` as well).
    pub variant_hits: u64,
    /// Weight of the entries now held (bytes).
    pub bytes: u64,
    pub entries: u64,
    pub max_bytes: u64,
    pub max_object_bytes: u64,
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// Checked against the file less than `revalidate` ago: serve it.
    Fresh(Arc<Entry>),
    /// Present but due for a check: [`ResponseCache::revalidate`] with the file's metadata.
    Stale(Arc<Entry>),
    Miss,
}

/// The cache.
pub struct ResponseCache {
    map: Map,
    /// Off in a `process`-model connection process: it would fill entries only to exit.
    fills_enabled: std::sync::atomic::AtomicBool,
    counters: Arc<Shared<Counters>>,
    max_bytes: u64,
    max_object_bytes: u64,
    /// The heaviest entry quick_cache admits (the hot share of one shard).
    max_weight: u64,
    revalidate_ms: u64,
    /// The coarse clock's resolution: an age is known to within one tick, so an entry counts
    /// as fresh only while its age plus a tick is under `revalidate_ms`.
    tick_ms: u64,
}

impl std::fmt::Debug for ResponseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseCache")
            .field("stats", &self.stats())
            .finish()
    }
}

impl ResponseCache {
    /// A cache with `cfg`'s bounds.
    pub fn new(cfg: &CacheConfig) -> ResponseCache {
        let max_bytes = cfg.max_bytes.max(1);
        let max_object_bytes = cfg.max_object_bytes.min(max_bytes);
        // quick_cache splits the capacity evenly over its shards and refuses an item heavier
        // than one shard: keep every shard able to hold the largest object (with its head).
        let per_object = max_object_bytes + 4096 + ENTRY_OVERHEAD;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut shards = (cores * 4).next_power_of_two();
        while shards > 1 && hot_share(max_bytes / shards as u64) <= per_object {
            shards /= 2;
        }
        let estimated_items = usize::try_from(max_bytes / 16384)
            .unwrap_or(usize::MAX)
            .max(64);
        let counters = Arc::new(Shared::<Counters>::new());
        let options = quick_cache::OptionsBuilder::new()
            .shards(shards)
            .estimated_items_capacity(estimated_items)
            // quick_cache rounds a shard's capacity up: a multiple of the shards keeps the
            // shards together within max_bytes.
            .weight_capacity(max_bytes / shards as u64 * shards as u64)
            .hot_allocation(HOT_ALLOCATION)
            .build()
            .expect("every option is set");
        let map = Map::with_options(
            options,
            Weigh,
            Default::default(),
            Evictions(counters.clone()),
        );
        let max_weight = hot_share(map.shard_capacity());
        ResponseCache {
            map,
            fills_enabled: std::sync::atomic::AtomicBool::new(true),
            counters,
            max_bytes,
            max_object_bytes,
            max_weight,
            revalidate_ms: u64::try_from(cfg.revalidate.as_millis()).unwrap_or(u64::MAX),
            tick_ms: weft_sys::clock::coarse_monotonic_resolution_ms(),
        }
    }

    fn now_ms(&self) -> u64 {
        weft_sys::clock::coarse_monotonic_ms()
    }

    /// Looks `key` up. A hit is counted once the entry is known to be current; a miss by the
    /// caller once it knows a file answers ([`Self::count_miss`]): a request for a file that
    /// does not exist (a 404) is neither.
    pub fn lookup(&self, key: &[u8]) -> Lookup {
        match self.map.get(key) {
            Some(e) => {
                let age = self.now_ms().saturating_sub(e.checked.load(Relaxed));
                if age + self.tick_ms < self.revalidate_ms {
                    self.counters.hits.fetch_add(1, Relaxed);
                    Lookup::Fresh(e)
                } else {
                    Lookup::Stale(e)
                }
            }
            None => Lookup::Miss,
        }
    }

    /// Counts a miss: a file answered that the cache did not hold.
    pub fn count_miss(&self) {
        self.counters.misses.fetch_add(1, Relaxed);
    }

    /// Stops (or resumes) reading files into the cache: lookups still answer from what it
    /// holds. A `process`-model connection process turns fills off: it serves one connection
    /// and exits, so an entry it filled would be read from disk, copied and dropped unused —
    /// dearer than `sendfile` (BENCHMARKS.md, the threads-vs-processes experiment).
    pub fn set_fills(&self, on: bool) {
        self.fills_enabled.store(on, Relaxed);
    }

    /// Checks a stale entry against the file's current metadata. True: unchanged, the entry
    /// is fresh again (counted as a hit). False: the entry is dropped (a miss); senders still
    /// holding it finish with the old bytes.
    pub fn revalidate(&self, key: &[u8], entry: &Arc<Entry>, meta: &std::fs::Metadata) -> bool {
        if meta.is_file() && Identity::of(meta) == entry.identity {
            entry.checked.store(self.now_ms(), Relaxed);
            // A sibling file may have appeared since: look again on demand.
            entry.absent.store(0, Relaxed);
            self.counters.hits.fetch_add(1, Relaxed);
            return true;
        }
        self.forget(key, entry);
        false
    }

    /// Drops `key`'s entry if it is still `entry` (a miss: the file went away or changed).
    pub fn forget(&self, key: &[u8], entry: &Arc<Entry>) {
        self.counters.misses.fetch_add(1, Relaxed);
        self.map.remove_if(key, |v| Arc::ptr_eq(v, entry));
    }

    /// Reads `file` (opened as `file_rel`, metadata `meta`) into a new entry for `key`, or
    /// `None` if it must not be cached (too large, not settled, changed while being read);
    /// then the caller serves it from the file. The server fills with [`Self::fill_with`]
    /// and [`Self::fill_sibling`]; this plain form is for the tests.
    #[cfg(test)]
    pub fn fill(
        &self,
        key: &[u8],
        file_rel: &[u8],
        file: &File,
        meta: &std::fs::Metadata,
        validators: Validators,
    ) -> Option<Arc<Entry>> {
        self.fill_with(key, file_rel, file, meta, validators, b"")
    }

    /// Reads `file` (opened as `file_rel`, metadata `meta`) into a new entry for `key`, with
    /// header fields `extra` (each ending in CRLF) added to the entry's head before
    /// `Content-Length` (`Vary: Accept-Encoding`); `None` if it must not be cached (too large,
    /// not settled, changed while being read): then the caller serves it from the file.
    pub fn fill_with(
        &self,
        key: &[u8],
        file_rel: &[u8],
        file: &File,
        meta: &std::fs::Metadata,
        validators: Validators,
        extra: &[u8],
    ) -> Option<Arc<Entry>> {
        let entry = self.read_entry(key, file_rel, file, meta, validators, true, extra)?;
        self.counters.fills.fetch_add(1, Relaxed);
        self.map.insert(key.into(), entry.clone());
        Some(entry)
    }

    /// Reads a precompressed sibling (`file`, opened as `sibling_rel`, metadata `meta`) into
    /// the variant entry `variant_key` in `coding`, with `validators` (the sibling's, the
    /// original's type) and `Vary`; `None` as for [`ResponseCache::fill_with`].
    pub fn fill_sibling(
        &self,
        variant_key: &[u8],
        sibling_rel: &[u8],
        file: &File,
        meta: &std::fs::Metadata,
        validators: Validators,
        coding: Coding,
    ) -> Option<Arc<Entry>> {
        let extra = variant_fields(coding);
        let entry = self.read_entry(
            variant_key,
            sibling_rel,
            file,
            meta,
            validators,
            false,
            &extra,
        )?;
        self.counters.fills.fetch_add(1, Relaxed);
        self.map.insert(variant_key.into(), entry.clone());
        Some(entry)
    }

    /// Keeps `body`, `base`'s body compressed with `coding`, as the variant entry
    /// `variant_key` (ETag `etag`); `None` if it must not be kept (fills off, too heavy).
    pub fn insert_variant(
        &self,
        variant_key: &[u8],
        base: &Entry,
        coding: Coding,
        body: Bytes,
        etag: String,
    ) -> Option<Arc<Entry>> {
        if !self.fills_enabled.load(Relaxed) {
            return None;
        }
        let validators = Validators {
            size: body.len() as u64,
            etag,
            ..base.validators.clone()
        };
        let fields = head_fields(&validators, false, &variant_fields(coding));
        let entry = Arc::new(Entry {
            fields,
            body,
            validators,
            file_rel: base.file_rel.clone(),
            identity: base.identity,
            checked: AtomicU64::new(base.checked.load(Relaxed)),
            absent: Default::default(),
            h2_block: Default::default(),
        });
        if entry.weight(variant_key) > self.max_weight {
            return None;
        }
        self.counters.compressions.fetch_add(1, Relaxed);
        self.map.insert(variant_key.into(), entry.clone());
        Some(entry)
    }

    /// The variant entry `variant_key` if present, without counting a hit or a miss (see
    /// [`ResponseCache::variant_hit`]); a sibling's variant is checked against its file as
    /// [`ResponseCache::lookup`] does, through `reopen` (the file's metadata now, if any).
    pub fn variant(
        &self,
        variant_key: &[u8],
        reopen: impl FnOnce(&[u8]) -> Option<std::fs::Metadata>,
    ) -> Option<Arc<Entry>> {
        let e = self.map.get(variant_key)?;
        let age = self.now_ms().saturating_sub(e.checked.load(Relaxed));
        if age + self.tick_ms < self.revalidate_ms {
            return Some(e);
        }
        match reopen(&e.file_rel) {
            Some(meta) if meta.is_file() && Identity::of(&meta) == e.identity => {
                e.checked.store(self.now_ms(), Relaxed);
                Some(e)
            }
            _ => {
                self.map.remove_if(variant_key, |v| Arc::ptr_eq(v, &e));
                None
            }
        }
    }

    /// Counts a request answered from a variant.
    pub fn variant_hit(&self) {
        self.counters.variant_hits.fetch_add(1, Relaxed);
    }

    /// The entry for `file`, read whole, with its head fields; `None` if it must not be
    /// cached.
    #[allow(clippy::too_many_arguments)]
    fn read_entry(
        &self,
        key: &[u8],
        file_rel: &[u8],
        file: &File,
        meta: &std::fs::Metadata,
        validators: Validators,
        accept_ranges: bool,
        extra: &[u8],
    ) -> Option<Arc<Entry>> {
        let size = meta.len();
        if !meta.is_file() || size > self.max_object_bytes || !self.fills_enabled.load(Relaxed) {
            return None;
        }
        // An entry quick_cache would refuse is not worth reading (its weight is more than this).
        if size + key.len() as u64 + ENTRY_OVERHEAD > self.max_weight {
            return None;
        }
        if !settled(meta) {
            return None;
        }
        let body = match read_exact_size(file, size) {
            Ok(b) => b,
            Err(e) => {
                log::debug!("not caching {:?}: {e}", String::from_utf8_lossy(file_rel));
                return None;
            }
        };
        let after = file.metadata().ok()?;
        if Identity::of(&after) != Identity::of(meta) {
            return None;
        }
        let fields = head_fields(&validators, accept_ranges, extra);
        let entry = Arc::new(Entry {
            fields,
            body,
            validators,
            file_rel: file_rel.into(),
            identity: Identity::of(meta),
            checked: AtomicU64::new(self.now_ms()),
            absent: Default::default(),
            h2_block: Default::default(),
        });
        if entry.weight(key) > self.max_weight {
            return None;
        }
        Some(entry)
    }

    /// The counters now.
    pub fn stats(&self) -> Stats {
        Stats {
            hits: self.counters.hits.load(Relaxed),
            misses: self.counters.misses.load(Relaxed),
            evictions: self.counters.evictions.load(Relaxed),
            fills: self.counters.fills.load(Relaxed),
            compressions: self.counters.compressions.load(Relaxed),
            variant_hits: self.counters.variant_hits.load(Relaxed),
            bytes: self.map.weight(),
            entries: self.map.len() as u64,
            max_bytes: self.max_bytes,
            max_object_bytes: self.max_object_bytes,
        }
    }
}

/// An entry's head fields: validators, type, `Accept-Ranges` (identity only: a variant is
/// never sent in ranges), `extra`, and `Content-Length` last.
fn head_fields(v: &Validators, accept_ranges: bool, extra: &[u8]) -> Box<[u8]> {
    let mut fields = Vec::with_capacity(192 + extra.len());
    enc::write_header_unchecked("Last-Modified", &v.last_modified, &mut fields);
    enc::write_header_unchecked("ETag", v.etag.as_bytes(), &mut fields);
    enc::write_header_unchecked("Content-Type", v.content_type.as_bytes(), &mut fields);
    if accept_ranges {
        enc::write_header_unchecked("Accept-Ranges", b"bytes", &mut fields);
    }
    fields.extend_from_slice(extra);
    enc::write_content_length(v.size, &mut fields);
    fields.into_boxed_slice()
}

/// `Content-Encoding` and `Vary` of a variant in `coding`.
fn variant_fields(coding: Coding) -> Vec<u8> {
    let mut f = Vec::with_capacity(64);
    enc::write_header_unchecked("Content-Encoding", coding.token().as_bytes(), &mut f);
    enc::write_header_unchecked("Vary", b"Accept-Encoding", &mut f);
    f
}

/// The key of `key`'s variant in `coding`: the key, a NUL, the coding's name.
pub fn variant_key(key: &[u8], coding: Coding) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 6);
    k.extend_from_slice(key);
    k.push(0);
    k.extend_from_slice(coding.token().as_bytes());
    k
}

fn coding_bit(coding: Coding) -> u8 {
    1 << (coding as u8)
}

/// The heaviest item a quick_cache shard of `capacity` admits (its formula).
fn hot_share(capacity: u64) -> u64 {
    (capacity as f64 * HOT_ALLOCATION) as u64
}

/// True if the file's last change is at least [`SETTLE`] old.
fn settled(meta: &std::fs::Metadata) -> bool {
    let ctime = UNIX_EPOCH
        + Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        );
    SystemTime::now()
        .duration_since(ctime)
        .is_ok_and(|age| age >= SETTLE)
}

/// Reads exactly `size` bytes from the start of `file`; a file that is shorter or longer now
/// is an error (it is being written).
fn read_exact_size(file: &File, size: u64) -> io::Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let len = usize::try_from(size).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, 0)?;
    let mut probe = [0u8; 1];
    if file.read_at(&mut probe, size)? != 0 {
        return Err(io::Error::other("file grew while being read"));
    }
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_hash_spreads_paths_and_depends_on_its_keys() {
        use std::hash::BuildHasher;
        let h = KeyHash::default();
        let key = |i: usize| -> Vec<u8> {
            // Lengths 0 to 60, paths that differ in one place: the shapes a site's files have.
            let mut k = format!("dir{}/file-{i}.html", i % 7).into_bytes();
            k.truncate(i % 61);
            k.extend_from_slice(format!("{i}").as_bytes());
            k
        };
        let n = 1 << 14;
        let hashes: Vec<u64> = (0..n).map(|i| h.hash_one(&key(i)[..])).collect();
        // Equal keys, equal hashes; a boxed key hashes as the slice it is looked up by.
        assert_eq!(h.hash_one(&key(5)[..]), hashes[5]);
        assert_eq!(h.hash_one(key(5).into_boxed_slice()), hashes[5]);
        let distinct: std::collections::HashSet<u64> = hashes.iter().copied().collect();
        assert_eq!(distinct.len(), n, "no two of {n} paths collide in 64 bits");
        // Both ends of the hash are used (the shard and the slot): 256 buckets by the low
        // byte and by the high byte each hold 64 on average; none may be empty or hold
        // three times that.
        for shift in [0, 56] {
            let mut buckets = [0u32; 256];
            for x in &hashes {
                buckets[((x >> shift) & 0xff) as usize] += 1;
            }
            let (lo, hi) = (buckets.iter().min().unwrap(), buckets.iter().max().unwrap());
            assert!(*lo > 20 && *hi < 192, "shift {shift}: buckets {lo}..{hi}");
        }
        // Another cache draws other keys: the same path hashes differently.
        let other = KeyHash::default();
        assert_ne!(other.hash_one(&key(5)[..]), hashes[5]);
        // Every length up to 40 reads all of its bytes: a change in any byte changes the hash.
        for len in 0..40 {
            let base = vec![b'a'; len];
            for at in 0..len {
                let mut changed = base.clone();
                changed[at] = b'b';
                assert_ne!(
                    h.hash_one(&base[..]),
                    h.hash_one(&changed[..]),
                    "len {len} at {at}"
                );
            }
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("weft-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Writes `body` to `path` and backdates nothing: waits out [`SETTLE`] instead, since
    /// ctime cannot be set.
    fn settled_file(path: &std::path::Path, body: &[u8]) -> (File, std::fs::Metadata) {
        std::fs::write(path, body).unwrap();
        std::thread::sleep(SETTLE + Duration::from_millis(50));
        let f = File::open(path).unwrap();
        let m = f.metadata().unwrap();
        (f, m)
    }

    #[test]
    fn a_same_size_change_within_one_second_changes_the_etag() {
        let d = tmp("etag");
        let path = d.join("f.txt");
        let base = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut tags = Vec::new();
        for (body, nanos) in [(b"aaaa", 100_000_000), (b"bbbb", 700_000_000)] {
            std::fs::write(&path, body).unwrap();
            let f = File::options().write(true).open(&path).unwrap();
            f.set_modified(base + Duration::from_nanos(nanos)).unwrap();
            let v = Validators::new(&f.metadata().unwrap(), "text/plain");
            assert_eq!(v.mtime, 1_700_000_000);
            tags.push(v.etag);
        }
        assert_ne!(tags[0], tags[1]);
        assert!(tags[0].ends_with("-4\""), "{}", tags[0]);
        std::fs::remove_dir_all(d).unwrap();
    }

    fn cfg(max_bytes: u64, max_object_bytes: u64, revalidate: Duration) -> CacheConfig {
        CacheConfig {
            enabled: true,
            max_bytes,
            max_object_bytes,
            revalidate,
        }
    }

    #[test]
    fn fill_hit_slice_and_head_fields() {
        let d = tmp("fill");
        let (f, m) = settled_file(&d.join("a.txt"), b"hello world");
        let c = ResponseCache::new(&cfg(1 << 20, 1 << 16, Duration::from_secs(60)));
        assert!(matches!(c.lookup(b"a.txt"), Lookup::Miss));
        // The caller counts the miss once a file answers (the static handler does).
        c.count_miss();
        let v = Validators::new(&m, "text/plain");
        let e = c.fill(b"a.txt", b"a.txt", &f, &m, v).expect("cached");
        assert_eq!(&e.body()[..], b"hello world");
        let fields = String::from_utf8(e.fields().to_vec()).unwrap();
        assert!(fields.starts_with("Last-Modified: "), "{fields}");
        assert!(fields.contains("\r\nContent-Type: text/plain\r\nAccept-Ranges: bytes\r\n"));
        assert!(fields.ends_with("Content-Length: 11\r\n"), "{fields}");
        // Read back as pairs, in order.
        let pairs: Vec<(&[u8], &[u8])> = e.header_fields().collect();
        let names: Vec<&[u8]> = pairs.iter().map(|(n, _)| *n).collect();
        let want: [&[u8]; 5] = [
            b"Last-Modified",
            b"ETag",
            b"Content-Type",
            b"Accept-Ranges",
            b"Content-Length",
        ];
        assert_eq!(names, want);
        assert_eq!(pairs[2].1, b"text/plain");
        assert_eq!(pairs[4].1, b"11");
        match c.lookup(b"a.txt") {
            Lookup::Fresh(hit) => assert!(Arc::ptr_eq(&hit, &e)),
            other => panic!("{other:?}"),
        }
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.fills, s.entries), (1, 1, 1, 1));
        assert_eq!(s.bytes, e.weight(b"a.txt"));
    }

    #[test]
    fn stale_entries_are_checked_against_the_file() {
        let d = tmp("stale");
        let p = d.join("a.txt");
        let (f, m) = settled_file(&p, b"one");
        let c = ResponseCache::new(&cfg(1 << 20, 1 << 16, Duration::ZERO));
        let e = c
            .fill(b"k", b"a.txt", &f, &m, Validators::new(&m, "text/plain"))
            .unwrap();
        let Lookup::Stale(s) = c.lookup(b"k") else {
            panic!("revalidate = 0 makes every lookup stale")
        };
        assert!(c.revalidate(b"k", &s, &std::fs::metadata(&p).unwrap()));
        // Replaced by rename (a new inode): the entry goes, its holders keep the old bytes.
        std::fs::write(d.join("new"), b"two!").unwrap();
        std::fs::rename(d.join("new"), &p).unwrap();
        let Lookup::Stale(s) = c.lookup(b"k") else {
            panic!()
        };
        assert!(!c.revalidate(b"k", &s, &std::fs::metadata(&p).unwrap()));
        assert!(matches!(c.lookup(b"k"), Lookup::Miss));
        assert_eq!(&e.body()[..], b"one");
    }

    #[test]
    fn unsettled_large_and_growing_files_are_not_cached() {
        let d = tmp("refuse");
        let c = ResponseCache::new(&cfg(1 << 20, 8, Duration::from_secs(1)));
        let p = d.join("fresh");
        std::fs::write(&p, b"abc").unwrap();
        let f = File::open(&p).unwrap();
        let m = f.metadata().unwrap();
        assert!(c
            .fill(b"k", b"fresh", &f, &m, Validators::new(&m, "x/y"))
            .is_none());
        let (f, m) = settled_file(&d.join("big"), b"0123456789");
        assert!(c
            .fill(b"k", b"big", &f, &m, Validators::new(&m, "x/y"))
            .is_none());
        let (f, m) = settled_file(&d.join("grow"), b"0123");
        // Written again (same inode, longer) after its metadata was taken.
        std::fs::write(d.join("grow"), b"012345").unwrap();
        assert!(c
            .fill(b"g", b"grow", &f, &m, Validators::new(&m, "x/y"))
            .is_none());
        assert_eq!(c.stats().entries, 0);
    }

    /// Regression: quick_cache rounds each shard's capacity up, so the shards together could
    /// hold up to a byte per shard more than `max_bytes`.
    #[test]
    fn the_shards_together_never_exceed_max_bytes() {
        for max in [100_001, (1 << 20) + 7, 64 * 1024 * 1024 + 3] {
            let c = ResponseCache::new(&cfg(max, 4096, Duration::from_secs(1)));
            assert!(
                c.map.capacity() <= max,
                "{} > {max} ({} shards)",
                c.map.capacity(),
                c.map.num_shards()
            );
        }
    }

    #[test]
    fn the_byte_bound_holds_and_evictions_are_counted() {
        let d = tmp("bound");
        let body = vec![b'x'; 4000];
        let mut files = Vec::new();
        for i in 0..40 {
            let p = d.join(format!("f{i}"));
            std::fs::write(&p, &body).unwrap();
            files.push(p);
        }
        std::thread::sleep(SETTLE + Duration::from_millis(50));
        let max = 50_000;
        let c = ResponseCache::new(&cfg(max, 8000, Duration::from_secs(60)));
        let mut held = Vec::new();
        for (i, p) in files.iter().enumerate() {
            let f = File::open(p).unwrap();
            let m = f.metadata().unwrap();
            let key = format!("f{i}");
            let e = c.fill(
                key.as_bytes(),
                key.as_bytes(),
                &f,
                &m,
                Validators::new(&m, "x/y"),
            );
            held.push(e.expect("fits"));
            assert!(c.stats().bytes <= max, "{:?}", c.stats());
        }
        let s = c.stats();
        assert!(s.evictions > 0, "{s:?}");
        assert!(s.entries < 40);
        // Evicted entries held by a sender are intact.
        assert!(held.iter().all(|e| e.body().len() == 4000));
    }
}
