//! Value-embedding gate (upstream #55): each head decides per token how much of the value
//! embedding enters its values, from the first n channels of the normed block input, as the
//! attention gate (upstream #28) decides how much of its output leaves:
//! ```text
//! v ← v + 2σ(h[:n]·W_veᵀ) ⊙ ve        W_ve: [H, n], zero init: the gate starts at 1 (plain v + ve)
//! ```
use super::params::{Group, ParamSet};
use tch::Tensor;

pub struct ValueGate {
    w: Tensor, // [H, n]
}

impl ValueGate {
    pub fn new(ps: &mut ParamSet, name: &str, (heads, n): (i64, i64), g: Group) -> ValueGate {
        ValueGate { w: ps.zeros(name, &[heads, n], g) }
    }

    /// h: [B, T, C] normed block input; ve: [B, T, H, D] -> the gated ve, [B, T, H, D]
    pub fn apply(&self, h: &Tensor, ve: &Tensor) -> Tensor {
        let n = self.w.size()[1];
        let gate = h.narrow(2, 0, n).linear(&self.w.to_kind(h.kind()), None::<Tensor>); // [B, T, H]
        ve * (gate.sigmoid() * 2.0).unsqueeze(3)
    }
}
