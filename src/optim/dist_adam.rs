//! DistAdam (record #24): Adam sharded ZeRO-1 style over the data-parallel ranks.
//!
//! Per param: reduce-scatter the local grads along dim 0 (Op::Avg), so rank r gets the averaged
//! grad of rows [r·n/W, (r+1)·n/W) and keeps Adam state for those rows only; update that shard;
//! all-gather the shards back into the param. With t this optimizer's step count from 1:
//! ```text
//! m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²     (in the param's dtype; bf16 from #32, fp32 from #56)
//! p ← p·(1 − lr·lr_mul·wd) − lr·lr_mul·(√(1−β2ᵗ)/(1−β1ᵗ))·m/(√v + eps)
//! ```
//! Upstream #52 all-reduces the small params (fewer than 1,024 entries: scalars, gates,
//! x0 lambdas) instead: every rank keeps their whole state and updates them whole, which needs
//! no division of their rows by the ranks. The mean gradient is the same either way.
//!
//! eps is added to √v, not to √v̂ as in torch's Adam (it matters at #29's eps = 1e-10). Weight
//! decay applies to the params whose group decays (upstream: all of them), times the group's
//! `wd_mul` (upstream #55: 5 for the value embeddings, 150 for head and embedding). Each line is computed
//! in fp32 and rounded once into a low-precision state or param (bf16 embeddings on CUDA), as
//! upstream's compiled step does; for fp32 params this is the same arithmetic. From upstream #32
//! the moments are bf16 whatever the param's dtype (`torch.zeros(.., dtype=torch.bfloat16)`);
//! ours on CUDA, where the matmuls are bf16 too (the CPU lab keeps fp32 moments).
//!
//! Upstream #44 launches each param's reduce-scatter from a post-accumulate-grad hook, as soon
//! as backward has finished its grad (the lm_head's and the last layers' first), so the
//! communication overlaps the rest of backward; `step` then waits on them in reverse order.
//! tch exposes no autograd hooks, so ours reduce-scatters in `step`, after backward: the same
//! numbers, without the overlap. With one rank (the lab) there is nothing to overlap.
//!
//! Upstream #71 sends only the bigram table's rows hashed since the last Adam step (an all-to-all
//! of the touched rows, then each rank averages its shard): the dense reduce-scatter's mean,
//! with a fraction of the traffic. Ours stays dense.
use super::cautious_adam;
use super::cautious_adam::CautiousMask;
use super::param_table::ParamRow;
use crate::dist::{Collectives, Op};
use crate::model::params::{Param, Role};
use crate::model::precision::AdamState;
use anyhow::{bail, ensure, Context, Result};
use tch::{Kind, Tensor};

#[derive(Debug, Clone, Copy)]
pub struct AdamConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Cautious, lr²-coupled weight decay (upstream #50; cautious_adam.rs).
    pub cautious: Option<CautiousMask>,
    /// Every moment in one kind, bf16 (upstream #32) or fp32 (#56); None: each in its param's.
    pub state: Option<AdamState>,
}

pub struct DistAdam {
    pub(super) params: Vec<Param>,
    cfg: AdamConfig,
    /// (m, v) of this rank's shard of each param ([n/W, ...]); empty before the first step.
    pub(super) state: Vec<(Tensor, Tensor)>,
    t: i32,
}

