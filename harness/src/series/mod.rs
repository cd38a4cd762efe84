//! The patch series. The trainer tree of the checkout (`src/` and the rest, see [`tree`]) is the
//! newest main record's trainer; `patches/NN.patch` is a mailbox of commits that turns the parent
//! record's trainer into record NN's; the main chain is the main records that have manifests,
//! oldest first, and #1 has no patch. Tree(N) is the checkout with the patches of every newer
//! record reverse-applied by libgit2, newest first, in an in-memory repository.
//!
//! Every other track branches from a main record (its row in the track table): Act 1's chain is
//! a1, a2, ... and Tree(ak) is Tree(#1) with `patches/a1.patch` ... `patches/ak.patch` applied
//! forward, in order.
pub mod apply;
pub mod capture;
pub mod check;
pub mod date;
pub mod export;
pub mod mailbox;
pub mod patch;
pub mod recorded;
pub mod stats;
pub mod tree;

use crate::catalog::{Catalog, RecordId, Track};
use apply::{ApplyError, Direction, Step};
use git2::{Oid, Repository};
use mailbox::{Commit, MailboxError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;
use tree::TreeError;

#[derive(Debug, Error)]
pub enum SeriesError {
    #[error("no records: {0} holds no NN.toml manifest")]
    NoRecords(PathBuf),
    #[error("record {record} has no patch: {} is missing; {}", .path.display(), write_patch_hint(.record))]
    MissingPatch { record: RecordId, path: PathBuf },
    #[error("record {record}: {}: {error}", .path.display())]
    Mailbox { record: RecordId, path: PathBuf, error: MailboxError },
    #[error("{}: the patch holds no commit", .0.display())]
    EmptyPatch(PathBuf),
    #[error("unknown record {}; known records: {known}", .record.bare())]
    UnknownRecord { record: RecordId, known: String },
    /// A record off the main track whose patch, or an earlier one of its track, did not load.
    #[error("{0}")]
    Unloaded(String),
    #[error("reading {}: {error}", .path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error(transparent)]
    Apply(Box<ApplyError>),
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

fn write_patch_hint(record: &RecordId) -> String {
    match record.track {
        Track::Main => format!(
            "write it with `records series capture {} --since REV` or `records series import DIR`",
            record.bare()
        ),
        _ => format!(
            "write it as a git mailbox (`git format-patch --stdout`) of the commits that turn \
             {}'s trainer into {record}'s",
            record.expected_parent().map_or("its parent".into(), |p| p.to_string())
        ),
    }
}

impl From<ApplyError> for SeriesError {
    fn from(e: ApplyError) -> Self {
        SeriesError::Apply(Box::new(e))
    }
}

/// One record of a chain and the commits of its patch (none for the main track's first).
#[derive(Debug, Clone)]
pub struct Record {
    pub number: RecordId,
    pub commits: Vec<Commit>,
}

/// The chains of records with their patches, read from the checkout: the main track's, then
/// each other track's, each oldest first.
#[derive(Debug, Clone)]
pub struct Series {
    pub root: PathBuf,
    /// `patches/head.patch`: what the checkout's trainer has beyond the newest record's, made
    /// by no record (the keys of another track's steps, so that `--head` runs them too).
    head: Vec<Commit>,
    records: Vec<Record>,
    unloaded: Vec<(RecordId, String)>,
}

/// The commits of `patches/<record>.patch`: a missing, unreadable or empty patch is an error.
fn read_patch(root: &Path, record: RecordId) -> Result<Vec<Commit>, SeriesError> {
    read_mailbox(patch_path(root, record), record)
}

/// The commits of the mailbox at `path`, errors naming `record`.
fn read_mailbox(path: PathBuf, record: RecordId) -> Result<Vec<Commit>, SeriesError> {
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SeriesError::MissingPatch { record, path })
        }
        Err(error) => return Err(SeriesError::Io { path, error }),
    };
    let commits = mailbox::parse(&text).map_err(|error| SeriesError::Mailbox {
        record,
        path: path.clone(),
        error,
    })?;
    if commits.is_empty() {
        return Err(SeriesError::EmptyPatch(path));
    }
    Ok(commits)
}

/// `patches/NN.patch`, `patches/aN.patch`.
pub fn patch_path(root: &Path, record: impl Into<RecordId>) -> PathBuf {
    root.join("patches").join(format!("{}.patch", record.into().slug()))
}

/// What the checkout's trainer has beyond the newest record's (see [`Series`]).
const HEAD_PATCH: &str = "head.patch";

