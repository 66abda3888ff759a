//! `weft-bench experiment cluster --quick`, where it can run: as root, with HAProxy on the
//! PATH and the `weft` binary built next to `weft-bench` (as `cargo test --workspace` builds
//! it). Elsewhere it says why and passes without running, as the experiment itself skips.
//!
//! The experiment's own targets are asserted: no failed request through a drain or a rolling
//! upgrade, none after HAProxy marks a killed instance down, and weft's access logs naming
//! the client behind HAProxy (PROXY protocol) on every line.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

fn csv(path: &PathBuf) -> Vec<Vec<String>> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect())
        .collect()
}

#[test]
fn cluster_quick_run_loses_no_request_to_a_drain_or_an_upgrade() {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_weft-bench"));
    let weft = bench.with_file_name("weft");
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let haproxy = weft_bench::experiment::find_program("haproxy");
    if !root || haproxy.is_none() || !weft.is_file() {
        eprintln!(
            "skipped: the cluster experiment needs root ({root}), haproxy ({}) and {} (built: {})",
            haproxy.is_some(),
            weft.display(),
            weft.is_file()
        );
        return;
    }
    let out = std::env::temp_dir().join(format!("weft-cluster-test-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let run = Command::new(&bench)
        .args(["experiment", "cluster", "--quick", "--out"])
        .arg(&out)
        .arg("--weft")
        .arg(&weft)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    if err.contains("# cluster: skipped") || err.contains("cannot create a network namespace") {
        eprintln!("skipped by the experiment: {err}");
        return;
    }
    let dir = out.join("cluster");
    let report = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("smoke check"), "{report}");
    let events = csv(&dir.join("events.csv"));
    let find = |key: &str| {
        events
            .iter()
            .find(|r| r[1] == key)
            .unwrap_or_else(|| panic!("no {key} row: {events:?}"))
            .clone()
    };
    // at_s,event,requests,failed,failed_keepalive,failed_per_request,down_after_s,
    // last_sent_after_s,failed_after_down
    for key in ["steady", "drain", "rolling"] {
        let r = find(key);
        assert!(
            r[2].parse::<u64>().unwrap() > 0,
            "{key}: no requests: {r:?}"
        );
        assert_eq!(r[3], "0", "{key}: failed requests: {r:?}\n{report}");
    }
    let drain = find("drain");
    assert!(
        !drain[6].is_empty(),
        "HAProxy never marked the drained instance down: {drain:?}"
    );
    let kill = find("kill");
    assert!(
        !kill[6].is_empty(),
        "HAProxy never marked the killed instance down: {kill:?}"
    );
    assert_eq!(kill[8], "0", "failures after the mark: {kill:?}\n{report}");
    // Every access-log line of every instance names the client, none HAProxy.
    let clients = csv(&dir.join("clients.csv"));
    assert_eq!(clients.len(), 3, "{clients:?}");
    for c in &clients {
        let lines: u64 = c[1].parse().unwrap();
        assert!(lines > 0, "{c:?}");
        assert_eq!(c[2], c[1], "{c:?}");
        assert_eq!(c[3], "0", "{c:?}");
    }
    for f in [
        "rows.csv",
        "throughput.png",
        "p99.svg",
        "scaling.csv",
        "haproxy.log",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    fs::remove_dir_all(&out).unwrap();
}

/// Bad input is refused with the reason (exit 1) wherever the test runs, before anything is
/// started or written.
#[test]
fn cluster_refuses_a_bad_model_or_rate_and_other_experiments_its_flags() {
    let out = std::env::temp_dir().join(format!("weft-cluster-bad-{}", std::process::id()));
    for (args, why) in [
        (&["cluster", "--model", "forked"][..], "--model forked"),
        (
            &["cluster", "--rate=0"][..],
            "--rate must be a positive number",
        ),
        (&["cluster", "--runs", "0"][..], "--runs must be at least 1"),
        (
            &["fibers", "--rate", "100"][..],
            "belong to the cluster experiment",
        ),
    ] {
        let run = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
            .arg("experiment")
            .args(args)
            .arg("--quick")
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    assert!(!out.exists(), "a refused run wrote {}", out.display());
}
