//! The learning-rate schedule: the multiplier every optimizer's lr takes at a step, one curve per
//! era. llm.c warms up and decays by a cosine (record #1); Act 1 decays linearly (a1), then holds
//! a plateau (a2); upstream #19 holds 1 and falls linearly at the end ("stable then decay"), and
//! #46 raises the plateau in stages as the batch grows, on #65's rounded stage bounds. The step
//! plan (schedule.rs) reads it once per step; the extension's floor (upstream #42) is the plan's.
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};

/// `lr_schedule = { kind = "stable_decay", cooldown_frac = 0.45 }`: the curve (record #1's
/// without the key).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Curve {
    /// llm.c: linear warmup over `warmup_steps`, cosine to `min_lr_frac`.
    #[default]
    WarmupCosine,
    /// Act 1's baseline (a1): linear warmup over `warmup_steps`, then linear to `min_lr_frac`
    /// at the last step (a1: 1/11, as `(0.1 + 1 - d)/1.1`).
    WarmupLinear,
    /// Act 1 from a2: linear warmup over `warmup_steps`, then `stable_decay`'s plateau and its
    /// linear fall to `min_lr_frac` over the last `cooldown_frac` of training.
    WarmupStableDecay { cooldown_frac: f64 },
    /// Upstream #19/#26: constant, then linear decay to `min_lr_frac` over the last
    /// `cooldown_frac` of training.
    StableDecay { cooldown_frac: f64 },
    /// Upstream #46: the stable phase's level rises with the batch size, `stage_max[k]` once
    /// progress passes `stage_at[k - 1]` ((16/8)^0.6, (24/8)^0.6 at 0.33, 0.66); the cooldown
    /// falls linearly from the current level to `min_lr_frac`.
    StagedDecay { cooldown_frac: f64, stage_at: Vec<f64>, stage_max: Vec<f64> },
}

pub const TECHNIQUE: Technique =
    Technique { act1: &[1, 2, 3, 4, 5, 6], ..technique("lr_schedule", &[4, 19, 46], &[]) };

/// What a curve reads at a step beyond the step itself, from the step plan.
pub struct Clock {
    pub steps: u64,
    /// The steps the curve spans: all but an extension's (upstream #35).
    pub scheduled: u64,
    pub warmup: u64,
    /// The floor as a share of the lr (`min_lr_frac`).
    pub floor: f64,
    /// An extension follows the scheduled steps: progress counts on them, capped below 1.
    pub extended: bool,
    /// The step's windows stage, when the level follows upstream #65's rounded stages.
    pub rounded_stage: Option<usize>,
}

impl Curve {
    /// The multiplier at `step`.
    pub fn at(&self, step: u64, c: &Clock) -> f64 {
        let (steps, clock, floor) = (c.steps, c.scheduled, c.floor);
        match self {
            Curve::WarmupCosine => warmup_cosine(step, steps, c.warmup, 1.0, floor),
            Curve::WarmupLinear => warmup_linear(step, steps, c.warmup, floor),
            Curve::WarmupStableDecay { cooldown_frac } => warmup_ramp(step, c.warmup)
                .unwrap_or_else(|| stable_decay(step, steps, *cooldown_frac, floor)),
            Curve::StableDecay { cooldown_frac } if c.extended => {
                let x = (step as f64 / clock.max(1) as f64).min(0.9999);
                stable_decay_at(x, *cooldown_frac, floor)
            }
            Curve::StableDecay { cooldown_frac } => {
                stable_decay(step, steps, *cooldown_frac, floor)
            }
            Curve::StagedDecay { cooldown_frac, stage_at, stage_max } => match c.rounded_stage {
                // Upstream #65: the stage's level, then linear from it to the floor over the
                // steps from int(S·(1 − cooldown_frac)) to S.
                Some(k) => {
                    let level = stage_max[k.min(stage_max.len() - 1)];
                    let from = (clock as f64 * (1.0 - cooldown_frac)) as u64;
                    let t =
                        (step.saturating_sub(from) as f64 / (clock - from).max(1) as f64).min(1.0);
                    level * (1.0 - t) + floor * t
                }
                None => {
                    let x = (step as f64 / clock.max(1) as f64).min(1.0);
                    let level = stage_max[stage_at.iter().filter(|&&a| x > a).count()];
                    level * stable_decay_at(x, *cooldown_frac, floor / level)
                }
            },
        }
    }
}

/// llm.c's warmup, kept through Act 1: `(step + 1)/warmup` over the first `warmup` steps.
fn warmup_ramp(step: u64, warmup: u64) -> Option<f64> {
    (step < warmup).then(|| (step + 1) as f64 / warmup as f64)
}

/// llm.c's schedule: linear warmup over `warmup` steps, then cosine decay to `min_lr_frac * lr`
/// at the last step.
pub fn warmup_cosine(step: u64, steps: u64, warmup: u64, lr: f64, min_lr_frac: f64) -> f64 {
    if let Some(ramp) = warmup_ramp(step, warmup) {
        return lr * ramp;
    }
    let min_lr = lr * min_lr_frac;
    let decay_ratio = (step - warmup) as f64 / (steps - warmup).max(1) as f64;
    min_lr + 0.5 * (1.0 + (std::f64::consts::PI * decay_ratio).cos()) * (lr - min_lr)
}

