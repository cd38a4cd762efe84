//! The patch series. The trainer tree of the checkout (`src/` and the rest, see [`tree`]) is the
//! newest record's trainer; `patches/NN.patch` is a mailbox of commits that turns the parent
//! record's trainer into record NN's; the chain is the records that have manifests, oldest
//! first, and #1 has no patch. Tree(N) is the checkout with the patches of every newer record
//! reverse-applied by libgit2, newest first, in an in-memory repository.
pub mod apply;
pub mod build;
pub mod capture;
pub mod check;
pub mod date;
pub mod export;
pub mod mailbox;
pub mod patch;
pub mod recorded;
pub mod tree;

use crate::catalog::Catalog;
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
    #[error("record #{record} has no patch: {} is missing; write it with `records series capture {record} --since REV` or `records series import DIR`", .path.display())]
    MissingPatch { record: u32, path: PathBuf },
    #[error("record #{record}: {}: {error}", .path.display())]
    Mailbox { record: u32, path: PathBuf, error: MailboxError },
    #[error("{}: the patch holds no commit", .0.display())]
    EmptyPatch(PathBuf),
    #[error("unknown record {record}; known records: {known}")]
    UnknownRecord { record: u32, known: String },
    #[error("reading {}: {error}", .path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error(transparent)]
    Apply(Box<ApplyError>),
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

impl From<ApplyError> for SeriesError {
    fn from(e: ApplyError) -> Self {
        SeriesError::Apply(Box::new(e))
    }
}

/// One record of the chain and the commits of its patch (none for the first).
#[derive(Debug, Clone)]
pub struct Record {
    pub number: u32,
    pub commits: Vec<Commit>,
}

/// The chain of records with their patches, read from the checkout.
#[derive(Debug, Clone)]
pub struct Series {
    pub root: PathBuf,
    records: Vec<Record>,
}

/// `patches/NN.patch`.
pub fn patch_path(root: &Path, record: u32) -> PathBuf {
    root.join("patches").join(format!("{record:02}.patch"))
}

/// Where record N's tree is materialized.
pub fn tree_dir(root: &Path, record: u32) -> PathBuf {
    root.join("target").join("records").join("trees").join(format!("{record:02}"))
}

/// The cargo target dir every materialized tree builds into (see `build`): beside the
/// checkout's own, never the same.
pub fn build_dir(root: &Path) -> PathBuf {
    crate::paths::cargo_target_dir(root).join("records-trees")
}

impl Series {
    /// The series of the checkout at `root`: the chain from the catalog, and its patches.
    pub fn load(root: &Path) -> anyhow::Result<Series> {
        // A manifest that does not load still holds its place: skipping it would give every
        // older record a different tree.
        let chain = Catalog::load(root)?.chain();
        Ok(Series::from_chain(root, &chain)?)
    }

