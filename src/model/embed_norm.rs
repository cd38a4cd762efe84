//! The embedding's norm (upstream #8): the residual stream starts from x0 = RMSNorm(embedding),
//! parameter-free with the recipe's ln_eps, so every block's x0 term (x0 lambdas, skips) reads a
//! unit-scale input whatever the table's init.
use crate::recipe::registry::{technique, Technique};
#[cfg(not(recipe_only))]
use {super::norm::rms_norm, tch::Tensor};

/// `embed_norm = true`: a switch.
pub const TECHNIQUE: Technique = technique("embed_norm", &[8], &[]);

#[cfg(not(recipe_only))]
/// x: [B, T, C] the embedding (after smear when the recipe has it) -> x0 [B, T, C].
pub fn x0(x: &Tensor, eps: f64) -> Tensor {
    rms_norm(x, eps)
}