impl DistAdam {
    pub fn new(params: Vec<Param>, cfg: AdamConfig) -> Result<DistAdam> {
        for p in &params {
            ensure!(p.tensor.dim() >= 1, "dist_adam: {} is a scalar; it needs a dim 0", p.name);
        }
        Ok(DistAdam { params, cfg, state: Vec::new(), t: 0 })
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// One step from each rank's local grads, `lr_factor` being the schedule's multiplier.
    /// Every rank must call it.
    pub fn step(&mut self, coll: &mut dyn Collectives, lr_factor: f64) -> Result<()> {
        let (rank, world) = (coll.rank(), coll.world() as i64);
        // Check everything before the first collective, so no rank is left waiting.
        for p in self.params.iter().filter(|p| !is_small(&p.tensor)) {
            let n = p.tensor.size()[0];
            ensure!(
                n % world == 0,
                "dist_adam: {} has {n} rows in dim 0, not divisible by the {world} ranks",
                p.name
            );
        }
        for p in self.params.iter().filter(|p| p.group.role != Role::LateEmbed) {
            ensure!(p.tensor.grad().defined(), "dist_adam: {} has no gradient", p.name);
        }
        if self.state.is_empty() {
            let cfg = self.cfg;
            self.state = self.params.iter().map(|p| shard_zeros(&p.tensor, world, &cfg)).collect();
        }
        self.t += 1;
        let eps = self.cfg.eps;
        tch::no_grad(|| {
            for (p, (m, v)) in self.params.iter().zip(&mut self.state) {
                // The untied embedding has no gradient before the untie (upstream: no hook
                // fired, so no step).
                if !p.tensor.grad().defined() {
                    continue;
                }
                let small = is_small(&p.tensor);
                let g = match small {
                    true => {
                        let mut g = [p.tensor.grad().copy()];
                        coll.all_reduce(&mut g, Op::Avg).with_context(|| {
                            format!("dist_adam: all_reduce of {}'s grad", p.name)
                        })?;
                        let [g] = g;
                        g
                    }
                    false => {
                        // The shard takes the grad's dtype (NCCL's rule), not the state's: fp32
                        // grads with bf16 moments from #32, bf16 grads with fp32 ones from #56.
                        let grad = p.tensor.grad();
                        let mut g = Tensor::zeros(m.size(), (grad.kind(), grad.device()));
                        coll.reduce_scatter(&mut g, &grad, Op::Avg).with_context(|| {
                            format!("dist_adam: reduce_scatter of {}'s grad", p.name)
                        })?;
                        g
                    }
                };
                let g = g.to_kind(Kind::Float);
                let [b1, b2] = betas(&self.cfg, p);
                let bias = (1.0 - b2.powi(self.t)).sqrt() / (1.0 - b1.powi(self.t));
                let m32 = m.to_kind(Kind::Float) * b1 + &g * (1.0 - b1);
                let v32 = v.to_kind(Kind::Float) * b2 + &g * &g * (1.0 - b2);
                m.f_copy_(&m32)?;
                v.f_copy_(&v32)?;
                let lr = self.cfg.lr * lr_factor * p.group.lr_mul;
                let wd = if p.group.decay { self.cfg.weight_decay * p.group.wd_mul } else { 0.0 };
                // [n/W, ...] view into the param: the rows this rank updates (all when small).
                let rows = if small { p.tensor.size()[0] } else { p.tensor.size()[0] / world };
                let first = if small { 0 } else { rank as i64 * rows };
                let mut shard = p.tensor.narrow(0, first, rows);
                let (p32, u) =
                    (shard.to_kind(Kind::Float), &m32 / (v32.sqrt() + eps) * (lr * bias));
                let updated = match self.cfg.cautious {
                    Some(mask) => cautious_adam::step(&p32, &u, lr * wd * lr, mask),
                    None => p32 * (1.0 - lr * wd) - u,
                };
                shard.f_copy_(&updated)?;
                if small {
                    continue;
                }
                let mut full = p.tensor.shallow_clone();
                coll.all_gather(&mut full, &shard)
                    .with_context(|| format!("dist_adam: all_gather of {}", p.name))?;
            }
            Ok(())
        })
    }

    /// The rows of `train --print-params` for this Adam's params; `label` names it.
    pub fn rows(&self, label: &'static str) -> Vec<ParamRow> {
        self.params
            .iter()
            .map(|p| ParamRow {
                name: p.name.clone(),
                shape: p.tensor.size(),
                storage: p.tensor.kind(),
                optimizer: label,
                lr_mul: p.group.lr_mul,
                wd_mul: if p.group.decay { p.group.wd_mul } else { 0.0 },
                betas: Some(betas(&self.cfg, p)),
                eps: Some(self.cfg.eps),
                state: state_kind(&p.tensor, &self.cfg),
                muon_blocks: String::new(),
            })
            .collect()
    }

    pub fn config(&self) -> &AdamConfig {
        &self.cfg
    }

    /// Deep copies of the state: the step count (a 0-dim int64), then m and v of every param
    /// once a step has run. Upstream saves around its untimed warmup steps.
    pub fn save(&self) -> Vec<Tensor> {
        let mut out = vec![Tensor::from(self.t as i64)];
        out.extend(self.state.iter().flat_map(|(m, v)| [m.copy(), v.copy()]));
        out
    }

    /// Puts back what [`DistAdam::save`] returned.
    pub fn restore(&mut self, saved: &[Tensor]) -> Result<()> {
        let Some((t, mv)) = saved.split_first() else { bail!("dist_adam: restore got no tensors") };
        if !mv.is_empty() && mv.len() != 2 * self.params.len() {
            bail!(
                "dist_adam: restore got {} state tensors for {} params",
                mv.len(),
                self.params.len()
            );
        }
        self.t = i32::try_from(t.f_int64_value(&[])?).context("dist_adam: saved step count")?;
        self.state = mv.chunks(2).map(|s| (s[0].copy(), s[1].copy())).collect();
        Ok(())
    }
}

/// Upstream #52's threshold: params this small are all-reduced and updated whole.
fn is_small(p: &Tensor) -> bool {
    p.numel() < 1024
}

/// Zero Adam state for one rank's rows of `p`: [n/W, ...] (all rows when small) on `p`'s
/// device, in the moments' dtype.
fn shard_zeros(p: &Tensor, world: i64, cfg: &AdamConfig) -> (Tensor, Tensor) {
    let mut shape = p.size();
    if !is_small(p) {
        shape[0] /= world;
    }
    let z = || Tensor::zeros(shape.as_slice(), (state_kind(p, cfg), p.device()));
    (z(), z())
}

/// The param's own betas (upstream #57) or the optimizer's.
fn betas(cfg: &AdamConfig, p: &Param) -> [f64; 2] {
    p.group.betas.unwrap_or([cfg.beta1, cfg.beta2])
}

/// The moments' dtype: fp32 from upstream #56, bf16 from #32 (on CUDA), else the param's.
fn state_kind(p: &Tensor, cfg: &AdamConfig) -> Kind {
    match cfg.state {
        Some(AdamState::Fp32) => Kind::Float,
        Some(AdamState::Bf16) => Kind::BFloat16,
        None => p.kind(),
    }
}
