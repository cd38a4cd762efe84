//! The attention's output projection drawn with Q, K and V (upstream #64): W_O starts from the
//! same uniform bound instead of at zero (zero_proj.rs), which the MLP's c_proj keeps.
use crate::recipe::registry::{technique, Technique};
use crate::recipe::Recipe;

/// `uniform_attn_out = true`: a switch on top of `zero_proj`.
pub const TECHNIQUE: Technique =
    technique("uniform_attn_out", &[64], &["attn_layers", "zero_proj"]);

/// Whether the attention's W_O starts at zero: `zero_proj` (upstream #5) until upstream #64.
pub fn zero_attn_out(r: &Recipe) -> bool {
    r.zero_proj && !r.uniform_attn_out
}
