//! Value-embedding gate (upstream #55): each head decides per token how much of the value
//! embedding enters its values, from the first n channels of the normed block input, as the
//! attention gate (upstream #28) decides how much of its output leaves:
//! ```text
//! v ← v + 2σ(h[:n]·W_veᵀ) ⊙ ve        W_ve: [H, n], zero init: the gate starts at 1 (plain v + ve)
//! ```
//! Upstream #70 has the gate of the layers without paired heads read half its channels from the
//! value embedding itself: 2σ([h[:n/2], ve[:n/2]]·W_veᵀ), ve's being the first of its row.
use super::builder::Builder;
use super::params::{Group, ParamSet};
use tch::Tensor;

pub struct ValueGate {
    w: Tensor, // [H, n]
    /// Half the gate's input from the value embedding (upstream #70).
    mixed: bool,
}

impl ValueGate {
    /// The gate on layer `i`'s value embedding (attention `attn`, kind `w` of `attn_layers`),
    /// when the recipe has one and the layer has a value embedding.
    pub fn build(b: &mut Builder, attn: &str, i: usize, w: char) -> Option<ValueGate> {
        let r = b.r;
        let n = r.ve_gate? as i64;
        let ve_layers = r.value_embed_layers.as_deref().unwrap_or("");
        ve_layers.chars().nth(i).filter(char::is_ascii_digit)?;
        let name = format!("{attn}.ve_gate");
        let gate = ValueGate::new(&mut b.ps, &name, (r.n_head as i64, n), b.g.gate);
        // Upstream #70: not on the paired layers.
        Some(if r.ve_gate_mixed && w != 'P' { gate.mixed() } else { gate })
    }

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
