//! The dense attention's output times 1/sqrt(2·n_layer) before it joins the stream (Act 1, a1;
//! the MLP's is not scaled). dense.rs holds the factor for attention.rs.
use crate::recipe::registry::{act1, Technique};

/// `attn_branch_scale = true`: a switch of the dense attention.
pub const TECHNIQUE: Technique = act1("attn_branch_scale", &[1, 2, 3, 4, 5, 6], &["attn_layers"]);
