//! Learning-rate schedules.

/// llm.c's schedule: linear warmup over `warmup` steps, then cosine decay to `min_lr_frac * lr`
/// at the last step.
pub fn warmup_cosine(step: u64, steps: u64, warmup: u64, lr: f64, min_lr_frac: f64) -> f64 {
    if step < warmup {
        return lr * (step + 1) as f64 / warmup as f64;
    }
    let min_lr = lr * min_lr_frac;
    let decay_ratio = (step - warmup) as f64 / (steps - warmup).max(1) as f64;
    min_lr + 0.5 * (1.0 + (std::f64::consts::PI * decay_ratio).cos()) * (lr - min_lr)
}

/// Upstream's `get_lr` since record #19 ("stable then decay"): the multiplier is 1 while
/// `step/steps < 1 - cooldown_frac`, then falls linearly to `floor` at `step = steps`.
/// Record #29: cooldown_frac 0.45, floor 0.1, no warmup.
pub fn stable_decay(step: u64, steps: u64, cooldown_frac: f64, floor: f64) -> f64 {
    let x = step as f64 / steps.max(1) as f64;
    if cooldown_frac <= 0.0 || x < 1.0 - cooldown_frac {
        return 1.0;
    }
    let w = (1.0 - x) / cooldown_frac;
    w + (1.0 - w) * floor
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
}
