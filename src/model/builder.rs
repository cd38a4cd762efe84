//! What every part builds itself from: the recipe, the model's sizes and inits, and the
//! parameter set and scalar bank a part reserves from. `Gpt::new` builds the parts in upstream's
//! creation order, which fixes the random draws and the optimizers' layout.
use super::dense::Dense;
use super::params::{Groups, Param, ParamSet};
use super::scalars::ScalarBank;
use crate::recipe::{Init, Recipe};
use tch::{nn, Device, Kind};

pub struct Builder<'p, 'r> {
    pub r: &'r Recipe,
    pub ps: ParamSet<'p>,
    pub scalars: ScalarBank,
    pub g: Groups,
    pub dev: Device,
    /// Matmuls run in this kind (bf16 on CUDA, fp32 on CPU).
    pub compute: Kind,
    /// n_layer, n_embd and the padded vocabulary.
    pub l: usize,
    pub c: i64,
    pub vp: i64,
    /// llm.c: N(0, init_std), residual projections N(0, init_std/sqrt(2L)).
    pub stds: (f64, f64),
    /// Record #1's dense attention and MLP: biases and inits (Act 1 changes them).
    pub dense: Dense,
    /// Upstream #19: block matrices U(±bound), std 0.5/sqrt(fan_in).
    pub bound: f64,
    /// The embeddings' init: N(0, init_std), N(0, 1) with #19's init, U(±1/sqrt(C)) with
    /// Act 1's `torch_tied` (the head's nn.Linear).
    pub embed_init: nn::Init,
}

impl<'p, 'r> Builder<'p, 'r> {
    pub fn new(path: nn::Path<'p>, r: &'r Recipe, compute: Kind) -> Self {
        let (l, c) = (r.n_layer, r.n_embd as i64);
        let std = if r.init == Init::Uniform { 1.0 } else { r.init_std };
        Builder {
            r,
            dev: path.device(),
            ps: ParamSet::new(path),
            scalars: ScalarBank::default(),
            g: Groups::new(r),
            compute,
            l,
            c,
            vp: r.padded_vocab_size as i64,
            stds: (r.init_std, r.init_std / (2.0 * l as f64).sqrt()),
            dense: Dense::new(r),
            bound: 3f64.sqrt() * 0.5 / (c as f64).sqrt(),
            embed_init: match r.init {
                Init::TorchTied => {
                    let bound = 1.0 / (c as f64).sqrt();
                    nn::Init::Uniform { lo: -bound, up: bound }
                }
                _ => nn::Init::Randn { mean: 0.0, stdev: std },
            },
        }
    }

    /// Creates the scalar bank's parameter, the last; returns the bank and every parameter in
    /// creation order.
    pub fn finish(mut self) -> (ScalarBank, Vec<Param>) {
        self.scalars.create(&mut self.ps, self.g.scalars);
        (self.scalars, self.ps.into_params(self.compute))
    }
}