/// Where record N's tree is materialized: `<state>/target/records/trees/NN/` (`.../aN/`; see
/// `paths::derived_dir`).
pub fn tree_dir(root: &Path, record: impl Into<RecordId>) -> PathBuf {
    crate::paths::derived_dir(root).join("trees").join(record.into().slug())
}

/// The cargo target dir every materialized tree builds into (see `build`): beside the
/// checkout's own, never the same.
pub fn build_dir(root: &Path) -> PathBuf {
    crate::paths::tree_builds_dir(root)
}

impl Series {
    /// The series of the checkout at `root`: the chain from the catalog, and its patches.
    pub fn load(root: &Path) -> anyhow::Result<Series> {
        // A manifest that does not load still holds its place: skipping it would give every
        // older record a different tree.
        let chain = Catalog::load(root)?.chain();
        Ok(Series::from_chain(root, &chain)?)
    }

    /// The series for an explicit chain of records: the main track's, then any other track's,
    /// each oldest first (as [`Catalog::chain`] gives them).
    pub fn from_chain(root: &Path, chain: &[RecordId]) -> Result<Series, SeriesError> {
        let mut chain = chain.to_vec();
        chain.sort_unstable();
        chain.dedup();
        if !chain.first().is_some_and(|r| r.is_main()) {
            return Err(SeriesError::NoRecords(root.join("records")));
        }
        let mut records = vec![Record { number: chain[0], commits: Vec::new() }];
        let mut unloaded: Vec<(RecordId, String)> = Vec::new();
        for &number in &chain[1..] {
            if unloaded.iter().any(|(r, _)| r.track == number.track) {
                continue; // after a record of its track that does not load
            }
            match read_patch(root, number) {
                Ok(commits) => records.push(Record { number, commits }),
                // Every main tree depends on every main patch; another track's only on its
                // own, so the main track and the records before the break stay usable.
                Err(e) if number.is_main() => return Err(e),
                Err(e) => unloaded.push((number, e.to_string())),
            }
        }
        let newest = records.iter().rev().find(|r| r.number.is_main()).map(|r| r.number);
        let head_path = root.join("patches").join(HEAD_PATCH);
        let head = match read_mailbox(head_path, newest.unwrap_or(chain[0])) {
            Err(SeriesError::MissingPatch { .. }) => Vec::new(),
            read => read?,
        };
        Ok(Series { root: root.to_path_buf(), head, records, unloaded })
    }

    /// The first record of each track off the main one whose patch does not load, and why: it
    /// and the later records of its track are not in the series.
    pub fn unloaded(&self) -> &[(RecordId, String)] {
        &self.unloaded
    }

    /// Every record of every chain, the main track's first.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The chain of `track`, oldest first (empty where it has no record).
    pub fn chain(&self, track: Track) -> &[Record] {
        let start = self.records.iter().position(|r| r.number.track == track);
        let Some(start) = start else { return &[] };
        let len = self.records[start..].iter().take_while(|r| r.number.track == track).count();
        &self.records[start..start + len]
    }

    /// Every record's id, the main track's first.
    pub fn numbers(&self) -> Vec<RecordId> {
        self.records.iter().map(|r| r.number).collect()
    }

    /// The newest main record: its trainer is the checkout's.
    pub fn newest(&self) -> RecordId {
        self.chain(Track::Main).last().map_or(RecordId::main(0), |r| r.number)
    }

    /// Index of record `n` among [`Series::records`], or an error listing the known ones.
    pub fn position(&self, n: impl Into<RecordId>) -> Result<usize, SeriesError> {
        let n = n.into();
        if let Some((_, why)) = self.unloaded.iter().find(|(r, _)| r.track == n.track && *r <= n) {
            return Err(SeriesError::Unloaded(why.clone()));
        }
        self.records.iter().position(|r| r.number == n).ok_or_else(|| SeriesError::UnknownRecord {
            record: n,
            known: crate::catalog::show_ids(self.numbers()),
        })
    }

    pub fn record(&self, n: impl Into<RecordId>) -> Result<&Record, SeriesError> {
        Ok(&self.records[self.position(n)?])
    }

    /// The commit that ports upstream record `k` (its subject starts "#k:"): the main record
    /// whose patch holds it, its index in that patch, and the commit.
    pub fn upstream_commit(&self, k: u32) -> Option<(RecordId, usize, &Commit)> {
        self.chain(Track::Main).iter().find_map(|r| {
            let i = r.commits.iter().position(|c| c.upstream() == Some(k))?;
            Some((r.number, i, &r.commits[i]))
        })
    }

    /// The record before `n`: the one before it in its chain, or for the first record of a
    /// track that branches (a1) the record it branches from (#1).
    pub fn parent(&self, n: impl Into<RecordId>) -> Result<Option<RecordId>, SeriesError> {
        let n = n.into();
        let i = self.position(n)?;
        Ok(match i.checked_sub(1).map(|p| self.records[p].number) {
            Some(p) if p.track == n.track => Some(p),
            _ => n.track.def().branch,
        })
    }

