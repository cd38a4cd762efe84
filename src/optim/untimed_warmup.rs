//! Upstream's explicit warmup (#29: 30 steps; from #46, 40, ten per window and batch stage):
//! untimed steps on real batches, cycling through the window sizes so every shape is compiled,
//! after which model, optimizer and loader are reset and the clock starts at step 0. The step
//! plan hands out the warm-up steps' windows and batches (schedule.rs `Schedule::warmup`);
//! src/train.rs runs and undoes them.
use crate::recipe::registry::{technique, Lab, Technique};

/// `untimed_warmup = 30`: a step count, mapped onto the lab budget.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::Steps, ..technique("untimed_warmup", &[29], &[]) };
