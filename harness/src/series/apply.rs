//! Applying one commit's diff to a tree with libgit2 (no fuzz, all or nothing), and saying
//! exactly which record, commit, file and hunk failed when it does not apply.
use super::patch::{self, FilePatch};
use crate::catalog::RecordId;
use git2::{ApplyOptions, Diff, Odb, Oid, Repository};
use std::cell::RefCell;
use thiserror::Error;

/// Which way a patch is being applied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Direction {
    /// Parent's tree + patch → the record's tree.
    Forward,
    /// The record's tree − patch → the parent's tree.
    Reverse,
}

/// The commit being applied, for error messages.
#[derive(Debug, Clone)]
pub struct Step<'a> {
    pub record: RecordId,
    /// 1-based position in the record's patch, and the patch's commit count.
    pub commit: usize,
    pub commits: usize,
    pub subject: &'a str,
    pub direction: Direction,
    /// The commit is head.patch's (what the checkout has beyond `record`), not the record's own.
    pub head: bool,
}

impl Step<'_> {
    /// `patches/29.patch`, `patches/head.patch`.
    fn patch(&self) -> String {
        format!("patches/{}.patch", if self.head { "head".into() } else { self.record.slug() })
    }

    /// Where the commit sits and what failed, as the error's first words.
    fn text(&self) -> String {
        let verb = match self.direction {
            Direction::Forward => "does not apply to the parent's tree",
            Direction::Reverse => "does not reverse-apply to the newer tree",
        };
        let whose = match self.head {
            true => format!("the checkout's trainer beyond record {}", self.record),
            false => format!("record {}", self.record),
        };
        let (k, n, subject) = (self.commit, self.commits, self.subject);
        format!("{whose}, {} commit {k}/{n} {subject:?} {verb}", self.patch())
    }

    /// How to mend it.
    fn hint(&self) -> String {
        let edit = match (self.head, self.record.track) {
            (false, crate::catalog::Track::Main) => {
                " (or edit the series with `records series export`/`import`)"
            }
            _ => "",
        };
        format!("fix the hunk in {}{edit}", self.patch())
    }
}

#[derive(Debug, Error)]
pub enum ApplyError {
    #[error("{step}: {file}: {}{reason}; {hint}", hunk_text(.hunk))]
    Hunk {
        /// [`Step::text`] and [`Step::hint`] of the failing commit.
        step: String,
        hint: String,
        file: String,
        /// The hunk header as written in the patch.
        hunk: Option<String>,
        reason: String,
    },
    #[error("{step}: {error}; {hint}")]
    Parse {
        step: String,
        hint: String,
        /// In the message, so not a `source` (that would print it twice).
        error: patch::PatchError,
    },
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

fn hunk_text(hunk: &Option<String>) -> String {
    hunk.as_ref().map(|h| format!("hunk `{h}`: ")).unwrap_or_default()
}

/// A repository that lives in memory: trees are computed without touching the disk.
pub fn scratch_repo() -> Result<Repository, git2::Error> {
    let odb = Odb::new()?;
    odb.add_new_mempack_backend(1000)?;
    Repository::from_odb(odb)
}

/// Applies `diff` (one commit of a record's patch, as written) to `tree` in the given
/// direction, returning the new tree.
// The error is the patch's whole location, built once per failure; `SeriesError` boxes it.
#[allow(clippy::result_large_err)]
pub fn apply(repo: &Repository, tree: Oid, diff: &str, step: &Step) -> Result<Oid, ApplyError> {
    let files = patch::parse(diff).map_err(|error| ApplyError::Parse {
        step: step.text(),
        hint: step.hint(),
        error,
    })?;
    let text: String = match step.direction {
        Direction::Forward => diff.to_string(),
        Direction::Reverse => files.iter().map(|f| f.reversed().render()).collect(),
    };
    let parsed = Diff::from_buffer(text.as_bytes())?;
    // libgit2 calls the delta callback per file and the hunk callback per hunk just before
    // applying it, so the last ones seen when it fails are the culprits.
    let seen = RefCell::new((None::<String>, None::<usize>));
    let result = {
        let mut opts = ApplyOptions::new();
        opts.delta_callback(|delta| {
            let path = delta.and_then(|d| {
                let p = d.new_file().path().or(d.old_file().path());
                p.map(|p| p.to_string_lossy().into_owned())
            });
            *seen.borrow_mut() = (path, None);
            true
        });
        opts.hunk_callback(|_| {
            let mut s = seen.borrow_mut();
            s.1 = Some(s.1.map_or(0, |h| h + 1));
            true
        });
        repo.apply_to_tree(&repo.find_tree(tree)?, &parsed, Some(&mut opts))
    };
    match result {
        Ok(mut index) => Ok(index.write_tree_to(repo)?),
        Err(e) => {
            let (path, hunk) = seen.into_inner();
            Err(locate(&files, path, hunk, step, e))
        }
    }
}

/// Names the failing file and hunk in the patch's own terms (the forward hunk header).
fn locate(
    files: &[FilePatch],
    path: Option<String>,
    hunk: Option<usize>,
    step: &Step,
    e: git2::Error,
) -> ApplyError {
    let file = path.as_deref().and_then(|p| {
        files.iter().find(|f| f.new_path.as_deref() == Some(p) || f.old_path.as_deref() == Some(p))
    });
    ApplyError::Hunk {
        step: step.text(),
        hint: step.hint(),
        file: file.map(|f| f.path().to_string()).or(path).unwrap_or_else(|| "?".into()),
        hunk: file.and_then(|f| hunk.and_then(|h| f.hunks.get(h))).map(|h| h.header()),
        reason: e.message().to_string(),
    }
}
