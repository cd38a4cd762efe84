//! The site's pages: the data each template is rendered with, built from the harness's
//! readers.
use crate::catalog::TARGET_VAL_LOSS;
use crate::catalog::{upstream_recipe, Catalog, Manifest, Note, RecordFacts, RecordId, Track};
use crate::cost::model::Model;
use crate::present::plot::svg;
use crate::present::plot::{Chart, XAxis};
use crate::present::report::{
    DiffReport, NotedDiff, Official, RecipeChange, RecordReport, UpstreamReport,
};
use crate::present::{predicted, walk};
use crate::run::replays::{self, Replay};
use crate::run::walk::{self as walks, Walk};
use crate::series::Series;
use anyhow::{Context, Result};
use git2::{Oid, Repository};
use minijinja::value::Serde;
use minijinja::{context, Environment};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Chart sizes: a page's curves, and the index's mini curves.
const FIGURE: (u32, u32) = (600, 380);
const SPARK: (u32, u32) = (150, 44);

/// Every record's replays on this machine, and the lab target each is judged against.
pub struct Replays {
    by_record: BTreeMap<RecordId, Vec<Replay>>,
    lab_targets: BTreeMap<RecordId, f64>,
    /// Where they were read, for the walks and the upstream records' replays.
    results: PathBuf,
}

impl Replays {
    pub fn load(catalog: &Catalog, results: &Path) -> Result<Replays> {
        let (mut by_record, mut lab_targets) = (BTreeMap::new(), BTreeMap::new());
        // This machine's replays, against this CPU's lab targets.
        let cpu = crate::run::lab_target::this_cpu();
        for m in catalog.records() {
            let n = m.id();
            by_record.insert(n, replays::of_record(results, n)?);
            if let Ok(t) = crate::run::lab_target::Target::of(catalog, results, n, &cpu) {
                lab_targets.insert(n, t.val_loss);
            }
        }
        Ok(Replays { by_record, lab_targets, results: results.to_path_buf() })
    }

    fn of(&self, n: RecordId) -> &[Replay] {
        self.by_record.get(&n).map_or(&[], Vec::as_slice)
    }
}

/// A record's facts as the templates read them, with its names: `id` (`#29`, `a3`), `bare` (as
/// typed: `29`, `a3`) and its `page`.
#[derive(Serialize)]
struct RecordView<'a> {
    #[serde(flatten)]
    facts: &'a RecordFacts,
    id: String,
    bare: String,
    page: String,
}

fn record_view(r: &RecordFacts) -> RecordView<'_> {
    let id = r.id();
    RecordView { facts: r, id: id.to_string(), bare: id.bare(), page: super::record_page(id) }
}

/// A track's part of the index: its line and its records.
#[derive(Serialize)]
struct TrackRows<'a> {
    key: &'static str,
    line: &'static str,
    rows: Vec<IndexRow<'a>>,
}

#[derive(Serialize)]
struct IndexRow<'a> {
    r: RecordView<'a>,
    page: String,
    /// The record's lab result ([`replays::lab_result`]).
    lab: Option<ReplayView>,
    /// Without one, the newest shortened lab replay's "N of M steps".
    shortened: Option<String>,
    spark: Option<String>,
}

pub fn index(env: &Environment, catalog: &Catalog, replays: &Replays) -> Result<String> {
    let mut tracks = Vec::new();
    for track in Track::all() {
        let mut rows = Vec::new();
        for m in catalog.track(track) {
            let n = m.id();
            let lab = replays::lab_result(replays.of(n), m).map(|r| view(r, m));
            let shortened =
                replays::newest_shortened(replays.of(n), m).and_then(|r| r.shortened(m));
            let spark =
                Chart::official(m, XAxis::Step).map(|c| svg::sparkline(&c, SPARK)).transpose()?;
            let page = super::record_page(n);
            rows.push(IndexRow { r: record_view(&m.record), page, lab, shortened, spark });
        }
        if !rows.is_empty() || track.is_main() {
            tracks.push(TrackRows { key: track.key(), line: track.def().line, rows });
        }
    }
    Ok(env.get_template("index.html")?.render(context! {
        tracks => Serde(tracks),
        upstream => Serde(upstream_rows(catalog)),
        target => TARGET_VAL_LOSS,
    })?)
}

