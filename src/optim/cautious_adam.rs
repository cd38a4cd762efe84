//! Cautious weight decay on Adam (upstream #50), as on Muon since #43: decay only where Adam's
//! update already pulls the weight towards zero, by lr²·wd (with lr the parameter's effective
//! lr, schedule included), so the decay follows the square of the schedule:
//! ```text
//! u = lr·bias·m/(√v + eps)
//! p ← p − u − (lr·wd·lr)·[u·p ≥ 0]·p        upstream #53: [u·p > 0]
//! ```
use crate::recipe::registry::{technique, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use tch::Tensor;

/// `[recipe.cautious_adam]`: which agreement of update and weight lets the decay act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub mask: CautiousMask,
}

/// Where cautious weight decay applies: where update and weight agree in sign, zeros included
/// (upstream #50) or not (#53).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum CautiousMask {
    #[serde(rename = ">=")]
    AtLeastZero,
    #[serde(rename = ">")]
    AboveZero,
}

/// Trees before the section read `adam_cautious_wd = ">"`.
pub const TECHNIQUE: Technique = Technique {
    older: &[("adam_cautious_wd", Older::Field("mask"))],
    ..technique("cautious_adam", &[50, 53], &["muon"])
};

#[cfg(not(recipe_only))]
/// p (fp32) minus Adam's update `u` and the cautious decay at `rate` = lr·wd·lr.
pub fn step(p: &Tensor, u: &Tensor, rate: f64, mask: CautiousMask) -> Tensor {
    let agree = match mask {
        CautiousMask::AtLeastZero => (u * p).ge(0.0),
        CautiousMask::AboveZero => (u * p).gt(0.0),
    };
    p - u - p * agree.to_kind(p.kind()) * rate
}
