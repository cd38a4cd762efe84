//! `records series export DIR` / `import DIR`: the series as an ordinary git history, so it can
//! be edited with `git rebase -i`, fixups and amends, then written back.
//!
//! The export's root commit is the first record's tree; every later commit is one commit of a
//! record's patch, oldest first, its message ending in a `Records-Patch: NN` trailer. On import a
//! commit without the trailer joins the record of the commit before it (so a fixup or a new
//! commit stays with its record); the trailer is stripped again. Only the main track's series is
//! exported; a branching track's patches (Act 1's) are edited as they are, and
//! `records series record-trees` records their trees.
use super::{mailbox, mailbox::Commit, patch_path, tree, Series};
use crate::catalog::{Catalog, Track};
use anyhow::{bail, Context, Result};
use git2::{build::CheckoutBuilder, Oid, Repository, Signature, Time};
use std::path::Path;

pub const TRAILER: &str = "Records-Patch";

/// Writes the series as a new git repository in `dir` (absent or empty); returns how many
/// commits it made.
pub fn export(root: &Path, dir: &Path) -> Result<usize> {
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        bail!("{} is not empty; export into a new folder", dir.display());
    }
    let catalog = Catalog::load(root)?;
    let series = Series::load(root)?;
    let repo = Repository::init(dir)
        .with_context(|| format!("creating a git repo in {}", dir.display()))?;
    let first = series.numbers()[0];
    let trees = series.trees(&repo, first)?;
    let base_sig = Signature::new("records", "records@localhost", &Time::new(0, 0))?;
    let title = &catalog.get(first)?.record.title;
    let msg =
        format!("Record {first}: {title}\n\nThe base of the series: record {first}'s trainer.\n");
    let mut head =
        repo.commit(None, &base_sig, &base_sig, &msg, &repo.find_tree(trees[&first])?, &[])?;
    let mut tree = trees[&first];
    let mut count = 1;
    for r in &series.chain(Track::Main)[1..] {
        let after = series.forward(&repo, r.number, tree)?;
        for (c, t) in r.commits.iter().zip(after) {
            let sig = signature(c)
                .with_context(|| format!("record {}: commit {:?}", r.number, c.subject))?;
            let message = format!("{}\n{TRAILER}: {}\n", c.message(), r.number.n);
            let parent = repo.find_commit(head)?;
            head = repo.commit(None, &sig, &sig, &message, &repo.find_tree(t)?, &[&parent])?;
            tree = t;
            count += 1;
        }
    }
    repo.reference("refs/heads/main", head, true, "records series export")?;
    repo.set_head("refs/heads/main")?;
    repo.checkout_head(Some(CheckoutBuilder::new().force()))?;
    Ok(count)
}

fn signature(c: &Commit) -> Result<Signature<'static>> {
    let (name, email) = c.author_parts();
    let Some((secs, offset)) = c.time() else {
        bail!("cannot read the date {:?}", c.date);
    };
    Ok(Signature::new(name, email, &Time::new(secs, offset))?)
}

/// What an import wrote.
#[derive(Debug)]
pub struct Imported {
    /// (main record, commits) of every rewritten patch.
    pub patches: Vec<(u32, usize)>,
    /// Trainer files of the checkout written or removed to match the export's tip.
    pub tip_changes: usize,
}