/// An upstream record inside a step, as the index lists it.
#[derive(Serialize)]
struct UpstreamRow {
    number: u32,
    title: String,
    date: String,
    time: String,
    page: String,
    holder: RecordId,
    holder_page: String,
    changed: String,
}

/// Every upstream record inside a step (not one of the series' records), oldest first.
fn upstream_rows(catalog: &Catalog) -> Vec<UpstreamRow> {
    (catalog.inside_steps().into_iter())
        .map(|(holder, u)| UpstreamRow {
            number: u.number,
            title: u.title.clone(),
            date: u.date.clone(),
            time: u.time_text.clone(),
            page: super::upstream_page(u.number),
            holder,
            holder_page: super::record_page(holder),
            changed: upstream_recipe::step(catalog, u.number)
                .map_or(String::new(), |s| s.summary()),
        })
        .collect()
}

/// A walk as a page shows it: its table and its two charts.
#[derive(Serialize)]
struct WalkView {
    header: [String; walk::COLUMNS],
    /// Each stop's cells and its page.
    rows: Vec<([String; walk::COLUMNS], String)>,
    total: String,
    moves: String,
    legend: Option<&'static str>,
    predicted_note: &'static str,
    command: String,
    figures: Vec<svg::Figure>,
}

/// The newest walk kept from `from` to `to`, if one was run here.
fn walk_view(
    (replays, model): (&Replays, &anyhow::Result<Model>),
    catalog: &Catalog,
    from: RecordId,
    to: RecordId,
) -> Result<Option<WalkView>> {
    let Some(mut w) = Walk::kept(&replays.results, from, to)?.into_iter().next() else {
        return Ok(None);
    };
    walks::predict(&mut w.stops, catalog, model);
    let chain = catalog.chain();
    let page = |n: RecordId| match chain.contains(&n) {
        true => super::record_page(n),
        false => super::upstream_page(n.n),
    };
    let target = replays.lab_targets.get(&to).copied();
    let figures =
        walk::charts(&w, target).iter().map(|c| svg::figure(c, FIGURE)).collect::<Result<_>>()?;
    let runs = if w.seeds.len() > 1 { format!(" --runs {}", w.seeds.len()) } else { String::new() };
    Ok(Some(WalkView {
        header: walk::header(&w),
        rows: walk::rows(&w).into_iter().zip(&w.stops).map(|(r, s)| (r, page(s.number))).collect(),
        total: walk::total(&w),
        moves: walk::moves(&w),
        legend: walk::legend(&w),
        predicted_note: walk::PREDICTED_NOTE,
        command: format!("records walk {} {}{runs}", from.bare(), to.bare()),
        figures,
    }))
}

/// The page of upstream record `k` inside a step: its facts and logs, the keys it set (or why
/// it set none), where its commit is, this machine's replays of it, and the walk over its step.
pub fn upstream(
    env: &Environment,
    (catalog, series): (&Catalog, &Series),
    (replays, model): (&Replays, &anyhow::Result<Model>),
    k: u32,
) -> Result<String> {
    let ours = replays::of_record(&replays.results, k)?;
    let u = UpstreamReport::load((catalog, series), model, ours, k)?
        .with_context(|| format!("upstream #{k} is in no manifest's rows"))?;
    let (step, m) = (&u.step, &u.m);
    let holder = step.holder.id();
    let keys: Vec<RecipeRow> = step
        .changes()
        .into_iter()
        .map(|(key, before, after)| {
            let show = |v: Option<&toml::Value>| v.map_or(String::new(), ToString::to_string);
            let kind = match (before, after) {
                (None, _) => "added",
                (_, None) => "removed",
                _ => "changed",
            };
            RecipeRow { kind, key: key.clone(), old: show(before), new: show(after) }
        })
        .collect();
    let parent = holder_parent(catalog, holder)?;
    let parent_page = match step.parent == parent {
        true => super::record_page(parent),
        false => super::upstream_page(step.parent.n),
    };
    let page = env.get_template("upstream.html")?.render(context! {
        r => Serde(&m.record),
        holder => Serde(holder),
        holder_page => super::record_page(holder),
        parent_page => parent_page,
        commit => u.commit + 1,
        commits => u.commits,
        same_math => Serde(&step.row.same_math),
        keys => Serde(keys),
        official => Serde(official(m, &Official::of(m, None))),
        replays => Serde(u.replays.iter().map(|r| view(r, m)).collect::<Vec<_>>()),
        lab_steps => m.lab_steps(),
        predicted => &u.predicted,
        predicted_label => predicted::LABEL,
        walk => Serde(walk_view((replays, model), catalog, parent, holder)?),
    })?;
    Ok(page)
}

