//! The commands README.md and BENCHMARKS.md show a reader: every line of their shell code
//! blocks and every inline code span, split into words as a shell would (roughly: quotes
//! group, a `#` word starts a comment, `|`, `&`, `;` and redirections end the command).
//! Shared by the tests of weft (its subcommands, flags, scripts, examples) and of weft-bench
//! (its subcommands and flags), which each check the commands that run their binary.

use std::path::PathBuf;

/// One command as the documentation shows it.
#[derive(Debug)]
pub struct DocCommand {
    /// `README.md` or `BENCHMARKS.md`.
    pub file: &'static str,
    /// 1-based line where it starts.
    pub line: usize,
    pub words: Vec<String>,
}

impl std::fmt::Display for DocCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: `{}`", self.file, self.line, self.words.join(" "))
    }
}

/// The repository's root (both crates live two levels below it).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every command of README.md and BENCHMARKS.md.
pub fn commands() -> Vec<DocCommand> {
    let mut out = Vec::new();
    for file in ["README.md", "BENCHMARKS.md"] {
        let text = std::fs::read_to_string(repo_root().join(file)).expect(file);
        let mut fence: Option<String> = None;
        let mut prose = String::new();
        // (end of the line in `prose`, its line number in the file)
        let mut prose_lines = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if let Some(rest) = line.trim_start().strip_prefix("```") {
                fence = match fence {
                    Some(_) => None,
                    None => Some(rest.trim().to_string()),
                };
                continue;
            }
            match fence.as_deref() {
                // Shell blocks and plain ones (the command-line synopsis).
                Some("" | "sh" | "bash" | "console") => out.push(DocCommand {
                    file,
                    line: i + 1,
                    words: words(line),
                }),
                Some(_) => {}
                None => {
                    prose.push_str(line);
                    prose.push('\n');
                    prose_lines.push((prose.len(), i + 1));
                }
            }
        }
        // Inline code spans (single backticks; a span may go on over a line break).
        let mut rest = prose.as_str();
        let mut offset = 0;
        while let Some(start) = rest.find('`') {
            let Some(len) = rest[start + 1..].find('`') else {
                break;
            };
            let span = &rest[start + 1..start + 1 + len];
            let at = offset + start;
            let line = prose_lines
                .iter()
                .find(|&&(end, _)| end > at)
                .map_or(0, |&(_, line)| line);
            out.push(DocCommand {
                file,
                line,
                words: words(&span.replace('\n', " ")),
            });
            offset += start + len + 2;
            rest = &rest[start + len + 2..];
        }
    }
    out.retain(|c| !c.words.is_empty());
    out
}

/// `line` split into words up to the end of its first command.
pub fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    if ends_command(&word) {
                        return out;
                    }
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, c) => {
                if !started && c == '#' {
                    return out;
                }
                word.push(c);
                started = true;
            }
        }
    }
    if started && !ends_command(&word) {
        out.push(word);
    }
    out
}

fn ends_command(word: &str) -> bool {
    matches!(
        word,
        "|" | "&" | "&&" | "||" | ";" | ">" | "2>" | ">>" | "<"
    ) || word.starts_with('>')
        || word.starts_with("2>")
}

/// The arguments after `bin` if `c` runs it: `bin ...`, `target/release/bin ...`, after
/// `NAME=value` assignments or `taskset -c N`, or `cargo run ... -p bin -- ...`.
pub fn invocation<'a>(c: &'a DocCommand, bin: &str) -> Option<&'a [String]> {
    let w = &c.words;
    if w.first().map(String::as_str) == Some("cargo") {
        let runs_bin = w.get(1).map(String::as_str) == Some("run")
            && w.windows(2).any(|p| p[0] == "-p" && p[1] == bin)
            && !w.iter().any(|x| x == "--example");
        let dashes = w.iter().position(|x| x == "--")?;
        return runs_bin.then(|| &w[dashes + 1..]);
    }
    let mut i = 0;
    while i < w.len() {
        let x = w[i].as_str();
        let name = x.rsplit('/').next().unwrap_or(x);
        if name == bin && (x == bin || x.ends_with(&format!("target/release/{bin}"))) {
            return Some(&w[i + 1..]);
        }
        if x == "taskset" {
            i += 3;
        } else if x.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
        }) {
            i += 1;
        } else {
            return None;
        }
    }
    None
}
