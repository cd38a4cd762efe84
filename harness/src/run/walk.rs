//! `records walk A B`: every record of the series from A to B (the upstream records inside the
//! steps too) at lab scale, all at one step budget (B's) and the same seeds, so that the change
//! each one made shows as a delta of the val loss at equal steps. A walk stays on one track:
//! `walk a1 a6` stops at every Act 1 step.
//!
//! Each run is kept under `<results>/walk/NN/<key>/` (`run.json` beside the trainer's log and
//! metrics), keyed by everything that decides its losses: the tree id, the recipe and `[lab]`
//! the manifest gives, the budget and the seed. A later walk over a covered range reuses it; a
//! changed tree or recipe is run again. The walk itself is written to
//! `<results>/walk/A-B-<steps>/walk.json` for the site.
use crate::catalog::recipe_check::trainer_view;
use crate::catalog::{upstream_recipe, Catalog, Manifest, RecordId, Track};
use crate::cost::model::{Model, PredictedStep};
use crate::verdict::{runlog, stats};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// One record along a walk and its runs, one per seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stop {
    pub number: RecordId,
    pub title: String,
    /// What it changed: the recipe keys its row set, "same math", or "" for the walk's start.
    pub changed: String,
    pub same_math: bool,
    /// Its recipe at lab scale at the walk's budget is the stop before's (its keys differ only
    /// at full scale, or in bf16 choices the fp32 lab does not compute in), so its curve is too.
    #[serde(default)]
    pub same_at_lab: bool,
    /// Upstream's record time (official, 8×H100), seconds.
    pub official_s: f64,
    /// Its training step at full scale, predicted by the time model (`predict`).
    #[serde(default)]
    pub predicted: Option<PredictedStep>,
    pub tree: String,
    pub runs: Vec<Run>,
}

/// One lab run of a stop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub seed: u64,
    /// The final val loss (ours, lab scale, at the walk's budget).
    pub val_loss: f64,
    pub train_time_ms: f64,
    /// (step, val loss) of every validation.
    pub val: Vec<(u64, f64)>,
}

/// A walk from record `from` to `to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Walk {
    pub from: RecordId,
    pub to: RecordId,
    pub steps: u64,
    pub seeds: Vec<u64>,
    /// The CPU that ran it (lab figures differ by CPU).
    pub cpu: String,
    pub stops: Vec<Stop>,
}

/// Each stop's step as `model` predicts it today: a walk kept before a refit, or before walks
/// carried a prediction, reads the current one. Where the model cannot predict (no hardware
/// file, a recipe its trainer cannot read) the stop has none, with a warning: the walk's
/// losses do not wait on it.
pub fn predict(stops: &mut [Stop], catalog: &Catalog, model: &Result<Model>) {
    let model = match model {
        Ok(m) => m,
        Err(e) => {
            // One reason for every stop: said once.
            tracing::warn!("records: warning: no predicted steps in this walk: {e:#}");
            stops.iter_mut().for_each(|s| s.predicted = None);
            return;
        }
    };
    for s in stops {
        s.predicted = (model.predict(catalog, s.number))
            .inspect_err(|e| tracing::warn!("records: {}: no predicted step: {e:#}", s.number))
            .ok();
    }
}

impl Stop {
    pub fn losses(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.val_loss).collect()
    }

    pub fn mean_loss(&self) -> f64 {
        stats::mean(&self.losses()).unwrap_or(f64::NAN)
    }
}

impl Walk {
    /// Stop `i`'s val loss minus stop `i - 1`'s, seed by seed (paired: the same seed on both
    /// sides, so the seeds' own noise cancels as far as it can).
    pub fn deltas(&self, i: usize) -> Vec<f64> {
        paired(&self.stops[i - 1], &self.stops[i])
    }

    /// The last stop's val loss minus the first's, seed by seed.
    pub fn total(&self) -> Vec<f64> {
        paired(&self.stops[0], &self.stops[self.stops.len() - 1])
    }

