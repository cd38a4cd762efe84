//! Muon as Keller Jordan's script had it in autumn 2024, which Act 1's a3 (Tyler Romero's
//! b91c2c0) takes whole: per matrix, every step,
//!   buf <- μ·buf + g,   g' = g + μ·buf                         (SGD momentum, Nesterov)
//!   X = NS5(g'), 5 steps of the quintic on g'/(‖g'‖_F + 1e-7)  (newton_schulz.rs)
//!   p <- p - lr·sqrt(max(rows, cols))·X                       (update RMS about 1)
//! A fused QKV weight, [3C, C] (the script's test: rows = 3·cols), is orthogonalized as three
//! [C, C] matrices, each scaled by sqrt(C). No weight decay. The modern records' Muon (muon.rs)
//! keeps momentum in lerp form and scales by sqrt(max(1, rows/cols)).
use super::newton_schulz::orthogonalize;
use crate::model::params::Param;
use tch::{Kind, Tensor};

pub struct MuonClassic {
    pub lr: f64,
    momentum: f64,
    ns_steps: usize,
    /// NS5 runs in this kind (bf16 on CUDA, as the script; fp32 on CPU).
    kind: Kind,
    bufs: Vec<Tensor>,
}

/// How a [rows, cols] matrix is orthogonalized: as `n` pieces of [r, c] (a fused QKV, rows =
/// 3·cols, as three squares), and its update's scale.
pub fn pieces(rows: i64, cols: i64) -> (i64, [i64; 2], f64) {
    if rows == 3 * cols {
        (3, [cols, cols], (cols as f64).sqrt())
    } else {
        (1, [rows, cols], (rows.max(cols) as f64).sqrt())
    }
}

/// g [rows, cols] -> (NS5 of each piece in `kind`, the update's scale).
fn orthogonal(g: &Tensor, steps: usize, kind: Kind) -> (Tensor, f64) {
    let (rows, cols) = g.size2().expect("classic Muon updates matrices");
    let (n, [r, c], scale) = pieces(rows, cols);
    // [n, r, c]: orthogonalize batches over the leading dim.
    let x = orthogonalize(&g.view([n, r, c]), steps, kind);
    (x.view([rows, cols]), scale)
}

impl MuonClassic {
    pub fn new(params: &[Param], lr: f64, (momentum, ns_steps): (f64, usize), kind: Kind) -> Self {
        let bufs = params.iter().map(|p| p.tensor.zeros_like()).collect();
        MuonClassic { lr, momentum, ns_steps, kind, bufs }
    }

    /// One update of `params` (their gradients already averaged over ranks) at `lr`.
    pub fn step(&mut self, params: &[Param], lr: f64) {
        let (momentum, steps, kind) = (self.momentum, self.ns_steps, self.kind);
        tch::no_grad(|| {
            for (p, buf) in params.iter().zip(&mut self.bufs) {
                let g = p.tensor.grad();
                let _ = buf.g_mul_scalar_(momentum).g_add_(&g);
                let g = &g + &*buf * momentum;
                let (x, scale) = orthogonal(&g, steps, kind);
                let _ = p.tensor.shallow_clone().g_sub_(&(x.to_kind(Kind::Float) * (lr * scale)));
            }
        });
    }

    /// The settings, for `train --print-params`.
    pub fn describe(&self) -> String {
        format!(
            "muon_classic: lr {} momentum {} nesterov ns_steps {}",
            self.lr, self.momentum, self.ns_steps
        )
    }

    /// Deep copies of the momentum buffers.
    pub fn save(&self) -> Vec<Tensor> {
        self.bufs.iter().map(|b| b.copy()).collect()
    }

    pub fn restore(&mut self, saved: &[Tensor]) -> anyhow::Result<()> {
        anyhow::ensure!(saved.len() == self.bufs.len(), "classic Muon: saved state is another's");
        tch::no_grad(|| self.bufs.iter_mut().zip(saved).for_each(|(b, s)| b.copy_(s)));
        Ok(())
    }
}
