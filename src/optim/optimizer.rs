//! The recipe's optimizer: llm.c's AdamW over everything (record #1, gradients all-reduced first,
//! as DDP), or upstream's pair (#24 on): Adam for embeddings, head and scalars, Muon for the
//! matrices inside the blocks, each doing its own reduce-scatter/all-gather. From upstream #39
//! Adam steps every `adam_every` steps only, on the sum of those steps' gradients. From upstream
//! #52 the scalar bank has an Adam of its own with smoother betas, paused for a while after each
//! change of windows or batch (its gradients dropped, its moments kept), so the scalars do not
//! chase the jump in the loss.
use super::adam_every;
use super::adamw::{clip_factor, AdamW};
use super::dist_adam::{AdamConfig, DistAdam};
use super::muon::{Muon, Storage};
use super::muon_classic::{pieces, MuonClassic};
use super::param_table::ParamRow;
use super::schedule::Plan;
use crate::dist::{Collectives, Op};
use crate::model::params::{Opt, Param};
use crate::model::precision::{self, AdamState};
use crate::recipe::Recipe;
use anyhow::{bail, Result};
use tch::{Kind, Tensor};

pub enum Optimizer {
    AdamW {
        opt: AdamW,
        params: Vec<Param>,
        lr: f64,
        grad_clip: f64,
        /// Act 1 from a3: the block matrices go to the classic Muon instead.
        muon: Option<(MuonClassic, Vec<Param>)>,
    },
    MuonAdam {
        adam: DistAdam,
        scalars: Option<Box<DistAdam>>,
        muon: Box<Muon>,
        lr: f64,
        adam_every: u64,
    },
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
    /// Each parameter goes to the optimizer its group names.
    pub fn new(params: Vec<Param>, r: &Recipe, compute: Kind) -> Result<Optimizer> {
        let Some(m) = &r.muon else {
            let (hidden, params): (Vec<Param>, Vec<Param>) =
                params.into_iter().partition(|p| p.group.opt == Opt::MuonClassic);
            if let Some(p) = params.iter().find(|p| p.group.opt != Opt::AdamW) {
                bail!("optimizer: {} is for {:?}, but the recipe has no muon", p.name, p.group.opt);
            }
            let muon = match (&r.muon_classic, hidden.first()) {
                (Some(c), _) => {
                    let settings = (c.momentum, c.ns_steps);
                    Some((MuonClassic::new(&hidden, c.lr, settings, compute), hidden))
                }
                (None, None) => None,
                (None, Some(p)) => bail!(
                    "optimizer: {} is for the classic Muon, but the recipe has no muon_classic",
                    p.name
                ),
            };
            let opt = AdamW::new(&params, r.beta1, r.beta2, r.eps, r.weight_decay);
            return Ok(Optimizer::AdamW { opt, params, lr: r.lr, grad_clip: r.grad_clip, muon });
        };
        let (hidden, rest): (Vec<Param>, Vec<Param>) =
            params.into_iter().partition(|p| p.group.opt == Opt::Muon);
        let (scalars, rest): (Vec<Param>, Vec<Param>) =
            rest.into_iter().partition(|p| p.group.opt == Opt::ScalarAdam);
        if let Some(p) = rest.iter().find(|p| p.group.opt != Opt::Adam) {
            bail!("optimizer: {} is for {:?}; with muon the rest is Adam's", p.name, p.group.opt);
        }
        // bf16 moments on CUDA only: the CPU lab keeps them in fp32.
        let bf16 = compute == Kind::BFloat16;
        let state = precision::of(r).adam_state.filter(|s| *s != AdamState::Bf16 || bf16);
        let adam = AdamConfig {
            lr: r.lr,
            beta1: r.beta1,
            beta2: r.beta2,
            eps: r.eps,
            weight_decay: r.weight_decay,
            cautious: r.cautious_adam.map(|c| c.mask),
            state,
        };
        let scalars = match r.scalar_adam.as_ref().map(|s| s.betas) {
            Some([beta1, beta2]) => {
                Some(Box::new(DistAdam::new(scalars, AdamConfig { beta1, beta2, ..adam })?))
            }
            None if scalars.is_empty() => None,
            None => bail!(
                "optimizer: {} is for the scalars' Adam, but the recipe has no scalar_adam",
                scalars[0].name
            ),
        };
        let storage = Storage { mantissa: precision::of(r).matrices, kind: compute };
        Ok(Optimizer::MuonAdam {
            adam: DistAdam::new(rest, adam)?,
            scalars,
            muon: Box::new(Muon::new(hidden, m, storage)?),
            lr: r.lr,
            adam_every: adam_every::every(r),
        })
    }

