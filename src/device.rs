//! Where the trainer runs, and the CPU settings that make small models fast.
use tch::{Device, Kind};

/// The device and the kind matmuls run in: bf16 on CUDA (fp32 master weights), fp32 on CPU.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub device: Device,
    pub compute: Kind,
}

impl Target {
    /// `cuda:<local_rank>` when CUDA is usable, else the CPU.
    pub fn pick(prefer_cpu: bool, local_rank: usize) -> Target {
        if !prefer_cpu && tch::Cuda::is_available() {
            Target { device: Device::Cuda(local_rank), compute: Kind::BFloat16 }
        } else {
            flush_denormals();
            keep_freed_memory();
            Target { device: Device::Cpu, compute: Kind::Float }
        }
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
