//! NCCL's contract, enforced for every backend: each tensor on the rank's training device, dense,
//! and an operation's input and output of one dtype. ProcessGroupNCCL refuses anything else
//! (a CPU tensor, a bf16 gradient scattered into an fp32 buffer); checking it on the CPU and on
//! one rank too means the CPU tests catch what would otherwise fail first on 2+ GPUs. Equal sizes
//! across ranks are checked by the TCP backend's frames.
use super::{Collectives, DistError, Op};
use tch::{Device, Tensor};

pub struct Checked {
    inner: Box<dyn Collectives>,
    device: Device,
}

impl Checked {
    /// `inner`, refusing tensors that are not dense tensors on `device`.
    pub fn new(inner: Box<dyn Collectives>, device: Device) -> Checked {
        Checked { inner, device }
    }

    fn on_device(&self, what: &str, name: &str, t: &Tensor) -> Result<(), DistError> {
        if t.device() != self.device {
            return Err(DistError::Usage(format!(
                "{what}: {name} is on {:?}, not on this rank's training device {:?} (NCCL takes \
                 only tensors on the rank's GPU)",
                t.device(),
                self.device
            )));
        }
        if t.is_sparse() {
            return Err(DistError::Usage(format!("{what}: {name} is sparse; NCCL needs dense")));
        }
        Ok(())
    }

    fn same_kind(what: &str, output: &Tensor, input: &Tensor) -> Result<(), DistError> {
        let (ko, ki) = (output.f_kind()?, input.f_kind()?);
        if ko != ki {
            return Err(DistError::Usage(format!(
                "{what}: input is {ki:?} but output is {ko:?}; NCCL needs one dtype"
            )));
        }
        Ok(())
    }
}

impl Collectives for Checked {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn world(&self) -> usize {
        self.inner.world()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn all_reduce(&mut self, tensors: &mut [Tensor], op: Op) -> Result<(), DistError> {
        for (i, t) in tensors.iter().enumerate() {
            self.on_device("all_reduce", &format!("tensor {i}"), t)?;
        }
        super::one_kind(tensors, op)?;
        self.inner.all_reduce(tensors, op)
    }
    fn broadcast(&mut self, tensor: &mut Tensor, root: usize) -> Result<(), DistError> {
        self.on_device("broadcast", "the tensor", tensor)?;
        self.inner.broadcast(tensor, root)
    }
    fn barrier(&mut self) -> Result<(), DistError> {
        self.inner.barrier()
    }
    fn reduce_scatter(
        &mut self,
        output: &mut Tensor,
        input: &Tensor,
        op: Op,
    ) -> Result<(), DistError> {
        self.on_device("reduce_scatter", "input", input)?;
        self.on_device("reduce_scatter", "output", output)?;
        Self::same_kind("reduce_scatter", output, input)?;
        self.inner.reduce_scatter(output, input, op)
    }
    fn all_gather(&mut self, output: &mut Tensor, input: &Tensor) -> Result<(), DistError> {
        self.on_device("all_gather", "input", input)?;
        self.on_device("all_gather", "output", output)?;
        Self::same_kind("all_gather", output, input)?;
        self.inner.all_gather(output, input)
    }
}
