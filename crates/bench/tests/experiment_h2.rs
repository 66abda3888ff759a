//! `weft-bench experiment h2`: bad arguments are refused with the reason before anything is
//! looked for, started or written; and a tiny quick run against weft's fiber model writes
//! every file a run writes (skipped, with a line, where h2load or the weft binary is missing).
//! Counts and files only, no timing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weft-bench"))
}

#[test]
fn h2_refuses_bad_arguments_and_other_experiments_its_flags() {
    let out = std::env::temp_dir().join(format!("weft-h2-bad-{}", std::process::id()));
    for (args, why) in [
        (&["h2", "--over", "quic"][..], "--over quic: tls or h2c"),
        (&["h2", "--streams", "0"], "--streams 0: from 1 to 128"),
        (
            &["h2", "--streams", "1,129"],
            "SETTINGS_MAX_CONCURRENT_STREAMS",
        ),
        (&["h2", "--conns", "10,10"], "--conns: 10 named twice"),
        (
            &["h2", "--models", "fiber,forked"],
            "\"forked\" is not a model",
        ),
        (&["h2", "--path", "echo"], "--path \"echo\""),
        (&["h2", "--duration", "1ms"], "--duration must be at least"),
        (&["h2", "--runs", "0"], "--runs must be at least 1"),
        (&["h2", "--servers", "fiber"], "--models"),
        (
            &["h2", "--model", "fiber"],
            "belong to the cluster experiment",
        ),
        (
            &["fibers", "--streams", "10"],
            "belong to the h2 experiment",
        ),
        (&["tls", "--over", "h2c"], "belong to the h2 experiment"),
    ] {
        let run = bench()
            .arg("experiment")
            .args(args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    // Not a number: the command line's own refusal (clap's usage error).
    let run = bench()
        .args(["experiment", "h2", "--conns", "ten", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(!out.exists(), "a refused run wrote {}", out.display());
}

fn h2load() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("h2load"))
        .find(|p| p.is_file())
}

/// The weft binary the experiment starts by default: `weft` next to weft-bench.
fn weft() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_weft-bench")).with_file_name("weft")
}

#[test]
fn a_tiny_quick_h2_run_writes_its_report() {
    if h2load().is_none() {
        eprintln!("skipped: h2load is not installed (apt-get install nghttp2-client)");
        return;
    }
    if !weft().is_file() {
        eprintln!(
            "skipped: no weft binary at {} (cargo build -p weft)",
            weft().display()
        );
        return;
    }
    let base = std::env::temp_dir().join(format!("weft-bench-exp-h2-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    let (out, root) = (base.join("out"), base.join("root"));
    fs::create_dir_all(&root).unwrap();
    let run = bench()
        .args([
            "experiment",
            "h2",
            "--quick",
            "--models",
            "fiber",
            "--conns",
            "2",
            "--streams",
            "2",
            "--duration",
            "300ms",
            "--warm-up",
            "300ms",
        ])
        .arg("--out")
        .arg(&out)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    let dir = out.join("h2");
    let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    assert!(read("run-kind.txt").starts_with("quick"));
    for stem in ["rps_c2", "cpu_c2", "p99_c2"] {
        for ext in ["png", "svg"] {
            let p = dir.join(format!("{stem}.{ext}"));
            assert!(fs::metadata(&p).unwrap().len() > 0, "{}", p.display());
        }
    }
    let report = read("report.md");
    assert!(report.starts_with("# h2:"), "{report}");
    assert!(report.contains("smoke check"), "{report}");
    assert!(report.contains("h2load nghttp2/"), "{report}");
    let rows = read("rows.csv");
    let lines: Vec<&str> = rows.lines().collect();
    assert_eq!(lines.len(), 2, "{rows}");
    let cols: Vec<&str> = lines[0].split(',').collect();
    let cells: Vec<&str> = lines[1].split(',').collect();
    let get = |name: &str| cells[cols.iter().position(|c| *c == name).unwrap()];
    assert_eq!(
        (get("server"), get("over"), get("conns"), get("streams")),
        ("fiber", "tls", "2", "2")
    );
    assert_eq!((get("protocol"), get("status")), ("h2", "ok"), "{rows}");
    for n in ["rps", "cpu_us_per_req", "p99_ms", "window_s"] {
        let v: f64 = get(n).parse().unwrap();
        assert!(v > 0.0, "{n}: {rows}");
    }
    assert_eq!(get("failed"), "0", "{rows}");
    assert!(read("median.csv")
        .lines()
        .any(|l| l.starts_with("fiber,2,2,")));
    let _ = fs::remove_dir_all(&base);
}
