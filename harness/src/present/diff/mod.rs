//! `records diff A B`: what changed between two records: the facts side by side
//! (`facts.rs`), the commits between them (`commits.rs`), the recipe diff of their manifests
//! (`recipe.rs`) and the code diff of their trees (`code.rs`). Either order works; from a newer
//! record to an older one the commits are listed as undone; across tracks (#29 and a2), undone
//! back to the record both descend from (#1), then done. For an upstream record inside a step,
//! `upstream.rs`.
mod code;
mod commits;
mod facts;
mod paint;
pub mod recipe;
pub mod upstream;

use crate::catalog::{Catalog, RecordId};
use crate::series::{apply, recorded, tree, Series};
use anyhow::Result;
use std::path::Path;

pub use code::{code_diff, FileStat, Files};
pub use paint::Paint;
pub use recipe::{recipe_changes, RecipeChange};

/// Which parts to print (the facts side by side always come first).
#[derive(Debug, Clone, Copy)]
pub struct Parts {
    pub series: bool,
    pub recipe: bool,
    pub code: bool,
}

/// `records diff a b` as text: the head (titles and the facts side by side) and the body (the
/// commits, recipe and code), so the curves can go between them, before a long code diff.
pub struct Rendered {
    pub head: String,
    pub body: String,
}

/// Renders `records diff a b`.
pub fn render(
    root: &Path,
    a: RecordId,
    b: RecordId,
    parts: Parts,
    paint: Paint,
) -> Result<Rendered> {
    let catalog = Catalog::load(root)?;
    let series = Series::load(root)?;
    let (ma, mb) = (catalog.get(a)?, catalog.get(b)?);
    series.position(a)?;
    series.position(b)?;
    let mut head = paint.bold(&format!(
        "records diff {a} → {b}\n  {a}: {}\n  {b}: {}\n",
        ma.record.title, mb.record.title
    ));
    head.push('\n');
    head.push_str(&facts::view(root, ma, mb)?);
    let mut out = String::new();
    let need_trees = parts.code || parts.series;
    let (old, new) = if need_trees {
        let repo = apply::scratch_repo()?;
        let trees = recorded::trees_of(&catalog, &series, &repo, &[a, b])?;
        (tree::files(&repo, trees[&a])?, tree::files(&repo, trees[&b])?)
    } else {
        Default::default()
    };
    let (code, stats) = code_diff(&old, &new, paint);
    if parts.series {
        out.push('\n');
        out.push_str(&commits::view(&catalog, &series, a, b, paint)?);
        out.push_str(&code::stat_view(&stats));
    }
    if parts.recipe {
        out.push('\n');
        out.push_str(&recipe::view(ma, mb, paint));
    }
    if parts.code {
        out.push('\n');
        out.push_str(&paint.bold(&format!("Code {a} → {b}")));
        out.push('\n');
        out.push_str(if code.is_empty() { "  (the trees are identical)\n" } else { &code });
    }
    Ok(Rendered { head, body: out })
}
