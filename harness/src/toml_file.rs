//! Reading a TOML file into a type, with errors as people fix them: `path:line: message`.
use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use std::path::Path;

/// The 1-based line of `text` where `error` points (0 when it points nowhere).
pub fn error_line(text: &str, error: &toml::de::Error) -> usize {
    error.span().map_or(0, |s| text[..s.start.min(text.len())].matches('\n').count() + 1)
}

/// `path` parsed as a `T`; a parse error names the file and line.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let line = error_line(&text, &e);
        anyhow::anyhow!("{}:{line}: {}", path.display(), e.message().trim())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)] // read for its errors
    struct Two {
        a: u32,
        b: u32,
    }

    #[test]
    fn a_parse_error_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("two.toml");
        std::fs::write(&path, "a = 1\n\nb = \"x\"\n").unwrap();
        let err = read::<Two>(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}:3: ", path.display())), "{err}");
        std::fs::write(&path, "a = 1\nb = 2\n").unwrap();
        assert_eq!(read::<Two>(&path).unwrap().b, 2);
    }
}
