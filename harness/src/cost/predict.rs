//! Work into predicted time: each kind of work over its peak times its achieved fraction,
//! summed (no overlap is assumed; what overlaps shows up in the fitted fractions).
use super::achieved::Fractions;
use super::count::Work;
use super::hardware::Hardware;
use serde::Serialize;

/// Predicted milliseconds of one step, in the categories of `records profile`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StepTime {
    pub matmul: f64,
    pub attention: f64,
    pub other_ops: f64,
    pub orthogonalisation: f64,
    pub optimizer_updates: f64,
    pub communication: f64,
    pub host: f64,
}

impl StepTime {
    pub fn total(&self) -> f64 {
        self.rows().iter().map(|(_, ms)| ms).sum()
    }

    /// The fields in the order of [`StepTime::rows`].
    pub fn fields_mut(&mut self) -> [&mut f64; 7] {
        let s = self;
        [
            &mut s.attention,
            &mut s.matmul,
            &mut s.other_ops,
            &mut s.orthogonalisation,
            &mut s.optimizer_updates,
            &mut s.communication,
            &mut s.host,
        ]
    }

    /// (category as `records profile` names it, ms).
    pub fn rows(&self) -> [(&'static str, f64); 7] {
        [
            ("attention (masks, kernel, its backward)", self.attention),
            ("matmul (forward, backward)", self.matmul),
            ("elementwise, norms, copies, loss", self.other_ops),
            ("optimizer: orthogonalisation", self.orthogonalisation),
            ("optimizer: Adam, momentum, updates", self.optimizer_updates),
            ("communication", self.communication),
            ("host overhead/idle", self.host),
        ]
    }
}

pub fn step_ms(w: &Work, hw: &Hardware, f: &Fractions) -> StepTime {
    let flops = |x: f64, tflops: f64, frac: f64| x / (tflops * 1e12 * frac) * 1e3;
    let bytes = |x: f64, gb_s: f64, frac: f64| x / (gb_s * 1e9 * frac) * 1e3;
    StepTime {
        matmul: flops(w.matmul_bf16_flops, hw.bf16_tflops, f.matmul)
            + flops(w.matmul_fp8_flops, hw.fp8_tflops, f.fp8),
        attention: flops(w.attention_flops, hw.bf16_tflops, f.attention),
        other_ops: bytes(w.other_bytes, hw.memory_tb_s * 1e3, f.memory),
        orthogonalisation: flops(w.orthogonalisation_flops, hw.bf16_tflops, f.matmul),
        optimizer_updates: bytes(w.optimizer_bytes, hw.memory_tb_s * 1e3, f.memory),
        communication: bytes(w.comm_bytes, hw.link_gb_s, f.comm),
        host: f.overhead_ms,
    }
}