/// Rewrites `patches/` and the checkout's trainer tree from the history in `dir` (its tip, the
/// newest record's tree, with `patches/head.patch` applied).
pub fn import(root: &Path, dir: &Path) -> Result<Imported> {
    let series = Series::load(root)?;
    let repo = Repository::open(dir)
        .with_context(|| format!("opening the exported repo {}", dir.display()))?;
    let tip = repo.head()?.peel_to_commit().context("the export has no commits")?;
    let mut history = vec![tip.clone()];
    while let Some(c) = history.last().filter(|c| c.parent_count() > 0) {
        if c.parent_count() > 1 {
            bail!(
                "commit {:.10} is a merge; the series must be a straight line",
                c.id().to_string()
            );
        }
        history.push(c.parent(0)?);
    }
    history.reverse();
    let mut groups: Vec<(u32, Vec<Commit>)> = Vec::new();
    for pair in history.windows(2) {
        let (parent, c) = (&pair[0], &pair[1]);
        let (message, record) = split_trailer(c.message().unwrap_or(""));
        let (subject, _) = Commit::split_message(&message);
        let record = match (record, groups.last()) {
            (Some(r), _) => r,
            (None, Some((r, _))) => *r,
            (None, None) => bail!(
                "commit {:.10} {subject:?} has no `{TRAILER}: NN` line and no record before it; add the trailer to its message",
                c.id().to_string()
            ),
        };
        let diff = tree::diff_text(&repo, Some(parent.tree_id()), c.tree_id())?;
        if diff.is_empty() {
            continue;
        }
        let mail = Commit::from_git(c, &message, diff);
        match groups.last_mut() {
            Some((r, commits)) if *r == record => commits.push(mail),
            _ => groups.push((record, vec![mail])),
        }
    }
    let found: Vec<u32> = groups.iter().map(|g| g.0).collect();
    let chain: Vec<u32> = series.chain(Track::Main)[1..].iter().map(|r| r.number.n).collect();
    if found != chain {
        bail!(
            "the export's commits belong to records {found:?} (by their {TRAILER} lines) but the chain after #{} is {chain:?}; every record needs its commits, in chain order",
            series.numbers()[0].n
        );
    }
    // The export ends at the newest record; the checkout's trainer is that plus head.patch,
    // checked before anything is written.
    let trainer = series.with_head(&repo, tip.tree_id()).with_context(|| {
        "the export's newest tree does not take patches/head.patch; rebase head.patch's commits \
         onto it by hand"
    })?;
    for (record, commits) in &groups {
        corpus::fs::write_atomic(&patch_path(root, *record), mailbox::write(commits)?.as_bytes())?;
    }
    let tip_changes = write_tip(root, &repo, trainer)?;
    super::recorded::record(root)?;
    Ok(Imported { patches: groups.iter().map(|(r, c)| (*r, c.len())).collect(), tip_changes })
}

/// Splits off the trailer: (message without it, record it names).
fn split_trailer(message: &str) -> (String, Option<u32>) {
    let mut record = None;
    let kept: Vec<&str> = message
        .lines()
        .filter(|l| match l.strip_prefix(TRAILER).and_then(|r| r.strip_prefix(':')) {
            Some(n) => {
                record = n.trim().parse().ok().or(record);
                false
            }
            None => true,
        })
        .collect();
    (kept.join("\n"), record)
}

/// Makes the checkout's trainer files equal the tree `tip`; returns how many files changed.
fn write_tip(root: &Path, repo: &Repository, tip: Oid) -> Result<usize> {
    let wanted = tree::files(repo, tip)?;
    let mut changes = 0;
    for path in tree::worktree_files(root)? {
        if !wanted.contains_key(&path) {
            let file = root.join(&path);
            std::fs::remove_file(&file).with_context(|| format!("removing {}", file.display()))?;
            changes += 1;
        }
    }
    for (path, (mode, data)) in &wanted {
        let file = root.join(path);
        if std::fs::read(&file).ok().as_deref() != Some(data.as_slice()) {
            corpus::fs::write_atomic(&file, data)?;
            changes += 1;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let exec = if *mode == 0o100755 { 0o755 } else { 0o644 };
            let perms = std::fs::metadata(&file)?.permissions();
            if perms.mode() & 0o111 != exec & 0o111 {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(exec))?;
                changes += 1;
            }
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_is_found_and_stripped() {
        let (m, r) = split_trailer("Tune lr\n\nWhy.\n\nRecords-Patch: 29\n");
        assert_eq!((m.trim_end(), r), ("Tune lr\n\nWhy.", Some(29)));
        assert_eq!(split_trailer("fixup! x\n").1, None);
    }
}
