//! Zero-initialised output projections (upstream #5): the attention's W_O and the MLP's c_proj
//! start at zero, so every block starts as the identity on the residual stream and its
//! gradient first flows into the projections alone. From upstream #64 the attention's W_O is
//! drawn with Q, K and V again (uniform_attn_out.rs); the MLP's c_proj stays at zero.
use crate::recipe::registry::{technique, Technique};

/// `zero_proj = true`: a switch.
pub const TECHNIQUE: Technique = technique("zero_proj", &[5], &[]);
