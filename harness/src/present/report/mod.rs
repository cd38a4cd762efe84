//! The typed report of a record: what `records review N` and the site's record page say,
//! gathered once from the catalog, the series, the time model and this machine's replays.
//! `review` renders it as text or Markdown and the site as HTML; neither reads a manifest's
//! figures, a patch or a verdict on its own. An upstream record inside a step has its own
//! (`upstream.rs`), and so has a diff of two records (`diff.rs`).
mod diff;
mod notes;
mod upstream;

use crate::catalog::{Catalog, Manifest, Note, RecordId, Track, TARGET_VAL_LOSS};
use crate::cost::model::Model;
use crate::present::predicted;
use crate::run::replays::Replay;
use crate::series::mailbox::Commit;
use crate::series::patch::{self, FilePatch};
use crate::series::{apply, tree, Series};
use crate::verdict::stats::{self, Summary, TTest};
use anyhow::Result;
use std::collections::BTreeMap;

pub use diff::{recipe_changes, DiffReport, RecipeChange};
pub use notes::{place_notes, Spot};
pub use upstream::UpstreamReport;

/// One record, as its review and its page present it.
pub struct RecordReport<'a> {
    pub m: &'a Manifest,
    pub parent: Option<&'a Manifest>,
    /// The official time's change from the parent; `None` without a parent on the same
    /// hardware (a1 on 2×RTX 4090 does not compare with #1 on 8×H100).
    pub time_change: Option<TimeChange>,
    /// The time model's step and its change from the parent, or why there is none.
    pub predicted: String,
    pub commits: Vec<CommitReport<'a>>,
    /// The notes that anchor at no line of the patch, with their line of the record's tree.
    pub loose: Vec<(&'a Note, String)>,
    pub official: Official,
    /// This machine's replays of the record, oldest first.
    pub replays: Vec<Replay>,
}

/// One commit of a record's patch, with the notes that land in it.
pub struct CommitReport<'a> {
    pub commit: &'a Commit,
    /// Whose change it ports (the upstream record and its authors, never the porter).
    pub credit: String,
    pub diff: NotedDiff<'a>,
}

/// A diff's files with the manifest's notes placed at their lines.
pub struct NotedDiff<'a> {
    pub files: Vec<FilePatch>,
    /// Notes by (file, hunk, body line).
    pub notes: BTreeMap<(usize, usize, usize), Vec<&'a Note>>,
}

impl NotedDiff<'_> {
    /// The notes placed at body line `line` of hunk `hunk` of file `file`.
    pub fn notes_at(&self, file: usize, hunk: usize, line: usize) -> &[&Note] {
        self.notes.get(&(file, hunk, line)).map_or(&[], Vec::as_slice)
    }
}

/// The official time against the parent's.
#[derive(Debug, Clone, Copy)]
pub struct TimeChange {
    pub parent: RecordId,
    pub parent_s: f64,
    pub delta_s: f64,
}

impl TimeChange {
    pub fn pct(&self) -> f64 {
        100.0 * self.delta_s / self.parent_s
    }
}

/// Upstream's logs of the record, summarised.
pub struct Official {
    pub loss: Option<Summary>,
    /// Whether the mean is under the target; `None` below two logs.
    pub ttest: Option<TTest>,
    pub times: Option<Summary>,
    /// The parent's mean train time, for the evidence's comparison.
    pub parent_times: Option<(RecordId, Summary)>,
}

impl Official {
    /// The figures of `m`'s logs (and its parent's mean train time).
    pub fn of(m: &Manifest, parent: Option<&Manifest>) -> Official {
        let e = &m.evidence;
        Official {
            loss: Summary::of(&e.val_losses),
            ttest: stats::ttest_1samp_less(&e.val_losses, TARGET_VAL_LOSS),
            times: Summary::of(&e.train_times_s),
            parent_times: parent
                .and_then(|p| Summary::of(&p.evidence.train_times_s).map(|s| (p.id(), s))),
        }
    }
}

