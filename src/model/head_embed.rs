//! The input embedding reads the lm_head's weight (upstream #51), not record #1's tie: the
//! parameter is the head's (its group: lr multiplier 1, bf16 with precision.linears), made before
//! every other parameter and initialised N(0, init_std) instead of at zero. Upstream #53 unties
//! them again late in training (src/optim/untie.rs; the step plan says when).
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {super::builder::Builder, tch::Tensor};

/// `[recipe.head_embed]`: the shared weight's init and the untie.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub init_std: f64,
    /// Upstream #53 unties them again at this fraction of the scheduled steps (2/3): the
    /// embedding gets a copy of the head's weight and Adam state, then trains on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untie_at: Option<f64>,
    /// Which odd (Adam) step the copy follows.
    #[serde(default)]
    pub untie_step: UntieStep,
}

/// The step the untie copies after, with s = ceil(untie_at · scheduled steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UntieStep {
    /// Upstream #53: the odd step before s, (s − 2) | 1; the embedding is its own from s.
    #[default]
    OddBefore,
    /// Upstream #54: s | 1, the embedding its own from the step after.
    OddFrom,
    /// Upstream #65: s = round(untie_at · scheduled steps), the third stage's first step;
    /// s | 1, the embedding its own from the step after.
    OddAtRounded,
}

/// It replaces the untied head's own zero-initialised matrix.
pub const TECHNIQUE: Technique = Technique {
    excludes: &["untied_head"],
    ..technique("head_embed", &[51, 53, 54, 65], &["muon"])
};

#[cfg(not(recipe_only))]
/// The head's weight, [Vp, C], N(0, init_std), when the recipe shares it with the input.
pub fn shared_weight(b: &mut Builder) -> Option<Tensor> {
    let h = b.r.head_embed.as_ref()?;
    Some(b.ps.normal("lm_head", &[b.vp, b.c], h.init_std, b.g.head))
}
