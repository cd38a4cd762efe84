//! CUDA streams, CUDA graphs and c10d ProcessGroupNCCL (`--features cuda`; src/shim/cuda.cpp).
use super::{check, store::TcpStore, CTensor};
use anyhow::{bail, Result};
use std::ffi::{c_int, c_void};
use tch::Tensor;

extern "C" {
    fn tshim_cuda_device_count(n: *mut i64) -> c_int;
    fn tshim_cuda_set_device(device: i64) -> c_int;
    fn tshim_cuda_current_stream(device: i64, id: *mut i64, handle: *mut *mut c_void) -> c_int;
    fn tshim_cuda_pool_stream(
        device: i64,
        high_priority: c_int,
        id: *mut i64,
        handle: *mut *mut c_void,
    ) -> c_int;
    fn tshim_cuda_set_current_stream(id: i64, device: i64) -> c_int;
    fn tshim_cuda_stream_synchronize(id: i64, device: i64) -> c_int;
    fn tshim_cuda_stream_wait(waiter: i64, waited: i64, device: i64) -> c_int;
    fn tshim_graph_new(out: *mut *mut c_void) -> c_int;
    fn tshim_graph_free(graph: *mut c_void);
    fn tshim_graph_capture_begin(graph: *mut c_void) -> c_int;
    fn tshim_graph_capture_end(graph: *mut c_void) -> c_int;
    fn tshim_graph_replay(graph: *mut c_void) -> c_int;
    fn tshim_nccl_new(
        store: *mut c_void,
        rank: c_int,
        world: c_int,
        device: i64,
        out: *mut *mut c_void,
    ) -> c_int;
    fn tshim_nccl_free(pg: *mut c_void);
    fn tshim_nccl_all_reduce(
        pg: *mut c_void,
        t: CTensor,
        op: c_int,
        work: *mut *mut c_void,
    ) -> c_int;
    fn tshim_nccl_reduce_scatter(
        pg: *mut c_void,
        output: CTensor,
        input: CTensor,
        op: c_int,
        work: *mut *mut c_void,
    ) -> c_int;
    fn tshim_nccl_all_gather(
        pg: *mut c_void,
        output: CTensor,
        input: CTensor,
        work: *mut *mut c_void,
    ) -> c_int;
    fn tshim_nccl_broadcast(
        pg: *mut c_void,
        t: CTensor,
        root: i64,
        work: *mut *mut c_void,
    ) -> c_int;
    fn tshim_nccl_barrier(pg: *mut c_void, work: *mut *mut c_void) -> c_int;
    fn tshim_work_wait(work: *mut c_void) -> c_int;
    fn tshim_work_free(work: *mut c_void);
}

/// How many CUDA devices this process sees; an error carries the driver's reason when none.
pub fn device_count() -> Result<usize> {
    let mut n = 0;
    // SAFETY: one out slot.
    check(unsafe { tshim_cuda_device_count(&mut n) }, "CUDA")?;
    Ok(n as usize)
}

/// Makes `device` this thread's current CUDA device.
pub fn set_device(device: usize) -> Result<()> {
    // SAFETY: a plain value.
    check(unsafe { tshim_cuda_set_device(device as i64) }, &format!("set CUDA device {device}"))
}

/// A torch CUDA stream (torch's own pool or default stream; never destroyed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaStream {
    id: i64,
    device: usize,
    handle: usize,
}

impl CudaStream {
    fn from_raw(id: i64, device: usize, handle: *mut c_void) -> CudaStream {
        CudaStream { id, device, handle: handle as usize }
    }

    /// This thread's current stream on `device` (what torch launches on).
    pub fn current(device: usize) -> Result<CudaStream> {
        let (mut id, mut handle) = (0, std::ptr::null_mut());
        // SAFETY: two out slots.
        let rc = unsafe { tshim_cuda_current_stream(device as i64, &mut id, &mut handle) };
        check(rc, "current CUDA stream")?;
        Ok(CudaStream::from_raw(id, device, handle))
    }

    /// A side stream from torch's pool on `device`.
    pub fn from_pool(device: usize, high_priority: bool) -> Result<CudaStream> {
        let (mut id, mut handle) = (0, std::ptr::null_mut());
        // SAFETY: two out slots.
        let rc = unsafe {
            tshim_cuda_pool_stream(device as i64, high_priority.into(), &mut id, &mut handle)
        };
        check(rc, "CUDA pool stream")?;
        Ok(CudaStream::from_raw(id, device, handle))
    }

