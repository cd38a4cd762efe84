//! `gpu-check`: one markdown table of what a CUDA build does on this GPU. Flash attention against
//! an SDPA reference (dense, window, varlen, backward), the FP8 head against bf16, Muon's
//! Newton–Schulz, our AdamW against the fused one, the bf16 paths of #32-#61 (bf16_paths.rs),
//! record #84's optimizer through a one-rank NCCL group, record #1 at full shape on one GPU
//! (ms/step, tokens/s, MFU, peak memory), the modern records at full shape on one GPU (one
//! rank's training step at each stage, the 262,144-token eval forward), and last one training
//! step eager against CUDA-graph replay. Each check lives in its own module; every check catches
//! its own errors, so one failure prints `error: ...` in its row and the rest still run.
//! scripts/gpu-check.sh runs it on a GPU machine:
//!
//!   gpu-check --out /tmp/gpu-check.md
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[cfg(feature = "cuda")]
mod adamw;
#[cfg(feature = "cuda")]
mod attention;
#[cfg(feature = "cuda")]
mod bf16_paths;
#[cfg(feature = "cuda")]
mod fp8;
#[cfg(feature = "cuda")]
mod graphs;
#[cfg(feature = "cuda")]
mod model;
#[cfg(feature = "cuda")]
mod nccl;
#[cfg(feature = "cuda")]
mod newton_schulz;
#[cfg(feature = "cuda")]
mod packed;
#[cfg(feature = "cuda")]
mod record1;
#[cfg(feature = "cuda")]
mod record_step;
#[cfg(any(feature = "cuda", test))]
mod table;
#[cfg(feature = "cuda")]
mod util;

#[derive(Parser)]
#[command(
    name = "gpu-check",
    about = "Check flash attention, records #1 and #29 at full shape, fused AdamW, CUDA graphs, \
             the FP8 head and Newton–Schulz on one GPU",
    args_override_self = true
)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct Args {
    /// Also write the table (markdown) to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// CUDA device index.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Rows of 1,024 tokens per step for record #1 at full shape.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(i64).range(1..=128))]
    batch: i64,
    /// Timed steps per measurement, after the warmup steps.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    steps: u32,
    /// A check whose estimate would end past this many seconds is skipped (the table stays
    /// complete).
    #[arg(long, default_value_t = 150)]
    budget_s: u64,
}

#[cfg(not(feature = "cuda"))]
fn main() -> ExitCode {
    Args::parse();
    eprintln!("gpu-check needs a CUDA build (--features cuda): cargo build --release -p gpu-check --features cuda");
    ExitCode::from(2)
}

