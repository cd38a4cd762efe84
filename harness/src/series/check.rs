//! `records series check`: every record's tree materializes, re-applying its patch to the
//! parent's tree gives exactly its tree (a branching track's: reverse-applying it gives the
//! parent's), its notes point at real lines, its upstream rows add up to its recipe (where they
//! carry recipes), a branching track's files under src/model/, src/optim/ and src/data/ are
//! HEAD's where HEAD has them (but those its manifest lists). That every tree builds is
//! `run::series_build`'s, over what this proves.
use super::{apply, patch_path, recorded, tree, Series};
use crate::catalog::upstream_recipe::{self, Rows};
use crate::catalog::{Catalog, RecordId};
use anyhow::{bail, Context, Error, Result};
use git2::{Oid, Repository};
use std::collections::BTreeMap;
use std::path::Path;

/// What was checked for one record.
#[derive(Debug, Clone)]
pub struct Checked {
    pub record: RecordId,
    pub commits: usize,
    pub added: usize,
    pub removed: usize,
    pub tree: Oid,
}

/// The proven series: what was checked for each record, every record's tree, and the scratch
/// repository that holds them (for `run::series_build` to write and build them).
pub struct Proven {
    pub catalog: Catalog,
    pub series: Series,
    pub checked: Vec<Checked>,
    pub trees: BTreeMap<RecordId, Oid>,
    pub repo: Repository,
}

/// Checks the whole series; `log` gets one line per record. The first problem is the error.
pub fn check(root: &Path, log: &mut dyn FnMut(&str)) -> Result<Proven> {
    let catalog = Catalog::load(root)?;
    if let Some(b) = catalog.broken().first() {
        bail!("{}", b.error);
    }
    let series = Series::load(root)?;
    if let Some((_, why)) = series.unloaded().first() {
        bail!("{why}");
    }
    stray_patches(root, &series.numbers())?;
    for r in series.records() {
        scope(root, r)?;
    }
    let repo = apply::scratch_repo()?;
    let trees = recorded::all_trees(&catalog, &series, &repo)?;
    // The checkout's trainer: the newest record's with head.patch's additions.
    let head = super::tree::worktree_tree(&repo, root)?;
    let ctx =
        Checker { root, catalog: &catalog, series: &series, repo: &repo, trees: &trees, head };
    let mut checked = Vec::new();
    for r in series.records() {
        let c = ctx.record(r)?;
        log(&c.line);
        checked.push(c.checked);
    }
    Ok(Proven { catalog, series, checked, trees, repo })
}

/// What every record's check reads.
struct Checker<'a> {
    root: &'a Path,
    catalog: &'a Catalog,
    series: &'a Series,
    repo: &'a Repository,
    trees: &'a BTreeMap<RecordId, Oid>,
    head: Oid,
}

/// One record's check: what was checked and its log line.
struct RecordCheck {
    checked: Checked,
    line: String,
}

