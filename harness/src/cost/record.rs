//! A record as the time model sees it: its full-scale recipe and step plan, its machine, and
//! what its logs say; and its run, predicted stage by stage.
use super::achieved::Fractions;
use super::count::{self, Shapes, Work};
use super::hardware::{self, Hardware};
use super::predict::{self, StepTime};
use crate::catalog::{upstream_recipe, Catalog, Manifest, RecordId};
use crate::trainer::optim::schedule::Schedule;
use crate::trainer::recipe::{Recipe, Scale};
use anyhow::Result;
use serde::Serialize;

/// A record's run at full scale.
pub struct Costed {
    pub id: RecordId,
    pub title: String,
    /// As its manifest writes it (`8xH100`).
    pub hardware: String,
    pub recipe: Recipe,
    pub logged: Option<Logged>,
    /// Its row's reason when upstream changed no math (a kernel, the comms, a version).
    pub same_math: Option<String>,
    /// (step, train time in s) at each validation of its curve log, where the manifest has one.
    pub time_curve: Vec<(u64, f64)>,
}

/// The logged train time: the mean of its logs' final `train_time`, or the record table's
/// figure where no log is kept (#1).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Logged {
    pub train_time_s: f64,
    pub logs: usize,
}

/// One stage of the run: consecutive timed steps whose work is the same.
#[derive(Debug, Clone, Serialize)]
pub struct Stage {
    pub first_step: u64,
    pub steps: u64,
    pub tokens_per_rank: usize,
    /// (long, short) windows in tokens, (0, 0) without windows.
    pub windows: (i64, i64),
    pub doc_len: Option<usize>,
    pub work: Work,
    pub ms: StepTime,
}

/// The whole run, predicted.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    pub stages: Vec<Stage>,
    pub timed_steps: u64,
    /// Mean over the timed steps, by category.
    pub mean: StepTime,
    pub predicted_ms_per_step: f64,
    pub predicted_train_time_s: f64,
}

/// Record `id` at full scale: a catalog record or an upstream record inside a step.
pub fn of(catalog: &Catalog, id: RecordId) -> Result<Costed> {
    let step = (id.is_main() && !catalog.chain().contains(&id))
        .then(|| upstream_recipe::step(catalog, id.n))
        .flatten();
    let (m, same_math) = match &step {
        Some(s) => {
            (s.manifest(Default::default()).map_err(anyhow::Error::msg)?, s.row.same_math.clone())
        }
        None => {
            let m = catalog.get(id)?.clone();
            let own = m.upstream.iter().find(|u| u.number == id.n && id.is_main());
            let same = own.and_then(|u| u.same_math.clone());
            (m, same)
        }
    };
    from_manifest(&m, same_math)
}

/// `m` at full scale, read as its trainer reads it; `same_math` is its row's reason, if any.
pub fn from_manifest(m: &Manifest, same_math: Option<String>) -> Result<Costed> {
    let recipe = m.typed_recipe(Scale::Full, None)?;
    let times = &m.evidence.train_times_s;
    let logged = match times.len() {
        0 if m.record.official_time_s > 0.0 => {
            Some(Logged { train_time_s: m.record.official_time_s, logs: 0 })
        }
        0 => None,
        n => Some(Logged { train_time_s: times.iter().sum::<f64>() / n as f64, logs: n }),
    };
    Ok(Costed {
        id: m.id(),
        title: m.record.title.clone(),
        hardware: m.record.hardware.clone(),
        recipe,
        logged,
        same_math,
        time_curve: m.evidence.time_curve.clone(),
    })
}

impl Costed {
    /// The machine its manifest names, and its GPU count.
    pub fn machine<'a>(&self, machines: &'a [Hardware]) -> Result<(&'a Hardware, usize)> {
        let (gpus, model) = hardware::gpus_and_model(&self.hardware);
        Ok((hardware::find(machines, model)?, gpus))
    }

    /// Its logged time where `hw` is the machine that logged it: a time from another machine
    /// checks nothing.
    pub fn logged_on(&self, hw: &Hardware, gpus: usize) -> Option<Logged> {
        let (own_gpus, _) = hardware::gpus_and_model(&self.hardware);
        let same_machine = hw.matches.iter().any(|m| self.hardware.contains(m.as_str()));
        self.logged.filter(|_| same_machine && gpus == own_gpus)
    }

    /// Every timed step's work, gathered into stages of equal work, on `gpus` ranks.
    pub fn stages(&self, gpus: usize) -> Vec<Stage> {
        let r = &self.recipe;
        let mut shapes = Shapes::of(r);
        shapes.ranks = gpus.max(1);
        let schedule = Schedule::new(r);
        let mut out: Vec<Stage> = Vec::new();
        for step in 0..schedule.steps() {
            let plan = schedule.at(step);
            if !plan.timed {
                continue;
            }
            let work = count::step(r, &shapes, &plan);
            match out.last_mut() {
                Some(s) if s.work == work && s.windows == plan.windows => s.steps += 1,
                _ => out.push(Stage {
                    first_step: step,
                    steps: 1,
                    tokens_per_rank: count::tokens_per_rank(r, &shapes, &plan),
                    windows: plan.windows,
                    doc_len: plan.max_doc_len,
                    work,
                    ms: StepTime::default(),
                }),
            }
        }
        out
    }

    /// The run on `hw` with `gpus` ranks (the record's own when None).
    pub fn predict(&self, hw: &Hardware, gpus: usize, f: &Fractions) -> Prediction {
        let mut stages = self.stages(gpus);
        let mut mean = StepTime::default();
        let timed: u64 = stages.iter().map(|s| s.steps).sum();
        for s in &mut stages {
            s.ms = predict::step_ms(&s.work, hw, f);
            let k = s.steps as f64 / timed.max(1) as f64;
            for (m, x) in mean.fields_mut().into_iter().zip(s.ms.rows()) {
                *m += k * x.1;
            }
        }
        let per_step = mean.total();
        Prediction {
            stages,
            timed_steps: timed,
            mean,
            predicted_ms_per_step: per_step,
            predicted_train_time_s: per_step * timed as f64 / 1e3,
        }
    }
}
