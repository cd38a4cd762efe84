//! The recipe diff: the `[recipe]` and `[lab]` keys that differ between two manifests, grouped
//! by the manifest's sections, each with the comment its line carries.
use super::Paint;
use crate::catalog::Manifest;
use crate::present::report::RecipeChange;
use std::collections::BTreeMap;

/// The recipe part of `records diff a b`: each changed key by the manifest section it sits in,
/// with the comment its line carries.
pub fn view(ma: &Manifest, mb: &Manifest, changes: &[RecipeChange], paint: Paint) -> String {
    let (a, b) = (ma.id(), mb.id());
    let mut out = String::new();
    out.push_str(&paint.bold(&format!("Recipe {a} → {b}")));
    out.push('\n');
    if changes.is_empty() {
        out.push_str("  (no recipe changes)\n");
    }
    // Each manifest's text, read once for its sections and its comments.
    let lines = |m: &Manifest| -> Vec<String> {
        let text = std::fs::read_to_string(&m.path).unwrap_or_default();
        text.lines().map(str::to_string).collect()
    };
    let (la, lb) = (lines(ma), lines(mb));
    let (mut why_a, mut why_b) = (KeyComments::of(ma, &la), KeyComments::of(mb, &lb));
    for (section, group) in by_section(changes.to_vec(), (ma, &la), (mb, &lb)) {
        let indent = if section.is_empty() { "  " } else { "    " };
        if !section.is_empty() {
            out.push_str(&format!("  {section}\n"));
        }
        for c in group {
            let why = match &c {
                RecipeChange::Removed { key, .. } => why_a.take(key),
                RecipeChange::Added { key, .. } | RecipeChange::Changed { key, .. } => {
                    why_b.take(key)
                }
            };
            out.push_str(&match c {
                RecipeChange::Added { key, new } => {
                    paint.green(&format!("{indent}+ {key} = {new}"))
                }
                RecipeChange::Removed { key, old } => {
                    paint.red(&format!("{indent}- {key} = {old}"))
                }
                RecipeChange::Changed { key, old, new } => {
                    format!("{indent}~ {key}: {old} → {new}")
                }
            });
            if let Some(why) = why {
                out.push_str(&paint.dim(&format!("   # {why}")));
            }
            out.push('\n');
        }
    }
    out
}

/// The comment each `[recipe]` line of a manifest carries (`key = value   # why`), given once
/// per line: the first changed key of a table line shows it, its siblings do not repeat it.
struct KeyComments<'a> {
    lines: &'a [String],
    keys: BTreeMap<String, usize>,
    shown: std::collections::BTreeSet<usize>,
}

impl<'a> KeyComments<'a> {
    /// `lines`: `m`'s text.
    fn of(m: &Manifest, lines: &'a [String]) -> KeyComments<'a> {
        let keys = m.recipe_keys.iter().cloned().collect();
        KeyComments { lines, keys, shown: Default::default() }
    }

    /// The comment on `key`'s line, cut to 72 characters, unless shown already.
    fn take(&mut self, key: &str) -> Option<String> {
        let line = *self.keys.get(key)?;
        let text = self.lines.get(line.checked_sub(1)?)?;
        let (_, comment) = text.split_once(" # ")?;
        if !self.shown.insert(line) {
            return None;
        }
        let comment = comment.trim();
        Some(match comment.char_indices().nth(72) {
            Some((cut, _)) => format!("{}…", &comment[..cut]),
            None => comment.to_string(),
        })
    }
}

/// The changes grouped by the section of the manifest they sit in (the `# Model: ...`, `# Data`,
/// `# Optimizers`, `# Evaluation` comments of `[recipe]`, in the newer manifest's order; `[lab]`
/// keys last). A manifest without such comments gives one unnamed group.
fn by_section(
    changes: Vec<RecipeChange>,
    (a, a_lines): (&Manifest, &[String]),
    (b, b_lines): (&Manifest, &[String]),
) -> Vec<(String, Vec<RecipeChange>)> {
    let (sa, sb) = (sections(a, a_lines), sections(b, b_lines));
    // Sections in the order of their first key's line in the newer manifest.
    let mut first: BTreeMap<&String, usize> = BTreeMap::new();
    for (key, line) in &b.recipe_keys {
        if let Some(s) = sb.get(key) {
            let at = first.entry(s).or_insert(*line);
            *at = (*at).min(*line);
        }
    }
    let mut order: Vec<(&String, usize)> = first.into_iter().collect();
    order.sort_by_key(|(_, line)| *line);
    let order: Vec<&String> = order.into_iter().map(|(s, _)| s).collect();
    let section_of = |c: &RecipeChange| -> String {
        let key = match c {
            RecipeChange::Added { key, .. }
            | RecipeChange::Removed { key, .. }
            | RecipeChange::Changed { key, .. } => key,
        };
        if key.starts_with("lab.") {
            return "Lab (the common rule)".into();
        }
        let top = key.split('.').next().unwrap_or(key);
        [key.as_str(), top]
            .iter()
            .find_map(|k| sb.get(*k).or_else(|| sa.get(*k)))
            .cloned()
            .unwrap_or_default()
    };
    let rank = |s: &String| match order.iter().position(|o| *o == s) {
        Some(i) => i,
        None if s.starts_with("Lab") => usize::MAX,
        None => usize::MAX - 1,
    };
    let mut groups: Vec<(String, Vec<RecipeChange>)> = Vec::new();
    for c in changes {
        let s = section_of(&c);
        match groups.iter_mut().find(|(g, _)| *g == s) {
            Some((_, list)) => list.push(c),
            None => groups.push((s, vec![c])),
        }
    }
    groups.sort_by_key(|(s, _)| rank(s));
    groups
}

/// Each `[recipe]` key's section in `m`'s text: the first word of the nearest `# Word...`
/// comment line above it (Model, Data, Optimizers, Evaluation); `lines`: `m`'s text.
fn sections(m: &Manifest, lines: &[String]) -> BTreeMap<String, String> {
    let Some(start) = lines.iter().position(|l| l.trim() == "[recipe]") else {
        return BTreeMap::new();
    };
    m.recipe_keys
        .iter()
        .filter_map(|(key, line)| {
            let above = lines.get(start..line.saturating_sub(1))?;
            let heading = above.iter().rev().find(|l| l.starts_with("# "))?;
            let word = heading[2..].split(|c: char| !c.is_alphanumeric()).next()?;
            (!word.is_empty()).then(|| (key.clone(), word.to_string()))
        })
        .collect()
}
