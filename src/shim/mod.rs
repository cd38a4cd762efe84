//! What tch 0.24 lacks, through a small C++ shim over libtorch (src/shim/*.cpp, built by build.rs).
//!
//! - here: flash attention (window, varlen), fused AdamW, flush-denormal, allocator statistics;
//! - [`autograd`]: custom autograd Functions with Rust forward/backward;
//! - [`profiler`]: Kineto Chrome traces and named ranges;
//! - [`store`]: c10d TCPStore, the rendezvous torchrun uses;
//! - `cuda` (`--features cuda`): streams, CUDA graphs, ProcessGroupNCCL.
//!
//! Tensors cross as tch's `*mut C_tensor` (= `torch::Tensor*`): borrowed going in, owned coming
//! back. C++ exceptions come back as `anyhow` errors carrying libtorch's message.
pub mod autograd;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod profiler;
pub mod store;

pub use autograd::custom_function;
#[cfg(feature = "cuda")]
pub use cuda::{CudaGraph, CudaStream, ProcessGroupNccl, ReduceOp, Work};
pub use profiler::{profiler_start, profiler_stop, Range};
pub use store::TcpStore;

use anyhow::{bail, Result};
use std::ffi::{c_char, c_int, CStr};
use tch::{Device, Tensor};
use torch_sys::C_tensor;

/// A borrowed tensor handle as the shim takes it.
type CTensor = *const C_tensor;

extern "C" {
    fn tshim_last_error() -> *const c_char;
    fn tshim_flash_attention(
        q: CTensor,
        k: CTensor,
        v: CTensor,
        cu_q: CTensor,
        cu_k: CTensor,
        max_q: i64,
        max_k: i64,
        causal: c_int,
        scale: f64,
        window_left: i64,
        window_right: i64,
        out: *mut *mut C_tensor,
    ) -> c_int;
    fn tshim_fused_adamw(
        params: *const CTensor,
        grads: *const CTensor,
        exp_avgs: *const CTensor,
        exp_avg_sqs: *const CTensor,
        steps: *const CTensor,
        n: usize,
        lr: f64,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
    ) -> c_int;
    fn tshim_set_flush_denormal(on: c_int) -> c_int;
    fn tshim_keep_freed_memory(retain: c_int) -> c_int;
    fn tshim_memory_stats(device: i64, out: *mut i64) -> c_int;
    fn tshim_reset_peak(device: i64) -> c_int;
}

/// Turns a shim return code into a Result, naming the failed call.
fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: the shim keeps a NUL-terminated thread-local message alive until its next failure.
    let msg = unsafe { CStr::from_ptr(tshim_last_error()) }.to_string_lossy();
    bail!("{what}: {msg}")
}

/// Takes ownership of a tensor the shim allocated.
fn owned(ptr: *mut C_tensor, what: &str) -> Result<Tensor> {
    if ptr.is_null() {
        bail!("{what}: the shim returned no tensor");
    }
    // SAFETY: the shim hands back a fresh `new at::Tensor` that nothing else owns.
    Ok(unsafe { Tensor::from_ptr(ptr) })
}

fn ptrs(ts: &[Tensor]) -> Vec<CTensor> {
    ts.iter().map(|t| t.as_ptr()).collect()
}

/// Packed documents for [`flash_attention`]: q/k/v are (total_tokens, H, D) and document `i`
/// spans `cu_seqlens[i]..cu_seqlens[i + 1]` (int32, one more entry than documents).
#[derive(Debug, Clone, Copy)]
pub struct Varlen<'a> {
    pub cu_seqlens_q: &'a Tensor,
    pub cu_seqlens_k: &'a Tensor,
    /// The longest document in q / in k.
    pub max_q: i64,
    pub max_k: i64,
}

/// How [`flash_attention`] masks and scales.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlashOptions<'a> {
    pub causal: bool,
    /// Softmax scale; `None` means 1/sqrt(head_dim).
    pub scale: Option<f64>,
    /// A query sees keys at most this many positions before / after it; `None` is unbounded.
    pub window_left: Option<i64>,
    pub window_right: Option<i64>,
    /// `None`: dense (B, T, H, D) inputs.
    pub varlen: Option<Varlen<'a>>,
}

