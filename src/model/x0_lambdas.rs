//! x0 lambdas (upstream #9): before every block x <- λ0·x + λ1·x0, with (λ0, λ1) per layer
//! learned in the scalar bank, init (1, 0); (1.1, 0) from upstream #45, a slight amplification
//! of the residual stream at each layer that training can then decay.
use super::scalars::{ScalarBank, Slot};
use tch::Tensor;

pub struct X0Lambdas {
    lambdas: Slot,
}

impl X0Lambdas {
    /// `lambda0`: λ0's init (1, or upstream #45's 1.1).
    pub fn new(bank: &mut ScalarBank, n_layer: usize, lambda0: f32) -> X0Lambdas {
        let init: Vec<f32> = (0..n_layer).flat_map(|_| [lambda0, 0.0]).collect();
        X0Lambdas { lambdas: bank.reserve("block_lambdas", &init) }
    }

    /// x, x0: [B, T, C] -> [B, T, C]
    pub fn mix(&self, i: usize, x: &Tensor, x0: &Tensor, bank: &Tensor) -> Tensor {
        let (l0, l1) = self.lambdas.pair(bank, 2 * i);
        x * l0 + x0 * l1
    }
}
