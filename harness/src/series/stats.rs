//! How much of each upstream record's commit stays in its technique's own module: every commit
//! of the main track's patches after #29 (the upstream records #30 onward), its trainer files
//! with their added and removed lines, each file either a technique's own module, a shared file
//! (the assembly, the recipe and its registry, the optimizers' routing, the loop) or a test.
//! `records series stats` prints it; ARCHITECTURE.md's figures are its output.
use super::Series;
use crate::catalog::{Catalog, RecordId, Track};
use anyhow::Result;
use git2::{Oid, Repository};

/// The trainer files every technique reaches through: a change here is paid again by every
/// record that adds a technique. Each with why it is shared.
pub const SHARED: &[(&str, &str)] = &[
    ("src/recipe.rs", "the Recipe: every key's field"),
    ("src/recipe/techniques.rs", "the Recipe's keys after #1"),
    ("src/recipe/registry.rs", "the registry list"),
    ("src/recipe/lab.rs", "the lab rule"),
    ("src/model/gpt.rs", "the model's assembly and trunk"),
    ("src/model/block.rs", "a block's assembly"),
    ("src/model/builder.rs", "what every part builds from"),
    ("src/model/params.rs", "parameter groups and roles"),
    ("src/model/scalars.rs", "the scalar bank"),
    ("src/model/mod.rs", "the model's module list"),
    ("src/optim/mod.rs", "the optimizers' module list"),
    ("src/optim/optimizer.rs", "routing parameters to optimizers"),
    ("src/optim/schedule.rs", "the step plan"),
    ("src/train.rs", "the training loop"),
    ("src/lib.rs", "the crate's module list"),
    ("src/bin/train.rs", "the trainer's command line"),
];

/// The goal for a commit: its own module, plus at most this many lines in shared files.
pub const GOAL_SHARED_LINES: usize = 5;

/// What a file of the trainer's tree is to a commit that changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A technique's own module: any file under `src/` that is not shared.
    Own,
    /// In [`SHARED`], or outside `src/` and `tests/` (Cargo.toml, build.rs).
    Shared,
    /// Under `tests/`: a technique's tests and the parameter tables.
    Test,
}

pub fn kind(path: &str) -> Kind {
    if path.starts_with("tests/") {
        Kind::Test
    } else if path.starts_with("src/") && !SHARED.iter().any(|(p, _)| *p == path) {
        Kind::Own
    } else {
        Kind::Shared
    }
}

/// One file a commit changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLines {
    pub path: String,
    pub added: usize,
    pub removed: usize,
}

impl FileLines {
    pub fn lines(&self) -> usize {
        self.added + self.removed
    }
}

/// One commit of a main record's patch.
#[derive(Debug, Clone)]
pub struct CommitStats {
    /// The record whose patch holds it.
    pub holder: RecordId,
    /// The upstream record it ports, from its subject ("#31: ...").
    pub upstream: Option<u32>,
    pub subject: String,
    pub files: Vec<FileLines>,
}

impl CommitStats {
    pub fn of_kind(&self, k: Kind) -> impl Iterator<Item = &FileLines> {
        self.files.iter().filter(move |f| kind(&f.path) == k)
    }

    /// Lines added plus removed in shared files.
    pub fn shared_lines(&self) -> usize {
        self.of_kind(Kind::Shared).map(FileLines::lines).sum()
    }

    /// Within the goal: at most [`GOAL_SHARED_LINES`] lines outside its own module and tests.
    pub fn stays_home(&self) -> bool {
        self.shared_lines() <= GOAL_SHARED_LINES
    }
}

/// Every commit of the main track's patches after #29, oldest first.
pub fn main_track(root: &std::path::Path) -> Result<Vec<CommitStats>> {
    let catalog = Catalog::load(root)?;
    let series = Series::load(root)?;
    let repo = super::apply::scratch_repo()?;
    let chain: Vec<RecordId> = series.chain(Track::Main).iter().map(|r| r.number).collect();
    let trees = super::recorded::trees_of(&catalog, &series, &repo, &chain)?;
    let mut out = Vec::new();
    for pair in chain.windows(2).filter(|p| p[0] >= RecordId::main(29)) {
        let (parent, record) = (pair[0], pair[1]);
        let mut before = trees[&parent];
        let commits = &series.record(record)?.commits;
        for (commit, after) in commits.iter().zip(series.forward(&repo, record, before)?) {
            out.push(CommitStats {
                holder: record,
                upstream: commit.upstream(),
                subject: commit.subject.clone(),
                files: file_lines(&repo, before, after)?,
            });
            before = after;
        }
    }
    Ok(out)
}

