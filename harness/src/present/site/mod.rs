//! `records site DIR`: the records as a static site, readable without a server or JavaScript.
//! An index (upstream's table with this machine's lab verdicts and a mini curve), one page per
//! record (header with its predicted step from the time model, claim, the commits of its patch with the review notes beside the lines they
//! anchor, the official evidence and our replays, curves as inline SVG) and one page per record
//! against its parent, a page per upstream record inside a step, and on each record's page the
//! walk from its parent where one was run here (`records walk`). Everything comes from the
//! harness's own readers: the catalog, the series, `review::place_notes`,
//! `diff::recipe_changes`, `stats`, `replays` and the kept walks.
mod pages;

use crate::catalog::{Catalog, RecordId};
use crate::cost::model::Model;
use crate::series::{apply, recorded, Series};
use anyhow::{Context, Result};
use corpus::fs::write_atomic;
use minijinja::Environment;
use std::path::{Path, PathBuf};

/// What `build` wrote.
#[derive(Debug)]
pub struct Built {
    pub files: Vec<PathBuf>,
}

/// The page of record `n`, relative to the site's folder: `29.html`, `a3.html`.
pub fn record_page(n: impl Into<RecordId>) -> String {
    format!("{}.html", n.into().slug())
}

/// The page of upstream record `k` inside a step.
pub fn upstream_page(k: u32) -> String {
    format!("u{k:02}.html")
}

/// The page of the diff from record `a` to record `b`: `diff-01-29.html`, `diff-01-a1.html`.
pub fn diff_page(a: impl Into<RecordId>, b: impl Into<RecordId>) -> String {
    format!("diff-{}-{}.html", a.into().slug(), b.into().slug())
}

/// Writes the site for the checkout at `root` (results from `results`) into `out`, each file
/// atomically; files of an earlier build that are not rewritten are left alone.
pub fn build(root: &Path, results: &Path, out: &Path) -> Result<Built> {
    let catalog = Catalog::load(root)?;
    let series = Series::load(root)?;
    let env = templates()?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut files = Vec::new();
    let mut write = |name: &str, text: &str| -> Result<()> {
        let path = out.join(name);
        write_atomic(&path, text.as_bytes())?;
        files.push(path);
        Ok(())
    };
    write("style.css", include_str!("style.css"))?;
    let replays = pages::Replays::load(&catalog, results)?;
    // A site without the time model (no hardware/) still builds: each page says why.
    let model = Model::load(root);
    write("index.html", &pages::index(&env, &catalog, &replays)?)?;
    let repo = apply::scratch_repo()?;
    let trees = match catalog.records().is_empty() {
        false => recorded::all_trees(&catalog, &series, &repo)?,
        true => Default::default(),
    };
    for m in catalog.records() {
        let n = m.id();
        write(&record_page(n), &pages::record(&env, (&catalog, &series), (&replays, &model), n)?)?;
        if let Some(p) = m.record.parent {
            let (ta, tb) = (trees.get(&p), trees.get(&n));
            let (Some(&ta), Some(&tb)) = (ta, tb) else {
                anyhow::bail!("no trees for {p} and {n} in the series");
            };
            let page = pages::diff(&env, (&catalog, &model), &series, &repo, (p, ta), (n, tb))?;
            write(&diff_page(p, n), &page)?;
        }
    }
    for (_, u) in catalog.inside_steps() {
        let page = pages::upstream(&env, (&catalog, &series), (&replays, &model), u.number)?;
        write(&upstream_page(u.number), &page)?;
    }
    Ok(Built { files })
}

fn templates() -> Result<Environment<'static>> {
    let mut env = Environment::new();
    for (name, text) in [
        ("base.html", include_str!("templates/base.html")),
        ("macros.html", include_str!("templates/macros.html")),
        ("index.html", include_str!("templates/index.html")),
        ("record.html", include_str!("templates/record.html")),
        ("diff.html", include_str!("templates/diff.html")),
        ("upstream.html", include_str!("templates/upstream.html")),
    ] {
        env.add_template(name, text).with_context(|| format!("template {name}"))?;
    }
    Ok(env)
}
