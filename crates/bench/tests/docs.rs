//! README.md and BENCHMARKS.md name only weft-bench subcommands and flags that exist: every
//! command they show that runs weft-bench is parsed by its own command line (placeholders
//! such as URL or PID may fail to parse as values; an unknown subcommand or flag may not).

use clap::error::ErrorKind;
use clap::Parser;

#[path = "../../server/tests/common/doc_commands.rs"]
mod doc_commands;

#[test]
fn the_docs_name_only_weft_bench_subcommands_and_flags_that_exist() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for c in doc_commands::commands() {
        let Some(args) = doc_commands::invocation(&c, "weft-bench") else {
            continue;
        };
        if args.is_empty() {
            continue;
        }
        checked += 1;
        let line = std::iter::once("weft-bench").chain(args.iter().map(String::as_str));
        if let Err(e) = weft_bench::cli::Cli::try_parse_from(line) {
            if matches!(
                e.kind(),
                ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand
            ) {
                wrong.push(format!("{c}: {}", e.render()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 20, "only {checked} weft-bench commands found");
}
