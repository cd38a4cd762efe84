// The device-generic half of the trainer's libtorch shim: what tch 0.24 does not expose and
// that compiles against the torch headers alone (no CUDA headers). Conventions: shim.h.
#include "shim.h"

#include <ATen/DeviceAccelerator.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <malloc.h>
#include <memory>
#include <optional>
#include <set>
#include <vector>

std::string& tshim_error_slot() {
  static thread_local std::string message;
  return message;
}

namespace {

std::optional<at::Tensor> optional_tensor(ctensor t) {
  if (t == nullptr) return std::nullopt;
  return *t;
}

std::vector<at::Tensor> tensor_list(const ctensor* ts, size_t n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; i++) out.push_back(*ts[i]);
  return out;
}

// ---- custom autograd Function with Rust callbacks ---------------------------------------

// Rust's side of a custom Function: the callbacks and their boxed closures (`user`). Lives as long
// as the autograd node (held in its saved_data); the destructor lets Rust free the closures.
typedef int (*fwd_fn)(void* user, const ctensor* inputs, size_t n, void* out_list, void* err);
typedef int (*bwd_fn)(void* user, const ctensor* grads, size_t n_grads, const ctensor* saved,
                      size_t n_saved, void* out_list, void* err);
typedef void (*drop_fn)(void* user);

struct RustCallbacks : torch::CustomClassHolder {
  RustCallbacks(void* user, fwd_fn fwd, bwd_fn bwd, drop_fn drop)
      : user(user), fwd(fwd), bwd(bwd), drop(drop) {}
  ~RustCallbacks() override { drop(user); }
  void* user;
  fwd_fn fwd;
  bwd_fn bwd;
  drop_fn drop;
};

std::vector<ctensor> pointers(const std::vector<at::Tensor>& ts) {
  std::vector<ctensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(&t);
  return out;
}

// forward(inputs) -> [output, saved...]; backward(grads, saved) -> one gradient per input.
struct RustFunction : torch::autograd::Function<RustFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::TensorList inputs,
                            const c10::intrusive_ptr<RustCallbacks>& cb) {
    std::vector<at::Tensor> in(inputs.begin(), inputs.end()), out;
    std::string err;
    auto ptrs = pointers(in);
    if (cb->fwd(cb->user, ptrs.data(), ptrs.size(), &out, &err) != 0)
      throw std::runtime_error("custom_function forward: " + err);
    TORCH_CHECK(!out.empty() && out[0].defined(), "custom_function forward returned no output");
    ctx->save_for_backward(std::vector<at::Tensor>(out.begin() + 1, out.end()));
    ctx->saved_data["callbacks"] = c10::IValue::make_capsule(cb);
    ctx->saved_data["n_inputs"] = static_cast<int64_t>(inputs.size());
    return out[0];
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto cb = c10::static_intrusive_pointer_cast<RustCallbacks>(
        ctx->saved_data["callbacks"].toCapsule());
    auto n_inputs = static_cast<size_t>(ctx->saved_data["n_inputs"].toInt());
    auto saved = ctx->get_saved_variables();
    auto grad_ptrs = pointers(grads), saved_ptrs = pointers(saved);
    std::vector<at::Tensor> out;
    std::string err;
    if (cb->bwd(cb->user, grad_ptrs.data(), grad_ptrs.size(), saved_ptrs.data(),
                saved_ptrs.size(), &out, &err) != 0)
      throw std::runtime_error("custom_function backward: " + err);
    TORCH_CHECK(out.size() == n_inputs, "custom_function backward returned ", out.size(),
                " gradients for ", n_inputs, " inputs");
    out.emplace_back();  // the callbacks argument gets no gradient
    return out;
  }
};

using StoreHandle = c10::intrusive_ptr<c10d::Store>;

StoreHandle& store_of(void* s) { return *static_cast<StoreHandle*>(s); }

std::vector<std::string> key_list(const char* const* keys, size_t n) {
  return std::vector<std::string>(keys, keys + n);
}

// A PrefixStore's innermost TCPStore (for its port), or null.
c10d::TCPStore* tcp_of(const StoreHandle& s) {
  if (auto p = dynamic_cast<c10d::PrefixStore*>(s.get()))
    return dynamic_cast<c10d::TCPStore*>(p->getUnderlyingNonPrefixStore().get());
  return dynamic_cast<c10d::TCPStore*>(s.get());
}

// A user range: the name must outlive the RecordFunction that points at it.
struct Range {
  std::string name;
  at::RecordFunction record{at::RecordScope::USER_SCOPE};
};

}  // namespace

