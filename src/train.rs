//! The training loop: validation on a paused clock, accumulation, gradient averaging across
//! ranks (DDP), clipping, AdamW, timing.
//!
//! Timing follows llm.c: each step is timed from data to update; step 0 is left out as kernel
//! warmup; validation is never timed. Rank 0 prints upstream's lines:
//!   step:N/M train_loss:X train_time:Yms step_avg:Zms      (train_loss is ours)
//!   step:N/M val_loss:X train_time:Yms step_avg:Zms
use crate::data::loader::{TrainLoader, ValLoader};
use crate::device::Target;
use crate::dist::{self, Collectives, Op, RankEnv};
use crate::model::Gpt;
use crate::optim::adamw::{clip_factor, AdamW};
use crate::optim::schedule::warmup_cosine;
use crate::recipe::{Recipe, Scale};
use crate::runlog::{Metric, RunLog, Summary};
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::time::Instant;
use tch::{nn, Kind, Tensor};

/// Everything a run needs besides the recipe.
pub struct RunConfig {
    pub recipe: Recipe,
    pub scale: Scale,
    pub record: Option<u32>,
    pub train_files: Vec<PathBuf>,
    pub val_files: Vec<PathBuf>,
    /// Where rank 0 writes train.log, metrics.jsonl, summary.json and recipe.toml.
    pub out: Option<PathBuf>,
    pub target: Target,
    pub ranks: RankEnv,
    /// Header lines (`# key: value`) describing the tree, versions and hardware.
    pub header: Vec<(String, String)>,
}

/// Trains and returns the final val loss (the mean over all ranks).
pub fn run(cfg: &RunConfig) -> Result<f64> {
    let r = &cfg.recipe;
    let (rank, ranks) = (cfg.ranks.rank, cfg.ranks.world);
    let (rows, accum) = r.micro_batch(ranks)?;
    let dev = cfg.target.device;
    let mut coll = dist::init(&cfg.ranks, dev)?;
    // Every rank draws the same init from the same seed, so the replicas start identical.
    tch::manual_seed(r.seed as i64);

    let vs = nn::VarStore::new(dev);
    let (model, params) = Gpt::new(vs.root(), r, cfg.target.compute);
    let mut opt = AdamW::new(&params, r.beta1, r.beta2, r.eps, r.weight_decay);
    let mut train = TrainLoader::new(&cfg.train_files, r.seq_len, rows, rank, ranks, r.seed)?;
    let val = ValLoader::new(&cfg.val_files, r.val_tokens, r.seq_len, rows, rank, ranks)?;

    let main = cfg.ranks.is_main();
    let mut log = RunLog::new(if main { cfg.out.as_deref() } else { None }, main)?;
    for (k, v) in &cfg.header {
        log.line(&format!("# {k}: {v}"))?;
    }
    let n_params: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    log.line(&format!("# parameters: {n_params}"))?;
    log.line(&format!(
        "# batch: {} tokens/step = {ranks} ranks x {accum} micro-batches x {rows} rows x {} tokens ({})",
        r.batch_tokens,
        r.seq_len,
        coll.backend()
    ))?;

    let steps = r.steps;
    let (mut train_ms, mut val_loss) = (0.0f64, f64::NAN);
    for step in 0..=steps {
        let last = step == steps;
        if last || step % r.val_every == 0 {
            val_loss = mean_over_ranks(coll.as_mut(), evaluate(&model, &val, cfg.target))?;
            if !val_loss.is_finite() {
                bail!("step {step}: val loss is {val_loss}; stopping");
            }
            log.line(&format!(
                "step:{step}/{steps} val_loss:{val_loss:.4} train_time:{train_ms:.0}ms step_avg:{:.2}ms",
                avg(train_ms, step)
            ))?;
            log.metric(Metric::Val { step, val_loss, train_time_ms: train_ms });
        }
        if last {
            break;
        }

        let t0 = Instant::now();
        let mut loss_sum = 0.0;
        for batch in train.next_step(accum, dev) {
            let loss = model.loss(&batch.inputs, &batch.targets);
            (&loss / accum as f64).backward();
            loss_sum += loss.double_value(&[]);
        }
        // DDP: every rank ends the step with the gradient of the whole global batch.
        let mut grads: Vec<Tensor> = params.iter().map(|p| p.tensor.grad()).collect();
        coll.all_reduce(&mut grads, Op::Avg)?;
        let loss = mean_over_ranks(coll.as_mut(), loss_sum / accum as f64)?;
        if !loss.is_finite() {
            bail!("step {}: train loss is {loss}; stopping", step + 1);
        }
        let (norm, scale) = clip_factor(&params, r.grad_clip);
        let lr = warmup_cosine(step, steps, r.warmup_steps, r.lr, r.min_lr_frac);
        opt.step(&params, lr, scale);
        for g in &mut grads {
            let _ = g.zero_();
        }
        cfg.target.sync();
        if step > 0 {
            train_ms += t0.elapsed().as_secs_f64() * 1e3;
        }
        let n = step + 1;
        log.line(&format!(
            "step:{n}/{steps} train_loss:{loss:.4} train_time:{train_ms:.0}ms step_avg:{:.2}ms",
            avg(train_ms, n)
        ))?;
        log.metric(Metric::Train {
            step: n,
            loss,
            lr,
            grad_norm: norm,
            tokens: n * r.batch_tokens as u64,
            train_time_ms: train_ms,
        });
    }

    let peak_memory_mib = cfg.target.peak_memory_mib();
    if let Some((allocated, reserved)) = peak_memory_mib {
        log.line(&format!("peak memory allocated: {allocated} MiB reserved: {reserved} MiB"))?;
    }
    let summary = Summary {
        record: cfg.record,
        scale: cfg.scale,
        device: cfg.target.describe(),
        ranks,
        steps,
        tokens: steps * r.batch_tokens as u64,
        final_val_loss: val_loss,
        train_time_ms: train_ms,
        step_avg_ms: avg(train_ms, steps),
        peak_memory_mib: peak_memory_mib.map(|(a, _)| a),
    };
    log.finish(&summary, r)?;
    coll.barrier()?;
    Ok(val_loss)
}

/// Mean ms per timed step (step 0 is untimed).
fn avg(train_ms: f64, steps_done: u64) -> f64 {
    if steps_done > 1 {
        train_ms / (steps_done - 1) as f64
    } else {
        0.0
    }
}

/// Mean loss over this rank's validation batches.
fn evaluate(model: &Gpt, val: &ValLoader, target: Target) -> f64 {
    tch::no_grad(|| {
        let (mut sum, mut n) = (0.0, 0usize);
        for batch in val.batches(target.device) {
            sum +=
                model.loss(&batch.inputs, &batch.targets).to_kind(Kind::Double).double_value(&[]);
            n += 1;
        }
        sum / n.max(1) as f64
    })
}

/// The mean of one number over all ranks (every rank gets it).
fn mean_over_ranks(coll: &mut dyn Collectives, x: f64) -> Result<f64> {
    if coll.world() == 1 {
        return Ok(x);
    }
    let mut t = [Tensor::from_slice(&[x])];
    coll.all_reduce(&mut t, Op::Avg)?;
    Ok(t[0].double_value(&[0]))
}
