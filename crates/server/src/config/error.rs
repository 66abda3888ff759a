//! [`ConfigError`]: why a configuration was refused, and where: the file, the line and column
//! of the setting, and its dotted key (`site[1].hosts[0]`), found from the TOML document's
//! spans. Every refusal of `Config::from_toml` and `Config::load` is one of these.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a configuration was refused. Its `Display` is one line, each part there when known:
/// `FILE: line L, column C: KEY: MESSAGE` (as `nginx -t` names the file and line).
///
/// ```
/// let err = weft::Config::from_toml("[timeouts]\nheader_read = \"soon\"\n").unwrap_err();
/// assert_eq!(err.line, Some(2));
/// assert_eq!(err.key.as_deref(), Some("timeouts.header_read"));
/// assert!(err.to_string().starts_with("line 2, column 15: timeouts.header_read: "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// The file the configuration was read from (none for text given directly).
    pub file: Option<PathBuf>,
    /// The line of the setting, from 1.
    pub line: Option<usize>,
    /// The column of the setting, from 1, in characters.
    pub column: Option<usize>,
    /// The setting's dotted key, arrays' elements as `[i]`.
    pub key: Option<String>,
    /// Why it was refused.
    pub message: String,
    /// The configuration's other problems, each found once those before it were left out
    /// (`weft check` reports them all, as a linter does); written on lines of their own.
    pub more: Box<[ConfigError]>,
}

impl ConfigError {
    /// A refusal with only a message.
    pub fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: None,
            line: None,
            column: None,
            key: None,
            message: message.into(),
            more: Box::default(),
        }
    }

    /// The same refusal of the setting at byte `at` of `text` (its line and column).
    pub(crate) fn at(mut self, text: &str, at: usize) -> ConfigError {
        let before = &text[..at.min(text.len())];
        self.line = Some(before.matches('\n').count() + 1);
        self.column = Some(before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1);
        self
    }

    /// The same refusal, of the setting named `key`.
    pub(crate) fn key(mut self, key: impl Into<String>) -> ConfigError {
        let key = key.into();
        self.key = (!key.is_empty()).then_some(key);
        self
    }

    /// The same refusal, of a configuration read from `file`.
    pub fn in_file(mut self, file: &Path) -> ConfigError {
        self.file = Some(file.to_path_buf());
        self.more = self
            .more
            .into_vec()
            .into_iter()
            .map(|e| e.in_file(file))
            .collect();
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, "line {line}, column {column}: ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)?;
        for e in &self.more {
            write!(f, "\n{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// A refusal from code that words its errors as text (a reload source given to
/// `ServerBuilder::reload_with`).
impl From<String> for ConfigError {
    fn from(message: String) -> ConfigError {
        ConfigError::new(message)
    }
}

/// For callers that report errors as text (the command line).
impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_is_written_when_known() {
        let text = "a = 1\n[b]\nc = 2\n";
        let e = ConfigError::new("bad")
            .at(text, text.find("c =").unwrap())
            .key("b.c");
        assert_eq!(e.to_string(), "line 3, column 1: b.c: bad");
        let e = e.in_file(Path::new("/etc/weft.toml"));
        assert_eq!(e.to_string(), "/etc/weft.toml: line 3, column 1: b.c: bad");
        assert_eq!(ConfigError::new("no").to_string(), "no");
        assert_eq!(ConfigError::new("no").key("").key, None);
        // Columns count characters, not bytes.
        let e = ConfigError::new("x").at("é = 1", "é = ".len());
        assert_eq!((e.line, e.column), (Some(1), Some(5)));
    }
}
