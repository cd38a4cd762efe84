//! The schedule: every step-dependent value of a run, from one place. `Schedule::at(step)` gives
//! that step's [`Plan`]; the loop, the optimizers and the log read it, and
//! `train --print-schedule` prints its table. Below it, the momentum and multi-token curves it
//! is made of; the lr's curves are in lr_schedule.rs.
use super::lr_schedule;
use crate::model::{head_embed::UntieStep, windows};
use crate::recipe::{Recipe, MTP_MAX};

/// What step `step` runs with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub step: u64,
    /// The learning-rate multiplier of every optimizer.
    pub lr_factor: f64,
    /// Muon's momentum (None without Muon).
    pub momentum: Option<f64>,
    /// (long, short) attention windows in tokens ((0, 0) without windows).
    pub windows: (i64, i64),
    /// The long window YaRN is tuned for, in tokens (the long window, or the final ws's).
    pub yarn_window: i64,
    /// This step's batch as a share of the recipe's batch_tokens (upstream #46 grows it).
    pub batch_share: f64,
    /// The scalar bank's Adam pauses (upstream #52: 40 steps from each stage change).
    pub freeze_scalars: bool,
    /// Multi-token prediction's weights (upstream #53), zeros past the last; all zeros: none.
    pub mtp: [f64; MTP_MAX],
    /// The input embedding reads its own table (upstream #53: from s = ceil(2/3 · scheduled);
    /// #54: from the step after the copy).
    pub split_embed: bool,
    /// After this step's update the head is copied into that table, with its Adam state
    /// (upstream #53: the odd step before s, `(s − 2) | 1`; #54: `s | 1`).
    pub untie_after: bool,
    /// The BOS loader's longest document at this step (upstream #72); None: seq_len.
    pub max_doc_len: Option<usize>,
    /// What each micro-batch's mean loss is multiplied by before its backward: upstream's
    /// `reduction="sum"` (the tokens of one reference rank at this step's batch) and Act 1's
    /// summed micro-batches; 1 for a mean.
    pub grad_mult: f64,
    /// The model is validated before this step (every `val_every` steps, and after the last).
    pub validate: bool,
    /// This step counts on the clock (llm.c leaves step 0 out, Act 1 ten steps).
    pub timed: bool,
}

impl Plan {
    /// The multi-token weights in use (none, or two or more).
    pub fn mtp_weights(&self) -> &[f64] {
        let n = self.mtp.iter().take_while(|&&w| w > 0.0).count();
        &self.mtp[..n]
    }
}

/// The training's stages, the one rule every step-dependent value reads (upstream #65 makes
/// them one `TrainingSchedule`): `n` stages (the windows schedule's) over the `clock` scheduled
/// steps of the run; the steps past the clock are #35's extension. Stage k holds the steps with
/// ⌊n·step/divisor⌋ = k, the divisor one more than the scheduled steps until #42 and the
/// scheduled steps from it; from #65, the steps from round(k·clock/n) to the next bound, each
/// knowing the fraction of its stage done. Past the clock every step is in the last stage.
#[derive(Debug, Clone, Copy)]
pub struct Stages {
    n: u64,
    clock: u64,
    divisor: u64,
    rounded: bool,
    /// The extension runs at the lr floor and the final windows (upstream #42).
    extension_final: bool,
}

impl Stages {
    pub fn new(r: &Recipe) -> Stages {
        let clock = r.steps - r.iteration_extension.min(r.steps);
        Stages {
            n: r.windows.as_ref().map_or(1, |w| w.schedule.len()) as u64,
            clock,
            divisor: if r.extension_final { clock } else { clock + 1 },
            rounded: r.rounded_stages,
            extension_final: r.extension_final,
        }
    }

    /// The scheduled steps: the lr, windows and weights run on them and stay at their end
    /// through the extension.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Whether `step` is in the extension that sits at the lr floor and the final windows
    /// (upstream #42).
    pub fn extending(&self, step: u64) -> bool {
        self.extension_final && step >= self.clock
    }

    /// The stage holding `step`.
    pub fn of(&self, step: u64) -> usize {
        match self.rounded {
            true => self.with_fraction(step).0,
            false if step >= self.clock => self.n as usize - 1,
            false => (self.n * step / self.divisor.max(1)).min(self.n - 1) as usize,
        }
    }