#[cfg(feature = "cuda")]
fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gpu-check: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs the checks in order, rewriting the table after each; returns whether every row passed.
#[cfg(feature = "cuda")]
fn run(args: &Args) -> anyhow::Result<bool> {
    use std::time::Instant;
    use table::{Row, Status};
    use util::Ctx;

    if !tch::Cuda::is_available() {
        anyhow::bail!(
            "no CUDA device visible (tch::Cuda::is_available() is false; libtorch_cuda loaded: {}); \
             run it on a GPU machine through scripts/gpu-check.sh",
            tch::utils::has_cudart()
        );
    }
    let count = tch::Cuda::device_count();
    if args.device as i64 >= count {
        anyhow::bail!("--device {} but only {count} CUDA devices", args.device);
    }
    trainer::shim::cuda::set_device(args.device)?;
    let ctx = Ctx::new(args.device, args.batch, args.steps as usize);
    let start = Instant::now();
    let mut rows = vec![Row::new(
        "device",
        format!("cuda:{} of {count}", args.device),
        format!("libtorch 2.11.0 (tch 0.24); cuDNN {}", tch::Cuda::cudnn_is_available()),
    )];
    // Cheap checks of one thing each first, then the full-shape records, the CUDA graph last:
    // a capture that goes wrong can leave the device unusable for what follows. The estimates
    // (seconds on one H200, the model's build included) decide what fits in the budget.
    type Check = (&'static str, u64, fn(&Ctx) -> anyhow::Result<Vec<Row>>);
    let checks: [Check; 32] = [
        ("flash fwd: dense causal", 2, attention::dense),
        ("flash fwd: causal window 64", 1, attention::window),
        ("flash fwd: varlen documents", 1, attention::varlen),
        ("flash fwd: varlen documents + window 64", 1, attention::varlen_window),
        ("flash bwd: dense causal", 1, attention::backward_dense),
        ("flash bwd: varlen documents + window 64", 1, attention::backward_varlen),
        ("FP8 head vs bf16", 3, fp8::check),
        ("Muon Newton–Schulz (bf16)", 2, newton_schulz::check),
        ("AdamW over record #1's params", 3, adamw::check),
        ("Adam's bf16 moments (#32-#55)", 2, bf16_paths::adam),
        ("NorMuon on a bf16 gate (#38-#55)", 2, bf16_paths::gate),
        ("Polar Express, split product (#48)", 3, bf16_paths::split_product),
        ("eval logits: bf16 matmul, fp32 softcap", 2, bf16_paths::eval_logits),
        ("NCCL, world 1: record #84's first two optimizer steps", 12, nccl::check),
        ("record #84, 1 GPU, one rank's batch", 15, record_step::step_84),
        ("record #1 full shape", 8, record1::check),
        ("record #29, 1 GPU, one rank's batch", 12, record_step::step_29),
        ("record #62, 1 GPU, one rank's batch", 15, record_step::step_62),
        ("record #53, 1 GPU, one rank's batch", 15, record_step::step_53),
        ("record #84 eval forward, 262,144 tokens", 6, record_step::eval_84),
        ("record #29 eval forward, 262,144 tokens", 6, record_step::eval_29),
        ("record #38, 1 GPU, one rank's batch", 12, record_step::step_38),
        ("record #46, 1 GPU, one rank's batch", 15, record_step::step_46),
        ("record #54, 1 GPU, one rank's batch", 15, record_step::step_54),
        ("record #63, 1 GPU, one rank's batch", 15, record_step::step_63),
        ("record #38 eval forward, 262,144 tokens", 6, record_step::eval_38),
        ("record #46 eval forward, 262,144 tokens", 6, record_step::eval_46),
        ("record #53 eval forward, 262,144 tokens", 6, record_step::eval_53),
        ("record #54 eval forward, 262,144 tokens", 6, record_step::eval_54),
        ("record #62 eval forward, 262,144 tokens", 6, record_step::eval_62),
        ("record #63 eval forward, 262,144 tokens", 6, record_step::eval_63),
        ("CUDA graph: one lab-size step", 5, graphs::check),
    ];
    let (n, total): (usize, u64) = (checks.len(), checks.iter().map(|c| c.1).sum());
    eprintln!("gpu-check: {n} checks, about {total} s in all; budget {} s", args.budget_s);
    for (i, (name, estimate, check)) in checks.into_iter().enumerate() {
        let elapsed = start.elapsed().as_secs();
        let new = if elapsed + estimate > args.budget_s {
            let why = format!(
                "about {estimate} s, and {elapsed} s of the {} s budget (--budget-s) are spent",
                args.budget_s
            );
            vec![Row::status(name, Status::Skipped, why)]
        } else {
            eprintln!("gpu-check: [{}/{n}] {name}: about {estimate} s (at {elapsed} s)", i + 1);
            util::guarded(|| check(&ctx))
                .unwrap_or_else(|e| vec![Row::status(name, Status::Error(format!("{e:#}")), "")])
        };
        for r in &new {
            eprintln!("gpu-check: {} | {}", r.check, r.result_cell());
        }
        rows.extend(new);
        if let Some(out) = &args.out {
            corpus::fs::write_atomic(out, table::render(&rows).as_bytes())?;
        }
    }
    rows.push(Row::new("total time", format!("{:.1} s", start.elapsed().as_secs_f64()), ""));
    let text = table::render(&rows);
    print!("{text}");
    if let Some(out) = &args.out {
        corpus::fs::write_atomic(out, text.as_bytes())?;
    }
    Ok(rows.iter().all(|r| r.status.passed()))
}
