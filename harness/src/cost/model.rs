//! The time model as the other commands use it: the machines of `hardware/` and the fitted
//! fractions, loaded once, predicting any record's step on the machine its manifest names. Its
//! figures are **predicted**; `walk`, `diff`, `review` and the site print them beside the
//! official times and the lab losses.
use super::achieved::{self, Achieved};
use super::hardware::{self, Hardware};
use super::record::{self, Costed};
use crate::catalog::{Catalog, Manifest, RecordId};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub struct Model {
    pub machines: Vec<Hardware>,
    pub achieved: Achieved,
}

/// A record's training step, predicted on its own machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedStep {
    /// Mean over the run's timed steps.
    pub ms_per_step: f64,
    pub train_time_s: f64,
    /// The machine: `8×H100 SXM`.
    pub machine: String,
}

impl Model {
    pub fn load(root: &Path) -> Result<Model> {
        Ok(Model { machines: hardware::all(root)?, achieved: achieved::read(root)? })
    }

    /// Record `id`'s step at full scale (a catalog record or an upstream record inside a step)
    /// on its manifest's machine with its GPU count.
    pub fn predict(&self, catalog: &Catalog, id: RecordId) -> Result<PredictedStep> {
        let costed = record::of(catalog, id)?;
        self.predict_costed(&costed).with_context(|| format!("predicting {id}'s step"))
    }

    /// Manifest `m`'s step (a walk's stop, an upstream record as a replay reads it).
    pub fn predict_manifest(&self, m: &Manifest) -> Result<PredictedStep> {
        let costed = record::from_manifest(m, None)?;
        self.predict_costed(&costed).with_context(|| format!("predicting {}'s step", m.id()))
    }

    fn predict_costed(&self, costed: &Costed) -> Result<PredictedStep> {
        let (hw, gpus) = costed.machine(&self.machines)?;
        let p = costed.predict(hw, gpus, &self.achieved.fractions);
        Ok(PredictedStep {
            ms_per_step: p.predicted_ms_per_step,
            train_time_s: p.predicted_train_time_s,
            machine: format!("{gpus}×{}", hw.name),
        })
    }

    /// Record `id`'s step and, where `parent` runs on the same machine, the parent's: what a
    /// reader compares. A parent on another machine (a1 on 2×RTX 4090 after #1 on 8×H100)
    /// gives none.
    pub fn with_parent(
        &self,
        catalog: &Catalog,
        id: RecordId,
        parent: Option<RecordId>,
    ) -> Result<(PredictedStep, Option<PredictedStep>)> {
        let own = self.predict(catalog, id)?;
        let parent = match parent {
            Some(p) => Some(self.predict(catalog, p)?).filter(|p| p.machine == own.machine),
            None => None,
        };
        Ok((own, parent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn a_record_is_predicted_on_the_machine_its_manifest_names() {
        let root = checkout();
        let (catalog, model) = (Catalog::load(&root).unwrap(), Model::load(&root).unwrap());
        let p = model.predict(&catalog, 84.into()).unwrap();
        assert_eq!(model.predict_manifest(catalog.get(84).unwrap()).unwrap(), p);
        assert_eq!(p.machine, "8×H100 SXM");
        // The same figure `records cost 84` prints: one model behind every command.
        let c = record::of(&catalog, 84.into()).unwrap();
        let (hw, gpus) = c.machine(&model.machines).unwrap();
        let direct = c.predict(hw, gpus, &model.achieved.fractions);
        assert_eq!(p.ms_per_step, direct.predicted_ms_per_step);
        assert!((p.train_time_s - p.ms_per_step * direct.timed_steps as f64 / 1e3).abs() < 1e-9);
    }

    #[test]
    fn a_parent_on_another_machine_is_not_compared() {
        let root = checkout();
        let (catalog, model) = (Catalog::load(&root).unwrap(), Model::load(&root).unwrap());
        let (a1, a2): (RecordId, RecordId) = ("a1".parse().unwrap(), "a2".parse().unwrap());
        let (own, parent) = model.with_parent(&catalog, a1, Some(1.into())).unwrap();
        assert!(own.machine == "2×RTX 4090" && parent.is_none(), "{own:?}");
        let (_, parent) = model.with_parent(&catalog, a2, Some(a1)).unwrap();
        assert_eq!(parent, Some(model.predict(&catalog, a1).unwrap()));
        // An upstream record inside a step is predicted as its own recipe.
        let (k, _) = model.with_parent(&catalog, 31.into(), Some(30.into())).unwrap();
        assert_ne!(k, model.predict(&catalog, 29.into()).unwrap());
    }
}
