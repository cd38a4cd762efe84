//! Record #1's dense attention and MLP without biases (Act 1, a1: Keller Jordan's first
//! modded-nanogpt script drops them). dense.rs makes no bias parameters when it is on.
use crate::recipe::registry::{act1, Technique};

/// `no_bias = true`: a switch of the dense layers.
pub const TECHNIQUE: Technique = act1("no_bias", &[1, 2, 3, 4, 5, 6], &["attn_layers"]);
