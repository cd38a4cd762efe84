//! QK-norm (upstream #5; #6 moved it before rotary): each head's q and k pass a parameter-free
//! RMSNorm, so the attention logits' scale is set by the softmax scale, not by the weights'
//! growth. The eps is the recipe's ln_eps.
use crate::recipe::registry::{technique, Technique};
#[cfg(not(recipe_only))]
use {super::norm::rms_norm, tch::Tensor};

/// `qk_norm = true`: a switch, part of the modern attention block.
pub const TECHNIQUE: Technique = technique("qk_norm", &[5, 6], &["attn_layers"]);

#[cfg(not(recipe_only))]
/// q, k: [B, T, H, D] -> both RMS-normed over D (before rotary, as from upstream #6).
pub fn apply(q: &Tensor, k: &Tensor, eps: f64) -> (Tensor, Tensor) {
    (rms_norm(q, eps), rms_norm(k, eps))
}
