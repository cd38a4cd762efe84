//! World size 1: reductions are identities, gathers and scatters are copies.
use super::{check_root, Collectives, DistError, Op};
use tch::Tensor;

/// The only rank.
pub struct Single;

impl Collectives for Single {
    fn rank(&self) -> usize {
        0
    }

    fn world(&self) -> usize {
        1
    }

    fn backend(&self) -> &'static str {
        "single"
    }

    fn all_reduce(&mut self, _tensors: &mut [Tensor], _op: Op) -> Result<(), DistError> {
        Ok(())
    }

    fn broadcast(&mut self, _tensor: &mut Tensor, root: usize) -> Result<(), DistError> {
        check_root(root, 1)
    }

    fn barrier(&mut self) -> Result<(), DistError> {
        Ok(())
    }

    fn reduce_scatter(
        &mut self,
        output: &mut Tensor,
        input: &Tensor,
        _op: Op,
    ) -> Result<(), DistError> {
        copy_flat(output, input, "reduce_scatter")
    }

    fn all_gather(&mut self, output: &mut Tensor, input: &Tensor) -> Result<(), DistError> {
        copy_flat(output, input, "all_gather")
    }
}

/// `output = input` viewed flat, with the size check the multi-rank backends make.
fn copy_flat(output: &mut Tensor, input: &Tensor, what: &str) -> Result<(), DistError> {
    if output.numel() != input.numel() {
        return Err(DistError::Usage(format!(
            "{what}: output has {} elements, input has {}; with 1 rank they must be equal",
            output.numel(),
            input.numel()
        )));
    }
    let src = input.f_reshape(output.size())?;
    tch::no_grad(|| output.f_copy_(&src))?;
    Ok(())
}
