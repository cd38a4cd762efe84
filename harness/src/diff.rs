//! `records diff A B`: what changed between two records, in three parts: the commits between
//! them (the series view), the recipe diff of their manifests, and the code diff of their trees.
//! Either order works; from a newer record to an older one the commits are listed as undone.
use crate::catalog::{pr_text, Catalog, Manifest};
use crate::figures;
use crate::replays::{self, Replay};
use crate::series::{apply, recorded, tree, Series};
use crate::table::{Format, Table};
use anyhow::Result;
use similar::{ChangeTag, TextDiff};
use std::collections::BTreeMap;
use std::path::Path;

/// Which parts to print (the facts side by side always come first).
#[derive(Debug, Clone, Copy)]
pub struct Parts {
    pub series: bool,
    pub recipe: bool,
    pub code: bool,
}

/// ANSI colour, on only when asked (a terminal that did not opt out).
#[derive(Debug, Clone, Copy)]
pub struct Paint(pub bool);

impl Paint {
    fn wrap(self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub fn red(self, s: &str) -> String {
        self.wrap("31", s)
    }
    pub fn green(self, s: &str) -> String {
        self.wrap("32", s)
    }
    pub fn cyan(self, s: &str) -> String {
        self.wrap("36", s)
    }
    pub fn bold(self, s: &str) -> String {
        self.wrap("1", s)
    }
    pub fn dim(self, s: &str) -> String {
        self.wrap("2", s)
    }
    /// Colours one diff body line by its origin character.
    pub fn diff_line(self, line: &str) -> String {
        let (text, nl) = match line.strip_suffix('\n') {
            Some(t) => (t, "\n"),
            None => (line, ""),
        };
        let painted = match text.as_bytes().first() {
            Some(b'+') => self.green(text),
            Some(b'-') => self.red(text),
            Some(b'@') => self.cyan(text),
            _ => text.to_string(),
        };
        format!("{painted}{nl}")
    }
}

/// One key of a recipe (or lab) table that differs; keys are dotted paths.
#[derive(Debug, Clone, PartialEq)]
pub enum RecipeChange {
    Added { key: String, new: toml::Value },
    Removed { key: String, old: toml::Value },
    Changed { key: String, old: toml::Value, new: toml::Value },
}

/// The recipe and lab keys that differ from `a` to `b`, sorted by key.
pub fn recipe_changes(a: &Manifest, b: &Manifest) -> Vec<RecipeChange> {
    let (mut fa, mut fb) = (BTreeMap::new(), BTreeMap::new());
    flatten("", &a.recipe, &mut fa);
    flatten("lab.", &a.lab, &mut fa);
    flatten("", &b.recipe, &mut fb);
    flatten("lab.", &b.lab, &mut fb);
    let keys: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    keys.into_iter()
        .filter_map(|k| match (fa.get(k), fb.get(k)) {
            (Some(o), Some(n)) if o != n => {
                Some(RecipeChange::Changed { key: k.clone(), old: o.clone(), new: n.clone() })
            }
            (None, Some(n)) => Some(RecipeChange::Added { key: k.clone(), new: n.clone() }),
            (Some(o), None) => Some(RecipeChange::Removed { key: k.clone(), old: o.clone() }),
            _ => None,
        })
        .collect()
}

fn flatten(prefix: &str, table: &toml::Table, out: &mut BTreeMap<String, toml::Value>) {
    for (k, v) in table {
        match v {
            toml::Value::Table(t) => flatten(&format!("{prefix}{k}."), t, out),
            _ => {
                out.insert(format!("{prefix}{k}"), v.clone());
            }
        }
    }
}

/// Files of a tree: path → (mode, content).
pub type Files = BTreeMap<String, (i32, Vec<u8>)>;

/// Lines added and removed in one file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileStat {
    pub path: String,
    pub added: usize,
    pub removed: usize,
}

