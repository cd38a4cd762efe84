//! This machine's replays of a record, read back from `results/<NN>/<run id>/`: the verdict
//! (`verdict.json`) and each run's val curve (`metrics.jsonl`, written by the trainer into the
//! run id folder or its `run-K/` subfolders; `baseline-K/` runs belong to the parent record).
use crate::catalog::{Manifest, RecordId};
use crate::verdict::runlog::ValPoint;
use crate::verdict::Verdict;
use anyhow::{Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One `records replay` result folder.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The run id: UTC start time, process id and label (`lab`, `full`, `lab-head`).
    pub id: String,
    pub dir: PathBuf,
    /// Lab scale (from the verdict, else from the label).
    pub lab: bool,
    /// `None` where verdict.json is missing or unreadable (see `verdict_error`).
    pub verdict: Option<Verdict>,
    pub verdict_error: Option<String>,
    /// The runs whose metrics.jsonl read whole; a damaged one is left out and named in
    /// `metrics_error`.
    pub runs: Vec<RunCurve>,
    pub metrics_error: Option<String>,
}

/// One run's val points, from its `metrics.jsonl`.
#[derive(Debug, Clone)]
pub struct RunCurve {
    /// `run-1`, ... (empty when metrics.jsonl sits in the run id folder itself).
    pub name: String,
    pub val: Vec<ValPoint>,
}

/// The replays of record `n` under `results` (`results/29/`, `results/a3/`), oldest first; none
/// when the folder is missing. Half-written folders (`.tmp-*`) are skipped. A damaged replay (a
/// verdict.json or metrics.jsonl that does not parse: a cut copy, a full disk) is kept with what
/// is wrong and a warning naming its file and line, never an error: the other replays and
/// records stay readable.
pub fn of_record(results: &Path, n: impl Into<RecordId>) -> Result<Vec<Replay>> {
    let dir = results.join(n.into().slug());
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let id = entry.file_name().to_string_lossy().into_owned();
        if id.starts_with('.') || !entry.file_type()?.is_dir() {
            continue;
        }
        out.push(read(&entry.path(), id)?);
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

fn read(dir: &Path, id: String) -> Result<Replay> {
    let (verdict, verdict_error) = match std::fs::read_to_string(dir.join("verdict.json")) {
        Ok(text) => match serde_json::from_str::<Verdict>(&text) {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(format!("{}: {e}", dir.join("verdict.json").display()))),
        },
        Err(_) => (None, None),
    };
    let lab =
        verdict.as_ref().map_or(id.ends_with("-lab") || id.contains("-lab-"), |v| v.lab_scale);
    let mut runs = Vec::new();
    let mut metrics_error = None;
    let mut curve = |name: String, path: PathBuf| match metrics(&path) {
        Ok(val) => runs.push(RunCurve { name, val }),
        Err(e) => {
            metrics_error.get_or_insert(format!("{e:#}"));
        }
    };
    if dir.join("metrics.jsonl").is_file() {
        curve(String::new(), dir.join("metrics.jsonl"));
    }
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("metrics.jsonl").is_file())
        .filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("baseline")))
        .collect();
    subdirs.sort();
    for sub in subdirs {
        let name = sub.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        curve(name, sub.join("metrics.jsonl"));
    }
    for what in verdict_error.iter().chain(&metrics_error) {
        tracing::warn!(
            "records: warning: {what}: replay {id} is damaged and left out where it does not \
             read; delete {} or replay again",
            dir.display()
        );
    }
    Ok(Replay { id, dir: dir.to_path_buf(), lab, verdict, verdict_error, runs, metrics_error })
}

impl Replay {
    /// The step budget it ran, from its verdict.
    pub fn steps(&self) -> Option<u64> {
        self.verdict.as_ref().map(|v| v.steps)
    }

