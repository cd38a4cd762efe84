//! Smear (upstream #34): each token's embedding takes in a gated share of the previous token's,
//! before the norm that makes x0, so even layer 1's attention starts from a bigram-aware input.
//! ```text
//! g_t  = λ·σ(e_t[:n]·W_sᵀ)          W_s [1, n] zero-init, λ from the scalar bank (init 0)
//! e'_t = e_t + g_t·e_{t−1}          t ≥ 1 over the packed sequence; e'_0 = e_0
//! ```
//! It starts as an exact no-op (λ = 0). The sequence is packed documents and nothing masks their
//! boundaries: a document's BOS takes in the previous document's last token, as upstream.
use super::builder::Builder;
use super::params::{Group, ParamSet};
use super::scalars::{ScalarBank, Slot};
use tch::Tensor;

pub struct Smear {
    gate: Tensor, // [1, n]
    lambda: Slot,
}

impl Smear {
    /// The recipe's smear over `smear` channels.
    pub fn build(b: &mut Builder) -> Option<Smear> {
        let r = b.r;
        let n = r.smear?;
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
