//! The extension at the final settings (upstream #42): its steps run at the lr floor and at the
//! final validation's windows (`windows.final_ws`, with YaRN at them) instead of where the
//! schedules ended, and the stages divide the scheduled steps instead of one more than them
//! (schedule.rs `Stages`).
use crate::recipe::registry::{technique, Technique};

/// `extension_final = true`: a switch.
pub const TECHNIQUE: Technique =
    technique("extension_final", &[42], &["iteration_extension", "windows"]);