/// The parent of record `n` of the series.
fn holder_parent(catalog: &Catalog, n: RecordId) -> Result<RecordId> {
    catalog.get(n)?.record.parent.with_context(|| format!("record {n} has no parent"))
}

/// One line of a diff, with the notes anchored at it.
#[derive(Serialize)]
struct LineView {
    /// `add`, `del`, `ctx` or `meta` (git's "\ No newline" marker).
    kind: &'static str,
    sign: String,
    /// The line in the newer file; `None` for removed lines.
    line: Option<u32>,
    text: String,
    notes: Vec<NoteView>,
    /// Diff rows the notes may span beside the code before the next note or the hunk's end.
    note_rows: usize,
}

#[derive(Serialize)]
struct HunkView {
    header: String,
    lines: Vec<LineView>,
}

#[derive(Serialize)]
struct FileView {
    path: String,
    status: &'static str,
    added: usize,
    removed: usize,
    hunks: Vec<HunkView>,
}

#[derive(Serialize)]
struct CommitView {
    index: usize,
    subject: String,
    /// The upstream record and authors it ports, as `review` credits it (never the porter).
    credit: String,
    body: String,
    added: usize,
    removed: usize,
    files: Vec<FileView>,
}

/// A note, with its file and line in the record's tree (a line of an earlier commit's diff can
/// have another number there).
#[derive(Serialize)]
struct NoteView {
    file: String,
    line: u32,
    text: String,
}

fn note_view(n: &Note) -> NoteView {
    NoteView { file: n.file.clone(), line: n.line, text: n.text.trim().into() }
}

/// The official logs' figures.
#[derive(Serialize)]
struct OfficialView {
    runs: usize,
    losses: String,
    mean: Option<String>,
    ttest: Option<String>,
    times: Option<String>,
    source: String,
}

/// One of our replays.
#[derive(Serialize)]
struct ReplayView {
    id: String,
    scale: &'static str,
    /// Its step budget; "N of M steps (shortened)" for a `--steps` run.
    steps: String,
    verdict: Option<&'static str>,
    reached: bool,
    reason: String,
    losses: String,
    time: String,
    runs: usize,
}

pub fn record(
    env: &Environment,
    (catalog, series): (&Catalog, &Series),
    (replays, model): (&Replays, &anyhow::Result<Model>),
    n: RecordId,
) -> Result<String> {
    let report = RecordReport::load((catalog, series), model, replays.of(n).to_vec(), n)?;
    let (m, parent) = (report.m, report.parent);
    let commits: Vec<CommitView> = report
        .commits
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let (added, removed) = c.commit.counts();
            CommitView {
                index: k + 1,
                subject: c.commit.subject.clone(),
                credit: c.credit.clone(),
                body: c.commit.body.clone(),
                added,
                removed,
                files: file_views(&c.diff),
            }
        })
        .collect();
    let loose: Vec<NoteView> = report.loose.iter().map(|(note, _)| note_view(note)).collect();
    let time_delta = report.time_change.map(|c| {
        format!("{:+.1} s ({:+.1}%) vs {} ({:.1} s)", c.delta_s, c.pct(), c.parent, c.parent_s)
    });
    let page = env.get_template("record.html")?.render(context! {
        r => Serde(record_view(&m.record)),
        parent => Serde(parent.map(|p| record_view(&p.record))),
        diff_page => Serde(parent.map(|p| super::diff_page(p.id(), n))),
        time_delta => Serde(time_delta),
        predicted => &report.predicted,
        predicted_label => predicted::LABEL,
        commits => Serde(commits),
        loose => Serde(loose),
        official => Serde(official(m, &report.official)),
        replays => Serde(report.replays.iter().map(|r| view(r, m)).collect::<Vec<_>>()),
        figures => Serde(record_figures(&report, replays.lab_targets.get(&n).copied())?),
        target => TARGET_VAL_LOSS,
        walk => Serde(match parent {
            Some(p) => walk_view((replays, model), catalog, p.id(), n)?,
            None => None,
        }),
    })?;
    Ok(page)
}

