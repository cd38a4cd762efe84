//! A modern record at full shape on one GPU: one rank's training step at each stage (windows,
//! batch; throughput, peak memory) and the 262,144-token eval forward at the final
//! validation's windows.
use crate::model::{
    build, Manifest, Model, RECORD_29, RECORD_38, RECORD_46, RECORD_53, RECORD_54, RECORD_62,
    RECORD_63, RECORD_84,
};
use crate::packed::packed;
use crate::table::{Row, Status};
use crate::util::{commas, guarded, loss_span, peak_memory, Ctx, WARMUP};
use anyhow::{Context, Result};
use tch::Kind;
use trainer::dist::{self, RankEnv};
use trainer::model::Ctx as Forward;
use trainer::optim::adam_every;
use trainer::optim::optimizer::Optimizer;
use trainer::optim::schedule::Schedule;
use trainer::recipe::Scale;
use trainer::shim;

/// One stage's measurement.
struct Stage {
    /// (long, short) in tokens.
    windows: (i64, i64),
    /// One rank's tokens per step.
    tokens: usize,
    step: u64,
    ms: f64,
}

/// A record the check times: its number, manifest and upstream's ms/step on 8xH100 (the logs'
/// step_avg) with what upstream ran it with.
type Record = (u32, Manifest, f64, &'static str);

const R29: Record = (29, RECORD_29, 98.1, "FA3, torch.compile, Triton NS");
const R38: Record = (38, RECORD_38, 88.97, "FA3, torch.compile, Triton Polar Express");
// The logs' median per-step time in the last stage (spec §1: ≈33.7 / 60.0 / 88.0 ms by stage).
const R46: Record = (46, RECORD_46, 88.0, "FA3, torch.compile, Triton Polar Express");
// Spec §1: ≈34.0 / 62.0 / 88.5 / 89.0 ms by stage.
const R53: Record = (53, RECORD_53, 88.5, "FA3, torch.compile, Triton Polar Express");
// Spec §1: ≈34.0 / 61.9 / 88.0 / 88.1 ms by stage.
const R54: Record = (54, RECORD_54, 88.0, "FA3, torch.compile, Triton Polar Express");
// Log 40ec7bb6: steps 1500-1600 in 8,707 ms, ≈ 87.1 ms per step in the last stage.
// Log 008bb79d: steps 1250-1485 in 18,983 ms, ≈ 80.8 ms per step in the last stage.
const R84: Record = (
    84,
    RECORD_84,
    80.8,
    "FA3, torch.compile, Triton Polar Express, fused MLP with FP8 up-projection, CUDA CE",
);
// Log 43955d93: steps 1500-1575 in 6,608 ms, ≈ 88.1 ms per step in the last stage.
const R63: Record =
    (63, RECORD_63, 88.1, "FA3, torch.compile, Triton Polar Express, fused MLP and softcapped CE");
const R62: Record =
    (62, RECORD_62, 87.1, "FA3, torch.compile, Triton Polar Express, fused MLP and softcapped CE");

pub fn step_29(ctx: &Ctx) -> Result<Vec<Row>> {
    step(ctx, R29)
}

pub fn step_38(ctx: &Ctx) -> Result<Vec<Row>> {
    step(ctx, R38)
}

pub fn eval_29(ctx: &Ctx) -> Result<Vec<Row>> {
    eval(ctx, R29)
}

pub fn eval_38(ctx: &Ctx) -> Result<Vec<Row>> {
    eval(ctx, R38)
}

pub fn step_46(ctx: &Ctx) -> Result<Vec<Row>> {
    step(ctx, R46)
}

pub fn eval_46(ctx: &Ctx) -> Result<Vec<Row>> {
    eval(ctx, R46)
}

pub fn step_53(ctx: &Ctx) -> Result<Vec<Row>> {
    step(ctx, R53)
}

pub fn eval_53(ctx: &Ctx) -> Result<Vec<Row>> {
    eval(ctx, R53)
}

pub fn step_54(ctx: &Ctx) -> Result<Vec<Row>> {
    step(ctx, R54)
}

pub fn eval_54(ctx: &Ctx) -> Result<Vec<Row>> {
    eval(ctx, R54)
}

pub fn step_62(ctx: &Ctx) -> Result<Vec<Row>> {
    step(ctx, R62)
}

pub fn eval_62(ctx: &Ctx) -> Result<Vec<Row>> {
    eval(ctx, R62)
}

pub fn step_84(ctx: &Ctx) -> Result<Vec<Row>> {
    step(ctx, R84)
}

pub fn eval_84(ctx: &Ctx) -> Result<Vec<Row>> {
    eval(ctx, R84)
}

pub fn step_63(ctx: &Ctx) -> Result<Vec<Row>> {
    step(ctx, R63)
}

pub fn eval_63(ctx: &Ctx) -> Result<Vec<Row>> {
    eval(ctx, R63)
}

/// The first step of each training stage: where the windows or the batch change.
fn stage_starts(schedule: &Schedule) -> Vec<u64> {
    let key = |s| {
        let p = schedule.at(s);
        (p.windows, p.batch_share.to_bits())
    };
    (0..schedule.steps()).filter(|&s| s == 0 || key(s) != key(s - 1)).collect()
}

/// One rank's training step (8 ranks upstream) on one GPU at each stage. With Adam on every
/// n-th step (upstream #39) each timed call runs n consecutive steps, so Adam's share counts.
fn step(ctx: &Ctx, (n, manifest, upstream_ms, how): Record) -> Result<Vec<Row>> {
    let Model { _vs, model, params, recipe: r } = build(ctx, manifest, Scale::Full)?;
    let per_rank = r.batch_tokens / r.reference_ranks.max(1); // 49,152
    let mut coll = dist::init(&RankEnv::single(), ctx.dev)?;
    let mut opt = Optimizer::new(params, &r, Kind::BFloat16)?;
    let schedule = Schedule::new(&r);
    let period = adam_every::every(&r);
    let (mut losses, mut timed, mut n_docs) = (Vec::new(), Vec::new(), Vec::new());
    shim::reset_peak(ctx.dev)?;
    for step in stage_starts(&schedule) {
        let plan = schedule.at(step);
        let tokens = schedule.micro_tokens(per_rank, &plan);
        let seq = packed(ctx, &r, tokens)?;
        n_docs.push((seq.n_docs, seq.slots));
        // train.rs's backward: the gradient of upstream's reduction="sum" over a rank's tokens.
        let grad_mult = if r.loss_sum { tokens as f64 } else { 1.0 };
        let (windows, yarn_window) = (plan.windows, plan.yarn_window);
        let fwd = Forward {
            docs: Some(seq.docs.clone()),
            windows,
            yarn_window,
            training: true,
            mtp: plan.mtp_weights().to_vec(),
            split_embed: plan.split_embed,
        };
        let ms = ctx.time_ms(|| {
            for k in 0..period {
                let loss = model.loss(&seq.x, &seq.y, &fwd)?;
                (&loss * grad_mult).f_backward()?;
                losses.push(loss.double_value(&[]));
                opt.step(coll.as_mut(), &schedule.at(step + k))?; // DistAdam + Muon, zero grads
            }
            Ok(())
        })? / period as f64;
        timed.push(Stage { windows, tokens, step, ms });
    }
    let mem = peak_memory(ctx)?;
    let join = |f: &dyn Fn(&Stage) -> String| timed.iter().map(f).collect::<Vec<_>>().join(" / ");
    let block = r.windows.as_ref().context("the record has no window schedule")?.block as i64;
    let ws = join(&|t| (t.windows.0 / block).to_string());
    let tokens = join(&|t| commas(t.tokens));
    let docs = n_docs.iter().map(|d| d.0.to_string()).collect::<Vec<_>>().join(" / ");
    let slots = n_docs.iter().map(|d| d.1.to_string()).collect::<Vec<_>>().join(" / ");
    Ok(vec![
        Row::new(
            format!("record #{n}, 1 GPU, one rank's batch: step at ws {ws}"),
            format!("{} ms/step", join(&|t| format!("{:.1}", t.ms))),
            format!(
                "upstream {upstream_ms} ms/step on 8xH100 (each rank this batch; {how}); this \
                 is one rank's work with no communication (world 1, the single backend). Step = fwd (FP8 head) + bwd of the summed loss + \
                 Optimizer::step (DistAdam + Muon) + zero grads on one packed sequence of \
                 {tokens} random tokens in {docs} documents (≤ {}, cu_seqlens padded to {slots}); \
                 steps {} of {} give the windows {} (long/short); {}mean of {} steps after \
                 {WARMUP} warmup per stage; {}",
                commas(r.seq_len),
                join(&|t| t.step.to_string()),
                commas(r.steps as usize),
                join(&|t| format!("{}/{}", t.windows.0, t.windows.1)),
                if period > 1 { format!("Adam steps every {period} steps, timed in pairs; ") } else { String::new() },
                ctx.steps,
                loss_span(&losses)
            ),
        ),
        Row::new(
            format!("record #{n} throughput at ws {ws}"),
            format!("{} tokens/s", join(&|t| format!("{:.0}", t.tokens as f64 / (t.ms / 1e3)))),
            format!(
                "{tokens} tokens per step; upstream 393,216 tokens in {upstream_ms} ms on 8 GPUs \
                 = {:.0}k tokens/s per GPU",
                393_216.0 / 8.0 / upstream_ms
            ),
        ),
        Row::new(
            format!("record #{n} peak memory"),
            mem,
            "caching allocator peaks over the steps of every stage (shim memory_stats); \
             upstream logs per rank: #29 ≈ 34,222 MiB allocated, ≈ 49,500 reserved; #38 ≈ \
             30,724 allocated, ≈ 45,700 reserved; #46 ≈ 29,892 allocated, ≈ 45,000 reserved; #53 ≈ \
             29,863 allocated, ≈ 44,600 reserved; #54 ≈ 29,709 allocated, ≈ 44,400 reserved; #62 ≈ \
             30,181 allocated, ≈ 46,200 reserved; #63 ≈ 31,016 allocated, ≈ 47,000 reserved; \
             #84 ≈ 31,286 allocated, ≈ 46,920 reserved",
        ),
    ])
}

/// The validation forward: one rank's 262,144 tokens, bf16 head, at the final eval's windows.
fn eval(ctx: &Ctx, (number, manifest, ..): Record) -> Result<Vec<Row>> {
    let m = build(ctx, manifest, Scale::Full)?;
    let r = &m.recipe;
    let n = r.val_seq_len.context("the record has no val_seq_len")?;
    let seq = packed(ctx, r, n)?;
    let plan = Schedule::new(r).at(r.steps);
    let (windows, yarn_window) = (plan.windows, plan.yarn_window);
    let split_embed = plan.split_embed;
    let fwd = Forward {
        docs: Some(seq.docs.clone()),
        windows,
        yarn_window,
        training: false,
        mtp: Vec::new(),
        split_embed,
    };
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
        "one sequence, {} documents, training=false (bf16 head), no_grad, windows {}/{} (the \
         final eval's); the logits [{n}, {}] are {logits_gb:.1} GB in fp32",
        seq.n_docs, windows.0, windows.1, r.padded_vocab_size
    );
    let check = format!("record #{number} eval forward, {} tokens", commas(n));
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
