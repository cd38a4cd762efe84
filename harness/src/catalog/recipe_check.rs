//! A manifest's recipe checked by the trainer's own rules when the catalog loads, long before
//! a build or a run would reject it: the newest trainer's recipe module is compiled into the
//! CLI ([`crate::trainer`]; it needs no libtorch), and it replays every record's recipe
//! (`replay N --head`), so its schema holds every key any manifest may use. Both scales are
//! read as the trainer reads them (the lab rule and `Recipe::validate` included), and an
//! unknown key is named with its line and the nearest key the trainer has.
use crate::toml_file;
use crate::trainer::recipe::{Recipe, Scale};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::Path;
use toml::de::{DeTable, DeValue};

/// The part of a manifest the trainer parses.
#[derive(Deserialize)]
struct RecipeOnly {
    #[allow(dead_code)] // read for its errors
    recipe: Recipe,
}

/// `Ok` when the trainer reads `text`'s recipe at both scales; else one error naming `path`
/// and the line (`records/84.toml:12: unknown recipe key `bigram_hashh`; did you mean ...`).
pub fn check(path: &Path, text: &str) -> Result<(), String> {
    let p = path.display();
    if let Err(e) = toml::from_str::<RecipeOnly>(text) {
        let line = toml_file::error_line(text, &e);
        let message = e.message().trim();
        return Err(match unknown_key(message) {
            Some((key, expected)) => {
                let path_of = key_lines(text)
                    .into_iter()
                    .find(|(k, l)| *l == line && k.rsplit('.').next() == Some(key))
                    .map_or(key.to_string(), |(k, _)| k);
                let prefix = path_of.strip_suffix(key).unwrap_or("");
                let known: BTreeSet<String> =
                    expected.iter().map(|k| format!("{prefix}{k}")).collect();
                let hint = suggest(&path_of, &known)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                format!("{p}:{line}: unknown recipe key `{path_of}`{hint}")
            }
            None => format!("{p}:{line}: recipe: {message}"),
        });
    }
    for (scale, name) in [(Scale::Full, "full"), (Scale::Lab, "lab")] {
        if let Err(e) = Recipe::from_manifest_str(text, scale, None) {
            let e = format!("{e:#}");
            // The trainer's rules name the key (`recipe: mtp = [..] needs ...`): give its line.
            let line = key_lines(text)
                .into_iter()
                .find(|(k, _)| e.contains(&format!(" {k} =")))
                .map_or(String::new(), |(_, l)| format!("{l}:"));
            return Err(format!("{p}:{line} the recipe at {name} scale: {e}"));
        }
    }
    Ok(())
}

/// A recipe table with its manifest's `[lab]`, read as the trainer reads a manifest at `scale`
/// (the lab rule at `steps` or `[lab] steps`, and `Recipe::validate`): the one way the
/// harness types a recipe (`Manifest::typed_recipe`, and an upstream record's merged rows).
pub fn typed(
    recipe: &toml::Table,
    lab: &toml::Table,
    scale: Scale,
    steps: Option<u64>,
) -> anyhow::Result<Recipe> {
    Recipe::from_manifest_str(&toml::to_string(&trainer_view(recipe, lab))?, scale, steps)
}

/// A manifest as its trainer reads it: `[recipe]` and `[lab]`, nothing else.
pub fn trainer_view(recipe: &toml::Table, lab: &toml::Table) -> toml::Table {
    let mut doc = toml::Table::new();
    doc.insert("recipe".into(), toml::Value::Table(recipe.clone()));
    doc.insert("lab".into(), toml::Value::Table(lab.clone()));
    doc
}

/// serde's `unknown field `x`, expected one of `a`, `b``: the field and the expected ones.
fn unknown_key(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, rest) = rest.split_once('`')?;
    let expected = rest.split('`').skip(1).step_by(2).collect();
    Some((key, expected))
}

/// Every key path under `[recipe]` (`lr`, `rotary`, `rotary.base`) and the line it is on.
pub fn key_lines(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let Ok(doc) = DeTable::parse(text) else {
        return out;
    };
    if let Some((_, recipe)) = doc.get_ref().iter().find(|(k, _)| k.get_ref() == "recipe") {
        if let DeValue::Table(t) = recipe.get_ref() {
            walk(t, "", text, &mut out);
        }
    }
    out
}

fn walk(table: &DeTable, prefix: &str, text: &str, out: &mut Vec<(String, usize)>) {
    for (key, value) in table.iter() {
        let path = format!("{prefix}{}", key.get_ref());
        let line = text[..key.span().start.min(text.len())].matches('\n').count() + 1;
        out.push((path.clone(), line));
        if let DeValue::Table(t) = value.get_ref() {
            walk(t, &format!("{path}."), text, out);
        }
    }
}

/// The known key closest to `key`, if it is close enough to be a slip of the keyboard.
fn suggest<'a>(key: &str, known: &'a BTreeSet<String>) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_keys_have_paths_and_lines() {
        let text = "[record]\nx = 1\n\n[recipe]\nlr = 0.1\nrotary = { base = 1e4 }\n\n[recipe.muon]\nlr = 0.05\n\n[lab]\nsteps = 3\n";
        let keys = key_lines(text);
        let want = [("lr", 5), ("rotary", 6), ("rotary.base", 6), ("muon", 8), ("muon.lr", 9)];
        let got: BTreeSet<(String, usize)> = keys.into_iter().collect();
        for (k, l) in want {
            assert!(got.contains(&(k.to_string(), l)), "{k}:{l} missing from {got:?}");
        }
        assert_eq!(got.len(), want.len(), "{got:?}");
    }

    #[test]
    fn serdes_unknown_field_message_gives_the_key_and_the_expected_ones() {
        let m = "unknown field `bsae`, expected `base` or `yarn`";
        assert_eq!(unknown_key(m), Some(("bsae", vec!["base", "yarn"])));
        assert_eq!(unknown_key("invalid type: string \"x\", expected usize"), None);
    }

    #[test]
    fn near_misses_are_suggested_and_strangers_are_not() {
        let known: BTreeSet<String> =
            ["warmup_steps", "lr", "muon.lr"].iter().map(|s| s.to_string()).collect();
        assert_eq!(suggest("warmup_stesp", &known), Some("warmup_steps"));
        assert_eq!(suggest("muon.rl", &known), Some("muon.lr"));
        assert_eq!(suggest("batch_size", &known), None);
    }
}
