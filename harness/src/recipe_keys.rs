//! Recipe keys checked when a manifest is loaded, long before a build would reject them.
//!
//! The rule: the newest trainer replays every record's recipe (`replay N --head`), so its
//! schema holds every key that any manifest may use, and record #1's manifest together with the
//! newest manifest write every key of that schema (a technique the newest record does not use
//! is still written there, switched off). A `[recipe]` key found in neither is unknown. The
//! keys of those two manifests themselves are checked by the trainer, whose tests load them.
use crate::catalog::Manifest;
use std::collections::BTreeSet;
use toml::de::{DeTable, DeValue};

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

/// The known keys: those of the first and the newest manifest (see the rule above).
pub fn known(manifests: &[Manifest]) -> BTreeSet<String> {
    let ends = [manifests.first(), manifests.last()];
    ends.into_iter().flatten().flat_map(|m| m.recipe_keys.iter().map(|(k, _)| k.clone())).collect()
}

/// `file:line: unknown recipe key` for each key of `m` that is not known, with the closest
/// known key when one is near.
pub fn check(m: &Manifest, known: &BTreeSet<String>) -> Result<(), String> {
    let problems: Vec<String> = m
        .recipe_keys
        .iter()
        .filter(|(k, _)| !known.contains(k))
        .map(|(k, line)| {
            let hint =
                suggest(k, known).map(|s| format!("; did you mean `{s}`?")).unwrap_or_default();
            format!("{}:{line}: unknown recipe key `{k}`{hint}", m.path.display())
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} (the trainer's keys are those of the first and the newest manifest)",
        problems.join("\n")
    ))
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
    fn near_misses_are_suggested_and_strangers_are_not() {
        let known: BTreeSet<String> =
            ["warmup_steps", "lr", "muon.lr"].iter().map(|s| s.to_string()).collect();
        assert_eq!(suggest("warmup_stesp", &known), Some("warmup_steps"));
        assert_eq!(suggest("muon.rl", &known), Some("muon.lr"));
        assert_eq!(suggest("batch_size", &known), None);
    }
}