    /// Every parameter, for zeroing gradients.
    pub fn params(&self) -> Vec<&Param> {
        match self {
            Optimizer::AdamW { params, muon, .. } => {
                params.iter().chain(muon.iter().flat_map(|(_, p)| p)).collect()
            }
            Optimizer::MuonAdam { adam, scalars, muon, .. } => {
                let scalars = scalars.iter().flat_map(|s| s.params());
                adam.params().iter().chain(scalars).chain(muon.params()).collect()
            }
        }
    }

    /// One update with `plan`'s lr and momentum from each rank's local gradients.
    pub fn step(&mut self, coll: &mut dyn Collectives, plan: &Plan) -> Result<StepInfo> {
        let factor = plan.lr_factor;
        // Adam's gradients are kept (summed into) until the step it runs (upstream #39).
        let mut adam_waits = false;
        let info = match self {
            Optimizer::AdamW { opt, params, lr, grad_clip, muon } => {
                // DDP: every rank ends the step with the gradient of the whole global batch.
                let hidden = muon.iter().flat_map(|(_, p)| p);
                let mut grads: Vec<Tensor> =
                    params.iter().chain(hidden).map(|p| p.tensor.grad()).collect();
                coll.all_reduce(&mut grads, Op::Avg)?;
                // The clip is AdamW's: the classic Muon normalizes its own update.
                let (norm, scale) = clip_factor(params, *grad_clip);
                opt.step(params, *lr * factor, scale);
                if let Some((m, hidden)) = muon {
                    let muon_lr = m.lr * factor;
                    m.step(hidden, muon_lr);
                }
                StepInfo { lr: *lr * factor, grad_norm: Some(norm) }
            }
            Optimizer::MuonAdam { adam, scalars, muon, lr, adam_every } => {
                let Some(mu) = plan.momentum else {
                    bail!("optimizer: step {}'s plan has no Muon momentum", plan.step)
                };
                // Upstream #39 steps Adam on odd steps: the 2nd, 4th, ... of the run.
                adam_waits = !(plan.step + 1).is_multiple_of(*adam_every);
                if !adam_waits {
                    adam.step(coll, factor)?;
                    if let Some(s) = scalars.as_mut().filter(|_| !plan.freeze_scalars) {
                        s.step(coll, factor)?;
                    }
                }
                muon.step(coll, factor, mu)?;
                StepInfo { lr: *lr * factor, grad_norm: None }
            }
        };
        match self {
            Optimizer::MuonAdam { muon, scalars, .. } if adam_waits => {
                zero_grads(muon.params().iter());
                // Paused scalars drop their gradients every step (upstream #52).
                if let Some(s) = scalars.as_ref().filter(|_| plan.freeze_scalars) {
                    zero_grads(s.params().iter());
                }
            }
            _ => zero_grads(self.params().into_iter()),
        }
        if let (Optimizer::MuonAdam { adam, .. }, true) = (&mut *self, plan.untie_after) {
            adam.untie()?;
        }
        Ok(info)
    }