    /// The line of records from the main track's first to `n`, `n` last: #1, #29, ..., #38; or
    /// #1, a1, a2, a3 for a3.
    pub fn lineage(&self, n: impl Into<RecordId>) -> Result<Vec<RecordId>, SeriesError> {
        let mut line = vec![n.into()];
        while let Some(p) = self.parent(*line.last().expect("not empty"))? {
            line.push(p);
        }
        line.reverse();
        Ok(line)
    }

    /// The records after `older` up to and including `newer`, where `older` is on `newer`'s
    /// lineage (#29 and #38; #1 and a3; a1 and a3), in chain order; else none.
    pub fn between(
        &self,
        older: impl Into<RecordId>,
        newer: impl Into<RecordId>,
    ) -> Result<Vec<&Record>, SeriesError> {
        let (older, newer) = (older.into(), newer.into());
        self.position(older)?;
        let line = self.lineage(newer)?;
        Ok(match line.iter().position(|&r| r == older) {
            Some(i) => line[i + 1..].iter().map(|&r| self.record(r)).collect::<Result<_, _>>()?,
            None => Vec::new(),
        })
    }

    /// The trees of every main record from the newest down to `oldest`, stored in `repo`.
    pub fn trees(
        &self,
        repo: &Repository,
        oldest: impl Into<RecordId>,
    ) -> Result<BTreeMap<RecordId, Oid>, SeriesError> {
        self.walk(repo, oldest, |_, _, _| Ok(()))
    }

    /// [`Series::trees`], calling `made(record, tree, undone)` on each tree as soon as it is
    /// made, before the next patch is reverse-applied: `undone` is the record whose patch made
    /// it (`None` for the newest, the checkout's own tree). `oldest` is a main record.
    pub fn walk<E: From<SeriesError>>(
        &self,
        repo: &Repository,
        oldest: impl Into<RecordId>,
        mut made: impl FnMut(RecordId, Oid, Option<RecordId>) -> Result<(), E>,
    ) -> Result<BTreeMap<RecordId, Oid>, E> {
        let stop = self.position(oldest)?;
        let main = self.chain(Track::Main).len();
        let mut tree = tree::worktree_tree(repo, &self.root).map_err(SeriesError::from)?;
        // The newest record's tree: the checkout's, less what head.patch added after it.
        for (k, c) in self.head.iter().enumerate().rev() {
            let step = Step {
                record: self.newest(),
                commit: k + 1,
                commits: self.head.len(),
                subject: &c.subject,
                direction: Direction::Reverse,
                head: true,
            };
            tree = apply::apply(repo, tree, &c.diff, &step).map_err(SeriesError::from)?;
        }
        made(self.newest(), tree, None)?;
        let mut out = BTreeMap::from([(self.newest(), tree)]);
        for i in (stop + 1..main).rev() {
            let r = &self.records[i];
            for (k, c) in r.commits.iter().enumerate().rev() {
                let step = Step {
                    record: r.number,
                    commit: k + 1,
                    commits: r.commits.len(),
                    subject: &c.subject,
                    direction: Direction::Reverse,
                    head: false,
                };
                tree = apply::apply(repo, tree, &c.diff, &step).map_err(SeriesError::from)?;
            }
            let parent = self.records[i - 1].number;
            made(parent, tree, Some(r.number))?;
            out.insert(parent, tree);
        }
        Ok(out)
    }

    /// The trees of `track`'s chain (a track that branches, as Act 1 from #1) up to and
    /// including `upto` (the whole chain with `None`): from `base`, the tree of the record it
    /// branches from, each record's patch applied forward to its parent's tree. `made(record,
    /// tree)` is called on each as soon as it is made, before the next patch is applied.
    pub fn branch<E: From<SeriesError>>(
        &self,
        repo: &Repository,
        track: Track,
        base: Oid,
        upto: Option<RecordId>,
        mut made: impl FnMut(RecordId, Oid) -> Result<(), E>,
    ) -> Result<BTreeMap<RecordId, Oid>, E> {
        if let Some(u) = upto {
            self.position(u)?;
        }
        let mut out = BTreeMap::new();
        let mut tree = base;
        for r in self.chain(track) {
            if upto.is_some_and(|u| r.number > u) {
                break;
            }
            tree = *self.forward(repo, r.number, tree)?.last().unwrap_or(&tree);
            made(r.number, tree)?;
            out.insert(r.number, tree);
        }
        Ok(out)
    }

