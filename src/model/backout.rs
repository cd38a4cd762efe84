//! Backout (upstream #40): the final hidden state takes back a learned share of an early layer's
//! output before the last norm, so the head reads more of what the later layers added.
//! ```text
//! h = x_L − λ·x_k          x_k: the residual stream after layer k (upstream: 8 of 12)
//! ```
//! λ comes from the scalar bank, init 0.5.
use crate::recipe::registry::{technique, Lab, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::builder::Builder,
    super::scalars::{ScalarBank, Slot},
    tch::Tensor,
};

/// `[recipe.backout]`: the layer whose output the final state takes a share of (#40: 8).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub layer: usize,
    /// The layers after it attend over its output instead of the stream (upstream #77's single
    /// saved activation, with parallel_residuals; src/model/gpt.rs hands it over).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attend: bool,
}

/// At lab scale the layer is the lab layer whose slice of the full layers holds it; trees
/// before the section read `backout = 8` and, from #77, `attend_backout = true`.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[("layer", Lab::Layer)]),
    older: &[("backout", Older::Field("layer")), ("attend_backout", Older::Field("attend"))],
    ..technique("backout", &[40, 77], &[])
};

#[cfg(not(recipe_only))]
pub struct Backout {
    /// The layer whose output is kept.
    pub layer: usize,
    lambda: Slot,
}

#[cfg(not(recipe_only))]
impl Backout {
    /// The recipe's backout of its layer's output.
    pub fn build(b: &mut Builder) -> Option<Backout> {
        b.r.backout.as_ref().map(|s| Backout::new(&mut b.scalars, s.layer))
    }

    pub fn new(bank: &mut ScalarBank, layer: usize) -> Backout {
        Backout { layer, lambda: bank.reserve("backout", &[0.5]) }
    }

    /// x, kept: [B, T, C] -> x − λ·kept
    pub fn apply(&self, x: &Tensor, kept: &Tensor, bank: &Tensor) -> Tensor {
        x - kept * self.lambda.get(bank, 0).to_kind(x.kind())
    }
}
