//! `records diff A B`: what changed between two records: the facts side by side
//! (`facts.rs`), the commits between them (`commits.rs`), the recipe diff of their manifests
//! (`recipe.rs`) and the code diff of their trees (`code.rs`), each rendered from the diff's
//! report (`present::report::DiffReport`). Either order works; from a newer
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
use crate::present::report::DiffReport;
use crate::series::{apply, recorded, Series};
use anyhow::Result;
use std::path::Path;

pub use paint::Paint;

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

/// Renders `records diff a b` from its report.
pub fn render(
    root: &Path,
    a: RecordId,
    b: RecordId,
    parts: Parts,
    paint: Paint,
) -> Result<Rendered> {
    let catalog = Catalog::load(root)?;
    let series = Series::load(root)?;
    let repo = apply::scratch_repo()?;
    // An unknown record is named (with where the upstream records are) before any tree is made.
    for n in [a, b] {
        catalog.get(n)?;
        series.position(n)?;
    }
    let trees = match parts.code || parts.series {
        true => {
            let trees = recorded::trees_of(&catalog, &series, &repo, &[a, b])?;
            Some((trees[&a], trees[&b]))
        }
        false => None,
    };
    let report = DiffReport::load((&catalog, &series), &repo, (a, b), trees)?;
    let (ma, mb) = (report.a, report.b);
    let mut head = paint.bold(&format!(
        "records diff {a} → {b}\n  {a}: {}\n  {b}: {}\n",
        ma.record.title, mb.record.title
    ));
    head.push('\n');
    head.push_str(&facts::view(root, ma, mb)?);
    let mut out = String::new();
    if parts.series {
        out.push('\n');
        out.push_str(&commits::view(&catalog, &report, paint)?);
        out.push_str(&code::stat_view(&report.code.files));
    }
    if parts.recipe {
        out.push('\n');
        out.push_str(&recipe::view(ma, mb, &report.recipe, paint));
    }
    if parts.code {
        out.push('\n');
        out.push_str(&paint.bold(&format!("Code {a} → {b}")));
        out.push('\n');
        let code = code::view(&report.code.files, paint);
        out.push_str(if code.is_empty() { "  (the trees are identical)\n" } else { &code });
    }
    Ok(Rendered { head, body: out })
}
