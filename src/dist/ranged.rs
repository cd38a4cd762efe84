//! A backend whose every collective runs in a named profiler range (`communication: <op>`), so a
//! trace shows the time ranks spend exchanging and waiting.
use super::{Collectives, DistError, Op};
use crate::shim::Range;
use tch::Tensor;

pub struct Ranged(pub Box<dyn Collectives>);

impl Collectives for Ranged {
    fn rank(&self) -> usize {
        self.0.rank()
    }
    fn world(&self) -> usize {
        self.0.world()
    }
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
    fn all_reduce(&mut self, tensors: &mut [Tensor], op: Op) -> Result<(), DistError> {
        let _range = Range::new("communication: all_reduce");
        self.0.all_reduce(tensors, op)
    }
    fn broadcast(&mut self, tensor: &mut Tensor, root: usize) -> Result<(), DistError> {
        let _range = Range::new("communication: broadcast");
        self.0.broadcast(tensor, root)
    }
    fn barrier(&mut self) -> Result<(), DistError> {
        let _range = Range::new("communication: barrier");
        self.0.barrier()
    }
    fn reduce_scatter(
        &mut self,
        output: &mut Tensor,
        input: &Tensor,
        op: Op,
    ) -> Result<(), DistError> {
        let _range = Range::new("communication: reduce_scatter");
        self.0.reduce_scatter(output, input, op)
    }
    fn all_gather(&mut self, output: &mut Tensor, input: &Tensor) -> Result<(), DistError> {
        let _range = Range::new("communication: all_gather");
        self.0.all_gather(output, input)
    }
}