impl Checker<'_> {
    /// Record `r`: its parent as the chain has it, its patch exactly between the two trees, its
    /// notes, its commits one per upstream row, and the rows adding up to its recipe (or, on a
    /// branching track, HEAD's shared files reused).
    fn record(&self, r: &super::Record) -> Result<RecordCheck> {
        let manifest = self.catalog.get(r.number)?;
        let parent = self.series.parent(r.number)?;
        if manifest.record.parent != parent {
            bail!(
                "{}: record.parent = {:?} but the chain puts {:?} before {}; add the missing manifest or fix the parent",
                manifest.path.display(),
                manifest.record.parent,
                parent,
                r.number
            );
        }
        let tree = self.trees[&r.number];
        if let Some(p) = parent {
            self.patch_between(r, p, tree)?;
        }
        check_notes(self.repo, tree, manifest)?;
        check_rows_are_commits(self.root, r, manifest)?;
        let rows_note = self.rows_note(r, parent, manifest)?;
        let (added, removed) = r.commits.iter().fold((0, 0), |acc, c| {
            let (a, d) = c.counts();
            (acc.0 + a, acc.1 + d)
        });
        let line = format!(
            "ok   {:<4} {} commit(s), +{added} -{removed}, tree {:.10}{rows_note}",
            r.number,
            r.commits.len(),
            tree.to_string()
        );
        let checked = Checked { record: r.number, commits: r.commits.len(), added, removed, tree };
        Ok(RecordCheck { checked, line })
    }

    /// A main record's patch applied to its parent's tree gives its tree; a branching track's,
    /// made forward, must also undo exactly.
    fn patch_between(&self, r: &super::Record, p: RecordId, tree: Oid) -> Result<()> {
        let (n, patch) = (r.number, patch_path(self.root, r.number));
        if n.is_main() {
            let base = self.trees[&p];
            let got = *self.series.forward(self.repo, n, base)?.last().unwrap_or(&base);
            if got != tree {
                let file = first_difference(self.repo, got, tree)?;
                bail!(
                    "record {n}: {} applied to {p}'s tree does not give {n}'s tree ({file} differs); the patch is not exactly reversible, regenerate it with `records series export`/`import`",
                    patch.display()
                );
            }
        } else {
            let got = reverse(self.repo, r, tree)?;
            if got != self.trees[&p] {
                let file = first_difference(self.repo, got, self.trees[&p])?;
                bail!(
                    "record {n}: {} reverse-applied to {n}'s tree does not give {p}'s tree ({file} differs); the patch is not exactly reversible, regenerate it (git format-patch)",
                    patch.display()
                );
            }
        }
        Ok(())
    }

    /// The upstream rows add up to the record's recipe; on a branching track, HEAD's shared
    /// files are reused. The log line's tail says which was proven.
    fn rows_note(
        &self,
        r: &super::Record,
        parent: Option<RecordId>,
        manifest: &crate::catalog::Manifest,
    ) -> Result<String> {
        let Some(p) = parent else { return Ok(String::new()) };
        let rows = upstream_recipe::check(self.catalog.get(p)?, manifest).map_err(Error::msg)?;
        if !r.number.is_main() {
            let chain = self.series.chain(r.number.track);
            let newest = self.trees[&chain[chain.len() - 1].number];
            let base = self.series.parent(chain[0].number)?.map(|b| self.trees[&b]);
            let base = base.context("a branching track starts from a main record")?;
            let n = check_head_reuse(self.root, self.repo, (self.head, base, newest), r, manifest)?;
            return Ok(format!(", HEAD's shared files reused ({n} listed as differing)"));
        }
        Ok(match rows {
            Rows::Proven(n) => format!(", the {n} upstream rows add up to its recipe"),
            Rows::NotYet => ", upstream rows without recipes".to_string(),
        })
    }
}

/// A patch after #29 has one commit per upstream record of its span ("#k: ..."), in the order of
/// the manifest's `[[upstream]]` rows: the rows name the commits `replay k` and `walk` build.
fn check_rows_are_commits(
    root: &Path,
    r: &super::Record,
    m: &crate::catalog::Manifest,
) -> Result<()> {
    let numbered: Vec<Option<u32>> = r.commits.iter().map(|c| c.upstream()).collect();
    if numbered.iter().all(Option::is_none) {
        return Ok(()); // #29's patch: commits by technique, spanning #2-#29
    }
    let rows: Vec<Option<u32>> = m.upstream.iter().map(|u| Some(u.number)).collect();
    if numbered != rows {
        let show = |v: &[Option<u32>]| -> String {
            let s: Vec<String> =
                v.iter().map(|n| n.map_or("?".to_string(), |n| format!("#{n}"))).collect();
            s.join(" ")
        };
        bail!(
            "record {}: {}'s commits port {} but {}'s [[upstream]] rows are {}; one commit per \
             row, in order, each subject starting \"#k:\"",
            r.number,
            patch_path(root, r.number).display(),
            show(&numbered),
            m.path.display(),
            show(&rows)
        );
    }
    Ok(())
}

/// A record's patch is the record's change to the trainer, nothing else: the CLI, README, docs,
/// scripts and the GPU check belong to no record.
fn scope(root: &Path, r: &super::Record) -> Result<()> {
    for (k, c) in r.commits.iter().enumerate() {
        let files = super::patch::parse(&c.diff).with_context(|| {
            format!("record {}: commit {}/{}", r.number, k + 1, r.commits.len())
        })?;
        if let Some(f) = files.iter().find(|f| !tree::is_trainer_path(f.path())) {
            bail!(
                "{}: commit {}/{} {:?} touches {}, which belongs to no record; a record's patch changes only the trainer (Cargo.toml, Cargo.lock, build.rs, src/, tests/, corpus/)",
                patch_path(root, r.number).display(),
                k + 1,
                r.commits.len(),
                c.subject,
                f.path()
            );
        }
    }
    Ok(())
}

/// Every `patches/NN.patch` (`aN.patch`) needs a manifest, or it would silently drop out of the
/// chain; `head.patch` is the checkout's own (see `Series`).
fn stray_patches(root: &Path, chain: &[RecordId]) -> Result<()> {
    let dir = root.join("patches");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry?.path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "patch")
            && stem != "head"
            && !stem.parse().is_ok_and(|n: RecordId| chain.contains(&n) && n.slug() == stem)
        {
            bail!("{} has no manifest records/{stem}.toml, so it is not in the chain; add the manifest or remove the patch", path.display());
        }
    }
    Ok(())
}

