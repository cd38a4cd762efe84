//! The typed report of two records, as `records diff A B` and the site's diff page show them:
//! the commits between (undone from A back to the record both descend from, then done up to
//! B), the recipe keys that differ, and the code diff of their trees (libgit2, trainer files)
//! with B's notes at their lines.
use super::{place_notes, NotedDiff};
use crate::catalog::{Catalog, Manifest, RecordId};
use crate::series::{patch, tree, Record, Series};
use anyhow::{Context, Result};
use git2::{Oid, Repository};
use std::collections::BTreeMap;

pub struct DiffReport<'a> {
    pub a: &'a Manifest,
    pub b: &'a Manifest,
    /// The newest record both descend from (#1 for #29 and a2; A itself when B descends from A).
    pub meet: RecordId,
    /// The records undone from A back to `meet`, newest first.
    pub undone: Vec<&'a Record>,
    /// The records done from `meet` to B, oldest first.
    pub done: Vec<&'a Record>,
    pub recipe: Vec<RecipeChange>,
    /// A's tree to B's.
    pub code: NotedDiff<'a>,
}

impl<'a> DiffReport<'a> {
    /// Records `a` and `b` of `series`, with the code diff of their `trees` in `repo`
    /// (`recorded::trees_of`), or none (empty) without them.
    pub fn load(
        (catalog, series): (&'a Catalog, &'a Series),
        repo: &Repository,
        (a, b): (RecordId, RecordId),
        trees: Option<(Oid, Oid)>,
    ) -> Result<DiffReport<'a>> {
        let (ma, mb) = (catalog.get(a)?, catalog.get(b)?);
        let (la, lb) = (series.lineage(a)?, series.lineage(b)?);
        let common = la.iter().zip(&lb).take_while(|(x, y)| x == y).count();
        let meet = *la.get(common.wrapping_sub(1)).context("two records of one series")?;
        let records = |ids: &[RecordId]| -> Result<Vec<&'a Record>> {
            ids.iter().map(|&r| Ok(series.record(r)?)).collect()
        };
        let mut undone = records(&la[common..])?;
        undone.reverse();
        let files = match trees {
            Some((ta, tb)) => patch::parse(&tree::diff_text(repo, Some(ta), tb)?)?,
            None => Vec::new(),
        };
        let (placed, _) = place_notes(&mb.notes, std::slice::from_ref(&files));
        let notes = placed.into_iter().map(|((_, f, h, l), n)| ((f, h, l), n)).collect();
        Ok(DiffReport {
            a: ma,
            b: mb,
            meet,
            undone,
            done: records(&lb[common..])?,
            recipe: recipe_changes(ma, mb),
            code: NotedDiff { files, notes },
        })
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
