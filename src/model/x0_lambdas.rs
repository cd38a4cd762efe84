//! x0 lambdas (upstream #9): before every block x <- λ0·x + λ1·x0, with (λ0, λ1) per layer
//! learned in the scalar bank, init (1, 0); (1.1, 0) from upstream #45, a slight amplification
//! of the residual stream at each layer that training can then decay. The bank holds them as
//! (λ0, λ1) pairs until upstream #49 relays them out as all λ0s ("resid_lambdas"), then all λ1s.
use super::scalars::{ScalarBank, Slot};
use tch::Tensor;

/// How the lambdas sit in the bank.
pub enum Layout {
    /// (λ0, λ1) per layer (upstream #9-#48).
    Pairs,
    /// All λ0s, then all λ1s (upstream #49).
    Split,
}

pub struct X0Lambdas {
    /// (λ0, λ1) of each layer.
    layers: Vec<(Slot, Slot)>,
}

impl X0Lambdas {
    /// `lambda0`: λ0's init (1, or upstream #45's 1.1).
    pub fn new(bank: &mut ScalarBank, n_layer: usize, lambda0: f32, layout: Layout) -> X0Lambdas {
        let layers = match layout {
            Layout::Pairs => {
                let init: Vec<f32> = (0..n_layer).flat_map(|_| [lambda0, 0.0]).collect();
                let all = bank.reserve("block_lambdas", &init);
                (0..n_layer).map(|i| (all.sub(2 * i, 1), all.sub(2 * i + 1, 1))).collect()
            }
            Layout::Split => {
                let resid = bank.reserve("resid_lambdas", &vec![lambda0; n_layer]);
                let x0 = bank.reserve("x0_lambdas", &vec![0.0; n_layer]);
                (0..n_layer).map(|i| (resid.sub(i, 1), x0.sub(i, 1))).collect()
            }
        };
        X0Lambdas { layers }
    }

    /// x, x0: [B, T, C] -> [B, T, C]
    pub fn mix(&self, i: usize, x: &Tensor, x0: &Tensor, bank: &Tensor) -> Tensor {
        let (l0, l1) = &self.layers[i];
        x * l0.get(bank, 0) + x0 * l1.get(bank, 0)
    }
}
