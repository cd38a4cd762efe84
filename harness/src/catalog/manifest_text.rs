//! A manifest's tables as written: key order, inline tables, dotted sub-tables and comments kept
//! (toml_edit), where a round trip through `toml::Table` would print nested tables as top-level
//! sections and drop every comment.
use anyhow::{Context, Result};
use std::path::Path;
use toml_edit::DocumentMut;

/// Table `key` of the TOML file at `path`, with its `[key]` header, as the file writes it.
pub fn table_as_written(path: &Path, key: &str) -> Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: DocumentMut =
        text.parse().with_context(|| format!("{}: not valid TOML", path.display()))?;
    let item = doc.get(key).with_context(|| format!("{}: no [{key}] table", path.display()))?;
    let mut only = DocumentMut::new();
    only.insert(key, item.clone());
    // The comment block above `[key]` (a section divider) belongs to the file, not the table.
    if let Some(t) = only.get_mut(key).and_then(|i| i.as_table_mut()) {
        t.decor_mut().set_prefix("");
    }
    Ok(only.to_string().trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_comments_inline_tables_and_sub_tables_under_their_parent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        let text = "\
[record]
number = 1

# Optimizer
[recipe]
# Model
n_layer = 12              # layers
rotary = { base = 1024.0 }

[recipe.muon]
lr = 0.05   # Muon's lr

[lab]
n_layer = 4
";
        std::fs::write(&path, text).unwrap();
        let recipe = table_as_written(&path, "recipe").unwrap();
        assert_eq!(
            recipe,
            "[recipe]\n# Model\nn_layer = 12              # layers\nrotary = { base = 1024.0 }\n\n\
             [recipe.muon]\nlr = 0.05   # Muon's lr"
        );
        assert_eq!(table_as_written(&path, "lab").unwrap(), "[lab]\nn_layer = 4");
        let err = table_as_written(&path, "evidence").unwrap_err();
        assert!(format!("{err:#}").contains("m.toml: no [evidence] table"), "{err:#}");
    }
}
