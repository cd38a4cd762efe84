//! FP8 lm_head (upstream record #19; scales in division form since #21, w = 2^-9 since #28, as
//! logged in #29): logits = x·Wᵀ with x and W cast to e4m3fn and the incoming gradient to e5m2,
//! every product on `aten::_scaled_mm` with per-tensor scales. `_scaled_mm` has no derivative,
//! so the backward is written by hand as a custom autograd Function.
//!
//! Scales are dequant scales: real value = fp8 value × scale (the quantizer divides by them).
//!
//! The casts round to nearest-even and do NOT saturate: e4m3fn has no infinity, so anything
//! whose magnitude rounds above 448 becomes NaN (464 still rounds down to 448, 480 is NaN);
//! e5m2 overflows to ±inf past 57,344. The scales must keep the inputs in range, hence
//! [`Fp8Scales::for_width`].
//!
//! CPU: the same quantisation, then the products in fp32: each fp8 operand is made contiguous,
//! widened to fp32 and multiplied by its scale, then an fp32 matmul. That is exactly what
//! libtorch 2.11's CPU `_scaled_mm` does on most CPUs (its "emulated" path, so the numbers are
//! the same bit for bit), but on CPUs with AMX it takes oneDNN's fp8 matmul instead, which costs
//! seconds per call at lab shapes (7-18 s per step on an AMX Xeon against 0.42 s without the
//! FP8 head). CUDA keeps `_scaled_mm`; there every dim must be a multiple of 16 and mat2
//! column-major, so mat2 is always passed as a transposed view of a row-major tensor.
//!
//! Upstream #67 quantises inside its cross-entropy kernel, which writes the e5m2 gradient straight
//! from fp32; ours quantises autograd's gradient of the logits (bf16 on CUDA): one rounding more,
//! the same scales.
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    crate::shim::autograd::custom_function,
    anyhow::{bail, Context, Result},
    tch::{Kind, Tensor},
};

/// `[recipe.fp8_head]`: the dequantisation scales (training only). The input's is
/// sqrt(n_embd)/448 unless given, derived from the width so RMS-normed inputs fit e4m3.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// The input's scale when given (upstream #51: 100/448); else sqrt(n_embd)/448.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x_scale: Option<f64>,
    pub w_scale: f64,
    pub grad_scale: f64,
}

/// Its scales are the same at lab scale (the lab's width gives x its own).
pub const TECHNIQUE: Technique = technique("fp8_head", &[19, 21, 28, 51], &[]);

#[cfg(not(recipe_only))]
/// Per-tensor dequant scales of the FP8 lm_head.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fp8Scales {
    /// of the normed input x (e4m3fn)
    pub x: f64,
    /// of the weight W (e4m3fn)
    pub w: f64,
    /// of the gradient of the logits (e5m2)
    pub grad: f64,
}

#[cfg(not(recipe_only))]
impl Fp8Scales {
    /// x = √n_embd / 448. The head's input is RMS-normed: Σx² = n_embd, so no entry exceeds
    /// √n_embd and x/scale stays within ±448, e4m3fn's largest finite value (the cast gives NaN
    /// beyond it, it does not clamp). #29 at 768: `for_width(768, 2^-9, 1/448)`.
    pub fn for_width(n_embd: usize, w: f64, grad: f64) -> Fp8Scales {
        Fp8Scales { x: (n_embd as f64).sqrt() / 448.0, w, grad }
    }
}

