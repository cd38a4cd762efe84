//! One long skip (upstream #45), replacing the U-net's mirrored pairs: layer `from`'s output
//! joins layer `to`'s input, gated by σ(w) from the scalar bank (raw init `skip_gate`, −1.5).
//! ```text
//! x_in(to) = x_out(to − 1) + σ(w)·x_out(from)          upstream: 4 -> 7 of 12
//! ```
//! The bank keeps upstream's L skip slots; the weight is slot `to − L/2` (upstream's
//! skip_weights[7 − 6]); upstream #49's relayout keeps one ("skip_lambda").
//!
//! Upstream #55 lets each token open or close the skip from x0's first n channels:
//! ```text
//! x_in(to) = x_out(to − 1) + σ(w)·2σ(x0[:n]·gᵀ)·x_out(from)     g: [1, n], zero init (factor 1)
//! ```
use crate::recipe::registry::{technique, Lab, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::builder::Builder,
    super::params::{Group, ParamSet},
    super::scalars::{ScalarBank, Slot},
    tch::Tensor,
};

/// `[recipe.single_skip]`: where the skip leaves and joins, and its gate on x0.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// [from, to]: layer `from`'s output joins layer `to`'s input (upstream #45: [4, 7]).
    pub layers: [usize; 2],
    /// n: the skip is also gated by x0's first n channels (upstream #55: 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x0_gate: Option<usize>,
}

/// Its layers map to the lab's, the gate's channels keep their count; trees before the section
/// read `single_skip = [4, 7]` and `skip_gate_x0 = 12`.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[("layers", Lab::Layer), ("x0_gate", Lab::Kept)]),
    excludes: &["unet"],
    older: &[("single_skip", Older::Field("layers")), ("skip_gate_x0", Older::Field("x0_gate"))],
    ..technique("single_skip", &[45, 55], &["skip_gate"])
};

#[cfg(not(recipe_only))]
pub struct SingleSkip {
    pub from: usize,
    pub to: usize,
    weight: Slot,
    /// The x0 gate's weight [1, n] (upstream #55).
    x0_gate: Option<Tensor>,
}

#[cfg(not(recipe_only))]
impl SingleSkip {
    /// The recipe's one gated skip.
    pub fn build(b: &mut Builder) -> Option<SingleSkip> {
        let r = b.r;
        let ([from, to], gate) = r.single_skip.as_ref().map(|s| s.layers).zip(r.skip_gate)?;
        Some(SingleSkip::new(&mut b.scalars, b.l, (from, to), gate, r.compact_scalars))
    }

    /// Adds upstream #55's gate on x0 when the recipe has it.
    pub fn build_x0_gate(self, b: &mut Builder) -> SingleSkip {
        match b.r.single_skip.as_ref().and_then(|s| s.x0_gate) {
            Some(n) => self.with_x0_gate(&mut b.ps, n as i64, b.g.skip_gate),
            None => self,
        }
    }

    pub fn new(
        bank: &mut ScalarBank,
        n_layer: usize,
        (from, to): (usize, usize),
        gate: f64,
        compact: bool,
    ) -> Self {
        if compact {
            let weight = bank.reserve("skip_lambda", &[gate as f32]);
            return SingleSkip { from, to, weight, x0_gate: None };
        }
        let slots = bank.reserve("skip", &vec![gate as f32; n_layer]);
        SingleSkip { from, to, weight: slots.sub(to - n_layer / 2, 1), x0_gate: None }
    }

    /// The skip also gated by x0's first `n` channels (upstream #55).
    pub fn with_x0_gate(self, ps: &mut ParamSet, n: i64, g: Group) -> SingleSkip {
        SingleSkip { x0_gate: Some(ps.zeros("skip_gate", &[1, n], g)), ..self }
    }

    /// x, kept, x0: [B, T, C] -> x + σ(w)·kept, times 2σ(x0[:n]·gᵀ) with the x0 gate
    pub fn add(&self, x: &Tensor, kept: &Tensor, x0: &Tensor, bank: &Tensor) -> Tensor {
        let kept = kept * self.weight.get(bank, 0).sigmoid();
        match &self.x0_gate {
            Some(g) => {
                let n = g.size()[1];
                let gate = x0.narrow(2, 0, n).linear(&g.to_kind(x0.kind()), None::<Tensor>); // [B, T, 1]
                x + kept * (gate.sigmoid() * 2.0)
            }
            None => x + kept,
        }
    }
}
