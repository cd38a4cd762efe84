//! The untied head (upstream #8): lm_head is a [Vp, C] matrix of its own, zero-initialised, in
//! place of the tied embedding table (GPT-2's, record #1's); it starts every logit at 0.
//! Upstream #51 ties them again through one shared weight (head_embed.rs), which excludes it.
use crate::recipe::registry::{technique, Technique};
#[cfg(not(recipe_only))]
use {super::builder::Builder, tch::Tensor};

/// `untied_head = true`: a switch.
pub const TECHNIQUE: Technique = technique("untied_head", &[8], &[]);

#[cfg(not(recipe_only))]
/// The head's own weight, [Vp, C] of zeros, in the head's group.
pub fn weight(b: &mut Builder) -> Tensor {
    b.ps.zeros("lm_head", &[b.vp, b.c], b.g.head)
}