/// The unified diff from `old` to `new` (one section per changed file) and its stat.
pub fn code_diff(old: &Files, new: &Files, paint: Paint) -> (String, Vec<FileStat>) {
    let mut out = String::new();
    let mut stats = Vec::new();
    let paths: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for path in paths {
        let (o, n) = (old.get(path), new.get(path));
        if o == n {
            continue;
        }
        let a_name = if o.is_some() { format!("a/{path}") } else { "/dev/null".into() };
        let b_name = if n.is_some() { format!("b/{path}") } else { "/dev/null".into() };
        out.push_str(&paint.bold(&format!("diff {a_name} {b_name}")));
        out.push('\n');
        if let (Some((om, _)), Some((nm, _))) = (o, n) {
            if om != nm {
                out.push_str(&format!("mode {om:o} → {nm:o}\n"));
            }
        }
        let (ob, nb) = (o.map_or(&[][..], |x| &x.1), n.map_or(&[][..], |x| &x.1));
        let (Ok(ot), Ok(nt)) = (std::str::from_utf8(ob), std::str::from_utf8(nb)) else {
            out.push_str(&format!("Binary files {a_name} and {b_name} differ\n"));
            stats.push(FileStat { path: path.clone(), added: 0, removed: 0 });
            continue;
        };
        let td = TextDiff::from_lines(ot, nt);
        let mut stat = FileStat { path: path.clone(), added: 0, removed: 0 };
        if ot != nt {
            out.push_str(&paint.bold(&format!("--- {a_name}\n+++ {b_name}")));
            out.push('\n');
        }
        for hunk in td.unified_diff().context_radius(3).iter_hunks() {
            out.push_str(&paint.cyan(&hunk.header().to_string()));
            out.push('\n');
            for change in hunk.iter_changes() {
                let sign = match change.tag() {
                    ChangeTag::Delete => {
                        stat.removed += 1;
                        '-'
                    }
                    ChangeTag::Insert => {
                        stat.added += 1;
                        '+'
                    }
                    ChangeTag::Equal => ' ',
                };
                out.push_str(&paint.diff_line(&format!("{sign}{}", change.to_string_lossy())));
                if change.missing_newline() {
                    out.push_str("\n\\ No newline at end of file\n");
                }
            }
        }
        stats.push(stat);
    }
    (out, stats)
}

/// `records diff a b` as text: the head (titles and the facts side by side) and the body (the
/// commits, recipe and code), so the curves can go between them, before a long code diff.
pub struct Rendered {
    pub head: String,
    pub body: String,
}