    /// Upstream #65's (k, t): the stage holding `step`, k starting at round(k·clock/n), and the
    /// fraction t of it done (1 from the end of the schedule on).
    pub fn with_fraction(&self, step: u64) -> (usize, f64) {
        let (n, clock) = (self.n, self.clock);
        let start = |k: u64| (k as f64 * clock as f64 / n as f64).round() as u64;
        if step >= clock {
            return (n as usize - 1, 1.0);
        }
        let k = (1..n).filter(|&k| step >= start(k)).count() as u64;
        let (a, b) = (start(k), start(k + 1));
        (k as usize, (step - a) as f64 / (b - a).max(1) as f64)
    }

    /// The first step of each stage.
    pub fn starts(&self) -> Vec<u64> {
        (0..self.n as usize).filter_map(|k| (0..self.clock).find(|&s| self.of(s) == k)).collect()
    }
}

/// Muon's lr and momentum schedule: from `start` up to `end` over the first `warmup` steps
/// (record #9), back down to `start` over the last `cooldown` (upstream #39).
#[derive(Debug, Clone, Copy)]
struct MuonSchedule {
    lr: f64,
    start: f64,
    end: f64,
    warmup: u64,
    cooldown: u64,
}

/// A run's step-dependent values, resolved from the recipe once.
#[derive(Debug, Clone)]
pub struct Schedule {
    steps: u64,
    lr: lr_schedule::Curve,
    warmup_steps: u64,
    min_lr_frac: f64,
    muon: Option<MuonSchedule>,
    adam_lr: f64,
    windows: Option<windows::Section>,
    untimed_warmup: u64,
    /// Steps at the end past the schedules' clock (upstream #35).
    extension: u64,
    stages: Stages,
    /// The batch's share of batch_tokens per windows stage (one entry without a batch
    /// schedule), and the windows block micro-batches are rounded to.
    batch_shares: Vec<f64>,
    block: usize,
    scalar_freeze: u64,
    mtp: Option<Vec<f64>>,
    /// (the step after which the head is copied, the first step on the untied embedding).
    split: Option<(u64, u64)>,
    /// The lr level, the multi-token weights and the cooldown follow upstream #65's stages.
    rounded: bool,
    /// The longest document per windows stage (upstream #72).
    doc_lens: Option<Vec<usize>>,
    grad: GradScale,
    val_every: u64,
    first_timed: u64,
}

/// How a step's loss is scaled for its backward (see [`Plan::grad_mult`]).
#[derive(Debug, Clone, Copy)]
struct GradScale {
    /// `Some(batch_tokens, reference_ranks)` for upstream's summed loss.
    sum_over: Option<(usize, usize)>,
    factor: f64,
}

impl GradScale {
    fn new(r: &Recipe) -> GradScale {
        let sum_over = r.loss_sum.then_some((r.batch_tokens, r.reference_ranks));
        GradScale { sum_over, factor: r.grad_sum_factor.unwrap_or(1.0) }
    }

    fn at(&self, batch_share: f64) -> f64 {
        let mult = match self.sum_over {
            Some((tokens, ranks)) => tokens as f64 * batch_share / ranks.max(1) as f64,
            None => 1.0,
        };
        mult * self.factor
    }
}

impl Schedule {
    pub fn new(r: &Recipe) -> Schedule {
        Schedule {
            steps: r.steps,
            lr: r.lr_schedule.clone(),
            warmup_steps: r.warmup_steps,
            min_lr_frac: r.min_lr_frac,
            muon: r.muon.as_ref().map(|m| MuonSchedule {
                lr: m.lr,
                start: m.momentum_start,
                end: m.momentum,
                warmup: m.momentum_warmup,
                cooldown: m.momentum_cooldown.unwrap_or(0),
            }),
            adam_lr: r.lr,
            windows: r.windows.clone(),
            untimed_warmup: r.untimed_warmup,
            extension: r.iteration_extension,
            stages: Stages::new(r),
            batch_shares: match &r.batch_schedule {
                Some(sizes) => {
                    let last = *sizes.last().unwrap_or(&1) as f64;
                    sizes.iter().map(|&s| s as f64 / last).collect()
                }
                None => vec![1.0],
            },
            block: r.windows.as_ref().map_or(1, |w| w.block),
            scalar_freeze: r.scalar_adam.as_ref().and_then(|s| s.freeze).unwrap_or(0),
            mtp: r.mtp.as_ref().map(|m| m.weights.clone()),
            split: r.head_embed.as_ref().and_then(|h| Some((h.untie_at?, h.untie_step))).map(
                |(at, rule)| {
                    let clock = Stages::new(r).clock();
                    let s = match rule {
                        UntieStep::OddBefore | UntieStep::OddFrom => (at * clock as f64).ceil(),
                        UntieStep::OddAtRounded => (at * clock as f64).round(),
                    } as u64;
                    match rule {
                        UntieStep::OddBefore => ((s.max(2) - 2) | 1, s),
                        UntieStep::OddFrom | UntieStep::OddAtRounded => (s | 1, (s | 1) + 1),
                    }
                },
            ),
            rounded: r.rounded_stages,
            doc_lens: r.doc_len_schedule.clone(),
            grad: GradScale::new(r),
            val_every: r.val_every,
            // Without an explicit warmup llm.c's step 0 is kernel warmup; with one every step
            // counts; Act 1 sets its own.
            first_timed: r.clock_from_step.unwrap_or(u64::from(r.untimed_warmup == 0)),
        }
    }

