//! The BOS loader's longest document per windows stage (upstream #72: 896 tokens in the first
//! stage, 2,048 after), instead of seq_len throughout: while the windows are short, long
//! documents are cut shorter too. The step plan hands each step its length
//! (src/optim/schedule.rs); the lab scales them with seq_len.
use crate::recipe::registry::{technique, Lab, Technique};
use crate::recipe::Recipe;
use anyhow::{ensure, Result};

/// `doc_len_schedule = [896, 2048, 2048]`: token lengths.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::Tokens, ..technique("doc_len_schedule", &[72], &["windows", "loader"]) };

/// One length in 1..=seq_len per windows stage.
pub fn validate(r: &Recipe) -> Result<()> {
    if let Some(d) = &r.doc_len_schedule {
        ensure!(
            d.iter().all(|&n| 0 < n && n <= r.seq_len)
                && r.windows.as_ref().is_some_and(|w| w.schedule.len() == d.len()),
            "recipe: doc_len_schedule = {d:?} needs one length in 1..=seq_len per windows stage"
        );
    }
    Ok(())
}
