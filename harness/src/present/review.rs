//! `records review N`: one record's change read like a pull request, rendered from its typed
//! report (`present::report`). The header (title, PR, authors, date, official time and its
//! delta to the parent, the predicted step), the claim, every commit's hunks with the
//! manifest's notes placed at their file and line, then the evidence: the official logs'
//! figures and, where this machine has replayed the record, its own results. Commits are
//! credited to the upstream record and its authors (the manifest's facts), not to whoever
//! committed the port.
use crate::catalog::{Catalog, Note, RecordId, TARGET_VAL_LOSS};
use crate::cost::model::Model;
use crate::present::diff::Paint;
use crate::present::predicted;
use crate::present::report::{CommitReport, RecordReport, UpstreamReport};
use crate::run::replays::{self, Replay};
use crate::series::Series;
use crate::text::figures;
use anyhow::Result;
use std::fmt::Write;
use std::path::Path;

pub use crate::text::table::Format;

/// Renders the review of record `n` (or of upstream record `n` inside a step).
pub fn render(root: &Path, n: RecordId, format: Format, paint: Paint) -> Result<String> {
    let catalog = Catalog::load(root)?;
    let series = Series::load(root)?;
    let model = Model::load(root);
    let results = crate::paths::results_dir(root);
    let md = format == Format::Markdown;
    let paint = if md { Paint(false) } else { paint };
    let inside = n.is_main() && !crate::catalog::SERIES.contains(&n.n);
    let ours = || replays::of_record(&results, n);
    if inside {
        if let Some(u) = UpstreamReport::load((&catalog, &series), &model, ours()?, n.n)? {
            return render_upstream(&u, md, paint);
        }
    }
    let report = RecordReport::load((&catalog, &series), &model, ours()?, n)?;
    let mut out = String::new();
    header(&mut out, &report, md, paint);
    section(&mut out, "Claim", md, paint);
    writeln!(out, "{}\n", report.m.record.claim.trim())?;
    section(&mut out, "Changes", md, paint);
    if report.commits.is_empty() {
        writeln!(out, "Record {n} is the base of the series: it has no patch.\n")?;
    }
    for (k, c) in report.commits.iter().enumerate() {
        commit_view(&mut out, (k, report.commits.len()), c, md, paint);
    }
    if !report.loose.is_empty() {
        let title = if report.commits.is_empty() { "Notes" } else { "Notes outside the hunks" };
        section(&mut out, title, md, paint);
        for (note, line) in &report.loose {
            loose_note(&mut out, note, line, md, paint);
        }
    }
    evidence(&mut out, &report, md, paint);
    Ok(out)
}

/// A note that anchors at no line of the patch, with its line of the record's tree.
fn loose_note(out: &mut String, note: &Note, line: &str, md: bool, paint: Paint) {
    let (file, at, text) = (&note.file, note.line, note.text.trim());
    match md {
        true => out.push_str(&format!("- `{file}:{at}` `{line}`\n\n  {text}\n\n")),
        false => out.push_str(&format!("  {file}:{at}  {line}\n{}\n", note_text(text, paint))),
    }
}

/// Upstream record K inside a record's step: its facts, then its one commit of the record's
/// patch with the notes that land in it.
fn render_upstream(u: &UpstreamReport, md: bool, paint: Paint) -> Result<String> {
    let row = u.step.row;
    let mut out = String::new();
    section(&mut out, &format!("Upstream #{}: {}", row.number, row.title), md, paint);
    writeln!(
        out,
        "{}, {}, {} on 8xH100 (upstream's); commit {} of {} in record {}'s patch\n\
         Predicted step: {} ({})\n",
        row.credit(),
        row.date,
        row.time_text,
        u.commit + 1,
        u.commits,
        u.step.holder.id(),
        u.predicted,
        predicted::LABEL
    )?;
    commit_view(&mut out, (u.commit, u.commits), &u.report, md, paint);
    Ok(out)
}

fn section(out: &mut String, title: &str, md: bool, paint: Paint) {
    if md {
        out.push_str(&format!("## {title}\n\n"));
    } else {
        out.push_str(&format!("{}\n{}\n\n", paint.bold(title), "─".repeat(title.chars().count())));
    }
}

