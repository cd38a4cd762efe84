//! Where the trainer runs, and the CPU settings that make small models fast.
use tch::{Device, Kind, Tensor};

/// The device and the kind matmuls run in: bf16 on CUDA (fp32 master weights), fp32 on CPU.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub device: Device,
    pub compute: Kind,
}

impl Target {
    /// The CPU (`--cpu`), else `cuda:<index>` for this rank, made its current device. A run not
    /// told `--cpu` that finds no usable CUDA stops here with the reason: never a silent
    /// fallback to the CPU.
    pub fn pick(cpu: bool, local_rank: usize) -> anyhow::Result<Target> {
        if cpu {
            return Ok(Target::cpu());
        }
        let index = cuda_device(local_rank)?;
        Ok(Target { device: Device::Cuda(index), compute: Kind::BFloat16 })
    }

    /// fp32 on the CPU, with the CPU settings below.
    pub fn cpu() -> Target {
        flush_denormals();
        keep_freed_memory();
        Target { device: Device::Cpu, compute: Kind::Float }
    }

    pub fn describe(&self) -> String {
        match self.device {
            Device::Cpu => format!("cpu ({} threads)", tch::get_num_threads()),
            Device::Cuda(i) => format!("cuda:{i}"),
            d => format!("{d:?}"),
        }
    }

    /// Peak (allocated, reserved) MiB of the caching allocator on CUDA; `None` on CPU.
    pub fn peak_memory_mib(&self) -> Option<(i64, i64)> {
        let stats = crate::shim::memory_stats(self.device).ok()?;
        Some((stats.peak_allocated >> 20, stats.peak_reserved >> 20))
    }

    /// Waits for queued GPU work, so wall-clock readings cover it.
    pub fn sync(&self) {
        if let Device::Cuda(i) = self.device {
            tch::Cuda::synchronize(i as i64);
        }
    }
}

/// A host tensor (a loader's tokens, document boundaries) on `device`. On the CPU it is
/// `to_device` as before: the same tensor, nothing pinned, no CUDA call. On CUDA a blocking copy
/// from pageable memory synchronizes the stream, so the host would wait for the previous
/// micro-batch's backward before queueing the next; from pinned memory the copy is queued
/// without waiting (`non_blocking`).
///
/// The pinned copy is dropped while the transfer may still run, which is safe: it comes from
/// libtorch's caching host allocator (`_pin_memory`), the non-blocking copy records an event on
/// the stream for that block (`copy_kernel_cuda`), and a freed block is not handed out again
/// until its events are done (ATen/cuda/CachingHostAllocator.h and ATen/core/
/// CachingHostAllocator.h in libtorch 2.11). `_pin_memory`, not `pin_memory`: the latter warns
/// on every call that its device argument is deprecated, and tch always passes one.
pub fn upload(host: &Tensor, device: Device) -> Tensor {
    if !device.is_cuda() {
        return host.to_device(device);
    }
    // Pinning keeps the strides; a dense copy first makes the transfer one memcpy.
    host.contiguous().internal_pin_memory(device).to_device_(device, host.kind(), true, false)
}

/// This rank's CUDA device: `LOCAL_RANK` among the visible devices, or the only one when the
/// launcher binds each rank to its own (Slurm's per-task `CUDA_VISIBLE_DEVICES`). It becomes the
/// thread's current device, so streams, graphs and NCCL use it rather than GPU 0.
#[cfg(feature = "cuda")]
fn cuda_device(local_rank: usize) -> anyhow::Result<usize> {
    use anyhow::Context;
    let count = crate::shim::cuda::device_count().with_context(|| {
        format!(
            "no usable CUDA device (libtorch_cuda loaded: {}, devices: {}); pass --cpu to train on \
             the CPU",
            tch::utils::has_cudart(),
            tch::Cuda::device_count()
        )
    })?;
    let index = match count {
        1 => 0,
        n if local_rank < n => local_rank,
        n => anyhow::bail!(
            "LOCAL_RANK {local_rank} but this process sees {n} CUDA devices (0-{}); bind one \
             device per rank or run at most {n} ranks per node",
            n - 1
        ),
    };
    crate::shim::cuda::set_device(index)?;
    Ok(index)
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_local_rank: usize) -> anyhow::Result<usize> {
    anyhow::bail!(
        "this train binary was built without CUDA, so it cannot use a GPU; pass --cpu to train \
         on the CPU, or build with `cargo build --release -p trainer --features cuda`"
    )
}

/// A small GPT's gradients go denormal on CPU and sgemm then runs ~30x slower (8.9 s vs 0.31 s
/// per step measured at 4 layers x d256). Worker threads created after this call inherit the
/// setting, so it must run before libtorch starts its thread pool.
fn flush_denormals() {
    crate::shim::set_flush_denormal(true);
}

/// Each step frees its activations (MiBs each; a 16,384-token validation's are 64 MiB) and
/// allocates them again; glibc maps large blocks on their own, unmaps them when freed and takes a
/// page fault per 4 KiB to get them again. Keeping them in the heap, up to 1 GiB of it free,
/// took #29's 30 lab steps and 2 validations from 1.22 M page faults to 0.20 M, 4.4 s of system
/// time to 0.8 s and the peak RSS from 915 to 876 MB (AMD EPYC Zen 3, 2 cores). The numbers do
/// not change.
fn keep_freed_memory() {
    crate::shim::keep_freed_memory(1 << 30);
}
