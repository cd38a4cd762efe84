//! Each record's expected trainer tree, kept in its manifest as `[record] tree = "<git tree
//! id>"`. A patch that loses or gains a change (a commit cut off, a trainer file edited outside
//! the series, a `-` line changed) still applies cleanly, but it changes the trees of the older
//! records; every tree the series makes for use (`replay`, `series tree`, `bench`, `profile`,
//! `diff`, `review`, `site`, `series check`) is compared with these ids. `capture` and `import`,
//! which rewrite the series on purpose, write them (every track's); `series record-trees
//! --track act1` writes a branching track's after its patches were edited.
use super::{apply, Series};
use crate::catalog::{Catalog, RecordId, Track};
use anyhow::{bail, Context, Result};
use git2::{Oid, Repository};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes every record's tree id into its manifest (comments and layout kept; a manifest whose
/// id is already right is not touched). Returns the manifests changed.
pub fn write(root: &Path, trees: &BTreeMap<RecordId, Oid>) -> Result<Vec<RecordId>> {
    let mut changed = Vec::new();
    for (&record, tree) in trees {
        let path = root.join("records").join(format!("{}.toml", record.slug()));
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

/// Computes the trees of the series as it now stands, every track's, and writes them (see
/// [`write`]).
pub fn record(root: &Path) -> Result<Vec<RecordId>> {
    let series = Series::load(root)?;
    let repo = apply::scratch_repo()?;
    let trees = series.trees(&repo, series.numbers()[0])?;
    let mut changed = write(root, &trees)?;
    for (track, from) in series.branches() {
        let made = series.branch(&repo, track, trees[&from], None, |_, _| -> Result<()> { Ok(()) });
        let made = made.with_context(|| {
            format!(
                "the main track's trees are recorded, but {}'s patches no longer apply to {from}'s \
                 tree",
                track.def().name
            )
        })?;
        changed.extend(write(root, &made)?);
    }
    Ok(changed)
}

/// Computes the trees of `track`'s records (a track that branches from the main one) and writes
/// them; the main trees they start from must be the recorded ones. Returns the manifests
/// changed.
pub fn record_track(root: &Path, track: Track) -> Result<Vec<RecordId>> {
    let Some(from) = track.def().branch else {
        bail!(
            "the main track's tree ids are written by `records series import` and `records \
             series capture`, which rewrite the series on purpose"
        );
    };
    let catalog = Catalog::load(root)?;
    let series = Series::load(root)?;
    let repo = apply::scratch_repo()?;
    let base = trees(&catalog, &series, &repo, from)?[&from];
    let made = series.branch(&repo, track, base, None, |_, _| -> Result<()> { Ok(()) })?;
    if made.is_empty() {
        bail!("{} has no record here (no records/{}N.toml)", track.def().name, track.def().prefix);
    }
    write(root, &made)
}

/// The trees of every main record from the newest down to `oldest` (see [`Series::trees`]),
/// each compared with the id its manifest records as soon as it is made. A tree that differs is
/// blamed on what is wrong: the manifest's id when the next older record's tree matches its own
/// again (only that id was edited), else what made it: the checkout's trainer files for the
/// newest, else the patches reverse-applied since the last tree that matched (a changed `-` or
/// context line applies cleanly both ways, but gives every older record another trainer). A
/// manifest without an id is refused: nothing is made from a tree nobody checked.
pub fn trees(
    catalog: &Catalog,
    series: &Series,
    repo: &Repository,
    oldest: impl Into<RecordId>,
) -> Result<BTreeMap<RecordId, Oid>> {
    let oldest = oldest.into();
    let mut suspects: Vec<RecordId> = Vec::new();
    let mut differs: Option<Mismatch> = None;
    let walked = series.walk(repo, oldest, |n, tree, undone| -> Result<()> {
        suspects.extend(undone);
        let Ok(m) = catalog.get(n) else { return Ok(()) };
        let want = recorded_id(m)?;
        if let Some(first) = differs.take() {
            // The first tree that differed decides by this one: equal again, only its id is off.
            return Err(first.blame(want == tree.to_string()));
        }
        if want == tree.to_string() {
            suspects.clear();
        } else {
            differs = Some(Mismatch { m: m.clone(), tree, suspects: suspects.clone() });
        }
        Ok(())
    });
    let made = walked?;
    match differs {
        None => Ok(made),
        // The oldest record asked for differs: walk on down to tell the id from the patches.
        Some(first) => match series.numbers().first() {
            Some(&bottom) if bottom != oldest => match trees(catalog, series, repo, bottom) {
                Err(e) => Err(e),
                Ok(_) => Err(first.blame(false)),
            },
            _ => Err(first.blame(false)),
        },
    }
}

/// The tree id `m` records, which every record must have and in git's form.
fn recorded_id(m: &crate::catalog::Manifest) -> Result<&str> {
    let Some(want) = m.record.tree.as_deref() else {
        bail!(
            "{}: no `tree = \"<git tree id>\"` in [record], so nothing could check the trainer \
             made for {}; `records series import` or `capture` writes it (`records series \
             record-trees --track {}` off the main track)",
            m.path.display(),
            m.id(),
            m.id().track.key()
        )
    };
    if want.len() != 40 || !want.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!(
            "{}: record.tree = \"{want}\" is not a git tree id (40 hex digits); `records series \
             import` or `capture` writes the right one",
            m.path.display()
        );
    }
    Ok(want)
}

/// A main record whose tree differs from the id its manifest records.
struct Mismatch {
    m: crate::catalog::Manifest,
    tree: Oid,
    /// The patches reverse-applied since the last tree that matched.
    suspects: Vec<RecordId>,
}

impl Mismatch {
    /// The error: the manifest's id when `older_matches` (the next older record's tree is its
    /// recorded one), else what made the tree.
    fn blame(self, older_matches: bool) -> anyhow::Error {
        let (m, n, tree) = (&self.m, self.m.id(), self.tree);
        let want = m.record.tree.as_deref().unwrap_or_default();
        if older_matches {
            return anyhow::anyhow!(
                "{}: record.tree = {want}, but the series gives {n} the tree {tree}, and the next \
                 older record has the tree its manifest records: the manifest's id is wrong (an \
                 edit of records/{}.toml), not a patch. Put back tree = \"{tree}\", or record the \
                 trees with `records series import` (after `export`) or `records series capture`",
                m.path.display(),
                n.slug()
            );
        }
        let patch = |p: &RecordId| format!("patches/{}.patch", p.slug());
        let by = match self.suspects.as_slice() {
            [] => "the checkout's trainer files (src/, tests/, Cargo.toml, ...) give".to_string(),
            many => {
                let list: Vec<String> = many.iter().map(patch).collect();
                format!("reverse-applying {} gives", list.join(", "))
            }
        };
        let what = match self.suspects.as_slice() {
            [] => "a trainer file changed outside the series".to_string(),
            [one] => format!("{} changed since the trees were recorded (a removed or context line edited gives {n} another trainer)", patch(one)),
            _ => "one of these patches changed since the trees were recorded".to_string(),
        };
        anyhow::anyhow!(
            "{}: record.tree = {want}, but {by} {n} the tree {tree}: {what}. If that is intended, record the new trees with `records series import` (after `export`) or `records series capture`",
            m.path.display()
        )
    }
}

/// The trees of a branching track's records up to `upto` (a3: a1, a2, a3), each compared with
/// the id its manifest records as soon as it is made, after the main record it branches from
/// (#1) has been compared with its own (see [`trees`]). A tree that differs is blamed on the
/// patches applied since the last tree that matched.
pub fn track_trees(
    catalog: &Catalog,
    series: &Series,
    repo: &Repository,
    upto: RecordId,
) -> Result<BTreeMap<RecordId, Oid>> {
    let Some(from) = upto.track.def().branch else {
        return trees(catalog, series, repo, upto);
    };
    let base = trees(catalog, series, repo, from)?[&from];
    let mut suspects: Vec<RecordId> = Vec::new();
    let mut last_good = from;
    series.branch(repo, upto.track, base, Some(upto), |n, tree| -> Result<()> {
        suspects.push(n);
        let Ok(m) = catalog.get(n) else { return Ok(()) };
        let want = recorded_id(m)?;
        if want == tree.to_string() {
            suspects.clear();
            last_good = n;
            return Ok(());
        }
        let list: Vec<String> =
            suspects.iter().map(|p| format!("patches/{}.patch", p.slug())).collect();
        let what = match suspects.as_slice() {
            [one] => format!(
                "patches/{}.patch changed since the trees were recorded (a changed line gives \
                 {n} another trainer)",
                one.slug()
            ),
            _ => "one of these patches changed since the trees were recorded".to_string(),
        };
        bail!(
            "{}: record.tree = {want}, but applying {} to {last_good}'s tree gives {n} the tree \
             {tree}: {what}. If that is intended, record the new trees with `records series \
             record-trees --track {}`",
            m.path.display(),
            list.join(", "),
            n.track.key()
        )
    })
}

/// The trees of `ids` (and the records between them and the newest), each compared with its
/// recorded id: one walk down the main track to the oldest main record they need, and each
/// other track's chain up to the newest of them.
pub fn trees_of(
    catalog: &Catalog,
    series: &Series,
    repo: &Repository,
    ids: &[RecordId],
) -> Result<BTreeMap<RecordId, Oid>> {
    let main_of = |id: &RecordId| if id.is_main() { Some(*id) } else { id.track.def().branch };
    let Some(oldest) = ids.iter().filter_map(main_of).min() else {
        bail!("no record to make a tree of");
    };
    let mut out = trees(catalog, series, repo, oldest)?;
    for id in ids.iter().filter(|id| !id.is_main()) {
        let newest = ids.iter().filter(|x| x.track == id.track).max().expect("id itself");
        if !out.contains_key(newest) {
            out.extend(track_trees(catalog, series, repo, *newest)?);
        }
    }
    Ok(out)
}

/// The trees of every record of every track, each compared with its recorded id.
pub fn all_trees(
    catalog: &Catalog,
    series: &Series,
    repo: &Repository,
) -> Result<BTreeMap<RecordId, Oid>> {
    let mut out = trees(catalog, series, repo, series.numbers()[0])?;
    for (track, _) in series.branches() {
        let last = series.chain(track).last().expect("a branch has records").number;
        out.extend(track_trees(catalog, series, repo, last)?);
    }
    Ok(out)
}
