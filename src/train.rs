//! The training loop: validation on a paused clock, accumulation, the recipe's optimizer (which
//! averages gradients over ranks), timing.
//!
//! Each step is timed from data to update; validation is never timed. Without an explicit warmup
//! step 0 is left out as kernel warmup (llm.c); with one (upstream, spec §7) the warmup steps run
//! before the clock on real batches and model, optimizer and loader are reset after them.
//! Rank 0 prints upstream's lines:
//!   step:N/M train_loss:X train_time:Yms step_avg:Zms      (train_loss is ours)
//!   step:N/M val_loss:X train_time:Yms step_avg:Zms
use crate::data::batches::{Train, Val};
use crate::data::loader::Loader;
use crate::device::Target;
use crate::dist::{self, Collectives, Op, RankEnv};
use crate::model::{Ctx, Gpt};
use crate::optim::optimizer::{Optimizer, StepInfo};
use crate::optim::schedule::{Plan, Schedule};
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
    run_until(cfg, None)
}

/// [`run`], ended after step `stop_after` of the budget when given, its schedule unchanged:
/// how `records bench` and `records profile` time a stage of a record's real schedule. Such a
/// run has no final validation; it returns the last val loss it logged.
pub fn run_until(cfg: &RunConfig, stop_after: Option<u64>) -> Result<f64> {
    let r = &cfg.recipe;
    let (rank, ranks) = (cfg.ranks.rank, cfg.ranks.world);
    let (rows, accum) = r.micro_batch(ranks)?;
    let dev = cfg.target.device;
    let mut coll = dist::init(&cfg.ranks, dev)?;
    // Every rank draws the same init from the same seed, so the replicas start identical.
    tch::manual_seed(r.seed as i64);

    let vs = nn::VarStore::new(dev);
    let (model, params) = Gpt::new(vs.root(), r, cfg.target.compute);
    let n_params: i64 = params.iter().map(|p| p.tensor.numel() as i64).sum();
    let mut opt = Optimizer::new(params, r, cfg.target.compute)?;
    let new_loader = || Train::new(r, &cfg.train_files, rows, rank, ranks);
    let val = Val::new(r, &cfg.val_files, rows, rank, ranks)?;

    let main = cfg.ranks.is_main();
    let mut log = RunLog::new(if main { cfg.out.as_deref() } else { None }, main)?;
    let schedule = Schedule::new(r);
    let batch = BatchShape { rows, accum, ranks, backend: coll.backend() };
    write_header(&mut log, cfg, n_params, &batch, &schedule)?;

    let micro = |plan: &Plan| schedule.micro_tokens(rows * r.seq_len, plan);
    let mut step_ctx = StepCtx { model: &model, accum, dev, coll: coll.as_mut(), micro: &micro };
    // Upstream's explicit warmup: real steps, cycling every window size, then everything reset.
    if schedule.untimed_warmup() > 0 {
        let saved = opt.save();
        let mut train = new_loader()?;
        for i in 0..schedule.untimed_warmup() {
            step_ctx.train_step(&mut train, &mut opt, &schedule.warmup(i))?;
        }
        opt.restore(&saved)?;
    }
    let mut train = new_loader()?;
    let (steps, first_timed) = (schedule.steps(), schedule.first_timed());
    let mut clock = Clock { train_ms: 0.0, val_loss: f64::NAN, tokens: 0 };
    for step in 0..=steps {
        let plan = schedule.at(step);
        if plan.validate {
            let local = evaluate(&model, &val, cfg.target, &plan)?;
            clock.val_loss = mean_over_ranks(step_ctx.coll, Tensor::from(local).to_device(dev))?;
            log_val(&mut log, &clock, step, steps, first_timed)?;
        }
        if step == steps {
            break;
        }

        let range = crate::profile::begin_step(&plan)?;
        let t0 = Instant::now();
        let (loss, info) = step_ctx.train_step(&mut train, &mut opt, &plan)?;
        cfg.target.sync();
        clock.train_ms += if plan.timed { t0.elapsed().as_secs_f64() * 1e3 } else { 0.0 };
        crate::profile::end_step(range, step)?;
        clock.tokens += (micro(&plan) * accum * ranks) as u64;
        log_train(&mut log, &clock, (step + 1, steps, first_timed), loss, &info)?;
        if stop_after == Some(step + 1) {
            break;
        }
    }
    finish(&mut log, cfg, &clock, steps, first_timed)?;
    coll.barrier()?;
    Ok(clock.val_loss)
}

