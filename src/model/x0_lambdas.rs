//! x0 lambdas (upstream #9): before every block x <- λ0·x + λ1·x0, with (λ0, λ1) per layer
//! learned in the scalar bank, init (1, 0); (1.1, 0) from upstream #45, a slight amplification
//! of the residual stream at each layer that training can then decay. The bank holds them as
//! (λ0, λ1) pairs until upstream #49 relays them out as all λ0s ("resid_lambdas"), then all λ1s;
//! upstream #52 moves the λ1s out of the bank into their own parameter, so they keep the main
//! Adam's betas while the bank's scalars get smoother ones.
use crate::recipe::registry::{technique, Technique};
#[cfg(not(recipe_only))]
use {
    super::block_lambda_init,
    super::builder::Builder,
    super::scalars::{ScalarBank, Slot},
    tch::Tensor,
};

/// `x0_lambdas = true`: a switch, part of the modern block.
pub const TECHNIQUE: Technique = technique("x0_lambdas", &[9], &["attn_layers"]);

#[cfg(not(recipe_only))]
/// Where the lambdas sit.
pub enum Layout {
    /// (λ0, λ1) per layer in the bank (upstream #9-#48).
    Pairs,
    /// All λ0s, then all λ1s in the bank (upstream #49).
    Split,
    /// The λ0s in the bank, the λ1s in this [L] parameter (upstream #52).
    Apart(Tensor),
}

#[cfg(not(recipe_only))]
pub struct X0Lambdas {
    /// λ0 of each layer.
    lambda0: Vec<Slot>,
    lambda1: Lambda1,
}

#[cfg(not(recipe_only))]
enum Lambda1 {
    Bank(Vec<Slot>),
    Param(Tensor),
}

#[cfg(not(recipe_only))]
impl X0Lambdas {
    /// The recipe's x0 lambdas, λ0 from its block_lambda_init, laid out as its scalars are
    /// (upstream #49 splits them; from #52 a parameter of their own, made even when the
    /// lambdas are off, as the recipes that set it have them).
    pub fn build(b: &mut Builder) -> Option<X0Lambdas> {
        let r = b.r;
        let layout = match (r.x0_lambdas_apart, r.compact_scalars) {
            (true, _) => Layout::Apart(b.ps.zeros("x0_lambdas", &[b.l as i64], b.g.x0)),
            (false, true) => Layout::Split,
            (false, false) => Layout::Pairs,
        };
        let lambda0 = block_lambda_init::lambda0(r) as f32;
        r.x0_lambdas.then(|| X0Lambdas::new(&mut b.scalars, b.l, lambda0, layout))
    }

    /// `lambda0`: λ0's init (1, or upstream #45's 1.1).
    pub fn new(bank: &mut ScalarBank, n_layer: usize, lambda0: f32, layout: Layout) -> X0Lambdas {
        let (lambda0, lambda1) = match layout {
            Layout::Pairs => {
                let init: Vec<f32> = (0..n_layer).flat_map(|_| [lambda0, 0.0]).collect();
                let all = bank.reserve("block_lambdas", &init);
                let slots = |k| (0..n_layer).map(|i| all.sub(2 * i + k, 1)).collect::<Vec<_>>();
                (slots(0), Lambda1::Bank(slots(1)))
            }
            Layout::Split => {
                let resid = bank.reserve("resid_lambdas", &vec![lambda0; n_layer]);
                let x0 = bank.reserve("x0_lambdas", &vec![0.0; n_layer]);
                let slots = |s: Slot| (0..n_layer).map(|i| s.sub(i, 1)).collect::<Vec<_>>();
                (slots(resid), Lambda1::Bank(slots(x0)))
            }
            Layout::Apart(t) => {
                let resid = bank.reserve("resid_lambdas", &vec![lambda0; n_layer]);
                ((0..n_layer).map(|i| resid.sub(i, 1)).collect(), Lambda1::Param(t))
            }
        };
        X0Lambdas { lambda0, lambda1 }
    }

    /// x, x0: [B, T, C] -> [B, T, C]
    pub fn mix(&self, i: usize, x: &Tensor, x0: &Tensor, bank: &Tensor) -> Tensor {
        let l1 = match &self.lambda1 {
            Lambda1::Bank(s) => s[i].get(bank, 0),
            Lambda1::Param(t) => t.get(i as i64),
        };
        x * self.lambda0[i].get(bank, 0) + x0 * l1
    }
}