/// Act 1's baseline (a1): linear warmup over `warmup` steps (`(step + 1)/warmup`), then linear
/// from 1 to `floor` at the last step: a1 writes it `(0.1 + 1 - d)/1.1`, d the decay's progress,
/// which is floor = 1/11.
pub fn warmup_linear(step: u64, steps: u64, warmup: u64, floor: f64) -> f64 {
    if let Some(ramp) = warmup_ramp(step, warmup) {
        return ramp;
    }
    let d = (step - warmup) as f64 / (steps - warmup).max(1) as f64;
    floor + (1.0 - d) * (1.0 - floor)
}

/// Upstream's `get_lr` since record #19 ("stable then decay"): the multiplier is 1 while
/// `step/steps < 1 - cooldown_frac`, then falls linearly to `floor` at `step = steps`.
/// Record #29: cooldown_frac 0.45, floor 0.1, no warmup.
pub fn stable_decay(step: u64, steps: u64, cooldown_frac: f64, floor: f64) -> f64 {
    stable_decay_at(step as f64 / steps.max(1) as f64, cooldown_frac, floor)
}

/// [`stable_decay`] at progress `x` = step/steps.
pub fn stable_decay_at(x: f64, cooldown_frac: f64, floor: f64) -> f64 {
    if cooldown_frac <= 0.0 || x < 1.0 - cooldown_frac {
        return 1.0;
    }
    let w = (1.0 - x) / cooldown_frac;
    w + (1.0 - w) * floor
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The corners of record #1's curve, as its log prints them (lr:%.6f).
    #[test]
    fn matches_the_llmc_log() {
        let lr = |s| warmup_cosine(s, 19560, 700, 6e-4, 0.0);
        let expect = [
            (0, 0.000001),
            (699, 0.000600),
            (700, 0.000600),
            (5415, 0.000512),
            (10130, 0.000300),
            (14845, 0.000088),
            (19000, 0.000001),
            (19559, 0.000000),
        ];
        for (s, want) in expect {
            assert!((lr(s) - want).abs() < 5e-7, "step {s}: {} vs {want}", lr(s));
        }
    }

    #[test]
    fn warmup_is_linear_and_decay_reaches_the_floor() {
        assert_eq!(warmup_cosine(0, 100, 10, 1.0, 0.1), 0.1);
        assert_eq!(warmup_cosine(9, 100, 10, 1.0, 0.1), 1.0);
        assert!((warmup_cosine(100, 100, 10, 1.0, 0.1) - 0.1).abs() < 1e-12);
        assert!((warmup_cosine(55, 100, 10, 1.0, 0.0) - 0.5).abs() < 1e-12);
    }

    /// Record #29's corners: 1670 steps, cooldown 0.45, floor 0.1 (spec §3).
    #[test]
    fn stable_decay_matches_record_29() {
        let m = |s| stable_decay(s, 1670, 0.45, 0.1);
        assert_eq!(m(0), 1.0);
        assert_eq!(m(918), 1.0, "x = 0.5497 is still in the stable phase");
        assert!((m(919) - 0.9994).abs() < 5e-5, "{}", m(919));
        assert!((m(1669) - 0.1012).abs() < 5e-5, "{}", m(1669));
        assert!((m(1670) - 0.1).abs() < 1e-12, "the floor at the end");
        // Linear in the step inside the cooldown.
        assert!((m(1200) - m(1100) - (m(1300) - m(1200))).abs() < 1e-12);
        assert!(m(1300) < m(1200));
        assert_eq!(stable_decay(99, 100, 0.0, 0.1), 1.0, "no cooldown");
    }

    /// Upstream #46's staged plateau on progress, and #65's on its rounded stages: clock 100,
    /// cooldown 0.5, floor 0.1, levels 1, 1.52, 1.73 past 0.33 and 0.66.
    #[test]
    fn the_staged_plateau_falls_from_its_stage_level_to_the_floor() {
        let curve = Curve::StagedDecay {
            cooldown_frac: 0.5,
            stage_at: vec![0.33, 0.66],
            stage_max: vec![1.0, 1.52, 1.73],
        };
        let clock = |rounded_stage| Clock {
            steps: 100,
            scheduled: 100,
            warmup: 0,
            floor: 0.1,
            extended: false,
            rounded_stage,
        };
        // Progress 0.75: the third level, halfway down its cooldown: 1.73·(0.5 + 0.5·0.1/1.73).
        assert!((curve.at(75, &clock(None)) - 0.915).abs() < 1e-12);
        assert_eq!(curve.at(20, &clock(None)), 1.0);
        // #65: stage 1's level from its first step, linear from step 50 to the floor at 100.
        assert!((curve.at(75, &clock(Some(1))) - (1.52 * 0.5 + 0.1 * 0.5)).abs() < 1e-12);
        assert_eq!(curve.at(40, &clock(Some(1))), 1.52);
        assert!((curve.at(100, &clock(Some(2))) - 0.1).abs() < 1e-12);
    }
}
