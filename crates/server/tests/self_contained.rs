//! The repository explains itself: no tracked file points a reader at a document that is not
//! in the checkout (the design notes and the papers live outside it; code cites the papers by
//! title and authors, and ARCHITECTURE.md holds the design).
//!
//! `results/` is left out: its `report.md` files are measured outputs, written by
//! `weft-bench experiment` and committed as they came; a report written before the citations
//! changed keeps its old "Paper:" line until the experiment runs again.

use std::path::Path;
use std::process::Command;

/// What must not appear: split so that this file does not match itself.
const MISSING: [&str; 2] = [concat!("DESIGN", ".md"), concat!("papers", "/")];

/// Path prefixes of measured outputs, which are regenerated rather than edited.
const SKIPPED: [&str; 1] = ["results/"];

#[test]
fn no_tracked_file_refers_to_a_document_outside_the_checkout() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Tracked files and new ones not yet committed (but not ignored ones, such as target/).
    let listed = Command::new("git")
        .args(["ls-files", "-z", "-co", "--exclude-standard"])
        .current_dir(&root)
        .output();
    let out = match listed {
        Ok(o) if o.status.success() => o.stdout,
        Ok(_) | Err(_) => {
            println!("skipped: not a git checkout, or git is not installed");
            return;
        }
    };
    let mut found = Vec::new();
    let mut checked = 0;
    for name in out.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name);
        if SKIPPED.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        // A file deleted in the working tree but still in the index, or not readable.
        let Ok(bytes) = std::fs::read(root.join(&*name)) else {
            continue;
        };
        checked += 1;
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in text.lines().enumerate() {
            if MISSING.iter().any(|m| line.contains(m)) {
                found.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(checked > 0, "git listed no files under {}", root.display());
    assert!(
        found.is_empty(),
        "files refer to documents that are not in the repository (cite the paper by title and \
         authors, or ARCHITECTURE.md):\n{}",
        found.join("\n")
    );
}
