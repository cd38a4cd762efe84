//! `records review N`: one record's change read like a pull request. The header (title, PR,
//! authors, date, official time and its delta to the parent), the claim, every commit's hunks
//! with the manifest's notes placed at their file and line, then the evidence: the official
//! logs' figures and, where this machine has replayed the record, its own results. Commits are
//! credited to the upstream record and its authors (the manifest's facts), not to whoever
//! committed the port.
use crate::catalog::upstream_recipe::{self, Step};
use crate::catalog::{Catalog, Manifest, Note, RecordId, Track, SERIES, TARGET_VAL_LOSS};
use crate::cost::model::Model;
use crate::present::diff::Paint;
use crate::present::predicted;
use crate::series::mailbox::Commit;
use crate::series::patch::{self, FilePatch};
use crate::series::{apply, tree, Series};
use crate::text::figures;
use crate::verdict::stats;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

pub use crate::text::table::Format;

/// Where a note lands: commit, file, hunk and body line of the record's patch.
pub type Spot = (usize, usize, usize, usize);

/// Renders the review of record `n`.
pub fn render(root: &Path, n: RecordId, format: Format, paint: Paint) -> Result<String> {
    let catalog = Catalog::load(root)?;
    let model = Model::load(root);
    let inside = n.is_main() && !SERIES.contains(&n.n);
    if let Some(step) = inside.then(|| upstream_recipe::step(&catalog, n.n)).flatten() {
        let predicted = predicted::line_for(&model, &catalog, n, Some(step.parent));
        return render_upstream(root, (&step, &predicted), format, paint);
    }
    let series = Series::load(root)?;
    let m = catalog.get(n)?;
    let parent = series.parent(n)?.map(|p| catalog.get(p)).transpose()?;
    let commits = &series.record(n)?.commits;
    let parsed: Vec<Vec<FilePatch>> =
        commits.iter().map(|c| patch::parse(&c.diff)).collect::<Result<_, _>>()?;
    let (placed, loose) = place_notes(&m.notes, &parsed);
    let md = format == Format::Markdown;
    let paint = if md { Paint(false) } else { paint };
    let predicted = predicted::line_for(&model, &catalog, n, parent.map(|p| p.id()));
    let mut out = String::new();
    header(&mut out, (m, parent), &predicted, md, paint);
    section(&mut out, "Claim", md, paint);
    writeln!(out, "{}\n", m.record.claim.trim())?;
    section(&mut out, "Changes", md, paint);
    if commits.is_empty() {
        writeln!(out, "Record {n} is the base of the series: it has no patch.\n")?;
    }
    for (k, (c, files)) in commits.iter().zip(&parsed).enumerate() {
        let credit = upstream_credit(m, &c.subject);
        commit_view(&mut out, (k, commits.len(), &credit), c, files, &placed, md, paint);
    }
    if !loose.is_empty() {
        let repo = apply::scratch_repo()?;
        let files = tree::files(&repo, series.tree(&repo, n)?)?;
        let title = if commits.is_empty() { "Notes" } else { "Notes outside the hunks" };
        section(&mut out, title, md, paint);
        for note in loose {
            let line = files
                .get(&note.file)
                .and_then(|(_, d)| {
                    String::from_utf8_lossy(d)
                        .lines()
                        .nth(note.line as usize - 1)
                        .map(str::to_string)
                })
                .unwrap_or_default();
            if md {
                writeln!(
                    out,
                    "- `{}:{}` `{}`\n\n  {}\n",
                    note.file,
                    note.line,
                    line.trim(),
                    note.text.trim()
                )?;
            } else {
                writeln!(
                    out,
                    "  {}:{}  {}\n{}",
                    note.file,
                    note.line,
                    line.trim(),
                    note_text(&note.text, paint)
                )?;
            }
        }
    }
    evidence(&mut out, root, m, parent, md, paint)?;
    Ok(out)
}

/// Upstream record K inside a record's step: its facts, then its one commit of the record's
/// patch with the notes that land in it.
fn render_upstream(
    root: &Path,
    (step, predicted): (&Step, &str),
    format: Format,
    paint: Paint,
) -> Result<String> {
    let (m, u) = (step.holder, step.row);
    let n = m.id();
    let series = Series::load(root)?;
    let commits = &series.record(n)?.commits;
    let parsed: Vec<Vec<FilePatch>> =
        commits.iter().map(|c| patch::parse(&c.diff)).collect::<Result<_, _>>()?;
    let (placed, _) = place_notes(&m.notes, &parsed);
    let k = (series.upstream_commit(u.number).filter(|(r, ..)| *r == n).map(|(_, k, _)| k))
        .with_context(|| {
            format!("no commit of patches/{}.patch ports upstream #{}", n.bare(), u.number)
        })?;
    let md = format == Format::Markdown;
    let paint = if md { Paint(false) } else { paint };
    let mut out = String::new();
    section(&mut out, &format!("Upstream #{}: {}", u.number, u.title), md, paint);
    writeln!(
        out,
        "{}, {}, {} on 8xH100 (upstream's); commit {} of {} in record {n}'s patch\n\
         Predicted step: {predicted} ({})\n",
        u.credit(),
        u.date,
        u.time_text,
        k + 1,
        commits.len(),
        predicted::LABEL
    )?;
    let credit = upstream_credit(m, &commits[k].subject);
    commit_view(&mut out, (k, commits.len(), &credit), &commits[k], &parsed[k], &placed, md, paint);
    Ok(out)
}