    /// Makes this torch's current stream on its device, for this thread.
    pub fn set_current(&self) -> Result<()> {
        // SAFETY: plain values.
        let rc = unsafe { tshim_cuda_set_current_stream(self.id, self.device as i64) };
        check(rc, "set current CUDA stream")
    }

    /// Blocks the host until the work queued on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: plain values.
        check(
            unsafe { tshim_cuda_stream_synchronize(self.id, self.device as i64) },
            "CUDA stream synchronize",
        )
    }

    /// Makes later work on this stream wait for what `other` has queued so far.
    pub fn wait_stream(&self, other: &CudaStream) -> Result<()> {
        if other.device != self.device {
            bail!("wait_stream: streams on cuda:{} and cuda:{}", self.device, other.device);
        }
        // SAFETY: plain values.
        let rc = unsafe { tshim_cuda_stream_wait(self.id, other.id, self.device as i64) };
        check(rc, "CUDA stream wait")
    }

    /// The `cudaStream_t`, e.g. for cudarc's `wrap_borrowed_stream`.
    pub fn raw(&self) -> *mut c_void {
        self.handle as *mut c_void
    }

    pub fn device(&self) -> usize {
        self.device
    }
}

/// A captured CUDA graph (at::cuda::CUDAGraph); its tensors come from a private memory pool.
pub struct CudaGraph {
    raw: *mut c_void,
}

impl CudaGraph {
    /// An empty graph; needs a CUDA device.
    pub fn new() -> Result<CudaGraph> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: one out slot.
        check(unsafe { tshim_graph_new(&mut raw) }, "CUDA graph")?;
        Ok(CudaGraph { raw })
    }

    /// Records the kernels `record` launches on `device` instead of running them, as
    /// `torch.cuda.graph` does: on a side stream that is current during the capture. Warm up the
    /// same work first (cuBLAS workspaces, lazy inits), and keep its input and output tensors
    /// alive: replays read and write those same addresses.
    pub fn capture<T>(&mut self, device: usize, record: impl FnOnce() -> Result<T>) -> Result<T> {
        let previous = CudaStream::current(device)?;
        previous.synchronize()?;
        let side = CudaStream::from_pool(device, false)?;
        side.wait_stream(&previous)?;
        side.set_current()?;
        // SAFETY: live graph handle.
        let begun =
            check(unsafe { tshim_graph_capture_begin(self.raw) }, "CUDA graph capture begin");
        // A panic inside `record` must still end the capture and restore the stream, or every
        // later kernel of this thread would be recorded into a dead capture.
        let recorded =
            begun.map(|()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(record)));
        let ended = match &recorded {
            // SAFETY: live graph handle; ends the capture begun above whatever `record` did.
            Ok(_) => check(unsafe { tshim_graph_capture_end(self.raw) }, "CUDA graph capture end"),
            Err(_) => Ok(()),
        };
        let restored = previous.set_current().and_then(|()| previous.wait_stream(&side));
        let value = match recorded {
            Ok(Ok(value)) => value,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(e) => return Err(e),
        };
        let value = value?;
        ended?;
        restored?;
        Ok(value)
    }

    /// Launches the captured work on the current stream.
    pub fn replay(&self) -> Result<()> {
        // SAFETY: live graph handle.
        check(unsafe { tshim_graph_replay(self.raw) }, "CUDA graph replay")
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: raw came from tshim_graph_new and is freed once.
        unsafe { tshim_graph_free(self.raw) }
    }
}

/// How a collective combines the ranks' tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    /// NCCL's native average (sum / world size).
    Avg,
    Max,
}

impl ReduceOp {
    fn code(self) -> c_int {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Avg => 1,
            ReduceOp::Max => 2,
        }
    }
}

/// A collective in flight, on the process group's NCCL stream.
#[must_use = "wait() orders the collective before later work on the current stream"]
pub struct Work {
    raw: *mut c_void,
}

impl Work {
    fn start(rc: c_int, raw: *mut c_void, what: &str) -> Result<Work> {
        check(rc, what)?;
        Ok(Work { raw })
    }

