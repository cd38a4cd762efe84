//! NorMuon (upstream #41; Li et al., arXiv 2510.05491): Muon's orthogonalized update, then
//! each neuron's row or column rescaled by a running second moment, as Adam does per element,
//! so no direction of the layer keeps a much larger step than the others. Per matrix V:
//! ```text
//! s ← β2·s + (1−β2)·mean(V², over dim −2)     one entry per column: s [.., 1, cols]
//! V' = V / √max(s, 1e-10)
//! V' ← V'·‖V‖_F / max(‖V'‖_F, 1e-10)          the step keeps Muon's overall size
//! ```
//! Upstream decides the orientation from the parameter's shape: the mean over dim −1 (one
//! moment per row) when rows ≥ cols, over dim −2 when wide. Until #47 all of its matrices were
//! wide ((768, 3072) QKVO and MLP, (6, 12) and (1, 12) gates): per column. Ours stores that
//! QKVO as [4, C, C], which stands for the wide layout: per column too. Upstream #48 stores
//! QKVO and MLP tall, (3072, 768), so their moments are per row (the same neurons for the MLP,
//! the output features for QKVO), and forces gates to per row (one moment per head).
use tch::{Kind, Tensor};

/// The reduced dim for a parameter of `shape`: −1 (per row) when `per_row` (upstream #48's
/// gates) or the matrix is tall or square, −2 when wide or stacked as [4, C, C].
pub fn reduced_dim(shape: &[i64], per_row: bool) -> i64 {
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    if per_row || (shape.len() == 2 && rows >= cols) {
        -1
    } else {
        -2
    }
}

/// The zero second-moment buffer of an update of `shape` reduced over `dim`: [.., 1, cols]
/// (dim −2) or [.., rows, 1] (dim −1).
pub fn second_moment(shape: &[i64], dim: i64) -> Tensor {
    let mut s = shape.to_vec();
    let d = (s.len() as i64 + dim) as usize;
    s[d] = 1;
    Tensor::zeros(s.as_slice(), (Kind::Float, tch::Device::Cpu))
}

/// Normalizes the orthogonalized update `v` ([.., rows, cols]) over `dim` with the running
/// second moment `s` (updated in place, in its own dtype: the parameter's from upstream #42, so
/// bf16 for a bf16 gate on CUDA); returns `v`'s kind, as upstream scales Polar Express's output
/// in place (bf16 on CUDA).
pub fn normalize(v: &Tensor, s: &mut Tensor, beta2: f64, dim: i64) -> Tensor {
    let kind = v.kind();
    let v = v.to_kind(Kind::Float);
    let mean_sq = v.square().mean_dim(dim, true, Kind::Float);
    let _ = s.lerp_(&mean_sq.to_kind(s.kind()), 1.0 - beta2);
    let scaled = &v * s.clamp_min(1e-10).rsqrt();
    let frob = |t: &Tensor| t.norm_scalaropt_dim(2, [-2, -1], true);
    (&scaled * (frob(&v) / frob(&scaled).clamp_min(1e-10))).to_kind(kind)
}
