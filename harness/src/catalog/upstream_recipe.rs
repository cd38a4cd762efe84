//! The recipe of every upstream record in a record's span. Each `[[upstream]]` row of a manifest
//! says which recipe keys its upstream record set (`[upstream.recipe]`, whole keys, full-scale
//! values) or why it set none (`same_math`). Upstream record k's recipe is the parent record's
//! `[recipe]` with the rows up to k applied in order; the last row is the record itself, so the
//! parent's recipe with every row applied must read exactly as the record's `[recipe]`.
use super::{lab_steps_rule, Evidence, Manifest, RecordFacts, RecordId, Track, Upstream};
use crate::trainer::recipe::{Recipe, Scale};
use serde::Deserialize;
use std::path::PathBuf;

/// What a manifest's rows say about its recipe.
#[derive(Debug, PartialEq)]
pub enum Rows {
    /// Every row sets its keys or says why it sets none, and they add up to `[recipe]`.
    Proven(usize),
    /// No row carries its recipe yet.
    NotYet,
}

/// The recipe of upstream record `upto`: `parent` with the rows up to `upto` applied.
pub fn recipe_at(parent: &toml::Table, rows: &[Upstream], upto: u32) -> toml::Table {
    let mut recipe = parent.clone();
    for row in rows.iter().take_while(|r| r.number <= upto) {
        for (key, value) in row.recipe.iter().flatten() {
            recipe.insert(key.clone(), value.clone());
        }
    }
    recipe
}

/// Checks `m`'s rows from `parent`'s recipe: each row sets keys or says `same_math`, each
/// upstream record's recipe is one the trainer reads at full scale and trains its log's step
/// count, and all rows together give `m`'s `[recipe]`. The error names the manifest, the row
/// and the key.
pub fn check(parent: &Manifest, m: &Manifest) -> Result<Rows, String> {
    let p = m.path.display();
    if m.upstream.iter().all(|r| r.recipe.is_none() && r.same_math.is_none()) {
        return Ok(Rows::NotYet);
    }
    for r in &m.upstream {
        let sets = r.recipe.as_ref().is_some_and(|t| !t.is_empty());
        match (sets, &r.same_math) {
            (true, Some(_)) => {
                return Err(format!(
                    "{p}: upstream #{}: a row sets recipe keys or says same_math, not both",
                    r.number
                ))
            }
            (false, None) => {
                return Err(format!(
                    "{p}: upstream #{} sets no recipe key; say why in same_math = \"...\"",
                    r.number
                ))
            }
            _ => {}
        }
        let recipe = recipe_at(&parent.recipe, &m.upstream, r.number);
        let read = super::recipe_check::typed(&recipe, &m.lab, Scale::Full, None)
            .map_err(|e| format!("{p}: upstream #{}'s recipe: {e:#}", r.number))?;
        if let Some(log) = r.steps.filter(|&s| s != read.steps) {
            return Err(format!(
                "{p}: upstream #{}'s recipe trains {} steps but its log {log}; set steps in its row",
                r.number, read.steps
            ));
        }
    }
    let got = normal(&recipe_at(&parent.recipe, &m.upstream, u32::MAX))?;
    let want = normal(&m.recipe)?;
    if let Some((key, got, want)) = changes(&got, &want).into_iter().next() {
        let last = (m.upstream.iter().rev())
            .find(|r| r.recipe.as_ref().is_some_and(|t| t.contains_key(key)));
        let from = match last {
            Some(r) => format!("set last by #{}'s row", r.number),
            None => format!("set by no row, so {}'s", parent.id()),
        };
        let show = |v: Option<&toml::Value>| v.map_or("absent".into(), ToString::to_string);
        return Err(format!(
            "{p}: the rows do not add up to [recipe]: `{key}` is {} ({from}) but [recipe] has {}",
            show(got),
            show(want)
        ));
    }
    Ok(Rows::Proven(m.upstream.len()))
}

/// The recipe as the trainer reads it (defaults filled in), for comparing two spellings.
fn normal(recipe: &toml::Table) -> Result<toml::Table, String> {
    let r = Recipe::deserialize(toml::Value::Table(recipe.clone())).map_err(|e| e.to_string())?;
    toml::Table::try_from(r).map_err(|e| e.to_string())
}

/// Upstream record `k` of the series, found in the manifest whose patch holds it: its row and
/// its full-scale recipe before and after it (as the manifests write the keys).
pub struct Step<'a> {
    pub holder: &'a Manifest,
    pub row: &'a Upstream,
    /// The record before it in the series: the previous row, or the holder's parent.
    pub parent: RecordId,
    pub before: toml::Table,
    pub after: toml::Table,
}

