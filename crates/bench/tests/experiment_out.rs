//! `weft-bench experiment --quick` never writes over a full run's results: it refuses before
//! starting anything, and leaves every file as it was.

use std::fs;
use std::process::Command;

#[test]
fn a_quick_run_refuses_a_full_runs_folder_and_changes_nothing() {
    let out = std::env::temp_dir().join(format!("weft-bench-out-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let dir = out.join("fibers");
    fs::create_dir_all(&dir).unwrap();
    // Results as committed before folders were marked: a full run's.
    fs::write(dir.join("report.md"), "measured\n").unwrap();
    fs::write(dir.join("rows.csv"), "server,rps\n").unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(["experiment", "fibers", "--quick", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{err}");
    assert!(err.contains("holds a full run's results"), "{err}");
    assert!(err.contains("results/quick/"), "{err}");
    let mut names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["report.md", "rows.csv"]);
    assert_eq!(
        fs::read_to_string(dir.join("report.md")).unwrap(),
        "measured\n"
    );
    // Marked as a full run's, it is refused the same way.
    fs::write(dir.join("run-kind.txt"), "full\n").unwrap();
    fs::remove_file(dir.join("report.md")).unwrap();
    fs::remove_file(dir.join("rows.csv")).unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_weft-bench"))
        .args(["experiment", "fibers", "--quick", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert_eq!(
        fs::read_to_string(dir.join("run-kind.txt")).unwrap(),
        "full\n"
    );
    fs::remove_dir_all(&out).unwrap();
}
