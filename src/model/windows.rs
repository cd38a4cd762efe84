//! Sliding windows for the attention (upstream #13, #16, #20, #29): windows are whole blocks of
//! `block` tokens; long = ws·block, short = (ws/2)·block, with ws taken from `schedule` by the
//! fraction of training done (#29: three equal stages). The step plan
//! (src/optim/schedule.rs) says each step's ws; the windowed attention
//! (src/model/windowed_attention.rs) attends within them.
use crate::recipe::registry::{technique, Lab, Technique};
use serde::{Deserialize, Serialize};

/// `[recipe.windows]`: the block, the schedule of window sizes, and the final validation's.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub block: usize,
    pub schedule: Vec<usize>,
    /// ws of the final validation, past the schedule's last (upstream #31: 13, with YaRN
    /// extended to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_ws: Option<usize>,
    /// The long layers' window at the final validation, in blocks, with YaRN left at final_ws
    /// (upstream #33: 20 for the last layer; #35: every long layer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_long: Option<usize>,
}

impl Section {
    /// (long, short) windows in tokens for window size `ws`: ws and ws/2 blocks.
    pub fn sizes_of(&self, ws: usize) -> (i64, i64) {
        ((ws * self.block) as i64, (ws / 2 * self.block) as i64)
    }

    /// The final validation's (long, short) windows and YaRN's window, in tokens, when it
    /// differs from training's.
    pub fn final_sizes(&self) -> Option<((i64, i64), i64)> {
        let ws = self.final_ws?;
        let (long, short) = self.sizes_of(ws);
        let wide = self.final_long.map_or(long, |l| (l * self.block) as i64);
        Some(((wide, short), long))
    }
}

/// The block is a token length; the schedule and final windows count blocks, unchanged.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[
        ("block", Lab::Tokens),
        ("schedule", Lab::Kept),
        ("final_ws", Lab::Kept),
        ("final_long", Lab::Kept),
    ]),
    ..technique("windows", &[13, 16, 20, 29, 31], &["attn_layers"])
};