/// The official curves, then ours at lab and full scale, each over steps and seconds.
fn record_figures(report: &RecordReport, lab_target: Option<f64>) -> Result<Vec<svg::Figure>> {
    let (m, ours, n) = (report.m, &report.replays, report.m.id());
    let mut charts: Vec<Chart> = Vec::new();
    for x in [XAxis::Step, XAxis::Seconds] {
        charts.extend(Chart::official(m, x));
    }
    for lab in [true, false] {
        for x in [XAxis::Step, XAxis::Seconds] {
            charts.extend(Chart::ours(n, ours, lab, lab_target, x));
        }
    }
    charts.iter().map(|c| svg::figure(c, FIGURE)).collect()
}

#[derive(Serialize)]
struct SeriesRecord<'a> {
    r: RecordView<'a>,
    commits: Vec<(String, usize, usize)>,
}

#[derive(Serialize)]
struct RecipeRow {
    kind: &'static str,
    key: String,
    old: String,
    new: String,
}

/// The page of the diff from record `a` to its descendant `b`: the commits between, the recipe
/// changes, the code diff of their trees with `b`'s notes beside their lines, and the two
/// official curves overlaid.
pub fn diff(
    env: &Environment,
    (catalog, model): (&Catalog, &anyhow::Result<Model>),
    series: &Series,
    repo: &Repository,
    (a, tree_a): (RecordId, Oid),
    (b, tree_b): (RecordId, Oid),
) -> Result<String> {
    let report = DiffReport::load((catalog, series), repo, (a, b), Some((tree_a, tree_b)))?;
    let (ma, mb) = (report.a, report.b);
    let predicted = predicted::line_for(model, catalog, b, Some(a));
    let between: Vec<SeriesRecord> = report
        .done
        .iter()
        .map(|r| {
            Ok(SeriesRecord {
                r: record_view(&catalog.get(r.number)?.record),
                commits: r
                    .commits
                    .iter()
                    .map(|c| {
                        let (add, del) = c.counts();
                        (c.subject.clone(), add, del)
                    })
                    .collect(),
            })
        })
        .collect::<Result<_>>()?;
    let recipe: Vec<RecipeRow> = report.recipe.iter().cloned().map(recipe_row).collect();
    let mut figures = Vec::new();
    for x in [XAxis::Step, XAxis::Seconds] {
        if let Some(c) = Chart::official_pair(ma, mb, x) {
            figures.push(svg::figure(&c, FIGURE)?);
        }
    }
    Ok(env.get_template("diff.html")?.render(context! {
        a => Serde(record_view(&ma.record)),
        b => Serde(record_view(&mb.record)),
        between => Serde(between),
        recipe => Serde(recipe),
        files => Serde(file_views(&report.code)),
        figures => Serde(figures),
        predicted => predicted,
        predicted_label => predicted::LABEL,
    })?)
}

fn recipe_row(c: RecipeChange) -> RecipeRow {
    let (kind, key, old, new) = match c {
        RecipeChange::Added { key, new } => ("added", key, String::new(), new.to_string()),
        RecipeChange::Removed { key, old } => ("removed", key, old.to_string(), String::new()),
        RecipeChange::Changed { key, old, new } => {
            ("changed", key, old.to_string(), new.to_string())
        }
    };
    RecipeRow { kind, key, old, new }
}

