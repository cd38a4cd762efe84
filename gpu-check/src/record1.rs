//! Record #1 at full shape on one GPU: train.rs's step on random tokens, fwd+bwd alone,
//! throughput, MFU and peak memory.
use crate::model::{batch, build, zero_grads, Model, RECORD_1};
use crate::table::Row;
use crate::util::{loss_span, peak_memory, Ctx, WARMUP};
use anyhow::Result;
use tch::Kind;
use trainer::dist::{self, RankEnv};
use trainer::optim::optimizer::Optimizer;
use trainer::optim::schedule::Schedule;
use trainer::recipe::Scale;
use trainer::shim;

/// H100/H200 SXM dense bf16 tensor-core peak (NVIDIA's spec sheets, without sparsity).
const PEAK_FLOPS: f64 = 989e12;

pub fn check(ctx: &Ctx) -> Result<Vec<Row>> {
    let Model { _vs, model, params, recipe: r } = build(ctx, RECORD_1, Scale::Full)?;
    let n_params: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    let (x, y) = batch(ctx, &r, [ctx.batch, r.seq_len as i64]);
    let mut coll = dist::init(&RankEnv::single(), ctx.dev)?;
    let mut opt = Optimizer::new(params, &r, Kind::BFloat16)?;
    // The first step past the warmup: the full lr (cosine at 0).
    let plan = Schedule::new(&r).at(r.warmup_steps);
    let mut losses = Vec::new();
    shim::reset_peak(ctx.dev)?;
    // train.rs's step: bf16 matmuls on fp32 masters, loss read back, then Optimizer::step
    // (clip, our AdamW, zero grads).
    let step_ms = ctx.time_ms(|| {
        let loss = model.loss(&x, &y, &Default::default())?;
        loss.f_backward()?;
        losses.push(loss.double_value(&[]));
        opt.step(coll.as_mut(), &plan)?;
        Ok(())
    })?;
    let mem = peak_memory(ctx)?;
    let fwd_bwd_ms = ctx.time_ms(|| {
        model.loss(&x, &y, &Default::default())?.f_backward()?;
        zero_grads(opt.params());
        Ok(())
    })?;

    let tokens = (ctx.batch * r.seq_len as i64) as f64;
    let wpe = (r.max_seq_len * r.n_embd) as i64;
    let (l, c, t) = (r.n_layer as f64, r.n_embd as f64, r.seq_len as f64);
    // nanoGPT's estimate_mfu: 6N per token (N without the position embedding) plus
    // 12·L·C·T for the attention scores and weighted sums.
    let flops_per_token = 6.0 * (n_params - wpe) as f64 + 12.0 * l * c * t;
    let tokens_per_s = tokens / (step_ms / 1e3);
    let mfu = flops_per_token * tokens_per_s / PEAK_FLOPS;
    let shape = format!("B{}×T{}", ctx.batch, r.seq_len);
    let first_last = loss_span(&losses);
    Ok(vec![
        Row::new(
            format!("record #1 step (fwd+bwd+clip+AdamW), {shape}"),
            format!("{step_ms:.1} ms/step"),
            format!(
                "mean of {} steps after {WARMUP} warmup; train.rs's step on random tokens; {first_last}",
                ctx.steps
            ),
        ),
        Row::new(
            format!("record #1 fwd+bwd only, {shape}"),
            format!("{fwd_bwd_ms:.1} ms"),
            "H200 probe: 49.3 ms at B16 (tch autocast), Python eager 50.1 ms",
        ),
        Row::new(
            "record #1 throughput",
            format!("{:.0} tokens/s", tokens_per_s),
            format!("{tokens} tokens per step; 8 GPUs ≈ 8× this for the 524,288-token batch"),
        ),
        Row::new(
            "record #1 MFU",
            format!("{:.1} %", mfu * 100.0),
            format!(
                "{:.0} MFLOP/token = 6N + 12·L·C·T (N = {:.1}M without wpe) over 989 TFLOP/s, \
                 the H100/H200 SXM bf16 dense peak",
                flops_per_token / 1e6,
                (n_params - wpe) as f64 / 1e6
            ),
        ),
        Row::new(
            "record #1 peak memory",
            mem,
            "caching allocator peaks over the full steps (shim memory_stats); probe: 16.5 GB at B16",
        ),
    ])
}