/// FlashAttention-2 forward (`aten::_flash_attention_forward`), with autograd: the result
/// carries `FlashAttentionBackward0`. Returns (B, T, H, D), or (total, H, D) with `varlen`.
/// CUDA only, fp16/bf16; on the CPU it returns an error (use SDPA with an explicit mask there).
pub fn flash_attention(q: &Tensor, k: &Tensor, v: &Tensor, opts: &FlashOptions) -> Result<Tensor> {
    let (cu_q, cu_k, max_q, max_k) = match opts.varlen {
        Some(vl) => (vl.cu_seqlens_q.as_ptr(), vl.cu_seqlens_k.as_ptr(), vl.max_q, vl.max_k),
        None => {
            let (tq, tk) = (q.size(), k.size());
            if tq.len() != 4 || tk.len() != 4 {
                bail!("flash_attention: dense q and k must be (B, T, H, D), got {tq:?} and {tk:?}");
            }
            (std::ptr::null(), std::ptr::null(), tq[1], tk[1])
        }
    };
    let mut out = std::ptr::null_mut();
    // SAFETY: every handle is borrowed for the call; `out` receives an owned tensor.
    let rc = unsafe {
        tshim_flash_attention(
            q.as_ptr(),
            k.as_ptr(),
            v.as_ptr(),
            cu_q,
            cu_k,
            max_q,
            max_k,
            opts.causal.into(),
            opts.scale.unwrap_or(0.0),
            opts.window_left.unwrap_or(-1),
            opts.window_right.unwrap_or(-1),
            &mut out,
        )
    };
    check(rc, "flash_attention")?;
    owned(out, "flash_attention")
}

/// AdamW's hyperparameters for one [`fused_adamw_`] step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub weight_decay: f64,
    pub eps: f64,
}

/// One `torch.optim.AdamW(fused=True)` step, in place (`aten::_fused_adamw_`): increments each
/// `state_steps[i]` (a float32 scalar tensor on the parameter's device, starting at 0), then
/// `p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g²;
/// p -= lr/(1-b1^t) * m / (sqrt(v/(1-b2^t)) + eps)`. All lists are parallel; CUDA and CPU.
pub fn fused_adamw_(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    state_steps: &[Tensor],
    cfg: AdamWConfig,
) -> Result<()> {
    let n = params.len();
    let lens = [grads.len(), exp_avgs.len(), exp_avg_sqs.len(), state_steps.len()];
    if lens.iter().any(|&l| l != n) {
        bail!("fused_adamw_: {n} params but grads/exp_avgs/exp_avg_sqs/state_steps have {lens:?}");
    }
    let (p, g, m, v, s) =
        (ptrs(params), ptrs(grads), ptrs(exp_avgs), ptrs(exp_avg_sqs), ptrs(state_steps));
    // SAFETY: five arrays of n borrowed handles, alive for the call.
    let rc = unsafe {
        tshim_fused_adamw(
            p.as_ptr(),
            g.as_ptr(),
            m.as_ptr(),
            v.as_ptr(),
            s.as_ptr(),
            n,
            cfg.lr,
            cfg.beta1,
            cfg.beta2,
            cfg.weight_decay,
            cfg.eps,
        )
    };
    check(rc, "fused_adamw_")
}

/// Flushes denormal floats to zero on the CPU (`torch.set_flush_denormal`). A small GPT's
/// gradients go denormal and sgemm then runs ~30x slower. Call it before torch starts its
/// thread pool. Returns false when the CPU cannot (no SSE3).
pub fn set_flush_denormal(on: bool) -> bool {
    // SAFETY: no pointers; the shim cannot throw here.
    unsafe { tshim_set_flush_denormal(on.into()) != 0 }
}

/// Keeps freed CPU memory in the heap, up to `retain` bytes free, instead of returning it to
/// the kernel (glibc's mallopt). Returns false where the C library is not glibc.
pub fn keep_freed_memory(retain: i32) -> bool {
    // SAFETY: no pointers; mallopt only sets allocator parameters.
    unsafe { tshim_keep_freed_memory(retain) != 0 }
}

/// The caching allocator's aggregate byte counts on one CUDA device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStats {
    pub allocated: i64,
    pub peak_allocated: i64,
    pub reserved: i64,
    pub peak_reserved: i64,
}

fn cuda_index(device: Device, what: &str) -> Result<i64> {
    match device {
        Device::Cuda(i) => Ok(i as i64),
        d => bail!("{what}: the caching allocator's statistics exist only for CUDA, not {d:?}"),
    }
}

/// `torch.cuda.memory_stats` essentials of `device`; an error for any non-CUDA device.
pub fn memory_stats(device: Device) -> Result<MemoryStats> {
    let index = cuda_index(device, "memory_stats")?;
    let mut out = [0i64; 4];
    // SAFETY: out has the 4 slots the shim writes.
    check(unsafe { tshim_memory_stats(index, out.as_mut_ptr()) }, "memory_stats")?;
    Ok(MemoryStats {
        allocated: out[0],
        peak_allocated: out[1],
        reserved: out[2],
        peak_reserved: out[3],
    })
}

/// Restarts the peaks of [`memory_stats`] (`torch.cuda.reset_peak_memory_stats`).
pub fn reset_peak(device: Device) -> Result<()> {
    let index = cuda_index(device, "reset_peak")?;
    // SAFETY: no pointers.
    check(unsafe { tshim_reset_peak(index) }, "reset_peak")
}