fn section(out: &mut String, title: &str, md: bool, paint: Paint) {
    if md {
        out.push_str(&format!("## {title}\n\n"));
    } else {
        out.push_str(&format!("{}\n{}\n\n", paint.bold(title), "─".repeat(title.chars().count())));
    }
}

fn header(
    out: &mut String,
    (m, parent): (&Manifest, Option<&Manifest>),
    predicted: &str,
    md: bool,
    paint: Paint,
) {
    let r = &m.record;
    let pr = match r.pr {
        Some(pr) => format!("#{pr} {}", r.link),
        None => r.link.clone(),
    };
    let mut time = format!("{} ({})", r.official_time_text, figures::secs(r.official_time_s));
    // Times on other hardware (a1 on 2×RTX 4090 against #1 on 8×H100) do not compare.
    if let Some(p) = parent.filter(|p| p.record.hardware == r.hardware) {
        let d = r.official_time_s - p.record.official_time_s;
        time.push_str(&format!(
            ", {} ({}) vs {} ({})",
            figures::secs_delta(d),
            figures::pct_delta(100.0 * d / p.record.official_time_s),
            p.id(),
            figures::secs(p.record.official_time_s)
        ));
    }
    let rows = [
        (if r.track.is_main() { "PR" } else { "Source" }, pr),
        ("Authors", r.authors.join(", ")),
        ("Date", r.date.clone()),
        ("Official time", time),
        ("Steps", r.steps.to_string()),
        ("Predicted step", format!("{predicted} ({})", predicted::LABEL)),
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

/// Anchors each note at a body line of the patch whose line, followed through the later
/// commits, is the note's line in the record's tree. An added line wins over a context line.
/// Notes that anchor nowhere come back loose.
pub fn place_notes<'n>(
    notes: &'n [Note],
    commits: &[Vec<FilePatch>],
) -> (BTreeMap<Spot, Vec<&'n Note>>, Vec<&'n Note>) {
    let mut placed: BTreeMap<Spot, Vec<&Note>> = BTreeMap::new();
    let mut loose = Vec::new();
    for note in notes {
        let mut best: Option<(bool, Spot)> = None;
        for (ci, files) in commits.iter().enumerate() {
            for (fi, f) in files.iter().enumerate() {
                let Some(path) = f.new_path.as_deref() else {
                    continue;
                };
                for (hi, h) in f.hunks.iter().enumerate() {
                    for (li, (num, text)) in h.numbered_lines().into_iter().enumerate() {
                        let final_line = num.and_then(|l| follow(path, l, &commits[ci + 1..]));
                        if path == note.file && final_line == Some(note.line) {
                            let added = text.starts_with('+');
                            if best.is_none_or(|(b_added, _)| added && !b_added) {
                                best = Some((added, (ci, fi, hi, li)));
                            }
                        }
                    }
                }
            }
        }
        match best {
            Some((_, spot)) => placed.entry(spot).or_default().push(note),
            None => loose.push(note),
        }
    }
    (placed, loose)
}

/// Line `line` of `path` after one commit, followed through the `later` commits.
fn follow(path: &str, line: u32, later: &[Vec<FilePatch>]) -> Option<u32> {
    let mut line = line;
    for files in later {
        if let Some(f) = files.iter().find(|f| f.old_path.as_deref() == Some(path)) {
            line = f.map_line(line)?;
        }
    }
    Some(line)
}

fn note_text(text: &str, paint: Paint) -> String {
    let mut s = String::new();
    for (i, l) in text.trim().lines().enumerate() {
        let lead = if i == 0 { "▸ note: " } else { "        " };
        s.push_str(&format!("        {}\n", paint.bold(&format!("{lead}{l}"))));
    }
    s
}

/// Commit `k` of `n`, credited to `credit` (the upstream record), with its notes in place.
fn commit_view(
    out: &mut String,
    (k, n, credit): (usize, usize, &str),
    c: &Commit,
    files: &[FilePatch],
    placed: &BTreeMap<Spot, Vec<&Note>>,
    md: bool,
    paint: Paint,
) {
    let (add, del) = c.counts();
    if md {
        out.push_str(&format!("### {}/{n} {}\n\n*{credit}* · +{add} −{del}\n\n", k + 1, c.subject));
        if !c.body.is_empty() {
            out.push_str(&format!("{}\n\n", c.body));
        }
    } else {
        out.push_str(&paint.bold(&format!("Commit {}/{n}: {}", k + 1, c.subject)));
        out.push_str(&format!("\n  {credit} · +{add} -{del}\n\n"));
        for l in c.body.lines() {
            out.push_str(&format!("    {l}\n").replace("    \n", "\n"));
        }
        if !c.body.is_empty() {
            out.push('\n');
        }
    }
    for (fi, f) in files.iter().enumerate() {
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
                for note in placed.get(&(k, fi, hi, li)).into_iter().flatten() {
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

fn evidence(
    out: &mut String,
    root: &Path,
    m: &Manifest,
    parent: Option<&Manifest>,
    md: bool,
    paint: Paint,
) -> Result<()> {
    section(out, "Evidence", md, paint);
    let e = &m.evidence;
    let bullet = if md { "- " } else { "  " };
    out.push_str(&sub("Official logs (upstream hardware)", md, paint));
    if let Some(s) = stats::Summary::of(&e.val_losses) {
        let std = s.std.map(|x| format!(" ± {}", figures::loss(x))).unwrap_or_default();
        let list: Vec<String> = e.val_losses.iter().map(|&x| figures::loss(x)).collect();
        writeln!(
            out,
            "{bullet}val loss: mean {}{std} over {}: [{}]",
            figures::loss(s.mean),
            figures::count(s.n, "run"),
            list.join(", ")
        )?;
        match stats::ttest_1samp_less(&e.val_losses, TARGET_VAL_LOSS) {
            Some(t) => writeln!(out, "{bullet}{}", t.stated(TARGET_VAL_LOSS))?,
            None => writeln!(out, "{bullet}t-test: needs two or more runs")?,
        }
    } else {
        writeln!(out, "{bullet}val loss: no official figures in the manifest")?;
    }
    if let Some(s) = stats::Summary::of(&e.train_times_s) {
        let std = s.std.map(|x| format!(" ± {}", figures::secs(x))).unwrap_or_default();
        let mean = figures::secs(s.mean);
        writeln!(out, "{bullet}train time: mean {mean}{std} over {}", figures::count(s.n, "run"))?;
    }
    if let Some((p, s)) =
        parent.and_then(|p| stats::Summary::of(&p.evidence.train_times_s).map(|s| (p, s)))
    {
        writeln!(out, "{bullet}parent {}: train time mean {}", p.id(), figures::secs(s.mean))?;
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
        writeln!(out, "{bullet}val curve (step:loss): {}", points.join(" "))?;
    }
    out.push('\n');
    out.push_str(&sub("This machine", md, paint));
    let runs = replay_summaries(root, m.id());
    if runs.is_empty() {
        writeln!(out, "{bullet}no replay results yet; run `records replay {}`", m.id().bare())?;
    }
    for (run, fields) in runs {
        writeln!(out, "{bullet}{run}: {fields}")?;
    }
    Ok(())
}

fn sub(title: &str, md: bool, paint: Paint) -> String {
    if md {
        format!("### {title}\n\n")
    } else {
        format!("{}\n", paint.bold(title))
    }
}

/// One line per replay under `results/<NN>/` (its `verdict.json`), oldest first.
fn replay_summaries(root: &Path, n: RecordId) -> Vec<(String, String)> {
    let dir = crate::paths::results_dir(root).join(n.slug());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut runs: Vec<(String, String)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let text = std::fs::read_to_string(e.path().join("verdict.json")).ok()?;
            let line = match serde_json::from_str::<crate::verdict::Verdict>(&text) {
                Ok(v) => {
                    let scale = if v.lab_scale { "lab" } else { "full" };
                    let time = v.time_s.map_or("n/a".to_string(), |t| figures::secs(t.mean));
                    let losses: Vec<String> = v.losses.iter().map(|&l| figures::loss(l)).collect();
                    format!(
                        "{scale} scale, {}, {} target {} in {}; val loss [{}], mean train time {time}",
                        figures::count(v.runs.len(), "run"),
                        match (v.sets_target.is_some(), v.reached) {
                            (true, _) => "set the",
                            (false, true) => "reached",
                            (false, false) => "did not reach",
                        },
                        v.target_loss,
                        figures::count(v.steps as usize, "step"),
                        losses.join(", ")
                    )
                }
                Err(e) => format!("unreadable verdict.json: {e}"),
            };
            Some((e.file_name().to_string_lossy().into_owned(), line))
        })
        .collect();
    runs.sort();
    runs
}