/// A diff's files, each line with the notes placed there.
fn file_views(diff: &NotedDiff) -> Vec<FileView> {
    diff.files
        .iter()
        .enumerate()
        .map(|(fi, f)| {
            let (added, removed) = f.counts();
            let hunks = f
                .hunks
                .iter()
                .enumerate()
                .map(|(hi, h)| {
                    let mut lines: Vec<LineView> = h
                        .numbered_lines()
                        .into_iter()
                        .enumerate()
                        .map(|(li, (num, text))| line_view(num, text, diff.notes_at(fi, hi, li)))
                        .collect();
                    span_notes(&mut lines);
                    HunkView { header: h.header(), lines }
                })
                .collect();
            FileView {
                path: f.path().to_string(),
                status: match (&f.old_path, &f.new_path) {
                    (None, _) => "new file",
                    (_, None) => "deleted",
                    _ => "",
                },
                added,
                removed,
                hunks,
            }
        })
        .collect()
}

fn line_view(num: Option<u32>, text: &str, notes: &[&Note]) -> LineView {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let (sign, rest) = body.split_at(body.len().min(1));
    LineView {
        kind: match sign {
            "+" => "add",
            "-" => "del",
            "\\" => "meta",
            _ => "ctx",
        },
        sign: sign.to_string(),
        line: num,
        text: rest.to_string(),
        notes: notes.iter().map(|&n| note_view(n)).collect(),
        note_rows: 0,
    }
}

/// Lets each line's notes span the rows beside the code that they need (about 46 characters a
/// row in the note column, plus the note's heading), but never into the next note's rows or
/// past the hunk, so notes sit beside their lines without pushing the code apart.
fn span_notes(lines: &mut [LineView]) {
    let noted: Vec<usize> = (0..lines.len()).filter(|&i| !lines[i].notes.is_empty()).collect();
    for (k, &i) in noted.iter().enumerate() {
        let room = noted.get(k + 1).unwrap_or(&lines.len()) - i;
        let need: usize = lines[i].notes.iter().map(|n| n.text.len().div_ceil(46) + 3).sum();
        lines[i].note_rows = need.min(room).max(1);
    }
}

fn official(m: &Manifest, o: &Official) -> OfficialView {
    let e = &m.evidence;
    let mean = o.loss.as_ref().map(|s| {
        let std = s.std.map(|x| format!(" ± {x:.4}")).unwrap_or_default();
        format!("{:.4}{std}", s.mean)
    });
    let ttest = match &o.ttest {
        Some(t) => Some(t.stated(TARGET_VAL_LOSS)),
        None if !e.val_losses.is_empty() => Some("p-value: needs two or more runs".into()),
        None => None,
    };
    let times = o.times.as_ref().map(|s| {
        let std = s.std.map(|x| format!(" ± {x:.3}")).unwrap_or_default();
        format!("{:.3}{std} s over {} run(s)", s.mean, s.n)
    });
    OfficialView {
        runs: e.val_losses.len(),
        losses: e.val_losses.iter().map(|x| format!("{x:.4}")).collect::<Vec<_>>().join(", "),
        mean,
        ttest,
        times,
        source: e.source.clone(),
    }
}

fn view(r: &Replay, m: &Manifest) -> ReplayView {
    let scale = if r.lab { "lab" } else { "full" };
    let steps = match (r.shortened(m), r.steps()) {
        (Some(short), _) => format!("{short} (shortened)"),
        (None, Some(steps)) => steps.to_string(),
        (None, None) => "n/a".into(),
    };
    match &r.verdict {
        Some(v) => ReplayView {
            id: r.id.clone(),
            scale,
            steps,
            verdict: Some(v.word()),
            reached: v.reached,
            reason: v.reason.clone(),
            losses: v.losses.iter().map(|l| format!("{l:.4}")).collect::<Vec<_>>().join(", "),
            time: v.time_s.as_ref().map_or("n/a".into(), |t| format!("{:.1} s", t.mean)),
            runs: v.runs.len(),
        },
        None => ReplayView {
            id: r.id.clone(),
            scale,
            steps,
            verdict: None,
            reached: false,
            reason: r.verdict_error.clone().unwrap_or_else(|| "no verdict.json".into()),
            losses: String::new(),
            time: "n/a".into(),
            runs: r.runs.len(),
        },
    }
}