/// Renders `records diff a b`.
pub fn render(root: &Path, a: u32, b: u32, parts: Parts, paint: Paint) -> Result<Rendered> {
    let catalog = Catalog::load(root)?;
    let series = Series::load(root)?;
    let (ma, mb) = (catalog.get(a)?, catalog.get(b)?);
    let (pa, pb) = (series.position(a)?, series.position(b)?);
    let mut head = paint.bold(&format!(
        "records diff #{a} → #{b}\n  #{a}: {}\n  #{b}: {}\n",
        ma.record.title, mb.record.title
    ));
    head.push('\n');
    head.push_str(&facts_view(root, ma, mb)?);
    let mut out = String::new();
    let need_trees = parts.code || parts.series;
    let (old, new) = if need_trees {
        let repo = apply::scratch_repo()?;
        let trees = recorded::trees(&catalog, &series, &repo, if pa < pb { a } else { b })?;
        (tree::files(&repo, trees[&a])?, tree::files(&repo, trees[&b])?)
    } else {
        Default::default()
    };
    let (code, stats) = code_diff(&old, &new, paint);
    if parts.series {
        out.push('\n');
        out.push_str(&series_view(&catalog, &series, a, b, paint)?);
        out.push_str(&stat_view(&stats));
    }
    if parts.recipe {
        out.push('\n');
        out.push_str(&paint.bold(&format!("Recipe #{a} → #{b}")));
        out.push('\n');
        let changes = recipe_changes(ma, mb);
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
        for (section, group) in by_section(changes, (ma, &la), (mb, &lb)) {
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
    }
    if parts.code {
        out.push('\n');
        out.push_str(&paint.bold(&format!("Code #{a} → #{b}")));
        out.push('\n');
        out.push_str(if code.is_empty() { "  (the trees are identical)\n" } else { &code });
    }
    Ok(Rendered { head, body: out })
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

/// The two records side by side: upstream's facts, and this machine's lab result of
/// each when there is one (final val loss and train time, ours).
fn facts_view(root: &Path, a: &Manifest, b: &Manifest) -> Result<String> {
    let (ra, rb) = (&a.record, &b.record);
    let change = |x: f64, y: f64, f: fn(f64) -> String| {
        format!("{} ({})", f(y - x), figures::pct_delta(100.0 * (y - x) / x))
    };
    let head =
        [String::new(), format!("#{}", ra.number), format!("#{}", rb.number), "change".into()];
    let mut t = Table::new(head).left(3);
    let time = |r: &crate::catalog::RecordFacts| {
        format!("{} ({})", r.official_time_text, figures::secs(r.official_time_s))
    };
    t.row([
        "official time (8xH100)".into(),
        time(ra),
        time(rb),
        change(ra.official_time_s, rb.official_time_s, figures::secs_delta),
    ]);
    t.row([
        "steps".into(),
        ra.steps.to_string(),
        rb.steps.to_string(),
        change(ra.steps as f64, rb.steps as f64, figures::count_delta),
    ]);
    t.row([
        "tokens".into(),
        format!("{:.1}M", ra.tokens as f64 / 1e6),
        format!("{:.1}M", rb.tokens as f64 / 1e6),
        change(ra.tokens as f64, rb.tokens as f64, figures::millions_delta),
    ]);
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    if let (Some(x), Some(y)) = (mean(&a.evidence.val_losses), mean(&b.evidence.val_losses)) {
        let n = |m: &Manifest| m.evidence.val_losses.len();
        t.row([
            "official mean val loss".into(),
            format!("{} ({} logs)", figures::loss(x), n(a)),
            format!("{} ({} logs)", figures::loss(y), n(b)),
            figures::loss_delta(y - x),
        ]);
    }
    t.row(["date".into(), ra.date.clone(), rb.date.clone(), String::new()]);
    let results = crate::paths::results_dir(root);
    let (la, lb) = (replays::lab_result_in(&results, a)?, replays::lab_result_in(&results, b)?);
    if la.is_some() || lb.is_some() {
        let cell = |r: &Option<Replay>, f: &dyn Fn(&crate::verdict::Verdict) -> Option<String>| {
            r.as_ref().and_then(|r| r.verdict.as_ref()).and_then(f).unwrap_or("not replayed".into())
        };
        let loss = |v: &crate::verdict::Verdict| {
            let mark = if v.reached { "reached" } else { "NOT REACHED" };
            v.loss.as_ref().map(|l| {
                format!("{} ({mark} {})", figures::loss(l.mean), figures::loss(v.target_loss))
            })
        };
        let time = |v: &crate::verdict::Verdict| {
            v.time_s.as_ref().map(|t| format!("{} / {} steps", figures::secs(t.mean), v.steps))
        };
        t.row([
            "ours, lab: final val loss".into(),
            cell(&la, &loss),
            cell(&lb, &loss),
            String::new(),
        ]);
        t.row(["ours, lab: train time".into(), cell(&la, &time), cell(&lb, &time), String::new()]);
    }
    let mut out = t.render(Format::Text);
    if la.is_some() || lb.is_some() {
        out.push_str("  ours, lab: the newest replay on this machine over the record's whole lab budget (records replay N); its times are not comparable with the official ones\n");
    }
    Ok(out)
}

/// The commits between the two records, with titles and line counts; from newer to older they
/// are listed newest first as undone (their counts swapped).
fn series_view(catalog: &Catalog, series: &Series, a: u32, b: u32, paint: Paint) -> Result<String> {
    let forward = series.position(a)? <= series.position(b)?;
    let (older, newer) = if forward { (a, b) } else { (b, a) };
    let mut records: Vec<_> = series.between(older, newer)?.iter().collect();
    let mut out = if forward {
        format!("{}\n", paint.bold(&format!("Commits from #{a} to #{b}")))
    } else {
        records.reverse();
        format!(
            "{}\n",
            paint.bold(&format!("Commits undone from #{a} back to #{b} (newest first)"))
        )
    };
    if records.is_empty() {
        out.push_str("  (none: same record)\n");
    }
    for r in records {
        let counts: Vec<(usize, usize)> = r.commits.iter().map(|c| c.counts()).collect();
        let (add, del) = counts.iter().fold((0, 0), |s, c| (s.0 + c.0, s.1 + c.1));
        let (add, del) = if forward { (add, del) } else { (del, add) };
        let title = &catalog.get(r.number)?.record.title;
        out.push_str(&format!(
            "  #{:<3} {title}  ({} commit(s), {} {})\n",
            r.number,
            r.commits.len(),
            paint.green(&format!("+{add}")),
            paint.red(&format!("-{del}"))
        ));
        let mut commits: Vec<_> = r.commits.iter().zip(&counts).enumerate().collect();
        if !forward {
            commits.reverse();
        }
        let upstream = &catalog.get(r.number)?.upstream;
        for (k, (c, &(ca, cd))) in commits {
            let (ca, cd) = if forward { (ca, cd) } else { (cd, ca) };
            // The upstream record the commit ports, when the manifest lists it: its time.
            let named = c.subject.strip_prefix('#').and_then(|s| s.split_once(':'));
            let named = named.and_then(|(n, _)| n.parse::<u32>().ok());
            let when = upstream
                .iter()
                .find(|u| Some(u.number) == named)
                .map_or(String::new(), |u| format!("  [{}, {}]", u.time_text, pr_text(u.pr)));
            out.push_str(&format!(
                "       {}/{} {}  {} {}{when}\n",
                k + 1,
                r.commits.len(),
                c.subject,
                paint.green(&format!("+{ca}")),
                paint.red(&format!("-{cd}"))
            ));
        }
    }
    Ok(out)
}

fn stat_view(stats: &[FileStat]) -> String {
    if stats.is_empty() {
        return String::new();
    }
    let width = stats.iter().map(|s| s.path.len()).max().unwrap_or(0);
    let mut out = String::from("  Files:\n");
    for s in stats {
        out.push_str(&format!("    {:<width$}  +{} -{}\n", s.path, s.added, s.removed));
    }
    let (add, del) = stats.iter().fold((0, 0), |t, s| (t.0 + s.added, t.1 + s.removed));
    out.push_str(&format!("    {} file(s) changed, +{add} -{del}\n", stats.len()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Files {
        list.iter().map(|(p, t)| (p.to_string(), (0o100644, t.as_bytes().to_vec()))).collect()
    }

    #[test]
    fn code_diff_covers_changed_new_and_deleted_files() {
        let old = files(&[("a.rs", "one\ntwo\n"), ("gone.rs", "x\n"), ("same.rs", "s\n")]);
        let new = files(&[("a.rs", "one\n2\n"), ("new.rs", "y\n"), ("same.rs", "s\n")]);
        let (text, stats) = code_diff(&old, &new, Paint(false));
        assert!(
            text.contains("--- a/a.rs\n+++ b/a.rs\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"),
            "{text}"
        );
        assert!(text.contains("--- a/gone.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"), "{text}");
        assert!(text.contains("+++ b/new.rs\n@@ -0,0 +1 @@\n+y\n"), "{text}");
        assert!(!text.contains("same.rs"));
        let a = stats.iter().find(|s| s.path == "a.rs").unwrap();
        assert_eq!((a.added, a.removed), (1, 1));
    }

    #[test]
    fn colour_only_when_asked() {
        assert_eq!(Paint(false).diff_line("+x\n"), "+x\n");
        assert_eq!(Paint(true).diff_line("-x\n"), "\x1b[31m-x\x1b[0m\n");
    }
}
