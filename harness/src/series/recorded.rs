//! Each record's expected trainer tree, kept in its manifest as `[record] tree = "<git tree
//! id>"`. A patch that loses or gains a change (a commit cut off, a trainer file edited outside
//! the series) still applies cleanly, but it changes the trees of the older records; `series
//! check` compares them with these ids. `capture` and `import`, which rewrite the series on
//! purpose, write them.
use super::{apply, Series};
use crate::catalog::Catalog;
use anyhow::{bail, Context, Result};
use git2::Oid;
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
        super::export::write_atomic(&path, doc.to_string().as_bytes())?;
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

/// Whether record `n`'s manifest records a tree; an error when it records another one.
pub fn verify(catalog: &Catalog, n: u32, tree: Oid) -> Result<bool> {
    let m = catalog.get(n)?;
    let Some(want) = m.record.tree.as_deref() else {
        return Ok(false);
    };
    if want != tree.to_string() {
        bail!(
            "{}: record.tree = {want} but the series gives #{n} the tree {tree}: a patch lost or gained a change, or a trainer file changed outside the series. If that is intended, record the new trees with `records series import` (after `export`) or `records series capture`",
            m.path.display()
        );
    }
    Ok(true)
}
