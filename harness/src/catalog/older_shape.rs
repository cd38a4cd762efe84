//! A manifest as a record's own tree reads it. The checkout's trainer reads a technique's
//! settings from its section (`[recipe.smear] gate_channels = 12`); a tree written before the
//! section existed reads the keys it replaced (`smear = 12`). Each registry entry says how its
//! older keys come from its section (`Technique::older`), and a tree run gets the manifest
//! written that way: the same values, so the tree and `--head` still run the same recipe.
use crate::trainer::recipe::registry::{Older, REGISTRY};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// `recipe` with every section that has older keys written as those keys.
pub fn flatten(recipe: &mut Table) {
    for t in REGISTRY.iter().filter(|t| !t.older.is_empty()) {
        let Some(Value::Table(section)) = recipe.remove(t.key) else { continue };
        for &(key, from) in t.older {
            let value = match from {
                Older::Field(field) => section.get(field).cloned(),
                Older::On => Some(Value::Boolean(true)),
                Older::Is(field, choice) => {
                    Some(Value::Boolean(section.get(field).and_then(Value::as_str) == Some(choice)))
                }
            };
            // A key that is off stays absent, as every key after #1 means off when absent: a
            // tree older than the key would not know it.
            if let Some(v) = value.filter(|v| *v != Value::Boolean(false)) {
                recipe.insert(key.into(), v);
            }
        }
    }
}

/// The manifest `text` in the older shape: its `[recipe]` flattened, the rest as it is.
pub fn manifest_text(text: &str) -> Result<String> {
    let mut doc: Table = toml::from_str(text)?;
    if let Some(Value::Table(recipe)) = doc.get_mut("recipe") {
        flatten(recipe);
    }
    Ok(toml::to_string(&doc)?)
}

/// Writes `manifest` in the older shape into `dir`, under its own file name (the trainer names
/// a main record by its file stem), and returns that path.
pub fn write(manifest: &Path, dir: &Path) -> Result<PathBuf> {
    let text = std::fs::read_to_string(manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let flat = manifest_text(&text).with_context(|| format!("{}", manifest.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let out = dir.join(manifest.file_name().context("a manifest has a file name")?);
    corpus::fs::write_atomic(&out, flat.as_bytes())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_with_older_keys_is_written_as_them_and_the_others_stay() {
        let text =
            "[record]\nnumber = 40\n\n[recipe]\nlr = 0.1\n\n[recipe.smear]\ngate_channels = 12\n\n\
                    [recipe.muon]\nlr = 0.05\n\n[lab]\nsteps = 3\n";
        let flat: Table = toml::from_str(&manifest_text(text).unwrap()).unwrap();
        let recipe = flat["recipe"].as_table().unwrap();
        assert_eq!(recipe.get("smear"), Some(&Value::Integer(12)), "{recipe:?}");
        assert_eq!(recipe["muon"]["lr"].as_float(), Some(0.05), "a table-shaped section stays");
        assert_eq!(recipe["lr"].as_float(), Some(0.1));
        assert_eq!(flat["lab"]["steps"].as_integer(), Some(3));
        assert_eq!(flat["record"]["number"].as_integer(), Some(40));
    }

    #[test]
    fn a_choice_writes_the_switch_of_its_value_and_leaves_the_others_absent() {
        let text = "[precision]\nembeddings = true\nadam_state = \"fp32\"\nloss = false\n";
        let mut recipe: Table = toml::from_str(text).unwrap();
        flatten(&mut recipe);
        let on = |k: &str| recipe.get(k) == Some(&Value::Boolean(true));
        assert!(on("bf16_embeddings") && on("adam_fp32_state"), "{recipe:?}");
        for off in ["bf16_adam_state", "bf16_loss", "bf16_linears", "precision"] {
            assert_eq!(recipe.get(off), None, "{off}: #62's tree reads it absent, as off");
        }
    }

    #[test]
    fn a_section_that_is_a_switch_writes_its_key_on() {
        let mut recipe: Table = toml::from_str("[key_offset]\nhalf = true\n").unwrap();
        flatten(&mut recipe);
        assert_eq!(recipe.get("key_offset"), Some(&Value::Boolean(true)));
        assert_eq!(recipe.get("key_offset_half"), Some(&Value::Boolean(true)));
        let mut quarter: Table = toml::from_str("[key_offset]\nhalf = false\n").unwrap();
        flatten(&mut quarter);
        assert_eq!(quarter.get("key_offset"), Some(&Value::Boolean(true)));
        assert_eq!(
            quarter.get("key_offset_half"),
            None,
            "off is absent: #49's tree has no such key"
        );
    }
}
