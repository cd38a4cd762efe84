//! Sparse attention gate (upstream #28): each head scales its output per token by a sigmoid of
//! the first n channels of the normed block input, so a head can switch itself off for tokens
//! where it has nothing to add:
//! ```text
//! y_h ← y_h · σ(h[:n]·W_gᵀ)_h        W_g: [H, n], zero init: every head starts at half strength
//! ```
use crate::recipe::registry::{technique, Lab, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::params::{Group, ParamSet},
    tch::Tensor,
};

/// `[recipe.attn_gate]`: the channels the gate reads.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// n: the first channels of the normed block input (upstream #28: 12).
    pub channels: usize,
}

/// The channels keep their count at lab scale; trees before the section read `attn_gate = 12`.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[("channels", Lab::Kept)]),
    older: &[("attn_gate", Older::Field("channels"))],
    ..technique("attn_gate", &[28], &["attn_layers"])
};

#[cfg(not(recipe_only))]
pub struct AttnGate {
    w: Tensor, // [H, n]
}

#[cfg(not(recipe_only))]
impl AttnGate {
    pub fn new(ps: &mut ParamSet, name: &str, (heads, n): (i64, i64), g: Group) -> AttnGate {
        AttnGate { w: ps.zeros(name, &[heads, n], g) }
    }

    /// h: [B, T, C] normed block input; y: [B, T, H, D] the heads' outputs -> y gated, [B, T, H, D]
    pub fn apply(&self, h: &Tensor, y: &Tensor) -> Tensor {
        let n = self.w.size()[1];
        let gate = h.narrow(2, 0, n).linear(&self.w.to_kind(h.kind()), None::<Tensor>).sigmoid(); // [B, T, H]
        y * gate.unsqueeze(3)
    }
}
