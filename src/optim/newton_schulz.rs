//! Newton–Schulz orthogonalization: Muon's replacement for the SVD's U·Vᵀ.
//!
//! A quintic iteration X ← a·X + (b·A + c·A²)·X with A = X·Xᵀ moves the singular values of a
//! Frobenius-normalized X towards 1: after 5 steps most lie in about [0.7, 1.2] (never above the
//! quintic's peak of 1.2024), not exactly at 1; the coefficients trade precision for speed. Came with Muon (record #3); NS5, 5 steps and bf16
//! since #4, batched over leading dims since #20. Upstream uses Triton kernels that compute only one
//! triangle of the symmetric products; `baddbmm` does the same math with about twice the FLOPs.
use tch::{Kind, Tensor};

/// `(a, b, c)` of the quintic, as in upstream's `zeropower_via_newtonschulz5`.
pub const NS5: (f64, f64, f64) = (3.4445, -4.7750, 2.0315);

/// Orthogonalizes each matrix of `g` ([..., rows, cols], batched over leading dims) with `steps`
/// iterations of NS5, computing in `kind` (bf16 on CUDA, fp32 on CPU). Returns `kind`.
///
/// Panics if `g` has fewer than 2 dims (Muon checks its params when it is built).
pub fn orthogonalize(g: &Tensor, steps: usize, kind: Kind) -> Tensor {
    odd_quintics(g, kind, (1.0, 1e-7), &vec![NS5; steps], false)
}

/// The iteration Newton–Schulz and Polar Express share: X = g / (‖g‖_F·cushion + eps) per
/// matrix, then for each (a, b, c): A = X·Xᵀ, X ← a·X + (b·A + c·A·A)·X. In `kind`; with
/// `split` and bf16, B·X is a product of its own, rounded to bf16, and a·X is added in fp32
/// (upstream #48's bmm + add for the MLP) instead of baddbmm's one rounding. In fp32 the two are
/// the same sum, so the CPU lab keeps baddbmm's.
pub fn odd_quintics(
    g: &Tensor,
    kind: Kind,
    (cushion, eps): (f64, f64),
    coeffs: &[(f64, f64, f64)],
    split: bool,
) -> Tensor {
    let shape = g.size();
    assert!(shape.len() >= 2, "orthogonalize needs [..., rows, cols], got {shape:?}");
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    // [B, rows, cols]: baddbmm wants exactly one batch dim.
    let mut x = g.to_kind(kind).reshape([-1, rows, cols]);
    // Wide orientation keeps A = X·Xᵀ the smaller of the two Gram matrices.
    let tall = rows > cols;
    if tall {
        x = x.transpose(-2, -1);
    }
    // Each matrix gets its own norm, so every singular value starts at or below 1.
    x = &x / (x.norm_scalaropt_dim(2, [-2, -1], true) * cushion + eps);
    for &(a, b, c) in coeffs {
        let gram = x.matmul(&x.transpose(-2, -1)); // A = X·Xᵀ   [B, m, m]
        let poly = gram.baddbmm(&gram, &gram, b, c); // b·A + c·A·A
        x = match split && kind == Kind::BFloat16 {
            true => {
                (poly.matmul(&x).to_kind(Kind::Float) + x.to_kind(Kind::Float) * a).to_kind(kind)
            }
            false => x.baddbmm(&poly, &x, a, 1.0), // a·X + B·X
        };
    }
    if tall {
        x = x.transpose(-2, -1);
    }
    x.reshape(shape.as_slice())
}