fn header(out: &mut String, report: &RecordReport, md: bool, paint: Paint) {
    let r = &report.m.record;
    let pr = match r.pr {
        Some(pr) => format!("#{pr} {}", r.link),
        None => r.link.clone(),
    };
    let mut time = format!("{} ({})", r.official_time_text, figures::secs(r.official_time_s));
    if let Some(c) = report.time_change {
        time.push_str(&format!(
            ", {} ({}) vs {} ({})",
            figures::secs_delta(c.delta_s),
            figures::pct_delta(c.pct()),
            c.parent,
            figures::secs(c.parent_s)
        ));
    }
    let rows = [
        (if r.track.is_main() { "PR" } else { "Source" }, pr),
        ("Authors", r.authors.join(", ")),
        ("Date", r.date.clone()),
        ("Official time", time),
        ("Steps", r.steps.to_string()),
        ("Predicted step", format!("{} ({})", report.predicted, predicted::LABEL)),
    ];
    if md {
        out.push_str(&format!("# Record {}: {}\n\n", r.id(), r.title));
        for (k, v) in rows {
            out.push_str(&format!("- **{k}:** {v}\n"));
        }
    } else {
        out.push_str(&paint.bold(&format!("Record {}: {}", r.id(), r.title)));
        out.push('\n');
        for (k, v) in rows {
            out.push_str(&format!("  {:<16}{v}\n", format!("{k}:")));
        }
    }
    out.push('\n');
}

fn note_text(text: &str, paint: Paint) -> String {
    let mut s = String::new();
    for (i, l) in text.trim().lines().enumerate() {
        let lead = if i == 0 { "▸ note: " } else { "        " };
        s.push_str(&format!("        {}\n", paint.bold(&format!("{lead}{l}"))));
    }
    s
}

/// Commit `k` of `n`, credited to the upstream record it ports, with its notes in place.
fn commit_view(out: &mut String, (k, n): (usize, usize), c: &CommitReport, md: bool, paint: Paint) {
    let (credit, commit) = (&c.credit, c.commit);
    let (add, del) = commit.counts();
    if md {
        out.push_str(&format!(
            "### {}/{n} {}\n\n*{credit}* · +{add} −{del}\n\n",
            k + 1,
            commit.subject
        ));
        if !commit.body.is_empty() {
            out.push_str(&format!("{}\n\n", commit.body));
        }
    } else {
        out.push_str(&paint.bold(&format!("Commit {}/{n}: {}", k + 1, commit.subject)));
        out.push_str(&format!("\n  {credit} · +{add} -{del}\n\n"));
        for l in commit.body.lines() {
            out.push_str(&format!("    {l}\n").replace("    \n", "\n"));
        }
        if !commit.body.is_empty() {
            out.push('\n');
        }
    }
    for (fi, f) in c.diff.files.iter().enumerate() {
        let (fa, fd) = f.counts();
        let what = match (&f.old_path, &f.new_path) {
            (None, _) => " (new file)",
            (_, None) => " (deleted)",
            _ => "",
        };
        if md {
            out.push_str(&format!("#### `{}`{what} (+{fa} −{fd})\n\n```diff\n", f.path()));
        } else {
            out.push_str(&format!(
                "  {}\n",
                paint.bold(&format!("{}{what}  +{fa} -{fd}", f.path()))
            ));
        }
        for (hi, h) in f.hunks.iter().enumerate() {
            if md {
                out.push_str(&format!("{}\n", h.header()));
            } else {
                out.push_str(&format!("  {}\n", paint.cyan(&h.header())));
            }
            for (li, (num, text)) in h.numbered_lines().into_iter().enumerate() {
                if md {
                    out.push_str(text);
                } else {
                    let num = num.map(|x| x.to_string()).unwrap_or_default();
                    out.push_str(&format!("  {num:>5} {}", paint.diff_line(text)));
                }
                if !text.ends_with('\n') {
                    out.push('\n');
                }
                for note in c.diff.notes_at(fi, hi, li) {
                    if md {
                        let quoted = note.text.trim().replace('\n', "\n> ");
                        out.push_str(&format!(
                            "```\n\n> **Note** (`{}:{}`): {quoted}\n\n```diff\n",
                            note.file, note.line
                        ));
                    } else {
                        out.push_str(&note_text(&note.text, paint));
                    }
                }
            }
        }
        out.push_str(if md { "```\n\n" } else { "\n" });
    }
}