    /// The series for an explicit chain of record numbers, oldest first.
    pub fn from_chain(root: &Path, chain: &[u32]) -> Result<Series, SeriesError> {
        if chain.is_empty() {
            return Err(SeriesError::NoRecords(root.join("records")));
        }
        let mut records = vec![Record { number: chain[0], commits: Vec::new() }];
        for &number in &chain[1..] {
            let path = patch_path(root, number);
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(SeriesError::MissingPatch { record: number, path })
                }
                Err(error) => return Err(SeriesError::Io { path, error }),
            };
            let commits = mailbox::parse(&text).map_err(|error| SeriesError::Mailbox {
                record: number,
                path: path.clone(),
                error,
            })?;
            if commits.is_empty() {
                return Err(SeriesError::EmptyPatch(path));
            }
            records.push(Record { number, commits });
        }
        Ok(Series { root: root.to_path_buf(), records })
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    pub fn numbers(&self) -> Vec<u32> {
        self.records.iter().map(|r| r.number).collect()
    }

    pub fn newest(&self) -> u32 {
        self.records.last().map_or(0, |r| r.number)
    }

    /// Index of record `n` in the chain, or an error listing the known ones.
    pub fn position(&self, n: u32) -> Result<usize, SeriesError> {
        self.records.iter().position(|r| r.number == n).ok_or_else(|| SeriesError::UnknownRecord {
            record: n,
            known: self.numbers().iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        })
    }

    pub fn record(&self, n: u32) -> Result<&Record, SeriesError> {
        Ok(&self.records[self.position(n)?])
    }

    /// The commit that ports upstream record `k` (its subject starts "#k:"): the record whose
    /// patch holds it, its index in that patch, and the commit.
    pub fn upstream_commit(&self, k: u32) -> Option<(u32, usize, &Commit)> {
        self.records.iter().find_map(|r| {
            let i = r.commits.iter().position(|c| c.upstream() == Some(k))?;
            Some((r.number, i, &r.commits[i]))
        })
    }

    /// The record before `n` in the chain.
    pub fn parent(&self, n: u32) -> Result<Option<u32>, SeriesError> {
        let i = self.position(n)?;
        Ok(i.checked_sub(1).map(|p| self.records[p].number))
    }

    /// The records after `older` up to and including `newer` (chain order).
    pub fn between(&self, older: u32, newer: u32) -> Result<&[Record], SeriesError> {
        let (a, b) = (self.position(older)?, self.position(newer)?);
        Ok(if a < b { &self.records[a + 1..=b] } else { &[] })
    }

    /// The trees of every record from the newest down to `oldest`, stored in `repo`.
    pub fn trees(&self, repo: &Repository, oldest: u32) -> Result<BTreeMap<u32, Oid>, SeriesError> {
        self.walk(repo, oldest, |_, _, _| Ok(()))
    }

    /// [`Series::trees`], calling `made(record, tree, undone)` on each tree as soon as it is
    /// made, before the next patch is reverse-applied: `undone` is the record whose patch made
    /// it (`None` for the newest, the checkout's own tree).
    pub fn walk<E: From<SeriesError>>(
        &self,
        repo: &Repository,
        oldest: u32,
        mut made: impl FnMut(u32, Oid, Option<u32>) -> Result<(), E>,
    ) -> Result<BTreeMap<u32, Oid>, E> {
        let stop = self.position(oldest)?;
        let mut tree = tree::worktree_tree(repo, &self.root).map_err(SeriesError::from)?;
        made(self.newest(), tree, None)?;
        let mut out = BTreeMap::from([(self.newest(), tree)]);
        for i in (stop + 1..self.records.len()).rev() {
            let r = &self.records[i];
            for (k, c) in r.commits.iter().enumerate().rev() {
                let step = Step {
                    record: r.number,
                    commit: k + 1,
                    commits: r.commits.len(),
                    subject: &c.subject,
                    direction: Direction::Reverse,
                };
                tree = apply::apply(repo, tree, &c.diff, &step).map_err(SeriesError::from)?;
            }
            let parent = self.records[i - 1].number;
            made(parent, tree, Some(r.number))?;
            out.insert(parent, tree);
        }
        Ok(out)
    }

    /// Record `n`'s tree, stored in `repo`, checked against the ids the manifests record (see
    /// [`recorded::trees`]).
    pub fn tree(&self, repo: &Repository, n: u32) -> anyhow::Result<Oid> {
        Ok(recorded::trees(&Catalog::load(&self.root)?, self, repo, n)?[&n])
    }

    /// The tree of record `n`, or of upstream record `n` inside a step (#58 in #62's patch):
    /// the holding record's parent's tree with the patch's commits up to `n`'s applied.
    pub fn tree_any(&self, repo: &Repository, n: u32) -> anyhow::Result<Oid> {
        match self.upstream_commit(n).filter(|_| self.position(n).is_err()) {
            Some((holder, i, _)) => {
                let parent = self.parent(holder)?.expect("a record with a patch has a parent");
                let base = self.tree(repo, parent)?;
                Ok(self.forward(repo, holder, base)?[i])
            }
            None => self.tree(repo, n),
        }
    }

    /// Applies record `n`'s commits to `tree` in order, returning the tree after each.
    pub fn forward(
        &self,
        repo: &Repository,
        n: u32,
        mut tree: Oid,
    ) -> Result<Vec<Oid>, SeriesError> {
        let r = self.record(n)?;
        let mut out = Vec::new();
        for (k, c) in r.commits.iter().enumerate() {
            let step = Step {
                record: n,
                commit: k + 1,
                commits: r.commits.len(),
                subject: &c.subject,
                direction: Direction::Forward,
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
pub fn materialize(root: &Path, record: u32) -> anyhow::Result<PathBuf> {
    let dir = tree_dir(root, record);
    write_tree(root, record, &dir)?;
    Ok(dir)
}

/// Writes record `record`'s trainer tree to `dest`, a folder of the user's: it must be new,
/// empty, or hold a tree written before, as writing replaces the folder.
pub fn materialize_into(root: &Path, record: u32, dest: &Path) -> anyhow::Result<()> {
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

fn write_tree(root: &Path, record: u32, dest: &Path) -> anyhow::Result<()> {
    let series = Series::load(root)?;
    let repo = apply::scratch_repo()?;
    let tree = series.tree_any(&repo, record)?;
    tree::write_dir(&repo, tree, dest)?;
    tree::write_head_manifests(root, dest)?;
    Ok(())
}
