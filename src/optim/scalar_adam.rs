//! The scalars' own Adam (upstream #52): the scalar bank (the lambdas, smear's and backout's
//! weights) steps in an Adam of its own with smoother betas, (0.9, 0.99), and pauses for
//! `freeze` steps from each step where the windows or the batch change: its gradients dropped,
//! its moments kept, so a schedule's jump does not kick the scalars. Upstream #54 keeps the
//! pause's code but never calls it (freeze 0); #57 folds this Adam into the main one with the
//! same betas, the same update. The pause itself is counted in the step plan
//! (src/optim/schedule.rs).
use crate::recipe::registry::{technique, Lab, Older, Technique};
use serde::{Deserialize, Serialize};

/// `[recipe.scalar_adam]`: the betas, and the pause.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub betas: [f64; 2],
    /// Steps the Adam pauses from each change of windows or batch (upstream #52: 40); absent:
    /// no pause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze: Option<u64>,
}

/// The pause is a step count, mapped onto the lab budget; trees before the section read
/// `scalar_betas = [0.9, 0.99]` and `scalar_freeze = 40`.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[("freeze", Lab::Steps)]),
    older: &[("scalar_betas", Older::Field("betas")), ("scalar_freeze", Older::Field("freeze"))],
    ..technique("scalar_adam", &[52, 54, 57], &["muon"])
};