/// How a step's batch is split: rows per micro-batch, micro-batches per rank, ranks.
struct BatchShape {
    rows: usize,
    accum: usize,
    ranks: usize,
    backend: &'static str,
}

/// The run's header: the tree's lines, the parameter count, the batch and its schedule.
fn write_header(
    log: &mut RunLog,
    cfg: &RunConfig,
    n_params: i64,
    b: &BatchShape,
    schedule: &Schedule,
) -> Result<()> {
    let r = &cfg.recipe;
    for (k, v) in &cfg.header {
        log.line(&format!("# {k}: {v}"))?;
    }
    log.line(&format!("# parameters: {n_params}"))?;
    let micro = match r.loader {
        Loader::Rows => format!("{} rows x {} tokens", b.rows, r.seq_len),
        Loader::Bos => {
            format!("{} packed tokens (documents clipped at {})", b.rows * r.seq_len, r.seq_len)
        }
    };
    log.line(&format!(
        "# batch: {} tokens/step = {} ranks x {} micro-batches x {micro} ({})",
        r.batch_tokens, b.ranks, b.accum, b.backend
    ))?;
    if r.batch_schedule.is_some() {
        log.line(&format!(
            "# batch schedule: micro-batches of {:?} tokens on the windows stages",
            schedule.stage_micro_tokens(b.rows * r.seq_len)
        ))?;
    }
    Ok(())
}

/// What the run has measured so far.
struct Clock {
    train_ms: f64,
    val_loss: f64,
    tokens: u64,
}

/// A validation step's line and metric; a loss that is not finite stops the run.
fn log_val(log: &mut RunLog, c: &Clock, step: u64, steps: u64, first_timed: u64) -> Result<()> {
    let (val_loss, train_ms) = (c.val_loss, c.train_ms);
    if !val_loss.is_finite() {
        bail!("step {step}: val loss is {val_loss}; stopping");
    }
    log.line(&format!(
        "step:{step}/{steps} val_loss:{val_loss:.4} train_time:{train_ms:.0}ms step_avg:{:.2}ms",
        avg(train_ms, step, first_timed)
    ))?;
    log.metric(Metric::Val { step, val_loss, train_time_ms: train_ms });
    Ok(())
}

/// A training step's line and metric; `at` is (steps done, budget, first timed step).
fn log_train(
    log: &mut RunLog,
    c: &Clock,
    at: (u64, u64, u64),
    loss: f64,
    info: &StepInfo,
) -> Result<()> {
    let ((n, steps, first_timed), train_ms) = (at, c.train_ms);
    log.line(&format!(
        "step:{n}/{steps} train_loss:{loss:.4} train_time:{train_ms:.0}ms step_avg:{:.2}ms",
        avg(train_ms, n, first_timed)
    ))?;
    log.metric(Metric::Train {
        step: n,
        loss,
        lr: info.lr,
        grad_norm: info.grad_norm,
        tokens: c.tokens,
        train_time_ms: train_ms,
    });
    Ok(())
}

