//! The step's gradient is this many times the mean's: Act 1's a1 and a2 sum their micro-batches'
//! losses (4 and 8 per rank upstream) where a mean was meant, so clipping and Adam's eps see a
//! larger gradient. A constant of the logged run, whatever our ranks; the step plan's
//! `GradScale` (schedule.rs) applies it.
use crate::recipe::registry::{act1, Technique};
use crate::recipe::Recipe;
use anyhow::{ensure, Result};

/// `grad_sum_factor = 4.0`: a number.
pub const TECHNIQUE: Technique = act1("grad_sum_factor", &[1, 2], &[]);

/// A positive, finite factor.
pub fn validate(r: &Recipe) -> Result<()> {
    if let Some(f) = r.grad_sum_factor {
        ensure!(f > 0.0 && f.is_finite(), "recipe: grad_sum_factor must be positive, got {f}");
    }
    Ok(())
}
