//! Data-parallel ranks: who this process is ([`RankEnv`]) and how ranks exchange tensors
//! ([`Collectives`]).
//!
//! ```text
//! let env = dist::RankEnv::from_env()?;           // torchrun, Slurm, or a single process
//! let mut coll = dist::init(&env, device)?;       // Single, Tcp (CPU) or NCCL (CUDA)
//! coll.all_reduce(&mut grads, dist::Op::Avg)?;    // every rank now holds the mean gradient
//! ```
//!
//! Backends: [`single::Single`] for world size 1, [`tcp::Tcp`] for CPU ranks (exact: rank 0 sums
//! in rank order), and `nccl::Nccl` (`--features cuda`: c10d ProcessGroupNCCL through the shim)
//! for CUDA ranks.
pub mod contract;
pub mod env;
#[cfg(feature = "cuda")]
pub mod nccl;
mod ranged;
pub mod single;
pub mod tcp;

pub use env::{EnvError, RankEnv, Source};

use tch::{Device, Kind, TchError, Tensor};
use thiserror::Error;

/// How an all-reduce or reduce-scatter combines the ranks' tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Sum,
    /// Sum, then divide by the world size (floating-point tensors only).
    Avg,
}

/// Collective operations over all ranks. Every rank must call the same operations in the same
/// order with tensors of the same shapes and dtypes; the backends check this where they can.
/// After an error the backend is unusable and every later call fails with the first error.
pub trait Collectives: Send {
    fn rank(&self) -> usize;
    fn world(&self) -> usize;
    /// `"single"`, `"tcp"` or `"nccl"`, for the run log.
    fn backend(&self) -> &'static str;
    /// Reduces every tensor in place across ranks. The list travels as one flat buffer, so pass
    /// all gradients in one call; all tensors must share one dtype.
    fn all_reduce(&mut self, tensors: &mut [Tensor], op: Op) -> Result<(), DistError>;
    /// Copies `root`'s tensor into every rank's `tensor`.
    fn broadcast(&mut self, tensor: &mut Tensor, root: usize) -> Result<(), DistError>;
    /// Returns once every rank has called it.
    fn barrier(&mut self) -> Result<(), DistError>;
    /// Reduces `input` (`world * output.numel()` elements, viewed flat) across ranks and leaves
    /// chunk `rank` of the result in `output`: torch's `reduce_scatter_tensor`.
    fn reduce_scatter(
        &mut self,
        output: &mut Tensor,
        input: &Tensor,
        op: Op,
    ) -> Result<(), DistError>;
    /// Concatenates every rank's `input` in rank order into `output` (`world * input.numel()`
    /// elements, viewed flat): torch's `all_gather_into_tensor`.
    fn all_gather(&mut self, output: &mut Tensor, input: &Tensor) -> Result<(), DistError>;
}