/// `r`'s tree with its patch reverse-applied, newest commit first.
fn reverse(repo: &Repository, r: &super::Record, mut tree: Oid) -> Result<Oid> {
    for (k, c) in r.commits.iter().enumerate().rev() {
        let step = apply::Step {
            record: r.number,
            commit: k + 1,
            commits: r.commits.len(),
            subject: &c.subject,
            direction: apply::Direction::Reverse,
            head: false,
        };
        tree = apply::apply(repo, tree, &c.diff, &step)?;
    }
    Ok(tree)
}

/// Where a branching track's files must be HEAD's: the shared trainer's techniques.
const SHARED: [&str; 3] = ["src/model/", "src/optim/", "src/data/"];

/// A branching track (Act 1) reuses the shared trainer's techniques rather than copying them:
/// every file `r`'s patch brings under src/model/, src/optim/ or src/data/ that its branch
/// point's tree (`base`, #1's) lacks and the checkout's trainer (`head`) has at the same path
/// must end, in the track's newest tree, as HEAD's byte for byte, unless the manifest's
/// `differs_from_head` lists it; a listed file must be one of them and differ. (Files #1 has,
/// such as the block's assembly, are the branch's own wiring.) Returns how many are listed.
fn check_head_reuse(
    root: &Path,
    repo: &Repository,
    (head, base, newest): (Oid, Oid, Oid),
    r: &super::Record,
    m: &crate::catalog::Manifest,
) -> Result<usize> {
    let (head_files, files) = (tree::files(repo, head)?, tree::files(repo, newest)?);
    let base_files = tree::files(repo, base)?;
    let mut touched = std::collections::BTreeSet::new();
    for c in &r.commits {
        for f in super::patch::parse(&c.diff)? {
            touched.extend(f.new_path.filter(|p| SHARED.iter().any(|s| p.starts_with(s))));
        }
    }
    let patch = patch_path(root, r.number);
    let patch = patch.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let listed = &m.record.differs_from_head;
    let name = r.number.track.def().name;
    let mut shared = Vec::new();
    for path in &touched {
        let (Some((_, at_head)), Some((_, ours))) = (head_files.get(path), files.get(path)) else {
            continue; // the step's own file (HEAD has none), or removed again by a later commit
        };
        if base_files.contains_key(path.as_str()) {
            continue; // #1's file, wired for the branch
        }
        shared.push(path);
        let listed = listed.contains(path);
        if at_head != ours && !listed {
            bail!(
                "{patch}'s {path} differs from HEAD's in the newest tree of its track: {name} \
                 reuses the shared trainer's techniques; make {path} HEAD's byte for byte (a \
                 change the step needs goes into the shared trainer, behind a recipe key that \
                 defaults to off), or list it in {}'s [record] differs_from_head, with the \
                 reason in a comment",
                m.path.display()
            );
        }
        if at_head == ours && listed {
            bail!(
                "{}: [record] differs_from_head lists {path}, but {}'s {path} is HEAD's byte \
                 for byte; take it off the list",
                m.path.display(),
                r.number
            );
        }
    }
    if let Some(extra) = listed.iter().find(|p| !shared.contains(p)) {
        bail!(
            "{}: [record] differs_from_head lists {extra}, which {patch} does not add or change \
             as a file HEAD has too under {}; take it off the list",
            m.path.display(),
            SHARED.join(", ")
        );
    }
    Ok(listed.len())
}

fn first_difference(repo: &Repository, a: Oid, b: Oid) -> Result<String> {
    let (fa, fb) = (tree::files(repo, a)?, tree::files(repo, b)?);
    let path = fa.keys().chain(fb.keys()).filter(|p| fa.get(*p) != fb.get(*p)).min().cloned();
    Ok(path.unwrap_or_else(|| "a file mode".into()))
}

/// Each review note must name a file of the record's tree, a line inside it and, with an anchor,
/// a line that still holds the anchor's text.
fn check_notes(repo: &Repository, tree: Oid, manifest: &crate::catalog::Manifest) -> Result<()> {
    if manifest.notes.is_empty() {
        return Ok(());
    }
    let files = tree::files(repo, tree)?;
    for n in &manifest.notes {
        let where_ = format!("{}: note at {}:{}", manifest.path.display(), n.file, n.line);
        let Some((_, data)) = files.get(&n.file) else {
            bail!("{where_}: the tree of {} has no such file", manifest.id());
        };
        let text = String::from_utf8_lossy(data);
        let Some(line) = text.lines().nth(n.line as usize - 1) else {
            bail!(
                "{where_}: the file has only {} lines in the tree of {}",
                text.lines().count(),
                manifest.id()
            );
        };
        if let Some(anchor) = n.anchor.as_deref().filter(|a| !line.contains(a)) {
            bail!(
                "{where_}: the line no longer holds {anchor:?} (it reads {:?}); move the note",
                line.trim()
            );
        }
    }
    Ok(())
}