    /// The first step the clock counts.
    pub fn first_timed(&self) -> u64 {
        self.first_timed
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Upstream's untimed warmup steps, run before the clock starts.
    pub fn untimed_warmup(&self) -> u64 {
        self.untimed_warmup
    }

    /// The plan of optimizer step `step` (0-based) of the run.
    pub fn at(&self, step: u64) -> Plan {
        let steps = self.steps;
        // With an extension, lr and windows run on the scheduled steps and stay at their
        // end (upstream #35 caps the progress at 0.9999) through the extension.
        let clock = self.stages.clock();
        // Upstream #42: the extension sits at the lr floor and the final windows.
        let extending = self.stages.extending(step);
        let lr_factor = match extending {
            true => self.min_lr_frac,
            false => self.lr.at(step, &self.lr_clock(step)),
        };
        let momentum = self.muon.map(|m| {
            let mu = momentum_warmup(step, m.warmup, m.start, m.end);
            momentum_cooldown(step, (steps, m.cooldown), m.end, m.start).unwrap_or(mu)
        });
        let (windows, yarn_window, batch_share) = self.stage(step);
        let max_doc_len = self.doc_lens.as_ref().map(|d| {
            let k = match &self.windows {
                Some(_) => self.stages.of(step),
                None => d.len() - 1,
            };
            d[k.min(d.len() - 1)]
        });
        let since = (step + 1).saturating_sub(self.scalar_freeze);
        let freeze_scalars = (since..=step).any(|t| self.transition(t));
        let mut mtp = [0.0; MTP_MAX];
        if let Some(base) = &self.mtp {
            let w = match self.rounded {
                true => {
                    let (k, t) = self.stages.with_fraction(step);
                    mtp_weights_in_stage(base, k, t)
                }
                false => mtp_weights(base, step as f64 / clock.max(1) as f64),
            };
            mtp[..w.len()].copy_from_slice(&w);
        }
        Plan {
            step,
            lr_factor,
            momentum,
            windows,
            yarn_window,
            batch_share,
            freeze_scalars,
            mtp,
            split_embed: self.split.is_some_and(|(_, from)| step >= from),
            untie_after: self.split.is_some_and(|(after, _)| step == after),
            max_doc_len,
            grad_mult: self.grad.at(batch_share),
            validate: step == steps || step.is_multiple_of(self.val_every),
            timed: step >= self.first_timed,
        }
    }

    /// What the lr curve reads at `step` beyond the step itself.
    fn lr_clock(&self, step: u64) -> lr_schedule::Clock {
        lr_schedule::Clock {
            steps: self.steps,
            scheduled: self.stages.clock(),
            warmup: self.warmup_steps,
            floor: self.min_lr_frac,
            extended: self.extension > 0,
            rounded_stage: self.rounded.then(|| self.stages.of(step)),
        }
    }

    /// Step `step`'s (long, short) windows, YaRN's window and batch share.
    fn stage(&self, step: u64) -> ((i64, i64), i64, f64) {
        let steps = self.steps;
        let extending = self.stages.extending(step);
        let (windows, yarn_window) = match &self.windows {
            None => ((0, 0), 0),
            // The final validation (upstream #31, #33): YaRN extended to final_ws, the long
            // layers' window widened to final_long.
            Some(w) if step == steps && w.final_ws.is_some() => w.final_sizes().unwrap_or_default(),
            Some(w) if extending => {
                let sizes = w.sizes_of(w.final_ws.unwrap_or(w.schedule[w.schedule.len() - 1]));
                (sizes, sizes.0)
            }
            Some(w) => {
                let sizes = w.sizes_of(w.schedule[self.stages.of(step)]);
                (sizes, sizes.0)
            }
        };
        // The batch follows the windows' stages; the extension and the end take the last.
        let stage = match &self.windows {
            Some(_) => self.stages.of(step),
            _ => self.batch_shares.len() - 1,
        };
        let batch_share = self.batch_shares[stage.min(self.batch_shares.len() - 1)];
        (windows, yarn_window, batch_share)
    }

    /// The windows or the batch change at `step` (upstream #52's transitions, which pause the
    /// scalars' Adam).
    fn transition(&self, step: u64) -> bool {
        if step == 0 || step >= self.steps {
            return false;
        }
        let (now, before) = (self.stage(step), self.stage(step - 1));
        now.0 .0 != before.0 .0 || now.2 != before.2
    }

    /// Tokens of one micro-batch at `plan` when a full one has `full`: its batch share, rounded
    /// to whole windows blocks (exact upstream: 49,152 x 8/24 = 16,384 = 128 blocks).
    pub fn micro_tokens(&self, full: usize, plan: &Plan) -> usize {
        self.micro_of(full, plan.batch_share)
    }

    /// Micro-batch tokens of each batch stage, for the log's header.
    pub fn stage_micro_tokens(&self, full: usize) -> Vec<usize> {
        self.batch_shares.iter().map(|&share| self.micro_of(full, share)).collect()
    }

    fn micro_of(&self, full: usize, share: f64) -> usize {
        if share == 1.0 {
            return full;
        }
        let blocks = (full as f64 * share / self.block as f64).round() as usize;
        blocks.max(1) * self.block
    }

    /// Untimed warmup step `i`: step 0's plan with the window sizes taken in turn, so each is
    /// exercised before the clock starts. With a batch schedule (upstream #46) the warmup runs
    /// each stage's plan (windows and batch, the extension's too) for an equal share of steps.
    /// Its step number is `i`, so Adam steps on the odd ones as in training (upstream #47).
    pub fn warmup(&self, i: u64) -> Plan {
        let mut plan = Plan { step: i, ..self.at(0) };
        let Some(w) = &self.windows else { return plan };
        if self.batch_shares.len() > 1 {
            let clock = self.stages.clock();
            let mut starts = self.stages.starts();
            if self.extension > 0 && self.stages.extending(clock) {
                starts.push(clock);
            }
            let k = (i * starts.len() as u64 / self.untimed_warmup.max(1)) as usize;
            let at = self.at(starts[k.min(starts.len() - 1)]);
            return Plan { step: i, freeze_scalars: false, untie_after: false, ..at };
        }
        plan.windows = w.sizes_of(w.schedule[i as usize % w.schedule.len()]);
        plan.yarn_window = plan.windows.0;
        plan
    }

    /// The table of `train --print-schedule`: the first and last steps, every step where a
    /// stage begins (windows or batch change, the lr leaves or enters 1 or jumps up, the
    /// momentum reaches its end, the scalars pause or resume, the multi-token weights drop
    /// one, the embedding is untied) and every `every` steps.
    pub fn table(&self, every: u64) -> String {
        let mut out = String::from(
            "step\tlr_factor\tadam_lr\tmuon_lr\tmomentum\twindows\tbatch\tmtp\tscalars\tembed\n",
        );
        let mut last: Option<Plan> = None;
        for step in 0..=self.steps {
            let p = self.at(step);
            let stage = last.is_none_or(|l| {
                l.windows != p.windows
                    || l.batch_share != p.batch_share
                    || (l.lr_factor == 1.0) != (p.lr_factor == 1.0)
                    || p.lr_factor > l.lr_factor
                    || l.freeze_scalars != p.freeze_scalars
                    || l.mtp_weights().len() != p.mtp_weights().len()
                    || l.split_embed != p.split_embed
            }) || p.untie_after
                || self.muon.is_some_and(|m| step == m.warmup || step + m.cooldown == self.steps);
            if stage || step == self.steps || (every > 0 && step % every == 0) {
                let muon_lr =
                    self.muon.map_or("-".into(), |m| format!("{:.6}", m.lr * p.lr_factor));
                let momentum = p.momentum.map_or("-".into(), |m| format!("{m:.4}"));
                let mtp = match p.mtp_weights() {
                    [] => "-".to_string(),
                    w => w.iter().map(|w| format!("{w:.4}")).collect::<Vec<_>>().join(","),
                };
                let scalars = if p.freeze_scalars { "paused" } else { "-" };
                let embed = match (self.split, p.split_embed, p.untie_after) {
                    (None, ..) => "-",
                    (_, _, true) => "copied",
                    (_, true, _) => "own",
                    _ => "head's",
                };
                out.push_str(&format!(
                    "{step}\t{:.6}\t{:.6}\t{muon_lr}\t{momentum}\t{}/{}\t{:.3}\t{mtp}\t{scalars}\t{embed}\n",
                    p.lr_factor,
                    self.adam_lr * p.lr_factor,
                    p.windows.0,
                    p.windows.1,
                    p.batch_share
                ));
            }
            last = Some(p);
        }
        out
    }
}

/// Upstream #39's momentum cooldown: past step `steps - cooldown`, linear from `from` back to
/// `to` (0.95 -> 0.85 over the last 50 steps, over the whole run, extension included); None
/// before.
pub fn momentum_cooldown(
    step: u64,
    (steps, cooldown): (u64, u64),
    from: f64,
    to: f64,
) -> Option<f64> {
    let start = steps.checked_sub(cooldown)?;
    (cooldown > 0 && step > start)
        .then(|| from - (step - start) as f64 / cooldown as f64 * (from - to))
}

/// Muon's momentum warmup (record #9; 300 steps since #13): linear from `from` to `to` over
/// `warmup_steps`, then `to`.
pub fn momentum_warmup(step: u64, warmup_steps: u64, from: f64, to: f64) -> f64 {
    if warmup_steps == 0 {
        return to;
    }
    let frac = (step as f64 / warmup_steps as f64).min(1.0);
    from + (to - from) * frac
}

/// Multi-token prediction's weights (upstream #53, `model/mtp.rs`) at progress `x` for the
/// base weights `base`.
pub fn mtp_weights(base: &[f64], x: f64) -> Vec<f64> {
    let n = base.len();
    let k = (1..n).filter(|&j| x >= j as f64 / n as f64).count();
    mtp_weights_in_stage(base, k, n as f64 * x - k as f64)
}

/// The weights in stage `k` (from 0), a fraction `t` of it done: the first n − k base weights,
/// the last of them (when more than one) times 1 − t. Upstream #65 takes its stages' own
/// bounds (`Schedule`); before, the stages were thirds of the progress (`mtp_weights`).
pub fn mtp_weights_in_stage(base: &[f64], k: usize, t: f64) -> Vec<f64> {
    let n = base.len();
    let mut w = base[..n - k.min(n - 1)].to_vec();
    if w.len() > 1 {
        let last = w.len() - 1;
        w[last] *= 1.0 - t;
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn momentum_warms_up_from_085_to_095_over_300_steps() {
        let mu = |s| momentum_warmup(s, 300, 0.85, 0.95);
        assert_eq!(mu(0), 0.85);
        assert!((mu(150) - 0.90).abs() < 1e-12);
        assert!((mu(299) - (0.85 + 0.10 * 299.0 / 300.0)).abs() < 1e-12);
        assert!((mu(300) - 0.95).abs() < 1e-12);
        assert!((mu(1000) - 0.95).abs() < 1e-12);
        assert_eq!(momentum_warmup(0, 0, 0.85, 0.95), 0.95);
    }

    /// Record #46 (spec §3.2): 0.95 - (step-2110)/50·0.1 for step > 2110 of 2160; 0.852 at 2159.
    #[test]
    fn momentum_cools_down_over_the_last_50_steps() {
        let mu = |s| momentum_cooldown(s, (2160, 50), 0.95, 0.85);
        assert_eq!(mu(2110), None);
        assert!((mu(2111).unwrap() - 0.948).abs() < 1e-12);
        assert!((mu(2159).unwrap() - 0.852).abs() < 1e-12);
        assert_eq!(momentum_cooldown(5, (2160, 0), 0.95, 0.85), None);
    }
}
