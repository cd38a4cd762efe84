// The CUDA half of the trainer's libtorch shim: streams, CUDA graphs and c10d ProcessGroupNCCL.
// Needs the CUDA and NCCL headers of the nvidia wheels (scripts/setup.sh); built only with
// `--features cuda`. Symbols resolve into libtorch_cuda.so and libc10_cuda.so.
#include "shim.h"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/Event.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <vector>

namespace {

c10::cuda::CUDAStream stream_of(int64_t id, int64_t device) {
  return c10::cuda::CUDAStream::unpack3(id, static_cast<c10::DeviceIndex>(device),
                                        c10::DeviceType::CUDA);
}

void describe(const c10::cuda::CUDAStream& s, int64_t* id, void** handle) {
  *id = s.id();
  *handle = s.stream();
}

at::cuda::CUDAGraph& graph_of(void* g) { return *static_cast<at::cuda::CUDAGraph*>(g); }

using PgHandle = c10::intrusive_ptr<c10d::ProcessGroupNCCL>;
using WorkHandle = c10::intrusive_ptr<c10d::Work>;

c10d::ProcessGroupNCCL& pg_of(void* pg) { return **static_cast<PgHandle*>(pg); }

c10d::ReduceOp reduce_op(int op) {
  switch (op) {
    case 0: return c10d::ReduceOp::SUM;
    case 1: return c10d::ReduceOp::AVG;
    case 2: return c10d::ReduceOp::MAX;
    default: throw std::invalid_argument("unknown reduce op " + std::to_string(op));
  }
}

}  // namespace

extern "C" {

// ---- devices ------------------------------------------------------------------------------

// The number of visible CUDA devices; fails with the driver's own error (no driver, a driver too
// old for the runtime, no device) instead of returning 0.
int tshim_cuda_device_count(int64_t* n) { SHIM_TRY(*n = c10::cuda::device_count_ensure_non_zero()) }

// Makes `device` this thread's current CUDA device (what streams, graphs and NCCL default to).
int tshim_cuda_set_device(int64_t device) {
  SHIM_TRY(c10::cuda::set_device(static_cast<c10::DeviceIndex>(device)))
}

// ---- streams: identified by (id, device); handle is the raw cudaStream_t --------------

// torch's current stream on device.
int tshim_cuda_current_stream(int64_t device, int64_t* id, void** handle) {
  SHIM_TRY(describe(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)), id,
                    handle))
}

// A stream from torch's per-device pool (round robin, never destroyed).
int tshim_cuda_pool_stream(int64_t device, int high_priority, int64_t* id, void** handle) {
  SHIM_TRY(describe(
      c10::cuda::getStreamFromPool(high_priority != 0, static_cast<c10::DeviceIndex>(device)),
      id, handle))
}

// Makes the stream torch's current one on its device (for this thread).
int tshim_cuda_set_current_stream(int64_t id, int64_t device) {
  SHIM_TRY(c10::cuda::setCurrentCUDAStream(stream_of(id, device)))
}

// Blocks the host until the stream's queued work is done.
int tshim_cuda_stream_synchronize(int64_t id, int64_t device) {
  SHIM_TRY(stream_of(id, device).synchronize())
}

// Makes future work on `waiter` wait for the work queued on `waited` so far (an event).
int tshim_cuda_stream_wait(int64_t waiter, int64_t waited, int64_t device) {
  SHIM_TRY({
    // c10::Event reaches cudart through libc10_cuda; at::cuda::CUDAEvent would inline the calls
    // and need libcudart at link time.
    c10::Event event(c10::DeviceType::CUDA);
    event.record(stream_of(waited, device));
    event.block(stream_of(waiter, device));
  })
}

// ---- CUDA graphs (at::cuda::CUDAGraph, allocations from its private memory pool) ----------

// An empty graph (its constructor reads the current stream, so it needs a CUDA device).
int tshim_graph_new(void** out) { SHIM_TRY(*out = new at::cuda::CUDAGraph()) }

// Frees the graph and returns its memory pool.
void tshim_graph_free(void* g) { delete static_cast<at::cuda::CUDAGraph*>(g); }

// Starts capturing the current stream, which must not be the default stream.
int tshim_graph_capture_begin(void* g) { SHIM_TRY(graph_of(g).capture_begin()) }

// Ends the capture and instantiates the graph.
int tshim_graph_capture_end(void* g) { SHIM_TRY(graph_of(g).capture_end()) }

// Launches the captured work on the current stream.
int tshim_graph_replay(void* g) { SHIM_TRY(graph_of(g).replay()) }

// ---- c10d ProcessGroupNCCL ---------------------------------------------------------------

// A process group of `world` ranks rendezvousing through store (a handle from core.cpp),
// bound to CUDA device `device` (connects eagerly there).
int tshim_nccl_new(void* store, int rank, int world, int64_t device, void** out) {
  SHIM_TRY({
    auto& s = *static_cast<c10::intrusive_ptr<c10d::Store>*>(store);
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(s, rank, world);
    pg->setBoundDeviceId(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
    *out = new PgHandle(std::move(pg));
  })
}

// Shuts the group down (aborting its communicators) and frees it.
void tshim_nccl_free(void* pg) {
  try {
    pg_of(pg).shutdown();
  } catch (...) {
    // Teardown of a failed group: nothing more to do than free it.
  }
  delete static_cast<PgHandle*>(pg);
}

// In-place all-reduce of t with op (0 sum, 1 avg, 2 max).
int tshim_nccl_all_reduce(void* pg, ctensor t, int op, void** work) {
  SHIM_TRY({
    std::vector<at::Tensor> ts{*t};
    c10d::AllreduceOptions opts;
    opts.reduceOp = reduce_op(op);
    *work = new WorkHandle(pg_of(pg).allreduce(ts, opts));
  })
}

// output (numel N) = op over ranks of this rank's N-element slice of input (numel world*N).
int tshim_nccl_reduce_scatter(void* pg, ctensor output, ctensor input, int op, void** work) {
  SHIM_TRY({
    at::Tensor out = *output, in = *input;
    c10d::ReduceScatterOptions opts;
    opts.reduceOp = reduce_op(op);
    *work = new WorkHandle(pg_of(pg)._reduce_scatter_base(out, in, opts));
  })
}

// output (numel world*N) = every rank's input (numel N), in rank order.
int tshim_nccl_all_gather(void* pg, ctensor output, ctensor input, void** work) {
  SHIM_TRY({
    at::Tensor out = *output, in = *input;
    *work = new WorkHandle(pg_of(pg)._allgather_base(out, in));
  })
}

// Copies root's t into every rank's t.
int tshim_nccl_broadcast(void* pg, ctensor t, int64_t root, void** work) {
  SHIM_TRY({
    std::vector<at::Tensor> ts{*t};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    *work = new WorkHandle(pg_of(pg).broadcast(ts, opts));
  })
}

// All ranks meet (a tiny all-reduce on the bound device).
int tshim_nccl_barrier(void* pg, void** work) {
  SHIM_TRY(*work = new WorkHandle(pg_of(pg).barrier()))
}

// Makes the current stream wait for the collective (a barrier also waits on the host).
int tshim_work_wait(void* work) { SHIM_TRY((*static_cast<WorkHandle*>(work))->wait()) }

// Drops the handle; the collective itself completes regardless.
void tshim_work_free(void* work) { delete static_cast<WorkHandle*>(work); }

}  // extern "C"
