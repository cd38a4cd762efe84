//! A batch size per windows stage (upstream #46: 8, 16, 24 rows of 2,048 tokens per GPU): the
//! short-window stages take smaller steps, the last size is `batch_tokens`, and the iteration
//! extension keeps it. Each micro-batch keeps its count per step and shrinks to the stage's
//! share in whole windows blocks (src/optim/schedule.rs `batch_shares`).
use crate::recipe::registry::{technique, Lab, Technique};
use crate::recipe::Recipe;
use anyhow::{ensure, Result};

/// `batch_schedule = [8, 16, 24]`: sizes relative to the last; the lab keeps them.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::Kept, ..technique("batch_schedule", &[46], &["windows", "loader"]) };

/// One positive size per windows stage.
pub fn validate(r: &Recipe) -> Result<()> {
    if let Some(b) = &r.batch_schedule {
        ensure!(
            b.iter().all(|&s| s > 0)
                && r.windows.as_ref().is_some_and(|w| w.schedule.len() == b.len()),
            "recipe: batch_schedule = {b:?} needs one positive size per windows stage"
        );
    }
    Ok(())
}
