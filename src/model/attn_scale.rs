//! The softmax scale (upstream #20: 0.12): attention's scores are q·k times this instead of
//! 1/√head_dim (0.088 for 128-dim heads). QK-norm fixes the norms of q and k, so the scale
//! alone sets how sharp attention can get. With YaRN (upstream #31) it is the scale at the
//! first window, and YaRN raises it as the windows grow (yarn.rs).
use crate::recipe::registry::{technique, Technique};
use crate::recipe::Recipe;

/// `attn_scale = 0.12`: a number.
pub const TECHNIQUE: Technique = technique("attn_scale", &[20, 31], &["attn_layers"]);

/// The scale of `head_dim`-wide heads: the key's value, or 1/√head_dim.
pub fn softmax_scale(r: &Recipe, head_dim: i64) -> f64 {
    r.attn_scale.unwrap_or(1.0 / (head_dim as f64).sqrt())
}
