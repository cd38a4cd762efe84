//! How record #1's dense layers (its attention and GELU MLP) are made, and Act 1's baseline's
//! changes to them (a1, Keller Jordan's first modded-nanogpt script as Tyler Romero ran it): no
//! biases, PyTorch's default init U(±1/sqrt(fan_in)) instead of llm.c's N(0, 0.02), the exact
//! (erf) GELU instead of the tanh one, and the attention's output scaled by 1/sqrt(2·n_layer);
//! from a2, ReLU² in the MLP and the tied table at its nn.Linear init (`torch_tied`); from a6, a
//! sliding window.
use super::params::{Group, ParamSet};
use crate::recipe::{Activation, Recipe};
use tch::Tensor;

pub struct Dense {
    bias: bool,
    /// U(±1/sqrt(fan_in)) (nn.Linear's default) instead of the normal stds below.
    torch_init: bool,
    /// llm.c: N(0, init_std), residual projections N(0, init_std/sqrt(2L)).
    stds: (f64, f64),
    /// The MLP's nonlinearity.
    pub activation: Activation,
    /// The attention's output times this before it joins the stream.
    pub attn_scale: Option<f64>,
    /// a6: the attention's window, i - j <= w.
    pub window: Option<i64>,
}

impl Dense {
    pub fn new(r: &Recipe) -> Dense {
        let two_l = 2.0 * r.n_layer as f64;
        Dense {
            bias: !r.no_bias,
            torch_init: r.init.is_torch(),
            stds: (r.init_std, r.init_std / two_l.sqrt()),
            activation: r.activation,
            attn_scale: r.attn_branch_scale.then(|| 1.0 / two_l.sqrt()),
            window: r.attn_window.map(|w| w as i64),
        }
    }

    /// A weight [out, in]; `residual`: a projection into the stream (llm.c's smaller std).
    pub fn weight(
        &self,
        ps: &mut ParamSet,
        name: &str,
        dims: [i64; 2],
        residual: bool,
        g: Group,
    ) -> Tensor {
        let name = format!("{name}.weight");
        if self.torch_init {
            return ps.uniform(&name, &dims, 1.0 / (dims[1] as f64).sqrt(), g);
        }
        ps.normal(&name, &dims, if residual { self.stds.1 } else { self.stds.0 }, g)
    }

    /// A bias of `n` zeros, or None without biases.
    pub fn bias(&self, ps: &mut ParamSet, name: &str, n: i64, g: Group) -> Option<Tensor> {
        self.bias.then(|| ps.zeros(&format!("{name}.bias"), &[n], g))
    }
}
