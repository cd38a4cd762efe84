//! Polar Express (upstream #38; Amsel, Persson, Musco and Gower, arXiv 2505.16932): Muon's
//! orthogonalization with a different odd quintic at each iteration instead of Newton–Schulz's
//! one. Each (a, b, c) is the minimax-optimal p(σ) = a·σ + b·σ³ + c·σ⁵ for the interval the
//! singular values are known to lie in after the previous steps, so five steps bring them much
//! closer to 1 than NS5 does, at the same cost.
//! ```text
//! X ← X / (‖X‖_F·1.02 + 1e-6)           the 2% cushion keeps every σ below 1
//! for (a, b, c): A = X·Xᵀ; B = b·A + c·A·A; X ← a·X + B·X
//! ```
//! Upstream computes X·Xᵀ and b·A + c·A·A with symmetric Triton kernels (one triangle, mirrored;
//! #69 tunes their loads), and from #74 keeps tall matrices tall (A = XᵀX, X ← a·X + X·B): the
//! same products. Ours uses libtorch's batched matmuls.
use super::newton_schulz::odd_quintics;
use tch::{Kind, Tensor};

/// Upstream's coefficients ("computed for num_iters=5, safety_factor=2e-2, cushion=2").
pub const COEFFS: [(f64, f64, f64); 5] = [
    (8.156554524902461, -22.48329292557795, 15.878769915207462),
    (4.042929935166739, -2.808917465908714, 0.5000178451051316),
    (3.8916678022926607, -2.772484153217685, 0.5060648178503393),
    (3.285753657755655, -2.3681294933425376, 0.46449024233003106),
    (2.3465413258596377, -1.7097828382687081, 0.42323551169305323),
];

/// Orthogonalizes each matrix of `g` ([..., rows, cols], batched over leading dims), computing
/// in `kind` (bf16 on CUDA, fp32 on CPU), the last product on its own when `split` (upstream
/// #48; see `odd_quintics`). Returns `kind`.
///
/// Panics if `g` has fewer than 2 dims (Muon checks its params when it is built).
pub fn orthogonalize(g: &Tensor, kind: Kind, split: bool) -> Tensor {
    odd_quintics(g, kind, (1.02, 1e-6), &COEFFS, split)
}