extern "C" {

// The calling thread's last error message (valid until its next failing call).
const char* tshim_last_error() { return tshim_error_slot().c_str(); }

// aten::_flash_attention_forward (autograd: FlashAttentionBackward0). Dense q/k/v are
// (B, T, H, D); varlen ones are (total, H, D) with int32 cu_q/cu_k of B+1 offsets (else null).
// scale <= 0 means 1/sqrt(D); a negative window side means unbounded. CUDA only.
int tshim_flash_attention(ctensor q, ctensor k, ctensor v, ctensor cu_q, ctensor cu_k,
                          int64_t max_q, int64_t max_k, int causal, double scale,
                          int64_t window_left, int64_t window_right, tensor* out) {
  SHIM_TRY({
    TORCH_CHECK(q->is_cuda(), "flash_attention runs on CUDA only (got a ", q->device(),
                " tensor); use SDPA with a mask on the CPU");
    auto some = [](int64_t w) { return w >= 0 ? std::optional<int64_t>(w) : std::nullopt; };
    auto res = at::_flash_attention_forward(
        *q, *k, *v, optional_tensor(cu_q), optional_tensor(cu_k), max_q, max_k,
        /*dropout_p=*/0.0, causal != 0, /*return_debug_mask=*/false,
        scale > 0 ? std::optional<double>(scale) : std::nullopt, some(window_left),
        some(window_right));
    *out = new at::Tensor(std::get<0>(res));
  })
}

// One torch.optim.AdamW(fused=True) step over n parameters: increments every state_steps entry
// (float32 scalars on the params' device), then aten::_fused_adamw_ (decoupled weight decay,
// bias corrections). Every list has n entries.
int tshim_fused_adamw(const ctensor* params, const ctensor* grads, const ctensor* exp_avgs,
                      const ctensor* exp_avg_sqs, const ctensor* steps, size_t n, double lr,
                      double beta1, double beta2, double weight_decay, double eps) {
  SHIM_TRY({
    // The CPU kernel trusts the shapes; a short grad or moment would be read out of bounds.
    for (size_t i = 0; i < n; i++) {
      auto shape = params[i]->sizes();
      TORCH_CHECK(grads[i]->sizes() == shape && exp_avgs[i]->sizes() == shape &&
                      exp_avg_sqs[i]->sizes() == shape && steps[i]->numel() == 1,
                  "tensor ", i, ": param ", shape, ", grad ", grads[i]->sizes(), ", exp_avg ",
                  exp_avgs[i]->sizes(), ", exp_avg_sq ", exp_avg_sqs[i]->sizes(), ", step ",
                  steps[i]->sizes());
    }
    at::NoGradGuard no_grad;
    auto step_list = tensor_list(steps, n);
    at::_foreach_add_(step_list, 1);
    at::_fused_adamw_(tensor_list(params, n), tensor_list(grads, n), tensor_list(exp_avgs, n),
                      tensor_list(exp_avg_sqs, n), /*max_exp_avg_sqs=*/{}, step_list, lr, beta1,
                      beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
  })
}

// Flush-to-zero/denormals-are-zero (MXCSR) for the calling thread and the threads it starts
// later; returns false when the CPU does not support it.
int tshim_set_flush_denormal(int on) { return at::globalContext().setFlushDenormal(on != 0); }

// Keeps freed CPU memory in the process's heap instead of handing it back to the kernel (and
// taking page faults to get it again on the next step): no block gets its own mapping (glibc
// falls back to one only when the heap cannot grow), and up to `retain` bytes of free heap are
// kept. Returns 0 where the C library is not glibc or refuses a value.
int tshim_keep_freed_memory(int retain) {
#ifdef __GLIBC__
  return mallopt(M_MMAP_MAX, 0) && mallopt(M_TRIM_THRESHOLD, retain) &&
         mallopt(M_TOP_PAD, 64 << 20);
#else
  (void)retain;
  return 0;
#endif
}

// The caching allocator's aggregate byte counts of the accelerator device:
// out = {allocated, peak allocated, reserved, peak reserved}.
int tshim_memory_stats(int64_t device, int64_t* out) {
  SHIM_TRY({
    auto stats = at::accelerator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = stats.allocated_bytes[all].current;
    out[1] = stats.allocated_bytes[all].peak;
    out[2] = stats.reserved_bytes[all].current;
    out[3] = stats.reserved_bytes[all].peak;
  })
}

// Restarts the peak counters of tshim_memory_stats.
int tshim_reset_peak(int64_t device) {
  SHIM_TRY(at::accelerator::resetPeakStats(static_cast<c10::DeviceIndex>(device)))
}

// Starts the Kineto profiler on this thread (CPU ops, plus CUDA kernels when cuda != 0).
int tshim_profiler_start(int cuda, int record_shapes) {
  SHIM_TRY({
    using namespace torch::profiler::impl;
    ProfilerConfig config(ProfilerState::KINETO, record_shapes != 0);
    std::set<ActivityType> activities{ActivityType::CPU};
    if (cuda) activities.insert(ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
  })
}

// Stops the profiler and writes its Chrome trace JSON (ui.perfetto.dev opens it) to path.
int tshim_profiler_stop(const char* path) {
  SHIM_TRY(torch::autograd::profiler::disableProfiler()->save(path))
}

// Opens a named user range (a `user_annotation` slice in the trace); close it with
// tshim_range_pop on the same thread. Costs almost nothing while no profiler runs. Null (no
// range) if the profiler's callbacks failed.
void* tshim_range_push(const char* name) {
  try {
    std::unique_ptr<Range> range(new Range{name});
    if (range->record.isActive())
      range->record.before(std::string_view(range->name), c10::ArrayRef<const c10::IValue>{});
    return range.release();
  } catch (...) {
    return nullptr;
  }
}

void tshim_range_pop(void* range) { delete static_cast<Range*>(range); }

// Moves a Rust-owned tensor into a C++ output list (a callback's out_list); frees the handle.
void tshim_list_push(void* list, tensor t) {
  static_cast<std::vector<at::Tensor>*>(list)->push_back(std::move(*t));
  delete t;
}

// Stores a callback's error message (err of the callbacks).
void tshim_message_set(void* err, const char* msg, size_t len) {
  static_cast<std::string*>(err)->assign(msg, len);
}

// Applies a custom autograd Function whose forward/backward are the Rust callbacks. Ownership of
// `user` passes to C++ at once: `drop(user)` runs when the last autograd node using it dies.
int tshim_custom_function(const ctensor* inputs, size_t n, void* user, fwd_fn fwd, bwd_fn bwd,
                          drop_fn drop, tensor* out) {
  SHIM_TRY({
    auto cb = c10::make_intrusive<RustCallbacks>(user, fwd, bwd, drop);
    auto in = tensor_list(inputs, n);
    *out = new at::Tensor(RustFunction::apply(at::TensorList(in), cb));
  })
}

// ---- c10d stores ------------------------------------------------------------------------

// A c10d::TCPStore: the server (listening on port; 0 picks a free one) or a client of host:port.
// multi_tenant lets several stores in one process share the server, as torchrun's do.
int tshim_store_tcp(const char* host, int port, int64_t world, int is_server, int multi_tenant,
                    int64_t timeout_ms, void** out) {
  SHIM_TRY({
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(port);
    opts.isServer = is_server != 0;
    opts.numWorkers = static_cast<size_t>(world);
    opts.waitWorkers = false;
    opts.multiTenant = multi_tenant != 0;
    opts.timeout = std::chrono::milliseconds(timeout_ms);
    *out = new StoreHandle(c10::make_intrusive<c10d::TCPStore>(host, opts));
  })
}

// A view of store whose keys all start with prefix (c10d::PrefixStore).
int tshim_store_prefix(void* store, const char* prefix, void** out) {
  SHIM_TRY(*out = new StoreHandle(c10::make_intrusive<c10d::PrefixStore>(prefix, store_of(store))))
}

// Drops this handle (a server stops with its last handle in the process).
void tshim_store_free(void* store) { delete static_cast<StoreHandle*>(store); }

// The port of the TCPStore under store.
int tshim_store_port(void* store, int* port) {
  SHIM_TRY({
    auto tcp = tcp_of(store_of(store));
    TORCH_CHECK(tcp != nullptr, "store is not a TCPStore");
    *port = tcp->getPort();
  })
}

// Sets key to the bytes data[0..len).
int tshim_store_set(void* store, const char* key, const uint8_t* data, size_t len) {
  SHIM_TRY(store_of(store)->set(key, std::vector<uint8_t>(data, data + len)))
}

// Blocks until key exists (or the store's timeout), then hands its bytes to sink(ctx, ...).
int tshim_store_get(void* store, const char* key, void (*sink)(void*, const uint8_t*, size_t),
                    void* ctx) {
  SHIM_TRY({
    auto value = store_of(store)->get(key);
    sink(ctx, value.data(), value.size());
  })
}

// Atomically adds delta to the integer at key (created as 0) and returns the sum.
int tshim_store_add(void* store, const char* key, int64_t delta, int64_t* out) {
  SHIM_TRY(*out = store_of(store)->add(key, delta))
}

// Blocks until every key exists; timeout_ms <= 0 means the store's own timeout.
int tshim_store_wait(void* store, const char* const* keys, size_t n, int64_t timeout_ms) {
  SHIM_TRY({
    if (timeout_ms > 0)
      store_of(store)->wait(key_list(keys, n), std::chrono::milliseconds(timeout_ms));
    else
      store_of(store)->wait(key_list(keys, n));
  })
}

// Whether every key exists, without blocking.
int tshim_store_check(void* store, const char* const* keys, size_t n, int* out) {
  SHIM_TRY(*out = store_of(store)->check(key_list(keys, n)) ? 1 : 0)
}

}  // extern "C"
