//! Value-embedding gate (upstream #55): each head decides per token how much of the value
//! embedding enters its values, from the first n channels of the normed block input, as the
//! attention gate (upstream #28) decides how much of its output leaves:
//! ```text
//! v ← v + 2σ(h[:n]·W_veᵀ) ⊙ ve        W_ve: [H, n], zero init: the gate starts at 1 (plain v + ve)
//! ```
//! Upstream #70 has the gate of the layers without paired heads read half its channels from the
//! value embedding itself: 2σ([h[:n/2], ve[:n/2]]·W_veᵀ), ve's being the first of its row.
use crate::recipe::registry::{technique, Lab, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::builder::Builder,
    super::params::{Group, ParamSet},
    tch::Tensor,
};

/// `[recipe.value_gate]`: the channels the gate reads, and whether half are the value
/// embedding's.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// n: the first channels of the normed block input (upstream #55: 12).
    pub channels: usize,
    /// Off the paired layers, half of them from the value embedding (upstream #70).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mixed: bool,
}

/// The channels keep their count at lab scale; trees before the section read `ve_gate = 12`
/// and `ve_gate_mixed`.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[("channels", Lab::Kept)]),
    older: &[("ve_gate", Older::Field("channels")), ("ve_gate_mixed", Older::Field("mixed"))],
    ..technique("value_gate", &[55, 70], &["value_embed", "attn_layers"])
};

#[cfg(not(recipe_only))]
pub struct ValueGate {
    w: Tensor, // [H, n]
    /// Half the gate's input from the value embedding (upstream #70).
    mixed: bool,
}

#[cfg(not(recipe_only))]
impl ValueGate {
    /// The gate on layer `i`'s value embedding (attention `attn`, kind `w` of `attn_layers`),
    /// when the recipe has one and the layer has a value embedding.
    pub fn build(b: &mut Builder, attn: &str, i: usize, w: char) -> Option<ValueGate> {
        let r = b.r;
        let s = r.value_gate.as_ref()?;
        let ve_layers = r.value_embed.as_ref().map_or("", |v| &v.layers);
        ve_layers.chars().nth(i).filter(char::is_ascii_digit)?;
        let name = format!("{attn}.ve_gate");
        let gate = ValueGate::new(&mut b.ps, &name, (r.n_head as i64, s.channels as i64), b.g.gate);
        // Upstream #70: not on the paired layers.
        Some(if s.mixed && w != 'P' { gate.mixed() } else { gate })
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
