//! The recipe's optimizer: llm.c's AdamW over everything (record #1, gradients all-reduced first,
//! as DDP), or upstream's pair (#24 on): Adam for embeddings, head and scalars, Muon for the
//! matrices inside the blocks, each doing its own reduce-scatter/all-gather.
use super::adamw::{clip_factor, AdamW};
use super::dist_adam::{AdamConfig, DistAdam};
use super::muon::{Muon, MuonConfig};
use super::schedule::{momentum_warmup, stable_decay, warmup_cosine};
use crate::dist::{Collectives, Op};
use crate::model::params::Param;
use crate::recipe::{LrSchedule, Recipe};
use anyhow::Result;
use tch::{Kind, Tensor};

pub enum Optimizer {
    AdamW { opt: AdamW, params: Vec<Param> },
    MuonAdam { adam: DistAdam, muon: Muon },
}

/// What one step did, for the log.
pub struct StepInfo {
    /// The base learning rate after the schedule.
    pub lr: f64,
    /// The global gradient norm before clipping (AdamW only: upstream's optimizers never see
    /// the averaged gradient as a whole).
    pub grad_norm: Option<f64>,
}

impl Optimizer {
    pub fn new(params: Vec<Param>, r: &Recipe, compute: Kind) -> Result<Optimizer> {
        let Some(m) = &r.muon else {
            let opt = AdamW::new(&params, r.beta1, r.beta2, r.eps, r.weight_decay);
            return Ok(Optimizer::AdamW { opt, params });
        };
        // Upstream's split: >= 2-D tensors under the blocks go to Muon, everything else to Adam.
        let (hidden, rest): (Vec<Param>, Vec<Param>) =
            params.into_iter().partition(|p| p.name.starts_with("blocks.") && p.tensor.dim() >= 2);
        let adam = AdamConfig {
            lr: r.lr,
            beta1: r.beta1,
            beta2: r.beta2,
            eps: r.eps,
            weight_decay: r.weight_decay,
        };
        let muon = MuonConfig {
            lr: m.lr,
            weight_decay: m.weight_decay,
            ns_steps: m.ns_steps,
            kind: compute,
        };
        Ok(Optimizer::MuonAdam { adam: DistAdam::new(rest, adam)?, muon: Muon::new(hidden, muon)? })
    }

    /// Every parameter, for zeroing gradients.
    pub fn params(&self) -> Vec<&Param> {
        match self {
            Optimizer::AdamW { params, .. } => params.iter().collect(),
            Optimizer::MuonAdam { adam, muon } => {
                adam.params().iter().chain(muon.params()).collect()
            }
        }
    }

    /// One update at `step` (0-based) of `steps` from each rank's local gradients.
    pub fn step(
        &mut self,
        coll: &mut dyn Collectives,
        r: &Recipe,
        step: u64,
        steps: u64,
    ) -> Result<StepInfo> {
        let factor = match r.lr_schedule {
            LrSchedule::WarmupCosine => {
                warmup_cosine(step, steps, r.warmup_steps, 1.0, r.min_lr_frac)
            }
            LrSchedule::StableDecay { cooldown_frac } => {
                stable_decay(step, steps, cooldown_frac, r.min_lr_frac)
            }
        };
        let info = match self {
            Optimizer::AdamW { opt, params } => {
                // DDP: every rank ends the step with the gradient of the whole global batch.
                let mut grads: Vec<Tensor> = params.iter().map(|p| p.tensor.grad()).collect();
                coll.all_reduce(&mut grads, Op::Avg)?;
                let (norm, scale) = clip_factor(params, r.grad_clip);
                opt.step(params, r.lr * factor, scale);
                StepInfo { lr: r.lr * factor, grad_norm: Some(norm) }
            }
            Optimizer::MuonAdam { adam, muon } => {
                let m = r.muon.as_ref().expect("MuonAdam is built from a recipe with muon");
                let mu = momentum_warmup(step, m.momentum_warmup, m.momentum_start, m.momentum);
                adam.step(coll, factor)?;
                muon.step(coll, factor, mu)?;
                StepInfo { lr: r.lr * factor, grad_norm: None }
            }
        };
        for p in self.params() {
            let mut g = p.tensor.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
        Ok(info)
    }

    /// Deep copies of every parameter and optimizer state, for [`Optimizer::restore`].
    pub fn save(&self) -> Saved {
        let params = self.params().iter().map(|p| p.tensor.detach().copy()).collect();
        let state = match self {
            Optimizer::AdamW { opt, .. } => vec![opt.save()],
            Optimizer::MuonAdam { adam, muon } => vec![adam.save(), muon.save()],
        };
        Saved { params, state }
    }

    /// Puts back what [`Optimizer::save`] copied (upstream restores model and optimizer after
    /// its untimed warmup steps).
    pub fn restore(&mut self, saved: &Saved) -> Result<()> {
        tch::no_grad(|| {
            for (p, s) in self.params().iter().zip(&saved.params) {
                p.tensor.shallow_clone().copy_(s);
            }
        });
        match (self, saved.state.as_slice()) {
            (Optimizer::AdamW { opt, .. }, [s]) => opt.restore(s),
            (Optimizer::MuonAdam { adam, muon }, [a, m]) => {
                adam.restore(a)?;
                muon.restore(m)
            }
            _ => anyhow::bail!("optimizer: saved state is from another optimizer"),
        }
    }
}

/// Parameters and optimizer state, one list per optimizer.
pub struct Saved {
    params: Vec<Tensor>,
    state: Vec<Vec<Tensor>>,
}
