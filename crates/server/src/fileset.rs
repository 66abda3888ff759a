//! The papers' generated test files: the large HTML page of the fibers paper
//! (`changes.html`, 816,378 bytes) and the 1 KB / 484 KB / 2 MB files of the
//! threads-vs-processes paper.
//!
//! The files are too big to keep in git, so they are generated into the document
//! root (normally `www/`) on demand by [`ensure`]. Generation is deterministic:
//! [`content`] depends only on the spec, never on the machine, the time or a random
//! source, so every run of every experiment serves the same bytes and responses can
//! be compared byte for byte across machines. The small, hand-written
//! `haewelmann.html` (10,541 bytes) is committed and is not part of this set.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// One generated file: its path relative to the document root and its exact size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSpec {
    /// Path relative to the document root, `/`-separated.
    pub path: &'static str,
    /// Exact size in bytes.
    pub size: u64,
}

/// The generated files of the papers. A path ending in `.html` gets an HTML page,
/// anything else pseudo-random bytes.
pub const PAPER_FILES: &[FileSpec] = &[
    // Keller and Monien (fibers paper), §4: "a file of about 800 KBytes (changes.html)",
    // "Document Length: 816378 bytes" in its ab output.
    FileSpec {
        path: "changes.html",
        size: 816_378,
    },
    // "Threaded vs Process-driven HTTP server": "small: 1KB, medium: 484 KB, large: 2MB".
    FileSpec {
        path: "files/1k.bin",
        size: 1_024,
    },
    FileSpec {
        path: "files/484k.bin",
        size: 495_616,
    },
    FileSpec {
        path: "files/2m.bin",
        size: 2_097_152,
    },
];

/// The file that marks a document root as the repository's own sample site (`www/`): only
/// there does `weft serve` generate these files on its own and mount `/echo` by default. A
/// dotfile, so the static files never serve it.
pub const SAMPLE_SITE_MARKER: &str = ".weft-sample-site";

/// True if `root` is the repository's sample site (it holds [`SAMPLE_SITE_MARKER`]). A user's
/// directory that happens to be called `www` is not.
pub fn is_sample_site(root: &Path) -> bool {
    root.join(SAMPLE_SITE_MARKER).is_file()
}

/// Writes every missing (or wrong-sized) generated file under `root`; returns how many it wrote.
///
/// A file whose size is already right is left alone (its content is not re-read).
/// Each file is written to a temporary file in its own directory and renamed into
/// place, so a server reading the root concurrently sees either no file or the whole
/// file, never a partial one.
///
/// # Errors
///
/// The first I/O error met while checking, creating a directory, writing or renaming;
/// files written before it stay written.
pub fn ensure(root: &Path) -> io::Result<usize> {
    let mut written = 0;
    for spec in PAPER_FILES {
        let dest = root.join(spec.path);
        let up_to_date = match fs::metadata(&dest) {
            Ok(meta) => meta.is_file() && meta.len() == spec.size,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(e),
        };
        if !up_to_date {
            write_atomically(&dest, &content(spec))?;
            written += 1;
        }
    }
    Ok(written)
}

/// The deterministic content of a spec (same bytes on every machine and run).
///
/// The result is exactly `spec.size` bytes long.
///
/// # Panics
///
/// If `spec.size` does not fit in `usize` (only possible on a 32-bit target).
#[must_use]
pub fn content(spec: &FileSpec) -> Vec<u8> {
    let size = usize::try_from(spec.size).expect("file size fits in memory");
    if Path::new(spec.path)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("html"))
    {
        html_page(spec.path, size)
    } else {
        random_bytes(spec.path, size)
    }
}

/// Temporary names must differ between processes and between threads of one
/// process, or two concurrent `ensure` calls could interleave writes to one file.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn write_atomically(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = dest.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir)?;
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| fs::rename(&tmp, dest));
    if result.is_err() {
        // Best effort: the original error is the one worth reporting.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for filler bytes.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        // n is a small table length, so the remainder fits in usize; the modulo bias is
        // irrelevant for filler text.
        usize::try_from(self.next_u64() % n as u64).unwrap_or(0)
    }
}