    /// Where it is written: `<results>/walk/A-B-<steps>/` (`62-63-7`, `a1-a6-250`).
    pub fn dir(
        results: &Path,
        from: impl Into<RecordId>,
        to: impl Into<RecordId>,
        steps: u64,
    ) -> PathBuf {
        let (from, to) = (from.into().bare(), to.into().bare());
        results.join("walk").join(format!("{from}-{to}-{steps}"))
    }

    /// The walk from `from` to `to` kept under `results` at `steps`, if one was written.
    pub fn load(
        results: &Path,
        from: impl Into<RecordId>,
        to: impl Into<RecordId>,
        steps: u64,
    ) -> Result<Option<Walk>> {
        let path = Walk::dir(results, from, to, steps).join("walk.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                Ok(Some(serde_json::from_str(&text).with_context(|| path.display().to_string())?))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Every walk kept under `results` that ends at `to` and starts at `from`, at any budget:
    /// the newest written first.
    pub fn kept(results: &Path, from: RecordId, to: RecordId) -> Result<Vec<Walk>> {
        let Ok(entries) = std::fs::read_dir(results.join("walk")) else {
            return Ok(Vec::new());
        };
        let prefix = format!("{}-{}-", from.bare(), to.bare());
        let mut found = Vec::new();
        for e in entries {
            let name = e?.file_name().to_string_lossy().into_owned();
            let Some(steps) = name.strip_prefix(&prefix).and_then(|s| s.parse().ok()) else {
                continue;
            };
            let path = Walk::dir(results, from, to, steps).join("walk.json");
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            if let (Some(w), Some(t)) = (Walk::load(results, from, to, steps)?, modified) {
                found.push((t, w));
            }
        }
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        Ok(found.into_iter().map(|(_, w)| w).collect())
    }
}

/// `b`'s val loss minus `a`'s, seed by seed.
fn paired(a: &Stop, b: &Stop) -> Vec<f64> {
    (a.runs.iter().zip(&b.runs)).map(|(x, y)| y.val_loss - x.val_loss).collect()
}

/// The records a walk from `from` to `to` visits, oldest first: `from`, then every record of
/// its track and, on the main track, every upstream record inside a step after it, up to `to`.
pub fn stops(
    catalog: &Catalog,
    (from, to): (RecordId, RecordId),
    command: &str,
) -> Result<Vec<RecordId>> {
    let (a, b) = (from.bare(), to.bare());
    let (at, range) =
        (format!("{command} {a} {b}"), if command == "walk" { "walk" } else { "range" });
    let series = catalog.records().iter().map(Manifest::id);
    let inside = catalog.inside_steps().into_iter().map(|(_, u)| RecordId::main(u.number));
    let mut all: Vec<RecordId> = series.chain(inside).collect();
    all.sort_unstable();
    for n in [from, to] {
        if !all.contains(&n) {
            bail!(
                "{} is neither a record of the series nor an upstream record inside one \
                 (`records list --all`)",
                n.bare()
            );
        }
    }
    if from.track != to.track {
        bail!(
            "{at}: a {range} stays on one track ({from} is on {}, {to} on {}); take each \
             track's records, or set the two against each other with `records diff {a} {b}`",
            from.track.def().name,
            to.track.def().name
        );
    }
    if from >= to {
        bail!("{at}: the first record must be older than the second");
    }
    if from < from.anchor() {
        bail!(
            "{at}: a {range} starts at {} or later (#1 has a lab target and a shape of its \
             own; `records replay 29 --baseline` sets it against #29)",
            from.anchor()
        );
    }
    Ok(all.into_iter().filter(|&n| (from..=to).contains(&n)).collect())
}

/// What stop `n` changed against the stop before it, and whether it is the same math: an
/// upstream record's row, or for a record off the main track the recipe keys it changed.
pub fn changed(catalog: &Catalog, n: RecordId, first: bool) -> (String, bool) {
    if first {
        return (String::new(), false);
    }
    if n.track != Track::Main {
        let Ok(m) = catalog.get(n) else { return (String::new(), false) };
        let Some(Ok(p)) = m.record.parent.map(|p| catalog.get(p)) else {
            return (String::new(), false);
        };
        let keys: Vec<&str> = (upstream_recipe::changes(&p.recipe, &m.recipe).into_iter())
            .map(|(k, ..)| k.as_str())
            .collect();
        return (keys.join(", "), false);
    }
    match upstream_recipe::step(catalog, n.n) {
        Some(s) => (s.summary(), s.row.same_math.is_some()),
        None => (String::new(), false),
    }
}

/// Whether `m` runs what `prev` runs at lab scale at `steps`: the trainer's own reading of both
/// recipes (the lab rule, schedules on the budget, patterns resampled to the lab's layers) is
/// equal but for the seed (the walk sets it) and the `precision` choices (the CPU lab is fp32).
pub fn same_at_lab(prev: &Manifest, m: &Manifest, steps: u64) -> Result<bool> {
    Ok(lab_reading(prev, steps)? == lab_reading(m, steps)?)
}

/// `m`'s recipe as its trainer reads it at lab scale at `steps`, without the seed and the
/// precision choices.
fn lab_reading(m: &Manifest, steps: u64) -> Result<toml::Table> {
    let recipe = m.typed_recipe(crate::trainer::recipe::Scale::Lab, Some(steps))?;
    let mut table = toml::Table::try_from(&recipe)?;
    table.retain(|k, _| k != "seed" && k != "precision");
    Ok(table)
}

/// The key of one kept run: what decides its losses.
pub fn run_key(m: &Manifest, tree: &str, steps: u64, seed: u64) -> Result<String> {
    let recipe =
        hex::encode(Sha256::digest(toml::to_string(&trainer_view(&m.recipe, &m.lab))?.as_bytes()));
    Ok(format!("{:.12}-{:.12}-{steps}-seed{seed}", tree, recipe))
}

/// Where record `n`'s run with `key` is kept: `walk/29/<key>`, `walk/a3/<key>`.
pub fn run_dir(results: &Path, n: impl Into<RecordId>, key: &str) -> PathBuf {
    results.join("walk").join(n.into().slug()).join(key)
}

/// The kept run at `dir`, if one was finished there.
pub fn kept_run(dir: &Path) -> Result<Option<Run>> {
    match std::fs::read_to_string(dir.join("run.json")) {
        Ok(text) => {
            Ok(Some(serde_json::from_str(&text).with_context(|| dir.display().to_string())?))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", dir.join("run.json").display())),
    }
}

/// Reads the trainer's log in `tmp` (a finished run with `seed`), writes `run.json` beside it
/// and moves the folder to `dir`, so that a kept run is always whole.
pub fn keep_run(tmp: &Path, dir: &Path, seed: u64) -> Result<Run> {
    let log = runlog::parse_file(&tmp.join("train.log"))?;
    let last = log.final_val().with_context(|| {
        format!("{}: the run logged no final val loss", tmp.join("train.log").display())
    })?;
    if !last.val_loss.is_finite() {
        bail!("{}: the final val loss is {}", tmp.join("train.log").display(), last.val_loss);
    }
    let run = Run {
        seed,
        val_loss: last.val_loss,
        train_time_ms: last.train_time_ms.unwrap_or(f64::NAN),
        val: log.val.iter().map(|v| (v.step, v.val_loss)).collect(),
    };
    corpus::fs::write_atomic(
        &tmp.join("run.json"),
        serde_json::to_string_pretty(&run)?.as_bytes(),
    )?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("replacing {}", dir.display()))?;
    }
    std::fs::rename(tmp, dir)
        .with_context(|| format!("moving {} to {}", tmp.display(), dir.display()))?;
    Ok(run)
}

/// Writes the walk's `walk.json` (and any `files`, e.g. its charts) into its folder, atomically.
pub fn write(results: &Path, walk: &Walk, files: &[(&str, String)]) -> Result<PathBuf> {
    let dir = Walk::dir(results, walk.from, walk.to, walk.steps);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, text) in files {
        corpus::fs::write_atomic(&dir.join(name), text.as_bytes())?;
    }
    corpus::fs::write_atomic(
        &dir.join("walk.json"),
        serde_json::to_string_pretty(walk)?.as_bytes(),
    )?;
    Ok(dir)
}