/// A key whose value differs between two recipes: (key, before, after); None where absent.
pub type Change<'t> = (&'t String, Option<&'t toml::Value>, Option<&'t toml::Value>);

/// The keys whose values differ from `before` to `after`, in key order.
pub fn changes<'t>(before: &'t toml::Table, after: &'t toml::Table) -> Vec<Change<'t>> {
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter().map(|k| (k, before.get(k), after.get(k))).filter(|(_, a, b)| a != b).collect()
}

impl Step<'_> {
    /// The keys upstream record k changed.
    pub fn changes(&self) -> Vec<Change<'_>> {
        changes(&self.before, &self.after)
    }

    /// What it changed in a few words: "same math", or the keys its row set (empty: none yet).
    pub fn summary(&self) -> String {
        if self.row.same_math.is_some() {
            return "same math".to_string();
        }
        let keys: Vec<&str> = self.changes().iter().map(|(k, ..)| k.as_str()).collect();
        keys.join(", ")
    }
}

/// Upstream record `k`, when a manifest's rows hold it (`None` for a number in no row).
pub fn step(catalog: &super::Catalog, k: u32) -> Option<Step<'_>> {
    let holder = catalog.track(Track::Main).find(|m| m.upstream.iter().any(|r| r.number == k))?;
    let row = holder.upstream.iter().find(|r| r.number == k)?;
    let parent = catalog.get(holder.record.parent?).ok()?;
    let previous = holder.upstream.iter().take_while(|r| r.number < k).last();
    let before = match previous {
        Some(p) => recipe_at(&parent.recipe, &holder.upstream, p.number),
        None => parent.recipe.clone(),
    };
    let after = recipe_at(&parent.recipe, &holder.upstream, k);
    let parent = previous.map_or(parent.id(), |p| RecordId::main(p.number));
    Some(Step { holder, row, parent, before, after })
}

impl Step<'_> {
    /// Upstream record k as a manifest that the trainer and the verdict read, to be written at
    /// `path`: its facts from its row, its recipe, the holder's `[lab]` with the lab rule's
    /// budget for its own step count (#29's 1,670 = 250), and the record before it as parent.
    /// It has no notes and no recorded tree: its tree is derived from the holder's.
    pub fn manifest(&self, path: PathBuf) -> Result<Manifest, String> {
        let (row, k) = (self.row, self.row.number);
        let read = super::recipe_check::typed(&self.after, &self.holder.lab, Scale::Full, None);
        let steps = read.map(|r| r.steps).map_err(|e| {
            format!("{}: upstream #{k}'s recipe: {e:#}", self.holder.path.display())
        })?;
        let official_time_s = minutes(&row.time_text).ok_or_else(|| {
            format!(
                "{}: upstream #{k}: time_text = {:?}, not \"N minutes\"",
                self.holder.path.display(),
                row.time_text
            )
        })? * 60.0;
        let mut lab = self.holder.lab.clone();
        let lab_steps = lab_steps_rule(k, steps).expect("an upstream record is past the anchor");
        lab.insert("steps".into(), toml::Value::Integer(lab_steps as i64));
        let h = &self.holder.record;
        let link = row.pr.map_or(h.link.clone(), |pr| format!("{PULLS}{pr}"));
        Ok(Manifest {
            path,
            record: RecordFacts {
                number: k,
                track: Track::Main,
                title: row.title.clone(),
                pr: row.pr,
                link,
                date: row.date.clone(),
                authors: row.authors.clone(),
                official_time_s,
                official_time_text: row.time_text.clone(),
                hardware: h.hardware.clone(),
                steps,
                tokens: 0, // not in upstream's table; no upstream record's page shows it
                parent: Some(self.parent),
                upstream_folder: row.folder.clone().unwrap_or_default(),
                claim: row.title.clone(),
                tree: None,
                differs_from_head: Vec::new(),
            },
            evidence: Evidence {
                val_losses: row.val_losses.clone(),
                train_times_s: row.train_times_s.clone(),
                val_curve: Vec::new(),
                time_curve: Vec::new(),
                source: row.folder.clone().unwrap_or_default(),
            },
            recipe: self.after.clone(),
            lab,
            lab_target: None,
            upstream: Vec::new(),
            notes: Vec::new(),
            recipe_keys: Vec::new(),
        })
    }
}

/// Upstream's pull requests.
const PULLS: &str = "https://github.com/KellerJordan/modded-nanogpt/pull/";

/// The minutes of upstream's table ("1.918 minutes").
fn minutes(text: &str) -> Option<f64> {
    text.strip_suffix(" minutes")?.trim().parse().ok().filter(|m: &f64| *m > 0.0)
}
