//! Upstream #65's TrainingSchedule: stage k of n starts at round(k·S/n) of the S scheduled
//! steps; the lr takes the stage's level from its first step and cools down linearly from
//! int(S·(1 − cooldown_frac)) to S, and the multi-token weights fade within each stage, each
//! step knowing the fraction of its stage done (schedule.rs `Stages::with_fraction`).
use crate::recipe::registry::{technique, Technique};

/// `rounded_stages = true`: a switch.
pub const TECHNIQUE: Technique =
    technique("rounded_stages", &[65], &["windows", "extension_final"]);