#[cfg(not(recipe_only))]
/// x: [N, C], w: [V, C] fp32 parameter (bf16 with upstream #32's bf16 linears) -> [N, V] in
/// x's kind (bf16 in CUDA training).
///
/// Forward: x_f8 = e4m3fn(x/s.x), w_f8 = e4m3fn(w/s.w), out = x_f8·w_f8ᵀ · s.x·s.w (fast accum).
/// Backward: g_f8 = e5m2(g/s.grad); grad_x = g_f8·w_f8 · s.grad·s.w in x's kind;
/// grad_w = (x_f8ᵀ·g_f8)ᵀ · s.x·s.grad in fp32, cast to w's kind. Saves only x_f8 and w_f8.
pub fn fp8_linear(x: &Tensor, w: &Tensor, s: &Fp8Scales) -> Result<Tensor> {
    let (xs, ws) = (x.size(), w.size());
    if xs.len() != 2 || ws.len() != 2 || xs[1] != ws[1] {
        bail!("fp8_linear: x must be [N, C] and w [V, C], got x {xs:?} and w {ws:?}");
    }
    if !matches!(w.kind(), Kind::Float | Kind::BFloat16) {
        bail!("fp8_linear: w must be an fp32 or bf16 parameter, got {:?}", w.kind());
    }
    let (s, w_kind) = (*s, w.kind());
    custom_function(
        &[x.shallow_clone(), w.shallow_clone()],
        move |t| {
            let (x, w) = (&t[0], &t[1]);
            let x_f8 = (x / s.x).to_kind(Kind::Float8e4m3fn); // [N, C]
            let w_f8 = (w / s.w).to_kind(Kind::Float8e4m3fn); // [V, C]
            let out = scaled_mm(&x_f8, &w_f8.tr(), s.x, s.w, x.kind(), true)
                .context("fp8_linear forward")?; // [N, V]
            Ok((out, vec![x_f8, w_f8]))
        },
        move |grads, saved| {
            let (g, x_f8, w_f8) = (&grads[0], &saved[0], &saved[1]);
            let g_f8 = (g / s.grad).to_kind(Kind::Float8e5m2); // [N, V]
                                                               // [N, V]·[V, C]: w_f8 as mat2 needs a column-major copy.
            let w_cm = w_f8.tr().contiguous().tr();
            let grad_x = scaled_mm(&g_f8, &w_cm, s.grad, s.w, g.kind(), false)
                .context("fp8_linear backward (grad x)")?;
            // [C, N]·[N, V], transposed back to [V, C]; fp32 like the parameter. Upstream #76
            // transposes x_f8 and the gradient with its own Triton kernel; the same values.
            let x_t = x_f8.tr().contiguous();
            let g_cm = g_f8.tr().contiguous().tr();
            let grad_w = scaled_mm(&x_t, &g_cm, s.x, s.grad, Kind::Float, false)
                .context("fp8_linear backward (grad w)")?
                .tr()
                .to_kind(w_kind);
            Ok(vec![grad_x, grad_w])
        },
    )
}

#[cfg(not(recipe_only))]
/// a·b · sa·sb with fp8 a, b (b column-major), out in `out`: `_scaled_mm` on CUDA, its
/// dequantize-then-fp32-matmul arithmetic on the CPU (see the module's docs).
pub(crate) fn scaled_mm(
    a: &Tensor,
    b: &Tensor,
    sa: f64,
    sb: f64,
    out: Kind,
    fast: bool,
) -> Result<Tensor> {
    let scale = |v: f64| Tensor::scalar_tensor(v, (Kind::Float, a.device()));
    scaled_mm_by(a, b, &scale(sa), &scale(sb), out, fast)
}

#[cfg(not(recipe_only))]
/// [`scaled_mm`] with the scales as 0-dim fp32 tensors on the operands' device, so a scale
/// computed on the GPU is never read back by the host.
pub(crate) fn scaled_mm_by(
    a: &Tensor,
    b: &Tensor,
    sa: &Tensor,
    sb: &Tensor,
    out: Kind,
    fast: bool,
) -> Result<Tensor> {
    if a.device().is_cuda() {
        return Ok(a.f_internal_scaled_mm(b, sa, sb, None::<Tensor>, None, out, fast)?);
    }
    // The kernel multiplies by the scale as an fp32 number (`scale.item<float>()`).
    let dequant = |t: &Tensor, s: &Tensor| -> Result<Tensor> {
        Ok(t.f_contiguous()?.f_to_kind(Kind::Float)? * s)
    };
    Ok(dequant(a, sa)?.f_matmul(&dequant(b, sb)?)?.f_to_kind(out)?)
}
