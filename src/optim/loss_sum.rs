//! The loss summed, not averaged (upstream #21): each reference rank's cross-entropy is
//! reduction="sum" over its tokens, so the gradient is batch_tokens/reference_ranks times the
//! mean's. Muon normalises its update and Adam divides by √v, so only Adam's eps feels the
//! difference. The step plan carries the factor (src/optim/schedule.rs); logged losses stay
//! means.
use crate::recipe::registry::{technique, Technique};

/// `loss_sum = true`: a switch.
pub const TECHNIQUE: Technique = technique("loss_sum", &[21], &[]);