/// The peak memory line and the summary.
fn finish(log: &mut RunLog, cfg: &RunConfig, c: &Clock, steps: u64, first: u64) -> Result<()> {
    let peak_memory_mib = cfg.target.peak_memory_mib();
    if let Some((allocated, reserved)) = peak_memory_mib {
        log.line(&format!("peak memory allocated: {allocated} MiB reserved: {reserved} MiB"))?;
    }
    let summary = Summary {
        record: cfg.record,
        scale: cfg.scale,
        device: cfg.target.describe(),
        ranks: cfg.ranks.world,
        steps,
        tokens: c.tokens,
        final_val_loss: c.val_loss,
        train_time_ms: c.train_ms,
        step_avg_ms: avg(c.train_ms, steps, first),
        peak_memory_mib: peak_memory_mib.map(|(a, _)| a),
    };
    log.finish(&summary, &cfg.recipe)
}

/// What a training step needs besides its data and optimizer.
struct StepCtx<'a> {
    model: &'a Gpt,
    accum: usize,
    dev: tch::Device,
    coll: &'a mut dyn Collectives,
    /// Tokens of one micro-batch at a step's plan.
    micro: &'a dyn Fn(&Plan) -> usize,
}

impl StepCtx<'_> {
    /// Forward and backward over this rank's micro-batches, then the optimizer (which averages
    /// the gradients over ranks). Returns the mean train loss over all ranks.
    fn train_step(
        &mut self,
        train: &mut Train,
        opt: &mut Optimizer,
        plan: &Plan,
    ) -> Result<(f64, StepInfo)> {
        let grad_mult = plan.grad_mult;
        // The loss stays on the device until the ranks have averaged it: one host read a step.
        let mut loss_sum = Tensor::zeros([], (Kind::Double, self.dev));
        let sizes = ((self.micro)(plan), plan.max_doc_len);
        for batch in train.next_step(self.accum, sizes, self.dev)? {
            let (windows, yarn_window) = (plan.windows, plan.yarn_window);
            let ctx = Ctx {
                docs: batch.docs,
                windows,
                yarn_window,
                training: true,
                mtp: plan.mtp_weights().to_vec(),
                split_embed: plan.split_embed,
            };
            let loss = self.model.loss(&batch.inputs, &batch.targets, &ctx)?;
            (&loss * (grad_mult / self.accum as f64)).backward();
            loss_sum += loss.detach().to_kind(Kind::Double);
        }
        let loss = mean_over_ranks(self.coll, loss_sum / self.accum as f64)?;
        if !loss.is_finite() {
            bail!("step {}: train loss is {loss}; stopping", plan.step + 1);
        }
        let info = crate::profile::ranged("optimizer", || opt.step(self.coll, plan))?;
        Ok((loss, info))
    }
}

/// Mean ms per timed step (steps before `first_timed` are untimed).
fn avg(train_ms: f64, steps_done: u64, first_timed: u64) -> f64 {
    if steps_done > first_timed {
        train_ms / (steps_done - first_timed) as f64
    } else {
        0.0
    }
}

/// Mean loss over this rank's validation batches, with the step's windows.
fn evaluate(model: &Gpt, val: &Val, target: Target, plan: &Plan) -> Result<f64> {
    let (windows, yarn_window, split_embed) = (plan.windows, plan.yarn_window, plan.split_embed);
    tch::no_grad(|| {
        let (mut sum, mut n) = (0.0, 0usize);
        for batch in val.batches(target.device) {
            let batch = batch?;
            let ctx = Ctx {
                docs: batch.docs,
                windows,
                yarn_window,
                training: false,
                mtp: Vec::new(),
                split_embed,
            };
            let loss = model.loss(&batch.inputs, &batch.targets, &ctx)?;
            sum += loss.to_kind(Kind::Double).double_value(&[]);
            n += 1;
        }
        Ok(sum / n.max(1) as f64)
    })
}

/// The mean over all ranks of a 0-dim tensor on the training device (NCCL takes no other), read
/// by the host once.
fn mean_over_ranks(coll: &mut dyn Collectives, x: Tensor) -> Result<f64> {
    let mut t = [x];
    coll.all_reduce(&mut t, Op::Avg)?;
    Ok(t[0].double_value(&[]))
}
