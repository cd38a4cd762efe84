//! Value-embedding gate (upstream #55): each head decides per token how much of the value
//! embedding enters its values, from the first n channels of the normed block input, as the
//! attention gate (upstream #28) decides how much of its output leaves:
//! ```text
//! v ← v + 2σ(h[:n]·W_veᵀ) ⊙ ve        W_ve: [H, n], zero init: the gate starts at 1 (plain v + ve)
//! ```
//! Upstream #70 has the gate of the layers without paired heads read half its channels from the
//! value embedding itself: 2σ([h[:n/2], ve[:n/2]]·W_veᵀ), ve's being the first of its row.
use super::params::{Group, ParamSet};
use tch::Tensor;

pub struct ValueGate {
    w: Tensor, // [H, n]
    /// Half the gate's input from the value embedding (upstream #70).
    mixed: bool,
}

impl ValueGate {
    pub fn new(ps: &mut ParamSet, name: &str, (heads, n): (i64, i64), g: Group) -> ValueGate {
        ValueGate { w: ps.zeros(name, &[heads, n], g), mixed: false }
    }

    /// The gate reads [h[:n/2], ve[:n/2]] (upstream #70).
    pub fn mixed(self) -> ValueGate {
        ValueGate { mixed: true, ..self }
    }

    /// h: [B, T, C] normed block input; ve: [B, T, H, D] -> the gated ve, [B, T, H, D]
    pub fn apply(&self, h: &Tensor, ve: &Tensor) -> Tensor {
        let n = self.w.size()[1];
        let input = match self.mixed {
            false => h.narrow(2, 0, n),
            true => {
                let row = ve.flatten(2, 3); // [B, T, C]
                Tensor::cat(&[h.narrow(2, 0, n / 2), row.narrow(2, 0, n - n / 2)], 2)
            }
        };
        let gate = input.linear(&self.w.to_kind(h.kind()), None::<Tensor>); // [B, T, H]
        ve * (gate.sigmoid() * 2.0).unsqueeze(3)
    }
}
