//! The GPT-2 MLP: C -> 4C -> GELU (tanh approximation) -> C, with biases.
use super::params::{Groups, ParamSet};
use tch::Tensor;

pub struct Mlp {
    fc_w: Tensor,
    fc_b: Tensor,
    proj_w: Tensor,
    proj_b: Tensor,
}

impl Mlp {
    pub fn new(
        ps: &mut ParamSet,
        name: &str,
        c: i64,
        (std, proj_std): (f64, f64),
        g: &Groups,
    ) -> Self {
        Mlp {
            fc_w: ps.normal(&format!("{name}.fc.weight"), &[4 * c, c], std, g.hidden),
            fc_b: ps.zeros(&format!("{name}.fc.bias"), &[4 * c], g.vector),
            proj_w: ps.normal(&format!("{name}.proj.weight"), &[c, 4 * c], proj_std, g.hidden),
            proj_b: ps.zeros(&format!("{name}.proj.bias"), &[c], g.vector),
        }
    }

    /// x: [B, T, C] -> [B, T, C]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let k = x.kind();
        let h = x.linear(&self.fc_w.to_kind(k), Some(&self.fc_b.to_kind(k))); // [B, T, 4C]
        h.gelu("tanh").linear(&self.proj_w.to_kind(k), Some(&self.proj_b.to_kind(k)))
    }
}