/// Why a collective or the rendezvous failed.
#[derive(Debug, Error)]
pub enum DistError {
    #[error(transparent)]
    Env(#[from] EnvError),
    /// A named peer died, hung or disagreed; `what` completes "rank N ...".
    #[error("rank {rank} {what}")]
    Peer { rank: usize, what: String },
    /// Rank 0 saw a failure and told this rank.
    #[error("{0} (reported by rank 0)")]
    Relayed(String),
    #[error("rank 0 cannot listen on {addr}: {why}")]
    Listen { addr: String, why: String },
    #[error("rank {rank} cannot reach rank 0 at {addr}: {why}")]
    Connect { rank: usize, addr: String, why: String },
    /// The caller passed tensors that do not fit the operation.
    #[error("{0}")]
    Usage(String),
    #[error("an earlier collective failed: {0}")]
    Poisoned(String),
    /// The NCCL process group or its store failed (libtorch's message).
    #[error("{0}")]
    Nccl(String),
    #[error("tensor operation inside a collective failed: {0}")]
    Tensor(#[from] TchError),
}

/// Picks the backend for `env` and `device` (world size 1: `Single`; CPU: `Tcp`; CUDA: `Nccl`)
/// and joins the other ranks, blocking until all have joined or `env.timeout` passes.
/// Every backend holds to NCCL's contract ([`contract`]: tensors on `device`, one dtype per
/// operation), one rank too. Every collective of several ranks runs in a named range, which the
/// profile counts as communication.
pub fn init(env: &RankEnv, device: Device) -> Result<Box<dyn Collectives>, DistError> {
    let backend: Box<dyn Collectives> = if env.world == 1 {
        Box::new(single::Single)
    } else {
        let inner: Box<dyn Collectives> = match device {
            Device::Cpu => Box::new(tcp::Tcp::connect(env)?),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => Box::new(nccl::Nccl::connect(env, i)?),
            other => {
                return Err(DistError::Usage(format!(
                "no collectives for {other:?} ranks (CUDA ranks need NCCL: build with --features cuda)"
            )))
            }
        };
        Box::new(ranged::Ranged(inner))
    };
    Ok(Box::new(contract::Checked::new(backend, device)))
}

/// Checks that `big` holds `world` times `small`'s elements and that the dtypes agree; returns
/// the dtype. The names say which of the caller's tensors is which.
pub(crate) fn check_sizes(
    what: &str,
    (big, big_name): (&Tensor, &str),
    (small, small_name): (&Tensor, &str),
    world: usize,
) -> Result<Kind, DistError> {
    let (nb, ns) = (big.numel(), small.numel());
    if nb != ns * world {
        return Err(DistError::Usage(format!(
            "{what}: {big_name} has {nb} elements, {small_name} has {ns}; with {world} ranks the \
             {big_name} needs {}",
            ns * world
        )));
    }
    let (kb, ks) = (big.f_kind()?, small.f_kind()?);
    if kb != ks {
        return Err(DistError::Usage(format!(
            "{what}: {big_name} is {kb:?} but {small_name} is {ks:?}"
        )));
    }
    Ok(kb)
}

/// `tensors` as one flat buffer, so a list costs one collective instead of one per tensor;
/// `None` for an empty list. They must share one dtype, and `op` must suit it.
pub(crate) fn flatten(tensors: &[Tensor], op: Op) -> Result<Option<Tensor>, DistError> {
    if one_kind(tensors, op)?.is_none() {
        return Ok(None);
    }
    let flat = tensors.iter().map(|t| t.f_reshape([-1])).collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Tensor::f_cat(&flat, 0)?))
}

/// The one dtype of an all_reduce's list (`None` when empty), which `op` must suit.
pub(crate) fn one_kind(tensors: &[Tensor], op: Op) -> Result<Option<Kind>, DistError> {
    let Some(first) = tensors.first() else { return Ok(None) };
    let kind = first.f_kind()?;
    for (i, t) in tensors.iter().enumerate() {
        if t.f_kind()? != kind {
            return Err(DistError::Usage(format!(
                "all_reduce: tensor {i} is {:?} but tensor 0 is {kind:?}; pass one dtype per call",
                t.f_kind()?
            )));
        }
    }
    check_op(kind, op)?;
    Ok(Some(kind))
}

/// A broadcast's root must be a rank of the world.
pub(crate) fn check_root(root: usize, world: usize) -> Result<(), DistError> {
    if root >= world {
        return Err(DistError::Usage(format!(
            "broadcast from rank {root}, but the world has {world} rank(s)"
        )));
    }
    Ok(())
}

pub(crate) fn check_op(kind: Kind, op: Op) -> Result<(), DistError> {
    let float = matches!(kind, Kind::Half | Kind::Float | Kind::Double | Kind::BFloat16);
    if op == Op::Avg && !float {
        return Err(DistError::Usage(format!(
            "Op::Avg needs floating-point tensors, got {kind:?}; use Op::Sum"
        )));
    }
    Ok(())
}