    /// `train --print-params`: a header line per optimizer (its base lr, betas, eps, weight
    /// decay), then a row per parameter.
    pub fn param_table(&self) -> (Vec<String>, Vec<ParamRow>) {
        match self {
            Optimizer::AdamW { opt, params, lr, muon, .. } => {
                let mut head = vec![format!(
                    "adamw: lr {lr} betas {},{} eps {:e} weight_decay {}",
                    opt.beta1, opt.beta2, opt.eps, opt.weight_decay
                )];
                let mut rows: Vec<ParamRow> = params
                    .iter()
                    .map(|p| ParamRow {
                        name: p.name.clone(),
                        shape: p.tensor.size(),
                        storage: p.tensor.kind(),
                        optimizer: "adamw",
                        lr_mul: 1.0,
                        wd_mul: if p.group.decay { 1.0 } else { 0.0 },
                        betas: Some([opt.beta1, opt.beta2]),
                        eps: Some(opt.eps),
                        state: p.tensor.kind(),
                        muon_blocks: String::new(),
                    })
                    .collect();
                if let Some((m, hidden)) = muon {
                    head.push(m.describe());
                    rows.extend(hidden.iter().map(|p| {
                        let (n, [r, c], scale) = pieces(p.tensor.size()[0], p.tensor.size()[1]);
                        ParamRow {
                            name: p.name.clone(),
                            shape: p.tensor.size(),
                            storage: p.tensor.kind(),
                            optimizer: "muon_classic",
                            lr_mul: scale,
                            wd_mul: 0.0,
                            betas: None,
                            eps: None,
                            state: p.tensor.kind(),
                            muon_blocks: format!("{n}x{r}x{c}"),
                        }
                    }));
                }
                (head, rows)
            }
            Optimizer::MuonAdam { adam, scalars, muon, lr, adam_every } => {
                let describe = |label: &str, a: &DistAdam| {
                    let c = a.config();
                    format!(
                        "{label}: lr {lr} betas {},{} eps {:e} weight_decay {}{} every {adam_every} \
                         steps",
                        c.beta1,
                        c.beta2,
                        c.eps,
                        c.weight_decay,
                        if c.cautious.is_some() { " (cautious)" } else { "" }
                    )
                };
                let mut head = vec![describe("adam", adam)];
                let mut rows = adam.rows("adam");
                if let Some(s) = scalars {
                    head.push(describe("adam (scalars)", s));
                    rows.extend(s.rows("adam (scalars)"));
                }
                head.push(muon.describe());
                rows.extend(muon.rows());
                (head, rows)
            }
        }
    }

    /// Deep copies of every parameter and optimizer state, for [`Optimizer::restore`].
    pub fn save(&self) -> Saved {
        let params = self.params().iter().map(|p| p.tensor.detach().copy()).collect();
        let state = match self {
            Optimizer::AdamW { opt, muon, .. } => {
                vec![opt.save(), muon.as_ref().map_or_else(Vec::new, |(m, _)| m.save())]
            }
            Optimizer::MuonAdam { adam, scalars, muon, .. } => {
                let scalars = scalars.as_ref().map_or_else(Vec::new, |s| s.save());
                vec![adam.save(), scalars, muon.save()]
            }
        };
        Saved { params, state }
    }

    /// Puts back what [`Optimizer::save`] copied (upstream restores model and optimizer after
    /// its untimed warmup steps).
    pub fn restore(&mut self, saved: &Saved) -> Result<()> {
        // Gradients Adam was still summing (upstream #39) belong to the steps being undone.
        zero_grads(self.params().into_iter());
        tch::no_grad(|| {
            for (p, s) in self.params().iter().zip(&saved.params) {
                p.tensor.shallow_clone().copy_(s);
            }
        });
        match (self, saved.state.as_slice()) {
            (Optimizer::AdamW { opt, muon, .. }, [s, m]) => {
                if let Some((muon, _)) = muon {
                    muon.restore(m)?;
                }
                opt.restore(s)
            }
            (Optimizer::MuonAdam { adam, scalars, muon, .. }, [a, s, m]) => {
                adam.restore(a)?;
                if let Some(scalars) = scalars {
                    scalars.restore(s)?;
                }
                muon.restore(m)
            }
            _ => anyhow::bail!("optimizer: saved state is from another optimizer"),
        }
    }
}

fn zero_grads<'a>(params: impl Iterator<Item = &'a Param>) {
    for p in params {
        let mut g = p.tensor.grad();
        if g.defined() {
            let _ = g.zero_();
        }
    }
}

/// Parameters and optimizer state, one list per optimizer.
pub struct Saved {
    params: Vec<Tensor>,
    state: Vec<Vec<Tensor>>,
}