/// FNV-1a over the name: a stable seed, unlike `std`'s randomly keyed hasher.
fn seed_from(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

fn random_bytes(name: &str, size: usize) -> Vec<u8> {
    let mut rng = SplitMix64(seed_from(name));
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        // Little-endian explicitly, so big-endian machines produce the same bytes.
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(size);
    out
}

const VERBS: &[&str] = &[
    "fixed",
    "added",
    "removed",
    "reworked",
    "documented",
    "simplified",
    "sped up",
    "tested",
];
const SUBJECTS: &[&str] = &[
    "keep-alive handling",
    "chunked request bodies",
    "the response cache",
    "range requests",
    "the status page",
    "CGI environment variables",
    "the access log",
    "If-Modified-Since handling",
    "path normalisation",
    "the stack pool",
    "the epoll reactor",
    "sendfile for large files",
    "the accept loop",
    "header limits",
    "the directory index",
    "the echo handler",
];
const MODULES: &[&str] = &[
    "conn",
    "cache",
    "handlers/static",
    "handlers/cgi",
    "models/fiber",
    "models/thread",
    "models/process",
    "models/pipeline",
    "config",
    "log",
    "metrics",
    "http/parse",
];
const AUTHORS: &[&str] = &["ada", "ben", "chen", "dora", "emil", "fatma", "gus", "hana"];

/// Entries per release section of the changelog page.
const CHANGES_PER_RELEASE: u64 = 250;

const PAGE_FOOT: &str = "</ul>\n</body>\n</html>\n";

/// The shortest filler comment is `<!---->\n`; the page keeps at least that much room
/// unless the lines fill it exactly.
const MIN_FILL: usize = 8;

/// A changelog-like page: a list of generated `<li>` lines, grouped into release
/// sections, with the closing tags landing exactly at `size`. The last few bytes
/// before the footer are filled by an HTML comment so the total comes out exact.
fn html_page(name: &str, size: usize) -> Vec<u8> {
    let head = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>weft: {name}</title>\n\
         <style>body{{font-family:sans-serif;max-width:50em;margin:2em auto}}code{{color:#444}}</style>\n\
         </head>\n<body>\n<h1>Changes</h1>\n\
         <p>A generated, deterministic changelog page: the large HTML test file of the fibers paper.</p>\n\
         <h2>Release 1</h2>\n<ul>\n"
    );
    let Some(body_budget) = size.checked_sub(head.len() + PAGE_FOOT.len()) else {
        // Too small for a page: a prefix of the empty page, still deterministic and exact.
        return [head.as_bytes(), PAGE_FOOT.as_bytes()].concat()[..size].to_vec();
    };

    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(head.as_bytes());
    let body_end = head.len() + body_budget;
    let mut rng = SplitMix64(seed_from(name));
    let mut line = String::new();
    for n in 1u64.. {
        line.clear();
        if n % CHANGES_PER_RELEASE == 0 {
            let release = n / CHANGES_PER_RELEASE + 1;
            // Writing to a String cannot fail.
            let _ = write!(line, "</ul>\n<h2>Release {release}</h2>\n<ul>\n");
        }
        let _ = writeln!(
            line,
            "<li>change {n}: {} {} in <code>{}</code> ({})</li>",
            VERBS[rng.below(VERBS.len())],
            SUBJECTS[rng.below(SUBJECTS.len())],
            MODULES[rng.below(MODULES.len())],
            AUTHORS[rng.below(AUTHORS.len())],
        );
        let left = body_end - out.len();
        if line.len() == left || line.len() + MIN_FILL <= left {
            out.extend_from_slice(line.as_bytes());
        } else {
            break;
        }
    }

    let left = body_end - out.len();
    if left >= MIN_FILL {
        out.extend_from_slice(b"<!--");
        out.resize(out.len() + left - MIN_FILL, b'.');
        out.extend_from_slice(b"-->\n");
    } else {
        // Only when the page is too small for even one line.
        out.resize(body_end, b'\n');
    }
    out.extend_from_slice(PAGE_FOOT.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fnv(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
        })
    }

    static SCRATCH_N: AtomicU64 = AtomicU64::new(0);

    fn scratch_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "weft-fileset-{tag}-{}-{}",
            std::process::id(),
            SCRATCH_N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn sizes_are_exact() {
        for spec in PAPER_FILES {
            assert_eq!(content(spec).len() as u64, spec.size, "{}", spec.path);
        }
        let sizes: Vec<_> = PAPER_FILES.iter().map(|s| (s.path, s.size)).collect();
        assert_eq!(
            sizes,
            [
                ("changes.html", 816_378),
                ("files/1k.bin", 1_024),
                ("files/484k.bin", 495_616),
                ("files/2m.bin", 2_097_152)
            ]
        );
    }

    #[test]
    fn content_is_deterministic() {
        for spec in PAPER_FILES {
            assert_eq!(content(spec), content(spec), "{}", spec.path);
        }
    }

    /// Pins the bytes, so a change to the generator (or a platform difference) that
    /// would silently change what experiments serve fails here.
    #[test]
    fn content_matches_golden_hashes() {
        let hashes: Vec<_> = PAPER_FILES
            .iter()
            .map(|s| (s.path, fnv(&content(s))))
            .collect();
        assert_eq!(hashes, GOLDEN);
    }

    const GOLDEN: [(&str, u64); 4] = [
        ("changes.html", 0xE752_FED9_AD25_8160),
        ("files/1k.bin", 0x1F08_386E_025C_768F),
        ("files/484k.bin", 0x6B0E_F5BB_717E_6869),
        ("files/2m.bin", 0x1F95_845D_69A2_4322),
    ];

    #[test]
    fn changes_html_is_a_page() {
        let page = String::from_utf8(content(&PAPER_FILES[0])).expect("utf-8");
        assert!(page.starts_with("<!DOCTYPE html>\n<html lang=\"en\">\n"));
        assert!(page.ends_with("</ul>\n</body>\n</html>\n"));
        assert!(page.contains("<li>change 1: "));
        assert_eq!(page.matches("<ul>").count(), page.matches("</ul>").count());
        assert_eq!(page.matches("<li>").count(), page.matches("</li>").count());
    }

    #[test]
    fn html_pages_are_exact_for_every_tail() {
        // Every remainder of the filler arithmetic, the exact-fit case, and pages too
        // small for a line or for the head itself.
        for size in 0..2000 {
            let page = content(&FileSpec {
                path: "x.html",
                size,
            });
            assert_eq!(page.len() as u64, size);
            if size >= 700 {
                assert!(page.ends_with(b"</html>\n"), "size {size}");
            }
        }
    }

    #[test]
    fn bin_files_differ_and_are_not_trivial() {
        let a = content(&PAPER_FILES[1]);
        let b = content(&PAPER_FILES[2]);
        assert_ne!(a[..], b[..a.len()]);
        let distinct = a.iter().collect::<std::collections::BTreeSet<_>>().len();
        assert!(
            distinct > 200,
            "only {distinct} distinct byte values in 1 KiB"
        );
    }

    #[test]
    fn only_a_root_with_the_marker_is_the_sample_site() {
        let root = scratch_dir("marker");
        fs::create_dir_all(&root).unwrap();
        assert!(!is_sample_site(&root));
        fs::write(root.join(SAMPLE_SITE_MARKER), "").unwrap();
        assert!(is_sample_site(&root));
        // The repository's own sample site carries it (tests run in crates/server).
        assert!(is_sample_site(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../www")
        ));
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn ensure_writes_missing_then_nothing_then_repairs() {
        let root = scratch_dir("ensure");
        assert_eq!(ensure(&root).unwrap(), PAPER_FILES.len());
        for spec in PAPER_FILES {
            assert_eq!(
                fs::read(root.join(spec.path)).unwrap(),
                content(spec),
                "{}",
                spec.path
            );
        }
        assert_eq!(ensure(&root).unwrap(), 0);

        let victim = root.join("files/484k.bin");
        fs::OpenOptions::new()
            .write(true)
            .open(&victim)
            .unwrap()
            .set_len(1000)
            .unwrap();
        assert_eq!(ensure(&root).unwrap(), 1);
        assert_eq!(fs::read(&victim).unwrap(), content(&PAPER_FILES[2]));
        assert_eq!(ensure(&root).unwrap(), 0);

        // No temporary files are left behind.
        for dir in [root.clone(), root.join("files")] {
            for entry in fs::read_dir(dir).unwrap() {
                let name = entry.unwrap().file_name();
                assert!(!name.to_string_lossy().contains(".tmp."), "{name:?}");
            }
        }
        fs::remove_dir_all(&root).unwrap();
    }
}
