//! Normalization: LayerNorm with a learned weight and bias (GPT-2, llm.c), or parameter-free
//! RMSNorm (upstream ≤#4: `F.rms_norm` with eps = None, i.e. the fp32 machine epsilon, which the
//! manifest spells out as ln_eps).
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::params::{Group, ParamSet},
    tch::Tensor,
};

/// `norm = "rms"`: the norm of the block inputs and the final hidden state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// LayerNorm with weight and bias (GPT-2).
    #[default]
    Layer,
    /// Parameter-free RMSNorm, eps = fp32 machine epsilon (upstream ≤#4).
    Rms,
}

pub const TECHNIQUE: Technique =
    Technique { act1: &[1, 2, 3, 4, 5, 6], ..technique("norm", &[4], &[]) };

#[cfg(not(recipe_only))]
/// x / sqrt(mean(x^2) + eps) over the last dimension, computed in fp32, returned in x's kind.
pub fn rms_norm(x: &Tensor, eps: f64) -> Tensor {
    let c = *x.size().last().expect("RMSNorm input has a channel dimension");
    x.to_kind(tch::Kind::Float).rms_norm([c], None::<Tensor>, eps).to_kind(x.kind())
}

#[cfg(not(recipe_only))]
pub struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

#[cfg(not(recipe_only))]
impl LayerNorm {
    pub fn new(ps: &mut ParamSet, name: &str, dim: i64, eps: f64, g: Group) -> Self {
        LayerNorm {
            weight: ps.ones(&format!("{name}.weight"), &[dim], g),
            bias: ps.zeros(&format!("{name}.bias"), &[dim], g),
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

#[cfg(not(recipe_only))]
/// The recipe's choice of norm for one site.
pub enum Norm {
    Layer(LayerNorm),
    Rms { eps: f64 },
}

#[cfg(not(recipe_only))]
impl Norm {
    /// `g`: the group of LayerNorm's weight and bias.
    pub fn new(
        ps: &mut ParamSet,
        name: &str,
        dim: i64,
        (kind, eps): (Kind, f64),
        g: Group,
    ) -> Self {
        match kind {
            Kind::Layer => Norm::Layer(LayerNorm::new(ps, name, dim, eps, g)),
            Kind::Rms => Norm::Rms { eps },
        }
    }

    pub fn forward(&self, x: &Tensor) -> Tensor {
        match self {
            Norm::Layer(ln) => ln.forward(x),
            Norm::Rms { eps } => rms_norm(x, *eps),
        }
    }
}
