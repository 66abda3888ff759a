//! The `weft-bench` binary: see the library's documentation and `weft-bench --help`.

#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = weft_bench::cli::Cli::parse();
    if let Err(e) = weft_bench::cli::run(cli) {
        eprintln!("weft-bench: {e}");
        std::process::exit(1);
    }
}
