//! `records diff A B` when A or B is an upstream record inside a step (`records list --all`):
//! the upstream records after A up to B with the keys each set, the recipe diff (each side's
//! recipe is its parent record's with the rows applied), and the code diff of their two trees.
use super::Paint;
use crate::catalog::upstream_recipe::{changes, step};
use crate::catalog::{Catalog, Manifest, RecordId, Upstream, SERIES};
use crate::series::{apply, patch, tree, Series};
use anyhow::{Context, Result};
use std::borrow::Cow;
use std::path::Path;

/// The diff from the older of `a`, `b` to the newer; None unless one of them is an upstream
/// record inside a step and the other a record or one too (the records' own diff applies, and
/// names an unknown number).
pub fn render(root: &Path, a: RecordId, b: RecordId, paint: Paint) -> Result<Option<String>> {
    if !(a.is_main() && b.is_main()) {
        return Ok(None); // the upstream records are inside the main track's steps
    }
    let (a, b) = (a.n, b.n);
    let catalog = Catalog::load(root)?;
    let upstream = |k: u32| !SERIES.contains(&k) && step(&catalog, k).is_some();
    let known = |k: u32| catalog.get(k).is_ok() || upstream(k);
    if !(upstream(a) || upstream(b)) || !(known(a) && known(b)) {
        return Ok(None);
    }
    let series = Series::load(root)?;
    let (lo, hi) = (a.min(b), a.max(b));
    let recipe = |k: u32| -> Result<(String, toml::Table)> {
        if let Ok(m) = catalog.get(k) {
            return Ok((m.record.title.clone(), m.recipe.clone()));
        }
        let s = step(&catalog, k).context("checked above")?;
        Ok((s.row.title.clone(), s.after))
    };
    let ((ta, old), (tb, new)) = (recipe(lo)?, recipe(hi)?);
    let mut out =
        paint.bold(&format!("records diff #{lo} → #{hi}\n  #{lo}: {ta}\n  #{hi}: {tb}\n"));
    out.push('\n');
    out.push_str(&super::facts::view(
        root,
        &*manifest(&catalog, root, lo)?,
        &*manifest(&catalog, root, hi)?,
    )?);
    let mut rows: Vec<&Upstream> = (catalog.records().iter())
        .flat_map(|m| &m.upstream)
        .filter(|u| lo < u.number && u.number <= hi)
        .collect();
    rows.sort_by_key(|u| u.number);
    let commit = |k: u32| series.upstream_commit(k).map(|(_, _, c)| c);
    out.push_str(&format!("\n{}\n", paint.bold(&format!("Upstream records from #{lo} to #{hi}"))));
    for u in &rows {
        let sets = step(&catalog, u.number).map_or(String::new(), |s| s.summary());
        let (add, del) = commit(u.number).map_or((0, 0), |c| c.counts());
        let counts =
            format!("{} {}", paint.green(&format!("+{add}")), paint.red(&format!("-{del}")));
        out.push_str(&format!("  #{:<3} {}  ({counts})  [{sets}]\n", u.number, u.title));
    }
    out.push_str(&format!("\n{}\n", paint.bold(&format!("Recipe #{lo} → #{hi} (full scale)"))));
    for (key, before, after) in changes(&old, &new) {
        match (before, after) {
            (Some(x), Some(y)) => out.push_str(&format!("  ~ {key}: {x} → {y}\n")),
            (None, Some(y)) => out.push_str(&paint.green(&format!("  + {key} = {y}\n"))),
            (Some(x), None) => out.push_str(&paint.red(&format!("  - {key} = {x}\n"))),
            (None, None) => {}
        }
    }
    // One diff of the two trees, each an upstream record's commit of the series (or a record's).
    let repo = apply::scratch_repo()?;
    let (old_tree, new_tree) = (series.tree_any(&repo, lo)?, series.tree_any(&repo, hi)?);
    let code = tree::diff_text(&repo, Some(old_tree), new_tree)?;
    let header = format!("Code #{lo} → #{hi} (the two trees; `records review K` for one commit)");
    out.push_str(&format!("\n{}\n", paint.bold(&header)));
    out.push_str(&super::code::view(&patch::parse(&code)?, paint));
    Ok(Some(out))
}

/// Record `k`'s manifest, or upstream record k's as `records replay k` would write it (its
/// facts from its row), for the facts side by side; nothing is written.
fn manifest<'c>(catalog: &'c Catalog, root: &Path, k: u32) -> Result<Cow<'c, Manifest>> {
    if let Ok(m) = catalog.get(k) {
        return Ok(Cow::Borrowed(m));
    }
    let path = crate::paths::derived_dir(root).join("upstream").join(format!("{k:02}.toml"));
    let s = step(catalog, k).context("an upstream record inside a step")?;
    s.manifest(path).map(Cow::Owned).map_err(anyhow::Error::msg)
}
