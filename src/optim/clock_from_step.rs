//! The clock starts after this many steps, and step_avg divides by the steps after them (Act 1's
//! scripts: 10, leaving compile and warm-up out). Without it: after step 0 (llm.c), or at step 0
//! after an untimed warmup. The step plan's `first_timed` (schedule.rs) holds it.
use crate::recipe::registry::{act1, Lab, Technique};

/// `clock_from_step = 10`: a step count, mapped onto the lab budget.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::Steps, ..act1("clock_from_step", &[1, 2, 3, 4, 5, 6], &[]) };
