//! U-net skips (upstream #11): the outputs of the first half's blocks feed the second half,
//! mirrored (block L/2-1 -> L/2, ..., 0 -> L-1), each scaled by a learned weight from the
//! scalar bank (init 1). Upstream reserves L weights and uses the first L/2.
use super::scalars::{ScalarBank, Slot};
use anyhow::{Context, Result};
use tch::Tensor;

pub struct UNetSkips {
    weights: Slot,
    half: usize,
}

impl UNetSkips {
    pub fn new(bank: &mut ScalarBank, n_layer: usize) -> UNetSkips {
        UNetSkips { weights: bank.reserve("skip", &vec![1.0; n_layer]), half: n_layer / 2 }
    }

    /// Before block `i`: in the second half, add the mirrored skip. x: [B, T, C]
    pub fn enter(
        &self,
        i: usize,
        x: Tensor,
        stack: &mut Vec<Tensor>,
        bank: &Tensor,
    ) -> Result<Tensor> {
        if i < self.half {
            return Ok(x);
        }
        let skip = stack.pop().context("U-net skip stack is empty")?;
        Ok(&x + skip * self.weights.get(bank, i - self.half))
    }

    /// After block `i`: in the first half, keep its output.
    pub fn leave(&self, i: usize, x: &Tensor, stack: &mut Vec<Tensor>) {
        if i < self.half {
            stack.push(x.shallow_clone());
        }
    }
}