/// The files that differ between two trees, with their added and removed lines.
fn file_lines(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<FileLines>> {
    let (old, new) = (repo.find_tree(old)?, repo.find_tree(new)?);
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    let mut out = Vec::new();
    for (i, delta) in diff.deltas().enumerate() {
        let path = delta.new_file().path().or(delta.old_file().path());
        let path = path.map_or(String::new(), |p| p.to_string_lossy().into_owned());
        let (_, added, removed) = match git2::Patch::from_diff(&diff, i)? {
            Some(patch) => patch.line_stats()?,
            None => (0, 0, 0), // a binary file: no lines
        };
        out.push(FileLines { path, added, removed });
    }
    Ok(out)
}

/// A shared file over all commits: how many touch it and their lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedUse {
    pub path: &'static str,
    pub why: &'static str,
    pub commits: usize,
    pub added: usize,
    pub removed: usize,
}

/// Each shared file's use across `commits`, in [`SHARED`]'s order; the unused ones left out.
pub fn shared_use(commits: &[CommitStats]) -> Vec<SharedUse> {
    let uses = SHARED.iter().map(|&(path, why)| {
        let touching: Vec<&FileLines> =
            commits.iter().flat_map(|c| &c.files).filter(|f| f.path == path).collect();
        SharedUse {
            path,
            why,
            commits: touching.len(),
            added: touching.iter().map(|f| f.added).sum(),
            removed: touching.iter().map(|f| f.removed).sum(),
        }
    });
    uses.filter(|u| u.commits > 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_own_shared_or_tests() {
        assert_eq!(kind("src/model/bigram_hash.rs"), Kind::Own);
        assert_eq!(kind("src/optim/muon.rs"), Kind::Own);
        assert_eq!(kind("src/model/gpt.rs"), Kind::Shared);
        assert_eq!(kind("src/recipe/registry.rs"), Kind::Shared);
        assert_eq!(kind("Cargo.toml"), Kind::Shared);
        assert_eq!(kind("tests/param_tables/84.tsv"), Kind::Test);
    }

    fn commit(files: &[(&str, usize, usize)]) -> CommitStats {
        CommitStats {
            holder: RecordId::main(84),
            upstream: Some(80),
            subject: "#80: ...".into(),
            files: (files.iter())
                .map(|&(p, a, r)| FileLines { path: p.into(), added: a, removed: r })
                .collect(),
        }
    }

    #[test]
    fn a_commit_stays_home_with_at_most_five_shared_lines() {
        let own = ("src/model/qk.rs", 40, 3);
        let test = ("tests/qk.rs", 90, 0);
        assert!(commit(&[own, test, ("src/model/gpt.rs", 2, 1), ("src/lib.rs", 1, 1)]).stays_home());
        let six = commit(&[own, ("src/model/gpt.rs", 4, 1), ("src/recipe/registry.rs", 1, 0)]);
        assert_eq!(six.shared_lines(), 6);
        assert!(!six.stays_home());
    }

    #[test]
    fn shared_use_sums_each_shared_file_over_the_commits() {
        let a = commit(&[("src/model/gpt.rs", 2, 1), ("src/model/qk.rs", 9, 0)]);
        let b = commit(&[("src/model/gpt.rs", 5, 0), ("src/recipe.rs", 3, 3)]);
        let uses = shared_use(&[a, b]);
        let paths: Vec<&str> = uses.iter().map(|u| u.path).collect();
        assert_eq!(paths, ["src/recipe.rs", "src/model/gpt.rs"]);
        assert_eq!((uses[1].commits, uses[1].added, uses[1].removed), (2, 7, 1));
        assert_eq!((uses[0].commits, uses[0].added, uses[0].removed), (1, 3, 3));
    }
}