    /// The tracks other than the main one that have records here, each with the main record
    /// it branches from.
    pub fn branches(&self) -> Vec<(Track, RecordId)> {
        (Track::all().filter(|t| !t.is_main()))
            .filter(|&t| !self.chain(t).is_empty())
            .filter_map(|t| Some((t, t.def().branch?)))
            .collect()
    }

    /// Record `n`'s tree, stored in `repo`, checked against the ids the manifests record (see
    /// [`recorded::trees`] and, for the other tracks, [`recorded::track_trees`]).
    pub fn tree(&self, repo: &Repository, n: impl Into<RecordId>) -> anyhow::Result<Oid> {
        let n = n.into();
        let catalog = Catalog::load(&self.root)?;
        if n.is_main() {
            return Ok(recorded::trees(&catalog, self, repo, n)?[&n]);
        }
        Ok(recorded::track_trees(&catalog, self, repo, n)?[&n])
    }

    /// The tree of record `n`, or of upstream record `n` inside a main record's step (#58 in
    /// #62's patch): the holding record's parent's tree with the patch's commits up to `n`'s
    /// applied.
    pub fn tree_any(&self, repo: &Repository, n: impl Into<RecordId>) -> anyhow::Result<Oid> {
        let n = n.into();
        let inside = n.is_main().then(|| self.upstream_commit(n.n)).flatten();
        match inside.filter(|_| self.position(n).is_err()) {
            Some((holder, i, _)) => {
                let parent = self.parent(holder)?.expect("a record with a patch has a parent");
                let base = self.tree(repo, parent)?;
                Ok(self.forward(repo, holder, base)?[i])
            }
            None => self.tree(repo, n),
        }
    }

    /// The checkout's trainer made from `tree`, the newest record's: head.patch's commits
    /// applied to it in order (the inverse of the first step of [`Series::walk`]).
    pub fn with_head(&self, repo: &Repository, mut tree: Oid) -> Result<Oid, SeriesError> {
        for (k, c) in self.head.iter().enumerate() {
            let step = Step {
                record: self.newest(),
                commit: k + 1,
                commits: self.head.len(),
                subject: &c.subject,
                direction: Direction::Forward,
                head: true,
            };
            tree = apply::apply(repo, tree, &c.diff, &step)?;
        }
        Ok(tree)
    }

    /// Applies record `n`'s commits to `tree` in order, returning the tree after each.
    pub fn forward(
        &self,
        repo: &Repository,
        n: impl Into<RecordId>,
        mut tree: Oid,
    ) -> Result<Vec<Oid>, SeriesError> {
        let n = n.into();
        let r = self.record(n)?;
        let mut out = Vec::new();
        for (k, c) in r.commits.iter().enumerate() {
            let step = Step {
                record: n,
                commit: k + 1,
                commits: r.commits.len(),
                subject: &c.subject,
                direction: Direction::Forward,
                head: false,
            };
            tree = apply::apply(repo, tree, &c.diff, &step)?;
            out.push(tree);
        }
        Ok(out)
    }
}

/// Writes record `record`'s trainer tree (or upstream record `record`'s, see
/// [`Series::tree_any`]) to `target/records/trees/NN/` (atomically; an unchanged tree is left as
/// is) and returns that directory. `src/` is never touched.
pub fn materialize(root: &Path, record: impl Into<RecordId>) -> anyhow::Result<PathBuf> {
    let record = record.into();
    let dir = tree_dir(root, record);
    write_tree(root, record, &dir)?;
    Ok(dir)
}

/// Writes record `record`'s trainer tree to `dest`, a folder of the user's: it must be new,
/// empty, or hold a tree written before, as writing replaces the folder.
pub fn materialize_into(
    root: &Path,
    record: impl Into<RecordId>,
    dest: &Path,
) -> anyhow::Result<()> {
    let record = record.into();
    if dest.exists() && !dest.join(tree::MARKER).is_file() {
        let mut entries = std::fs::read_dir(dest)
            .map_err(|e| anyhow::anyhow!("--out {}: {e}", dest.display()))?;
        if entries.next().is_some() {
            anyhow::bail!(
                "--out {}: the folder is not empty and holds no tree written by `records series \
                 tree`; writing replaces it, so give a new or empty folder",
                dest.display()
            );
        }
    }
    write_tree(root, record, dest)
}

fn write_tree(root: &Path, record: RecordId, dest: &Path) -> anyhow::Result<()> {
    let series = Series::load(root)?;
    let repo = apply::scratch_repo()?;
    let tree = series.tree_any(&repo, record)?;
    tree::write_dir(&repo, tree, dest)?;
    tree::write_head_manifests(root, dest)?;
    Ok(())
}
