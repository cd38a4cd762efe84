//! Backout (upstream #40): the final hidden state takes back a learned share of an early layer's
//! output before the last norm, so the head reads more of what the later layers added.
//! ```text
//! h = x_L − λ·x_k          x_k: the residual stream after layer k (upstream: 8 of 12)
//! ```
//! λ comes from the scalar bank, init 0.5.
use super::builder::Builder;
use super::scalars::{ScalarBank, Slot};
use tch::Tensor;

pub struct Backout {
    /// The layer whose output is kept.
    pub layer: usize,
    lambda: Slot,
}

impl Backout {
    /// The recipe's backout of its layer's output.
    pub fn build(b: &mut Builder) -> Option<Backout> {
        b.r.backout.map(|layer| Backout::new(&mut b.scalars, layer))
    }

    pub fn new(bank: &mut ScalarBank, layer: usize) -> Backout {
        Backout { layer, lambda: bank.reserve("backout", &[0.5]) }
    }

    /// x, kept: [B, T, C] -> x − λ·kept
    pub fn apply(&self, x: &Tensor, kept: &Tensor, bank: &Tensor) -> Tensor {
        x - kept * self.lambda.get(bank, 0).to_kind(x.kind())
    }
}
