//! A larger QKV init (upstream #53: 2): Q, K and V are drawn from U(±b·mul), b the MLP's
//! uniform bound √3·0.5/√C, so attention starts with larger scores. Upstream's README says the
//! init was halved; its logged code doubles it, and the code wins. W_O is drawn in the same
//! QKVO weight, then zeroed unless upstream #64's uniform_attn_out keeps it.
use crate::recipe::registry::{technique, Technique};
use crate::recipe::Recipe;

/// `qkv_init_mul = 2.0`: a number.
pub const TECHNIQUE: Technique = technique("qkv_init_mul", &[53], &["attn_layers"]);

/// The QKV weights' bound, from the MLP's `bound`.
pub fn bound(r: &Recipe, bound: f64) -> f64 {
    bound * r.qkv_init_mul.unwrap_or(1.0)
}
