//! FP8 up-projection of the MLP (upstream #84), in training only: the activations and c_fc are
//! cast to e4m3fn with per-tensor scales and multiplied on `_scaled_mm`, the product dequantized
//! in fp32 and rounded once to the compute kind. The backward ignores the quantization (a
//! straight-through estimator) and differentiates h·c_fcᵀ in the compute kind, as upstream's
//! kernel keeps its bf16 backward.
//! ```text
//! s_h = max(max|h|, 1e-12)/448         one scale per call, from the whole activation (detached)
//! s_w = bf16(max(max|c_fc|, 1e-12)/448)   one per matrix (upstream refreshes it after every
//!                                         step; computing it in the forward gives the same)
//! pre = (e4m3(h/s_h) · e4m3(c_fc/s_w)ᵀ) · s_h·s_w
//! ```
//! Scaling by the max keeps every value within e4m3fn's ±448, so the casts cannot overflow.
use crate::recipe::registry::{technique, Older, Technique};
use crate::recipe::Recipe;
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::fp8_head::scaled_mm_by,
    crate::shim::autograd::custom_function,
    anyhow::{ensure, Result},
    tch::{Kind, Tensor},
};

/// `[recipe.fp8_mlp]`: which of the MLP's projections run in FP8 during training.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// c_fc, the up-projection (upstream #84).
    pub up: bool,
}

/// Trees before the section read `fp8_mlp_up = true`.
pub const TECHNIQUE: Technique = Technique {
    older: &[("fp8_mlp_up", Older::Field("up"))],
    ..technique("fp8_mlp", &[84], &["tall_matrices", "activation"])
};

/// Whether the recipe runs the up-projection in FP8 (the trainer's MLP and the time model ask).
pub fn up(r: &Recipe) -> bool {
    r.fp8_mlp.as_ref().is_some_and(|f| f.up)
}

/// e4m3fn's largest finite value.
#[cfg(not(recipe_only))]
const E4M3_MAX: f64 = 448.0;

#[cfg(not(recipe_only))]
/// h: [N, C], w: [H, C] (c_fc, tall) -> h·wᵀ [N, H] in h's kind, the forward in FP8.
pub fn fp8_up_projection(h: &Tensor, w: &Tensor) -> Result<Tensor> {
    let (hs, ws) = (h.size(), w.size());
    ensure!(
        hs.len() == 2 && ws.len() == 2 && hs[1] == ws[1],
        "fp8_up_projection: h must be [N, C] and w [H, C], got h {hs:?} and w {ws:?}"
    );
    custom_function(
        &[h.shallow_clone(), w.shallow_clone()],
        |t| {
            let (h, w) = (&t[0], &t[1]);
            // The scales stay on the device (0-dim, computed in f64 and rounded once, as a
            // host f64 would be): no host sync per layer and micro-batch.
            let amax = |x: &Tensor| x.abs().max().to_kind(Kind::Double).clamp_min(1e-12);
            let s_h = (amax(h) / E4M3_MAX).to_kind(Kind::Float);
            // Upstream keeps the weight's scale as a bf16 number.
            let s_w = (amax(w) / E4M3_MAX).to_kind(Kind::BFloat16).to_kind(Kind::Float);
            let h_f8 = (h.to_kind(Kind::Float) / &s_h).to_kind(Kind::Float8e4m3fn); // [N, C]
            let w_f8 = (w.to_kind(Kind::Float) / &s_w).to_kind(Kind::Float8e4m3fn); // [H, C]
            let pre = scaled_mm_by(&h_f8, &w_f8.tr(), &s_h, &s_w, h.kind(), true)?; // [N, H]
            Ok((pre, vec![h.shallow_clone(), w.shallow_clone()]))
        },
        |grads, saved| {
            let (g, h, w) = (&grads[0], &saved[0], &saved[1]);
            let k = g.kind();
            let grad_h = g.matmul(&w.to_kind(k)); // [N, C]
            let grad_w = g.tr().matmul(&h.to_kind(k)).to_kind(w.kind()); // [H, C]
            Ok(vec![grad_h, grad_w])
        },
    )
}
