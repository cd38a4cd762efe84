//! Each record's expected trainer tree, kept in its manifest as `[record] tree = "<git tree
//! id>"`. A patch that loses or gains a change (a commit cut off, a trainer file edited outside
//! the series, a `-` line changed) still applies cleanly, but it changes the trees of the older
//! records; every tree the series makes for use (`replay`, `series tree`, `bench`, `profile`,
//! `diff`, `review`, `site`, `series check`) is compared with these ids. `capture` and `import`,
//! which rewrite the series on purpose, write them.
use super::{apply, Series};
use crate::catalog::Catalog;
use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes every record's tree id into its manifest (comments and layout kept; a manifest whose
/// id is already right is not touched). Returns the manifests changed.
pub fn write(root: &Path, trees: &BTreeMap<u32, Oid>) -> Result<Vec<u32>> {
    let mut changed = Vec::new();
    for (&record, tree) in trees {
        let path = root.join("records").join(format!("{record:02}.toml"));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut doc: toml_edit::DocumentMut =
            text.parse().with_context(|| format!("{}: not valid TOML", path.display()))?;
        let Some(table) = doc.get_mut("record").and_then(|t| t.as_table_like_mut()) else {
            bail!("{}: no [record] table to write the tree id into", path.display());
        };
        let id = tree.to_string();
        if table.get("tree").and_then(|v| v.as_str()) == Some(id.as_str()) {
            continue;
        }
        table.insert("tree", toml_edit::value(id));
        corpus::fs::write_atomic(&path, doc.to_string().as_bytes())?;
        changed.push(record);
    }
    Ok(changed)
}

/// Computes the trees of the series as it now stands and writes them (see [`write`]).
pub fn record(root: &Path) -> Result<Vec<u32>> {
    let series = Series::load(root)?;
    let repo = apply::scratch_repo()?;
    let trees = series.trees(&repo, series.numbers()[0])?;
    write(root, &trees)
}

/// The trees of every record from the newest down to `oldest` (see [`Series::trees`]), each
/// compared with the id its manifest records as soon as it is made. A tree that differs is
/// blamed on what made it: the checkout's trainer files for the newest, else the patches
/// reverse-applied since the last tree that matched (a changed `-` or context line applies
/// cleanly both ways, but gives the older records another trainer).
pub fn trees(
    catalog: &Catalog,
    series: &Series,
    repo: &Repository,
    oldest: u32,
) -> Result<BTreeMap<u32, Oid>> {
    let mut suspects: Vec<u32> = Vec::new();
    series.walk(repo, oldest, |n, tree, undone| -> Result<()> {
        suspects.extend(undone);
        let Ok(m) = catalog.get(n) else { return Ok(()) };
        let Some(want) = m.record.tree.as_deref() else { return Ok(()) };
        if want == tree.to_string() {
            suspects.clear();
            return Ok(());
        }
        let by = match suspects.as_slice() {
            [] => "the checkout's trainer files (src/, tests/, Cargo.toml, ...) give".to_string(),
            [one] => format!("reverse-applying patches/{one:02}.patch gives"),
            many => {
                let list: Vec<String> = many.iter().map(|p| format!("patches/{p:02}.patch")).collect();
                format!("reverse-applying {} gives", list.join(", "))
            }
        };
        let what = match suspects.as_slice() {
            [] => "a trainer file changed outside the series".to_string(),
            [one] => format!("patches/{one:02}.patch changed since the trees were recorded (a removed or context line edited gives #{n} another trainer)"),
            _ => "one of these patches changed since the trees were recorded".to_string(),
        };
        bail!(
            "{}: record.tree = {want}, but {by} #{n} the tree {tree}: {what}. If that is intended, record the new trees with `records series import` (after `export`) or `records series capture`",
            m.path.display()
        )
    })
}
