//! `weft-bench experiment tls --quick` against nginx with TLS: it writes every file a run
//! writes, with nginx's rows complete and error-free, and names weft's models as skipped when
//! the weft binary does not take `--https`. Skipped (with a line) when nginx is not installed.
//! Counts and files only, no timing.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

fn nginx() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

#[test]
fn a_quick_tls_run_against_nginx_writes_its_report() {
    if nginx().is_none() {
        eprintln!("skipped: nginx is not installed (apt-get install nginx-light)");
        return;
    }
    let base = std::env::temp_dir().join(format!("weft-bench-exp-tls-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    let (out, root) = (base.join("out"), base.join("root"));
    fs::create_dir_all(&root).unwrap();
    // The page, in case no weft binary is there to write the file set.
    let page: Vec<u8> = (0..10_541).map(|i| b'a' + (i % 26) as u8).collect();
    fs::write(root.join("haewelmann.html"), &page).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(["experiment", "tls", "--quick", "--servers", "fiber,nginx"])
        .arg("--out")
        .arg(&out)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    let dir = out.join("tls");
    let read = |f: &str| fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    assert!(read("run-kind.txt").starts_with("quick"));
    for f in [
        "keepalive_cpu",
        "handshake_cpu",
        "handshakes",
        "idle_memory",
    ] {
        for ext in ["png", "svg"] {
            let p = dir.join(format!("{f}.{ext}"));
            assert!(fs::metadata(&p).unwrap().len() > 0, "{}", p.display());
        }
    }
    let report = read("report.md");
    assert!(report.contains("smoke check"), "{report}");
    assert!(report.contains("ssl_session_cache shared"), "{report}");
    // nginx negotiated TLS 1.3 with the client, as weft will.
    assert!(report.contains("- nginx: TLSv1_3"), "{report}");

    let rows = read("rows.csv");
    let nginx_rows: Vec<Vec<&str>> = rows
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[0] == "nginx")
        .collect();
    let scenarios: Vec<&str> = nginx_rows.iter().map(|c| c[1]).collect();
    assert_eq!(scenarios, ["keepalive", "handshake", "resumed"], "{rows}");
    for c in &nginx_rows {
        let rps: f64 = c[3].parse().unwrap();
        let connects: u64 = c[6].parse().unwrap();
        assert!(rps > 0.0, "{rows}");
        assert_eq!(c[7], "0", "errors: {rows}");
        if c[1] == "keepalive" {
            // Each of the 50 connections handshakes once and stays open.
            assert_eq!(connects, 50, "{rows}");
        } else {
            assert!(connects > 50, "{rows}");
        }
    }
    let idle = read("idle.csv");
    let nginx_idle: Vec<&str> = idle
        .lines()
        .find(|l| l.starts_with("nginx,"))
        .unwrap_or_else(|| panic!("{idle}"))
        .split(',')
        .collect();
    // server,run,connections,open,...: every idle connection stayed open.
    assert_eq!((nginx_idle[2], nginx_idle[3]), ("200", "200"), "{idle}");
    assert!(read("median.csv").lines().any(|l| l.starts_with("nginx,")));

    // weft's fiber model: measured when the binary takes --https, else named as skipped.
    let fiber_measured = rows.lines().any(|l| l.starts_with("fiber,"));
    assert!(
        fiber_measured || err.contains("does not take --https") || err.contains("no weft binary"),
        "{err}"
    );
    let _ = fs::remove_dir_all(&base);
}
