//! Smear (upstream #34): each token's embedding takes in a gated share of the previous token's,
//! before the norm that makes x0, so even layer 1's attention starts from a bigram-aware input.
//! ```text
//! g_t  = λ·σ(e_t[:n]·W_sᵀ)          W_s [1, n] zero-init, λ from the scalar bank (init 0)
//! e'_t = e_t + g_t·e_{t−1}          t ≥ 1 over the packed sequence; e'_0 = e_0
//! ```
//! It starts as an exact no-op (λ = 0). The sequence is packed documents and nothing masks their
//! boundaries: a document's BOS takes in the previous document's last token, as upstream.
use crate::recipe::registry::{technique, Lab, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::builder::Builder,
    super::params::{Group, ParamSet},
    super::scalars::{ScalarBank, Slot},
    tch::Tensor,
};

/// `[recipe.smear]`: how many channels of each token's embedding the gate reads (#34: 12).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub gate_channels: usize,
}

/// The gate's channels keep their count at lab scale; trees before the section read
/// `smear = 12`.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[("gate_channels", Lab::Kept)]),
    older: &[("smear", Older::Field("gate_channels"))],
    ..technique("smear", &[34, 40], &["embed_norm", "muon"])
};

#[cfg(not(recipe_only))]
pub struct Smear {
    gate: Tensor, // [1, n]
    lambda: Slot,
}

#[cfg(not(recipe_only))]
impl Smear {
    /// The recipe's smear over its gate's channels.
    pub fn build(b: &mut Builder) -> Option<Smear> {
        let r = b.r;
        let n = r.smear.as_ref()?.gate_channels;
        // Upstream reserved a slot per layer for smear's one lambda until #40 gave the spare
        // slots back, keeping one for smear and one for backout.
        let slots = if r.backout.is_some() { 1 } else { b.l };
        Some(Smear::new(&mut b.ps, &mut b.scalars, n as i64, slots, b.g.smear))
    }

    /// Reads the first `n` channels; reserves `reserve` scalars (upstream pads its bank with
    /// one per layer "for smear_lambda" and uses the first).
    pub fn new(
        ps: &mut ParamSet,
        bank: &mut ScalarBank,
        n: i64,
        reserve: usize,
        g: Group,
    ) -> Smear {
        let lambda = bank.reserve("smear", &vec![0.0; reserve]);
        Smear { gate: ps.zeros("smear_gate", &[1, n], g), lambda }
    }

    /// e: [B, T, C] token embeddings (one packed sequence when B = 1) -> [B, T, C]
    pub fn forward(&self, e: &Tensor, bank: &Tensor) -> Tensor {
        let (b, t, c) = e.size3().expect("smear takes [B, T, C]");
        let flat = e.view([b * t, c]);
        let (prev, next) = (flat.narrow(0, 0, b * t - 1), flat.narrow(0, 1, b * t - 1));
        let n = self.gate.size()[1];
        let gate = next.narrow(1, 0, n).linear(&self.gate.to_kind(e.kind()), None::<Tensor>); // [N-1, 1]
        let g = self.lambda.get(bank, 0).to_kind(e.kind()) * gate.sigmoid();
        Tensor::cat(&[flat.narrow(0, 0, 1), next + g * prev], 0).view([b, t, c])
    }
}