/// The official logs' figures, then this machine's replays.
fn evidence(out: &mut String, report: &RecordReport, md: bool, paint: Paint) {
    section(out, "Evidence", md, paint);
    let (e, o) = (&report.m.evidence, &report.official);
    let bullet = if md { "- " } else { "  " };
    out.push_str(&sub("Official logs (upstream hardware)", md, paint));
    let mut lines: Vec<String> = Vec::new();
    match &o.loss {
        Some(s) => {
            let std = s.std.map(|x| format!(" ± {}", figures::loss(x))).unwrap_or_default();
            let list: Vec<String> = e.val_losses.iter().map(|&x| figures::loss(x)).collect();
            let (mean, runs) = (figures::loss(s.mean), figures::count(s.n, "run"));
            lines.push(format!("val loss: mean {mean}{std} over {runs}: [{}]", list.join(", ")));
            lines.push(match &o.ttest {
                Some(t) => t.stated(TARGET_VAL_LOSS),
                None => "t-test: needs two or more runs".into(),
            });
        }
        None => lines.push("val loss: no official figures in the manifest".into()),
    }
    if let Some(s) = &o.times {
        let std = s.std.map(|x| format!(" ± {}", figures::secs(x))).unwrap_or_default();
        let runs = figures::count(s.n, "run");
        lines.push(format!("train time: mean {}{std} over {runs}", figures::secs(s.mean)));
    }
    if let Some((p, s)) = &o.parent_times {
        lines.push(format!("parent {p}: train time mean {}", figures::secs(s.mean)));
    }
    if !e.val_curve.is_empty() {
        // At most nine points: every k-th one and the last.
        let every = e.val_curve.len().div_ceil(8);
        let last = e.val_curve.len() - 1;
        let points: Vec<String> = e
            .val_curve
            .iter()
            .enumerate()
            .filter(|(i, _)| i % every == 0 || *i == last)
            .map(|(_, (s, l))| format!("{s}:{l:.4}"))
            .collect();
        lines.push(format!("val curve (step:loss): {}", points.join(" ")));
    }
    for l in lines {
        out.push_str(&format!("{bullet}{l}\n"));
    }
    out.push('\n');
    out.push_str(&sub("This machine", md, paint));
    if report.replays.is_empty() {
        let bare = report.m.id().bare();
        out.push_str(&format!("{bullet}no replay results yet; run `records replay {bare}`\n"));
    }
    for r in &report.replays {
        out.push_str(&format!("{bullet}{}: {}\n", r.id, replay_line(r)));
    }
}

fn sub(title: &str, md: bool, paint: Paint) -> String {
    if md {
        format!("### {title}\n\n")
    } else {
        format!("{}\n", paint.bold(title))
    }
}

/// One replay in a line: its scale, runs, verdict, budget, losses and mean train time.
fn replay_line(r: &Replay) -> String {
    let Some(v) = &r.verdict else {
        return match &r.verdict_error {
            Some(why) => format!("unreadable verdict.json: {why}"),
            None => "no verdict.json (stopped before its verdict)".into(),
        };
    };
    let scale = if v.lab_scale { "lab" } else { "full" };
    let time = v.time_s.as_ref().map_or("n/a".to_string(), |t| figures::secs(t.mean));
    let losses: Vec<String> = v.losses.iter().map(|&l| figures::loss(l)).collect();
    let verdict = match (v.sets_target.is_some(), v.reached) {
        (true, _) => "set the",
        (false, true) => "reached",
        (false, false) => "did not reach",
    };
    format!(
        "{scale} scale, {}, {verdict} target {} in {}; val loss [{}], mean train time {time}",
        figures::count(v.runs.len(), "run"),
        v.target_loss,
        figures::count(v.steps as usize, "step"),
        losses.join(", ")
    )
}
