//! One long skip (upstream #45), replacing the U-net's mirrored pairs: layer `from`'s output
//! joins layer `to`'s input, gated by σ(w) from the scalar bank (raw init `skip_gate`, −1.5).
//! ```text
//! x_in(to) = x_out(to − 1) + σ(w)·x_out(from)          upstream: 4 -> 7 of 12
//! ```
//! The bank keeps upstream's L skip slots; the weight is slot `to − L/2` (upstream's
//! skip_weights[7 − 6]); upstream #49's relayout keeps one ("skip_lambda").
use super::scalars::{ScalarBank, Slot};
use tch::Tensor;

pub struct SingleSkip {
    pub from: usize,
    pub to: usize,
    weight: Slot,
}

impl SingleSkip {
    pub fn new(
        bank: &mut ScalarBank,
        n_layer: usize,
        (from, to): (usize, usize),
        gate: f64,
        compact: bool,
    ) -> Self {
        if compact {
            return SingleSkip { from, to, weight: bank.reserve("skip_lambda", &[gate as f32]) };
        }
        let slots = bank.reserve("skip", &vec![gate as f32; n_layer]);
        SingleSkip { from, to, weight: slots.sub(to - n_layer / 2, 1) }
    }

    /// x, kept: [B, T, C] -> x + σ(w)·kept
    pub fn add(&self, x: &Tensor, kept: &Tensor, bank: &Tensor) -> Tensor {
        x + kept * self.weight.get(bank, 0).sigmoid()
    }
}
