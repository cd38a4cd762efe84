//! `records series capture NN --since REV`: a new record's patch from this checkout's own
//! history. The commits in REV..HEAD become the patch's commits (trainer files only; commits
//! that touch no trainer file are skipped), authors, dates and messages kept. The main track's
//! only: the checkout's trainer is its newest record's.
use super::{mailbox, mailbox::Commit, patch_path, tree};
use crate::catalog::{RecordId, Track};
use anyhow::{bail, Context, Result};
use corpus::fs::write_atomic;
use git2::{Repository, Sort};
use std::path::{Path, PathBuf};

/// Writes `patches/NN.patch` from REV..HEAD; returns its path and commit count.
pub fn capture(
    root: &Path,
    record: impl Into<RecordId>,
    since: &str,
    force: bool,
) -> Result<(PathBuf, usize)> {
    let record = record.into();
    if !record.is_main() {
        bail!(
            "capture makes a main record's patch from this checkout's history (the checkout's \
             trainer is the newest main record's); {}'s patches/{}.patch is a git mailbox of the \
             commits on its parent's tree (git format-patch), and `records series record-trees \
             --track {}` records its trees",
            record.track.def().name,
            record.slug(),
            record.track.key()
        );
    }
    let newest = newest_manifest(root)?;
    if record != newest {
        bail!("record {record} is not the newest record ({newest}); the checkout's trainer is the newest record's, so only {newest} can be captured");
    }
    let path = patch_path(root, record);
    if path.exists() && !force {
        bail!("{} exists; pass --force to replace it", path.display());
    }
    let repo = Repository::open(root)
        .with_context(|| format!("opening the git repo at {}", root.display()))?;
    let base = repo
        .revparse_single(since)
        .and_then(|o| o.peel_to_commit())
        .with_context(|| format!("--since {since:?} names no commit"))?;
    let mut walk = repo.revwalk()?;
    walk.push_head()?;
    walk.hide(base.id())?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)?;
    let mut commits = Vec::new();
    for id in walk {
        let c = repo.find_commit(id?)?;
        if c.parent_count() != 1 {
            bail!("commit {:.10} {:?} has {} parents; capture needs a straight line of commits after {since}", c.id().to_string(), c.summary().ok().flatten().unwrap_or(""), c.parent_count());
        }
        let diff = tree::diff_text(&repo, Some(c.parent(0)?.tree_id()), c.tree_id())?;
        if diff.is_empty() {
            continue;
        }
        commits.push(Commit::from_git(&c, c.message().unwrap_or(""), diff));
    }
    if commits.is_empty() {
        bail!("no commit in {since}..HEAD changes a trainer file; nothing to capture");
    }
    write_atomic(&path, mailbox::write(&commits)?.as_bytes())?;
    super::recorded::record(root)
        .context("the series no longer reverse-applies after the capture")?;
    Ok((path, commits.len()))
}

fn newest_manifest(root: &Path) -> Result<RecordId> {
    let catalog = crate::catalog::Catalog::load(root)?;
    match catalog.chain().iter().rfind(|r| r.track == Track::Main) {
        Some(&n) => Ok(n),
        None => {
            bail!("{} holds no manifest; add records/NN.toml first", root.join("records").display())
        }
    }
}

/// Whether the checkout's trainer files differ from HEAD's (those edits are not in a capture).
pub fn has_uncommitted_trainer_changes(root: &Path) -> Result<bool> {
    let repo = Repository::open(root)?;
    let scratch = super::apply::scratch_repo()?;
    let work = tree::files(&scratch, tree::worktree_tree(&scratch, root)?)?;
    let mut head = tree::files(&repo, repo.head()?.peel_to_tree()?.id())?;
    head.retain(|path, _| tree::is_trainer_path(path));
    Ok(work != head)
}