    /// Makes the current stream wait for the collective (the host does not block, except for a
    /// barrier). The tensors must stay alive until then.
    pub fn wait(self) -> Result<()> {
        // SAFETY: live work handle; Drop frees it.
        check(unsafe { tshim_work_wait(self.raw) }, "NCCL work wait")
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        // SAFETY: raw came from the shim and is freed once.
        unsafe { tshim_work_free(self.raw) }
    }
}

/// c10d's ProcessGroupNCCL: NCCL collectives with torch's stream and allocator bookkeeping.
pub struct ProcessGroupNccl {
    raw: *mut c_void,
}

// SAFETY: ProcessGroupNCCL is used from one thread at a time (not Sync); moving it is fine.
unsafe impl Send for ProcessGroupNccl {}

impl ProcessGroupNccl {
    /// Joins the group of `world_size` ranks meeting in `store` (e.g.
    /// [`TcpStore::rendezvous`]), as `rank`, with its tensors on `cuda:device`.
    pub fn new(
        store: &TcpStore,
        rank: usize,
        world_size: usize,
        device: usize,
    ) -> Result<ProcessGroupNccl> {
        let (rank_c, world_c) = (c_int::try_from(rank)?, c_int::try_from(world_size)?);
        let mut raw = std::ptr::null_mut();
        // SAFETY: live store handle (the group keeps its own reference); one out slot.
        let rc = unsafe { tshim_nccl_new(store.raw(), rank_c, world_c, device as i64, &mut raw) };
        check(rc, &format!("ProcessGroupNCCL rank {rank} of {world_size} on cuda:{device}"))?;
        Ok(ProcessGroupNccl { raw })
    }

    /// In place: `t` becomes `op` over every rank's `t`.
    pub fn all_reduce(&self, t: &Tensor, op: ReduceOp) -> Result<Work> {
        let mut work = std::ptr::null_mut();
        // SAFETY: live group; t borrowed for the call (c10d keeps its own reference).
        let rc = unsafe { tshim_nccl_all_reduce(self.raw, t.as_ptr(), op.code(), &mut work) };
        Work::start(rc, work, "NCCL all_reduce")
    }

    /// `output` (N elements) = `op` over ranks of their `input` slice `rank*N..(rank+1)*N`.
    pub fn reduce_scatter(&self, output: &Tensor, input: &Tensor, op: ReduceOp) -> Result<Work> {
        let mut work = std::ptr::null_mut();
        // SAFETY: as in all_reduce.
        let rc = unsafe {
            tshim_nccl_reduce_scatter(
                self.raw,
                output.as_ptr(),
                input.as_ptr(),
                op.code(),
                &mut work,
            )
        };
        Work::start(rc, work, "NCCL reduce_scatter")
    }

    /// `output` (world*N elements) = every rank's `input` (N elements), in rank order.
    pub fn all_gather(&self, output: &Tensor, input: &Tensor) -> Result<Work> {
        let mut work = std::ptr::null_mut();
        // SAFETY: as in all_reduce.
        let rc =
            unsafe { tshim_nccl_all_gather(self.raw, output.as_ptr(), input.as_ptr(), &mut work) };
        Work::start(rc, work, "NCCL all_gather")
    }

    /// Copies rank `root`'s `t` into every rank's `t`.
    pub fn broadcast(&self, t: &Tensor, root: usize) -> Result<Work> {
        let mut work = std::ptr::null_mut();
        // SAFETY: as in all_reduce.
        let rc = unsafe { tshim_nccl_broadcast(self.raw, t.as_ptr(), root as i64, &mut work) };
        Work::start(rc, work, "NCCL broadcast")
    }

    /// Returns once every rank has reached it.
    pub fn barrier(&self) -> Result<()> {
        let mut work = std::ptr::null_mut();
        // SAFETY: live group; one out slot.
        let rc = unsafe { tshim_nccl_barrier(self.raw, &mut work) };
        Work::start(rc, work, "NCCL barrier")?.wait()
    }
}

impl Drop for ProcessGroupNccl {
    fn drop(&mut self) {
        // SAFETY: raw came from tshim_nccl_new; shuts the group down and frees it once.
        unsafe { tshim_nccl_free(self.raw) }
    }
}
