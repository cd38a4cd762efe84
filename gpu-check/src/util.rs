//! What every check shares: the device and timing context, panic guarding and formatting.
use anyhow::{anyhow, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;
use tch::{Device, Kind, Tensor};
use trainer::shim;

/// Untimed runs before each measurement.
pub const WARMUP: usize = 3;

pub struct Ctx {
    pub index: usize,
    pub dev: Device,
    /// Rows of record #1's full-shape batch (--batch).
    pub batch: i64,
    /// Timed runs per measurement (--steps).
    pub steps: usize,
}

impl Ctx {
    pub fn new(index: usize, batch: i64, steps: usize) -> Ctx {
        Ctx { index, dev: Device::Cuda(index), batch, steps }
    }

    pub fn sync(&self) {
        tch::Cuda::synchronize(self.index as i64);
    }

    /// Mean ms of `f` over `steps` runs, after `WARMUP` untimed ones.
    pub fn time_ms(&self, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
        for _ in 0..WARMUP {
            f()?;
        }
        self.sync();
        let t0 = Instant::now();
        for _ in 0..self.steps {
            f()?;
        }
        self.sync();
        Ok(t0.elapsed().as_secs_f64() * 1e3 / self.steps as f64)
    }
}

/// Runs `f` with a panic turned into an error (tch's calls without `f_` panic on libtorch
/// errors, out of memory among them).
pub fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let text = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into());
        Err(anyhow!(text))
    })
}

/// 262144 -> "262,144".
pub fn commas(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// "loss a → b over n steps" for the losses a timed loop read back.
pub fn loss_span(losses: &[f64]) -> String {
    match (losses.first(), losses.last()) {
        (Some(a), Some(b)) => format!("loss {a:.3} → {b:.3} over {} steps", losses.len()),
        _ => String::new(),
    }
}

/// Peak allocated and reserved memory since the last `shim::reset_peak`.
pub fn peak_memory(ctx: &Ctx) -> Result<String> {
    let mem = shim::memory_stats(ctx.dev)?;
    Ok(format!(
        "{} MiB allocated, {} MiB reserved",
        mem.peak_allocated >> 20,
        mem.peak_reserved >> 20
    ))
}

pub fn max_abs(t: &Tensor) -> f64 {
    t.abs().max().to_kind(Kind::Double).double_value(&[])
}