impl<'a> RecordReport<'a> {
    /// Record `n` of `series`, with this machine's `replays` of it (`run::replays`).
    pub fn load(
        (catalog, series): (&'a Catalog, &'a Series),
        model: &Result<Model>,
        replays: Vec<Replay>,
        n: RecordId,
    ) -> Result<RecordReport<'a>> {
        let m = catalog.get(n)?;
        let parent = series.parent(n)?.map(|p| catalog.get(p)).transpose()?;
        let (commits, loose) = commits(m, &series.record(n)?.commits)?;
        let loose = match loose.is_empty() {
            true => Vec::new(),
            false => loose_lines(series, n, loose)?,
        };
        Ok(RecordReport {
            m,
            parent,
            time_change: parent.filter(|p| p.record.hardware == m.record.hardware).map(|p| {
                let parent_s = p.record.official_time_s;
                TimeChange {
                    parent: p.id(),
                    parent_s,
                    delta_s: m.record.official_time_s - parent_s,
                }
            }),
            predicted: predicted::line_for(model, catalog, n, parent.map(|p| p.id())),
            commits,
            loose,
            official: Official::of(m, parent),
            replays,
        })
    }
}

/// The commits of `m`'s patch with their notes placed, and the notes placed nowhere.
fn commits<'a>(
    m: &'a Manifest,
    commits: &'a [Commit],
) -> Result<(Vec<CommitReport<'a>>, Vec<&'a Note>)> {
    let parsed: Vec<Vec<FilePatch>> =
        commits.iter().map(|c| patch::parse(&c.diff)).collect::<Result<_, _>>()?;
    let (placed, loose) = place_notes(&m.notes, &parsed);
    let mut reports: Vec<CommitReport> = commits
        .iter()
        .zip(parsed)
        .map(|(c, files)| CommitReport {
            commit: c,
            credit: upstream_credit(m, &c.subject),
            diff: NotedDiff { files, notes: BTreeMap::new() },
        })
        .collect();
    for ((ci, fi, hi, li), notes) in placed {
        reports[ci].diff.notes.insert((fi, hi, li), notes);
    }
    Ok((reports, loose))
}

/// Each loose note with its line of record `n`'s tree (empty past the file's end).
fn loose_lines<'a>(
    series: &Series,
    n: RecordId,
    loose: Vec<&'a Note>,
) -> Result<Vec<(&'a Note, String)>> {
    let repo = apply::scratch_repo()?;
    let files = tree::files(&repo, series.tree(&repo, n)?)?;
    let line = |note: &Note| {
        let (_, data) = files.get(&note.file)?;
        let text = String::from_utf8_lossy(data);
        text.lines().nth((note.line as usize).checked_sub(1)?).map(|l| l.trim().to_string())
    };
    Ok(loose.into_iter().map(|note| (note, line(note).unwrap_or_default())).collect())
}

/// Whose change a commit ports: the upstream record its subject names (`#31: ...`) when the
/// manifest lists it (`upstream #31 · PR #122 by @classiclarryd, 09/10/25, 2.656 minutes`),
/// else the record's own: `record #29 · upstream PR #118 by @varunneal, 2025-09-03` (an Act 1
/// step's: `record a3 · <its post> by Tyler Romero, 2024-...`).
pub fn upstream_credit(m: &Manifest, subject: &str) -> String {
    let named = crate::series::mailbox::upstream_number(subject);
    if let Some(u) = m.upstream.iter().find(|u| Some(u.number) == named) {
        return format!("upstream #{} · {}, {}, {}", u.number, u.credit(), u.date, u.time_text);
    }
    let r = &m.record;
    let source = match (r.pr, r.track) {
        (Some(pr), Track::Main) => format!("upstream PR #{pr}"),
        (None, Track::Main) => format!("upstream {}", r.link),
        (_, _) => r.link.clone(),
    };
    format!("record {} · {source} by {}, {}", r.id(), r.authors.join(", "), r.date)
}
