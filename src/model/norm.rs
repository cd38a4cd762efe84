//! LayerNorm with a learned weight and bias (GPT-2, llm.c).
use super::params::ParamSet;
use tch::Tensor;

pub struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    pub fn new(ps: &mut ParamSet, name: &str, dim: i64, eps: f64) -> Self {
        LayerNorm {
            weight: ps.ones(&format!("{name}.weight"), &[dim]),
            bias: ps.zeros(&format!("{name}.bias"), &[dim]),
            eps,
        }
    }

    /// x: [B, T, C] -> [B, T, C]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let c = *x.size().last().expect("LayerNorm input has a channel dimension");
        x.layer_norm(
            [c],
            Some(&self.weight.to_kind(x.kind())),
            Some(&self.bias.to_kind(x.kind())),
            self.eps,
            true,
        )
    }
}
