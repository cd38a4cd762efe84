//! The GPT-2 MLP: C -> 4C -> GELU -> C. GPT-2's GELU is the tanh approximation and its layers
//! have biases; Act 1's baseline takes the exact GELU and no biases (`Dense`), its a2 relu(x)².
use super::dense::Dense;
use super::params::{Groups, ParamSet};
use crate::recipe::Activation;
use tch::Tensor;

pub struct Mlp {
    fc_w: Tensor,
    fc_b: Option<Tensor>,
    proj_w: Tensor,
    proj_b: Option<Tensor>,
    activation: Activation,
}

impl Mlp {
    pub fn new(ps: &mut ParamSet, name: &str, c: i64, d: &Dense, g: &Groups) -> Self {
        Mlp {
            fc_w: d.weight(ps, &format!("{name}.fc"), [4 * c, c], false, g.hidden),
            fc_b: d.bias(ps, &format!("{name}.fc"), 4 * c, g.vector),
            proj_w: d.weight(ps, &format!("{name}.proj"), [c, 4 * c], true, g.hidden),
            proj_b: d.bias(ps, &format!("{name}.proj"), c, g.vector),
            activation: d.activation,
        }
    }

    /// x: [B, T, C] -> [B, T, C]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let k = x.kind();
        let bias = |b: &Option<Tensor>| b.as_ref().map(|b| b.to_kind(k));
        let h = x.linear(&self.fc_w.to_kind(k), bias(&self.fc_b).as_ref()); // [B, T, 4C]
        let h = match self.activation {
            Activation::Gelu => h.gelu("tanh"),
            Activation::GeluErf => h.gelu("none"),
            Activation::Relu2 => h.relu().square(),
        };
        h.linear(&self.proj_w.to_kind(k), bias(&self.proj_b).as_ref())
    }
}
