//! U-net skips (upstream #11): the outputs of the first half's blocks feed the second half,
//! mirrored (block L/2-1 -> L/2, ..., 0 -> L-1), each scaled by a learned weight from the
//! scalar bank (init 1). Upstream reserves L weights and uses the first L/2. From upstream #32
//! the weight passes through a sigmoid (raw init -1.5): a skip can only add a bounded share.
use crate::recipe::registry::{technique, Technique};
#[cfg(not(recipe_only))]
use {
    super::builder::Builder,
    super::scalars::{ScalarBank, Slot},
    anyhow::{Context, Result},
    tch::Tensor,
};

/// `unet = true`: a switch, part of the modern block; its weights' sigmoid is `skip_gate`.
pub const TECHNIQUE: Technique = technique("unet", &[11], &["attn_layers"]);

#[cfg(not(recipe_only))]
pub struct UNetSkips {
    weights: Slot,
    /// Pairs: the first `half` layers that run push, the next `half` pop (an odd last one,
    /// upstream #35's layer 11 of 1-11, has no skip).
    half: usize,
    sigmoid: bool,
}

#[cfg(not(recipe_only))]
impl UNetSkips {
    /// The U-net's skip weights over the layers that run (upstream #35's empty layer is none).
    pub fn build(b: &mut Builder) -> Option<UNetSkips> {
        let r = b.r;
        let running = (0..b.l).filter(|&i| !r.skips_layer(i)).count();
        r.unet.then(|| UNetSkips::new(&mut b.scalars, (b.l, running), r.skip_gate))
    }

    /// `running`: the layers that run (a layer with neither attention nor MLP is skipped);
    /// `gate`: the raw init of sigmoid-gated weights (upstream #32), or None for plain ones.
    pub fn new(
        bank: &mut ScalarBank,
        (n_layer, running): (usize, usize),
        gate: Option<f64>,
    ) -> UNetSkips {
        let weights = bank.reserve("skip", &vec![gate.unwrap_or(1.0) as f32; n_layer]);
        UNetSkips { weights, half: running / 2, sigmoid: gate.is_some() }
    }

    /// Before the `i`-th layer that runs: in the second half, add the mirrored skip.
    /// x: [B, T, C]
    pub fn enter(
        &self,
        i: usize,
        x: Tensor,
        stack: &mut Vec<Tensor>,
        bank: &Tensor,
    ) -> Result<Tensor> {
        if i < self.half || i >= 2 * self.half {
            return Ok(x);
        }
        let skip = stack.pop().context("U-net skip stack is empty")?;
        let w = self.weights.get(bank, i - self.half);
        Ok(&x + skip * if self.sigmoid { w.sigmoid() } else { w })
    }

    /// After the `i`-th layer that runs: in the first half, keep its output.
    pub fn leave(&self, i: usize, x: &Tensor, stack: &mut Vec<Tensor>) {
        if i < self.half {
            stack.push(x.shallow_clone());
        }
    }
}
