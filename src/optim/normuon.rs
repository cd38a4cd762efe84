//! NorMuon (upstream #41; Li et al., arXiv 2510.05491): Muon's orthogonalized update, then
//! each neuron's row or column rescaled by a running second moment, as Adam does per element,
//! so no direction of the layer keeps a much larger step than the others. Per matrix V:
//! ```text
//! s ← β2·s + (1−β2)·mean(V², over dim −2)     one entry per column: s [.., 1, cols]
//! V' = V / √max(s, 1e-10)
//! V' ← V'·‖V‖_F / max(‖V'‖_F, 1e-10)          the step keeps Muon's overall size
//! ```
//! Upstream takes the mean over dim −2 when the parameter is wide (all of its matrices are:
//! (768, 3072) QKVO and MLP, (6, 12) and (1, 12) gates), over dim −1 when tall. Ours stores
//! QKVO as [4, C, C], square; its stats are per column too, upstream's orientation.
use tch::{Kind, Tensor};

/// The reduced dim of a [.., rows, cols] update: −2 unless the matrices are tall.
pub fn reduced_dim(shape: &[i64]) -> i64 {
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    if rows > cols {
        -1
    } else {
        -2
    }
}

/// The zero second-moment buffer of an update of `shape`: [.., 1, cols] (or [.., rows, 1]).
pub fn second_moment(shape: &[i64]) -> Tensor {
    let mut s = shape.to_vec();
    let d = (s.len() as i64 + reduced_dim(shape)) as usize;
    s[d] = 1;
    Tensor::zeros(s.as_slice(), (Kind::Float, tch::Device::Cpu))
}

/// Normalizes the orthogonalized update `v` ([.., rows, cols]) with the running second moment
/// `s` (updated in place, fp32); returns fp32.
pub fn normalize(v: &Tensor, s: &mut Tensor, beta2: f64) -> Tensor {
    let v = v.to_kind(Kind::Float);
    let mean_sq = v.square().mean_dim(reduced_dim(&v.size()), true, Kind::Float);
    let _ = s.lerp_(&mean_sq, 1.0 - beta2);
    let scaled = &v * s.clamp_min(1e-10).rsqrt();
    let frob = |t: &Tensor| t.norm_scalaropt_dim(2, [-2, -1], true);
    &scaled * (frob(&v) / frob(&scaled).clamp_min(1e-10))
}
