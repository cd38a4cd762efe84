//! Every learned scalar in one vector (upstream #24), so Adam updates it as one tensor and the
//! distributed optimizer can split it evenly. For L layers:
//!   [0, L)      U-net skip weights (only the first L/2 are used), init 1      (upstream #11)
//!   [L, 3L)     block lambdas (λ0, λ1) per layer: x <- λ0·x + λ1·x0, init (1, 0)  (#9)
//!   [3L, 5L)    value lambdas (sa0, sa1) per layer: v <- sa0·v + sa1·ve, init (0.5, 0.5) (#15)
//!   [5L, ...)   padding to a multiple of 8, init 1, unused
use super::params::ParamSet;
use tch::Tensor;

pub struct Scalars {
    all: Tensor, // [5L + pad] fp32
    n_layer: i64,
}

impl Scalars {
    pub fn new(ps: &mut ParamSet, n_layer: usize, lr_mul: f64) -> Scalars {
        let l = n_layer;
        let pad = (8 - (5 * l) % 8) % 8;
        let mut init = vec![1.0f32; 5 * l + pad];
        for i in 0..l {
            init[l + 2 * i + 1] = 0.0; // λ1
            init[3 * l + 2 * i] = 0.5; // sa0
            init[3 * l + 2 * i + 1] = 0.5; // sa1
        }
        let all = ps.zeros("scalars", &[init.len() as i64]);
        ps.lr_mul(lr_mul);
        tch::no_grad(|| all.shallow_clone().copy_(&Tensor::from_slice(&init)));
        Scalars { all, n_layer: n_layer as i64 }
    }

    /// The weight of the U-net skip into block `L/2 + i`. 0-dim.
    pub fn skip(&self, i: usize) -> Tensor {
        self.all.get(i as i64)
    }

    /// (λ0, λ1) of layer `i`. 0-dim each.
    pub fn block_lambdas(&self, i: usize) -> (Tensor, Tensor) {
        let at = self.n_layer + 2 * i as i64;
        (self.all.get(at), self.all.get(at + 1))
    }

    /// (sa0, sa1) of layer `i`. 0-dim each.
    pub fn value_lambdas(&self, i: usize) -> (Tensor, Tensor) {
        let at = 3 * self.n_layer + 2 * i as i64;
        (self.all.get(at), self.all.get(at + 1))
    }
}