    /// "5 of 281 steps": how far a replay shortened by `--steps` ran; `None` for one over the
    /// record's whole budget.
    pub fn shortened(&self, m: &Manifest) -> Option<String> {
        let (steps, budget) = (self.steps()?, m.budget(self.lab));
        (steps != budget).then(|| format!("{steps} of {budget} steps"))
    }
}

/// The record's lab result, one rule for every command (`list`, `diff`, `site`): its newest
/// replay at lab scale, of its own tree (not `--head`), over its whole lab budget. A shortened
/// run (`--steps`) is never the record's result.
pub fn lab_result<'a>(replays: &'a [Replay], m: &Manifest) -> Option<&'a Replay> {
    replays.iter().rev().find(|r| {
        r.lab && !r.id.ends_with("-head") && r.steps().is_some() && r.shortened(m).is_none()
    })
}

/// [`lab_result`] of `m`'s record among its replays under `results`.
pub fn lab_result_in(results: &Path, m: &Manifest) -> Result<Option<Replay>> {
    Ok(lab_result(&of_record(results, m.id())?, m).cloned())
}

/// The newest lab replay shortened by `--steps`: what `list` and the site show, saying so, for
/// a record without a lab result.
pub fn newest_shortened<'a>(replays: &'a [Replay], m: &Manifest) -> Option<&'a Replay> {
    replays.iter().rev().find(|r| r.lab && r.shortened(m).is_some())
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Metric {
    Val {
        step: u64,
        val_loss: Option<f64>,
        train_time_ms: Option<f64>,
    },
    #[serde(other)]
    Other,
}

/// The val points of one metrics.jsonl (a `null` loss, as JSON writes NaN, stays NaN).
pub fn metrics(path: &Path) -> Result<Vec<ValPoint>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut val = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let m: Metric = serde_json::from_str(line)
            .with_context(|| format!("{}: line {}", path.display(), i + 1))?;
        if let Metric::Val { step, val_loss, train_time_ms } = m {
            val.push(ValPoint {
                step,
                total_steps: None,
                val_loss: val_loss.unwrap_or(f64::NAN),
                train_time_ms,
                step_avg_ms: None,
            });
        }
    }
    Ok(val)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_scale_from_the_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("29/20261130T101010Z-42-lab");
        std::fs::create_dir_all(run.join("run-1")).unwrap();
        std::fs::create_dir_all(run.join("baseline-1")).unwrap();
        std::fs::create_dir_all(tmp.path().join("29/.tmp-x")).unwrap();
        let jsonl = "{\"type\":\"train\",\"step\":1,\"loss\":5.0,\"lr\":0.1,\"tokens\":1,\"train_time_ms\":1.0}\n\
                     {\"type\":\"val\",\"step\":25,\"val_loss\":2.5,\"train_time_ms\":1500.0}\n";
        std::fs::write(run.join("run-1/metrics.jsonl"), jsonl).unwrap();
        std::fs::write(run.join("baseline-1/metrics.jsonl"), jsonl).unwrap();
        let r = of_record(tmp.path(), 29).unwrap();
        assert_eq!(r.len(), 1);
        assert!(r[0].lab && r[0].verdict.is_none());
        assert_eq!(r[0].runs.len(), 1);
        assert_eq!(r[0].runs[0].name, "run-1");
        assert_eq!((r[0].runs[0].val[0].step, r[0].runs[0].val[0].val_loss), (25, 2.5));
        assert!(of_record(tmp.path(), 1).unwrap().is_empty());
        std::fs::write(run.join("run-1/metrics.jsonl"), "{\"type\":\"val\",\"step\":\"x\"}\n")
            .unwrap();
        // A damaged run is kept, named, and leaves out only its own curve.
        let r = of_record(tmp.path(), 29).unwrap();
        let e = r[0].metrics_error.as_deref().unwrap();
        assert!(e.contains("run-1/metrics.jsonl: line 1"), "{e}");
        assert!(r[0].runs.is_empty());
    }
}
