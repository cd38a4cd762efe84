//! Record #29 at full shape on one GPU: one rank's training step at each window stage
//! (throughput, peak memory) and the 262,144-token eval forward.
use crate::model::{build, Model, RECORD_29};
use crate::packed::packed;
use crate::table::{Row, Status};
use crate::util::{commas, guarded, loss_span, peak_memory, Ctx, WARMUP};
use anyhow::{Context, Result};
use tch::Kind;
use trainer::dist::{self, RankEnv};
use trainer::model::Ctx as Forward;
use trainer::optim::optimizer::Optimizer;
use trainer::optim::schedule::Schedule;
use trainer::recipe::{Recipe, Scale, Windows};
use trainer::shim;

/// One window stage's measurement.
struct Stage {
    ws: usize,
    /// (long, short) in tokens.
    windows: (i64, i64),
    step: u64,
    ms: f64,
}

fn windows_of(r: &Recipe) -> Result<&Windows> {
    r.windows.as_ref().context("records/29.toml has no window schedule")
}

/// One rank's training step (8 ranks upstream) on one GPU at each window stage.
pub fn step(ctx: &Ctx) -> Result<Vec<Row>> {
    let Model { _vs, model, params, recipe: r } = build(ctx, RECORD_29, Scale::Full)?;
    let per_rank = r.batch_tokens / r.reference_ranks.max(1); // 49,152
    let seq = packed(ctx, &r, per_rank)?;
    let mut coll = dist::init(&RankEnv::single(), ctx.dev)?;
    let mut opt = Optimizer::new(params, &r, Kind::BFloat16)?;
    let schedule = Schedule::new(&r);
    let w = windows_of(&r)?;
    // train.rs's backward: the gradient of upstream's reduction="sum" over a rank's tokens.
    let grad_mult = if r.loss_sum { per_rank as f64 } else { 1.0 };
    let stages = w.schedule.len() as u64;
    let (mut losses, mut timed) = (Vec::new(), Vec::new());
    shim::reset_peak(ctx.dev)?;
    for i in 0..stages {
        // The first step of stage i: ws(step) = schedule[stages·step / (1 + steps)].
        let step = (i * (r.steps + 1)).div_ceil(stages);
        let plan = schedule.at(step);
        let windows = plan.windows;
        let fwd = Forward { docs: Some(seq.docs.clone()), windows, yarn_window: 0, training: true };
        let ms = ctx.time_ms(|| {
            let loss = model.loss(&seq.x, &seq.y, &fwd)?;
            (&loss * grad_mult).f_backward()?;
            losses.push(loss.double_value(&[]));
            opt.step(coll.as_mut(), &plan)?; // DistAdam + Muon, zeroes the grads
            Ok(())
        })?;
        timed.push(Stage { ws: w.ws(step, r.steps), windows, step, ms });
    }
    let mem = peak_memory(ctx)?;
    let join = |f: &dyn Fn(&Stage) -> String| timed.iter().map(f).collect::<Vec<_>>().join(" / ");
    let ws = join(&|t| t.ws.to_string());
    let tokens = commas(per_rank);
    Ok(vec![
        Row::new(
            format!("record #29, 1 GPU, one rank's batch: step at ws {ws}"),
            format!("{} ms/step", join(&|t| format!("{:.1}", t.ms))),
            format!(
                "upstream 98.1 ms/step on 8xH100 (each rank this batch; FA3, torch.compile, \
                 Triton NS); this is one rank's work with no communication (world 1, the \
                 single backend). Step = fwd (FP8 head) + bwd of the summed loss + \
                 Optimizer::step (DistAdam + Muon) + zero grads on one packed sequence of \
                 {tokens} random tokens in {} documents (≤ {}, cu_seqlens padded to {}); \
                 steps {} of {} give the windows {} (long/short); mean of {} steps after \
                 {WARMUP} warmup per ws; {}",
                seq.n_docs,
                commas(r.seq_len),
                seq.slots,
                join(&|t| t.step.to_string()),
                commas(r.steps as usize),
                join(&|t| format!("{}/{}", t.windows.0, t.windows.1)),
                ctx.steps,
                loss_span(&losses)
            ),
        ),
        Row::new(
            format!("record #29 throughput at ws {ws}"),
            format!("{} tokens/s", join(&|t| format!("{:.0}", per_rank as f64 / (t.ms / 1e3)))),
            format!(
                "{tokens} tokens per step; upstream 393,216 tokens in 98.1 ms = 4.0M tokens/s \
                 on 8 GPUs, 501k per GPU"
            ),
        ),
        Row::new(
            "record #29 peak memory",
            mem,
            "caching allocator peaks over the steps at every ws (shim memory_stats); \
             upstream logs ≈ 34,222 MiB allocated, ≈ 49,500 MiB reserved per rank",
        ),
    ])
}

/// The validation forward: one rank's 262,144 tokens, bf16 head, at the final eval's windows.
pub fn eval(ctx: &Ctx) -> Result<Vec<Row>> {
    let m = build(ctx, RECORD_29, Scale::Full)?;
    let r = &m.recipe;
    let n = r.val_seq_len.context("records/29.toml has no val_seq_len")?;
    let seq = packed(ctx, r, n)?;
    let w = windows_of(r)?;
    let windows = w.sizes(r.steps, r.steps);
    let fwd = Forward { docs: Some(seq.docs.clone()), windows, yarn_window: 0, training: false };
    let mut loss = f64::NAN;
    shim::reset_peak(ctx.dev)?;
    // train.rs's evaluate: no_grad, the mean loss read back each call.
    let ms = guarded(|| {
        ctx.time_ms(|| {
            loss = tch::no_grad(|| m.model.loss(&seq.x, &seq.y, &fwd))?.double_value(&[]);
            Ok(())
        })
    });
    let mem = peak_memory(ctx)?;
    let logits_gb = (n * r.padded_vocab_size * 4) as f64 / 1e9;
    let what = format!(
        "one sequence, {} documents, training=false (bf16 head), no_grad, ws {} (windows \
         {}/{}, the final eval's); the logits [{n}, {}] are {logits_gb:.1} GB in fp32",
        seq.n_docs,
        w.ws(r.steps, r.steps),
        windows.0,
        windows.1,
        r.padded_vocab_size
    );
    let check = format!("record #29 eval forward, {} tokens", commas(n));
    Ok(vec![match ms {
        Ok(ms) => Row::new(
            check,
            format!("{ms:.1} ms/call, peak {mem}"),
            format!("{what}; mean of {} calls after {WARMUP} warmup; loss {loss:.3}", ctx.steps),
        ),
        Err(e) => Row::status(
            check,
            Status::Error(format!("{e:#}")),
            format!("{what}; peak {mem} by then"),
        ),
    }])
}
