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
}
