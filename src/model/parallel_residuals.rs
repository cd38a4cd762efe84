//! Residual lambdas per sublayer (upstream #73, in the form #77 settles on): attention and MLP
//! each scale the stream and their own output, and x0 and the bigram row join after attention
//! instead of before the block:
//! ```text
//! x ← x0 + bigλ[0]·x0b                                            before layer 0
//! x ← r_a[i]·x + p_a[i]·Attn(norm(x)) + x0λ[i]·x0 + bigλ[i]·x0b   layers with attention (no bigλ at 0)
//! x ← r_m[i]·x + p_m[i]·MLP(norm(x))
//! ```
//! A layer without attention (upstream's 6) gets neither the injection nor r_a. The lambdas are
//! parameters of their own (not the scalar bank) in Adam, without decay, stored in fp32 and
//! rounded to the stream's kind before they scale it (upstream's `.bfloat16()` on GPUs; on the
//! CPU's fp32 stream nothing changes).
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::block_lambda_init,
    super::builder::Builder,
    super::params::{Group, ParamSet},
    tch::{nn, Tensor},
};

/// `[recipe.parallel_residuals]`: the lambdas' Adam betas. r_a and r_m start at
/// √block_lambda_init (√1.1: 1.1 over the two sublayers), the bigram lambdas at
/// bigram_hash.lambda.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// (0.9, 0.95) upstream.
    pub betas: [f64; 2],
}

/// It replaces the x0 lambdas' mix before each block and the U-net's skips.
pub const TECHNIQUE: Technique = Technique {
    excludes: &["x0_lambdas", "unet"],
    ..technique("parallel_residuals", &[73, 77], &["embed_norm", "muon"])
};

#[cfg(not(recipe_only))]
pub struct ParallelResiduals {
    resid: Tensor,  // [L, 2]: attention, MLP
    post: Tensor,   // [L, 2]
    x0: Tensor,     // [L]
    bigram: Tensor, // [L]
}

#[cfg(not(recipe_only))]
/// The lambdas' inits.
pub struct Inits {
    pub resid: f64,
    pub bigram: f64,
}

#[cfg(not(recipe_only))]
impl ParallelResiduals {
    /// The recipe's lambdas per sublayer: the residual's start at sqrt(block_lambda_init), the
    /// bigram row's at its lambda.
    pub fn build(b: &mut Builder) -> Option<ParallelResiduals> {
        let r = b.r;
        r.parallel_residuals.as_ref()?;
        let resid = block_lambda_init::lambda0(r).sqrt();
        let bigram = r.bigram_hash.as_ref().map_or(0.0, |h| h.lambda);
        let groups = (b.g.lambdas, b.g.resid_lambdas);
        Some(ParallelResiduals::new(&mut b.ps, b.l as i64, Inits { resid, bigram }, groups))
    }

    /// `g`: the lambdas' group; `g_resid`: the residual lambdas' (upstream: lr_mul 5).
    pub fn new(
        ps: &mut ParamSet,
        n_layer: i64,
        inits: Inits,
        (g, g_resid): (Group, Group),
    ) -> Self {
        let l = n_layer;
        ParallelResiduals {
            resid: ps.add("resid_lambdas", &[l, 2], nn::Init::Const(inits.resid), g_resid),
            post: ps.ones("post_lambdas", &[l, 2], g),
            x0: ps.zeros("x0_lambdas", &[l], g),
            bigram: ps.add("bigram_lambdas", &[l], nn::Init::Const(inits.bigram), g),
        }
    }

    /// x0, x0b: [B, T, C] -> the stream entering layer 0
    pub fn start(&self, x0: &Tensor, x0b: Option<&Tensor>) -> Tensor {
        match x0b {
            Some(b) => x0 + b * self.bigram.get(0).to_kind(x0.kind()),
            None => x0.shallow_clone(),
        }
    }

    /// Layer i's stream after its attention output `a`. x, a, x0, x0b: [B, T, C]
    pub fn after_attention(
        &self,
        i: usize,
        x: &Tensor,
        a: &Tensor,
        x0: &Tensor,
        x0b: Option<&Tensor>,
    ) -> Tensor {
        let (k, kind) = (i as i64, x.kind());
        let lam = |t: Tensor| t.to_kind(kind);
        let mut out = x * lam(self.resid.get(k).get(0))
            + a * lam(self.post.get(k).get(0))
            + x0 * lam(self.x0.get(k));
        if let (Some(b), true) = (x0b, i > 0) {
            out += b * lam(self.bigram.get(k));
        }
        out
    }

    /// Layer i's stream after its MLP output `m`. x, m: [B, T, C]
    pub fn after_mlp(&self, i: usize, x: &Tensor, m: &Tensor) -> Tensor {
        let (k, kind) = (i as i64, x.kind());
        x * self.resid.get(k).get(1).to_kind(kind) + m * self.post.get(k).get(1).to_kind(kind)
    }
}
