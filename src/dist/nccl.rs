//! CUDA collectives: c10d's ProcessGroupNCCL through the shim, meeting in torchrun's TCPStore.
//!
//! Each call waits for its NCCL work on the current stream (`Work::wait`: the host does not
//! block), so later kernels see the result; the flat staging buffers stay alive until then.
//! A dead peer is handled by the launcher, which stops the job; NCCL's own watchdog is the
//! backstop.
use super::{check_op, check_root, check_sizes, flatten, Collectives, DistError, Op, RankEnv};
use crate::shim::{ProcessGroupNccl, ReduceOp, TcpStore};
use tch::{Kind, Tensor};

/// The NCCL backend; see the module docs.
pub struct Nccl {
    rank: usize,
    world: usize,
    pg: ProcessGroupNccl,
    /// Rank 0's store server must outlive the group (the group holds its own client reference).
    _store: TcpStore,
}

impl Nccl {
    /// Meets the other ranks in the TCPStore on `MASTER_ADDR:MASTER_PORT` (rank 0 hosts it,
    /// or torchrun's agent does) and builds the NCCL group on `cuda:device`.
    pub fn connect(env: &RankEnv, device: usize) -> Result<Nccl, DistError> {
        let store = TcpStore::rendezvous(
            &env.master_addr,
            env.master_port,
            env.rank,
            env.world,
            env.agent_store,
            env.timeout,
        )
        .map_err(nccl_err)?;
        let pg = ProcessGroupNccl::new(&store, env.rank, env.world, device).map_err(nccl_err)?;
        Ok(Nccl { rank: env.rank, world: env.world, pg, _store: store })
    }
}

fn nccl_err(e: anyhow::Error) -> DistError {
    DistError::Nccl(format!("{e:#}"))
}

fn reduce_op(op: Op) -> ReduceOp {
    match op {
        Op::Sum => ReduceOp::Sum,
        Op::Avg => ReduceOp::Avg,
    }
}

/// `src` viewed as `dst`'s shape, copied into `dst` on the current stream.
fn copy_back(dst: &mut Tensor, src: &Tensor) -> Result<(), DistError> {
    tch::no_grad(|| dst.f_copy_(&src.f_view(dst.size().as_slice())?))?;
    Ok(())
}

impl Collectives for Nccl {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.world
    }

    fn backend(&self) -> &'static str {
        "nccl"
    }

    fn all_reduce(&mut self, tensors: &mut [Tensor], op: Op) -> Result<(), DistError> {
        let Some(buf) = flatten(tensors, op)? else { return Ok(()) };
        self.pg.all_reduce(&buf, reduce_op(op)).and_then(|w| w.wait()).map_err(nccl_err)?;
        let mut offset = 0;
        for t in tensors.iter_mut() {
            let n = t.numel() as i64;
            copy_back(t, &buf.f_narrow(0, offset, n)?)?;
            offset += n;
        }
        Ok(())
    }

    fn broadcast(&mut self, tensor: &mut Tensor, root: usize) -> Result<(), DistError> {
        check_root(root, self.world)?;
        let buf = tensor.f_contiguous()?;
        self.pg.broadcast(&buf, root).and_then(|w| w.wait()).map_err(nccl_err)?;
        copy_back(tensor, &buf)
    }

    fn barrier(&mut self) -> Result<(), DistError> {
        self.pg.barrier().map_err(nccl_err)
    }

    fn reduce_scatter(
        &mut self,
        output: &mut Tensor,
        input: &Tensor,
        op: Op,
    ) -> Result<(), DistError> {
        let kind = check_sizes("reduce_scatter", (input, "input"), (output, "output"), self.world)?;
        check_op(kind, op)?;
        let src = input.f_contiguous()?.f_reshape([-1])?;
        let out = Tensor::f_empty([output.numel() as i64], (kind, input.device()))?;
        self.pg
            .reduce_scatter(&out, &src, reduce_op(op))
            .and_then(|w| w.wait())
            .map_err(nccl_err)?;
        copy_back(output, &out)
    }

    fn all_gather(&mut self, output: &mut Tensor, input: &Tensor) -> Result<(), DistError> {
        let kind: Kind =
            check_sizes("all_gather", (output, "output"), (input, "input"), self.world)?;
        let src = input.f_contiguous()?.f_reshape([-1])?;
        let out = Tensor::f_empty([output.numel() as i64], (kind, input.device()))?;
        self.pg.all_gather(&out, &src).and_then(|w| w.wait()).map_err(nccl_err)?;
        copy_back(output, &out)
    }
}
