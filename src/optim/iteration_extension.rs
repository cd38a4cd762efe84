//! The iteration extension (upstream #35: 40 steps): the last steps run past the schedules'
//! clock, at the final lr and windows. The lr, windows and weight schedules run on the first
//! `steps - iteration_extension` steps, their progress capped at 0.9999, and stay where they
//! ended (schedule.rs `Stages`); extension_final.rs moves where that is.
use crate::recipe::registry::{technique, Lab, Technique};

/// `iteration_extension = 40`: a step count, mapped onto the lab budget.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::Steps, ..technique("iteration_extension", &[35], &["lr_schedule"]) };
