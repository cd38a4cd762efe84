//! How figures read in everything the CLI prints: losses to 4 decimals, times to 0.1 s,
//! percentages to 1 decimal, a real minus sign, counts with their plural.
/// A val loss: `2.4820`.
pub fn loss(x: f64) -> String {
    minus(format!("{x:.4}"))
}

/// A time in seconds: `70.9 s`.
pub fn secs(x: f64) -> String {
    minus(format!("{x:.1} s"))
}

/// A signed difference in seconds: `+70.9 s`, `−1.0 s`.
pub fn secs_delta(x: f64) -> String {
    minus(format!("{x:+.1} s"))
}

/// A time per step in milliseconds: `60.71 ms`.
pub fn ms(x: f64) -> String {
    minus(format!("{x:.2} ms"))
}

/// A signed difference in milliseconds: `+4.24 ms`, `−0.50 ms`.
pub fn ms_delta(x: f64) -> String {
    minus(format!("{x:+.2} ms"))
}

/// The change from `before` to `after` milliseconds, and as a share of `before`:
/// `+4.24 ms (+7.5%)`.
pub fn ms_change(before: f64, after: f64) -> String {
    let d = after - before;
    format!("{} ({})", ms_delta(d), pct_delta(100.0 * d / before))
}

/// A signed percentage: `+2444.4%`.
pub fn pct_delta(x: f64) -> String {
    minus(format!("{x:+.1}%"))
}

/// A signed loss difference: `−0.0012`.
pub fn loss_delta(x: f64) -> String {
    minus(format!("{x:+.4}"))
}

/// A p-value: four decimals, or two significant digits below 0.0001 (`4.9e-12`) so a tiny p
/// never reads as `0.0000`.
pub fn p_value(p: f64) -> String {
    if p != 0.0 && p < 0.000_05 {
        minus(format!("{p:.1e}"))
    } else {
        format!("{p:.4}")
    }
}

/// A t statistic: `−8.80`.
pub fn t_stat(t: f64) -> String {
    minus(format!("{t:.2}"))
}

/// Degrees of freedom: whole for Student's test (`6`), one decimal for Welch's (`23.4`).
pub fn dof(df: f64) -> String {
    if df.fract() == 0.0 {
        format!("{df:.0}")
    } else {
        format!("{df:.1}")
    }
}

/// `1 run`, `3 runs`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Rust prints `-`; text for people gets the minus sign U+2212.
/// A signed whole difference: `+490`.
pub fn count_delta(x: f64) -> String {
    minus(format!("{x:+.0}"))
}

/// A signed difference in millions: `−85.3M`.
pub fn millions_delta(x: f64) -> String {
    minus(format!("{:+.1}M", x / 1e6))
}

fn minus(s: String) -> String {
    s.replace('-', "\u{2212}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_and_signs() {
        assert_eq!(loss(2.482), "2.4820");
        assert_eq!(secs(70.937), "70.9 s");
        assert_eq!(secs_delta(-1.04369), "−1.0 s");
        assert_eq!(pct_delta(2444.417643), "+2444.4%");
        assert_eq!(loss_delta(-0.00123), "−0.0012");
        assert_eq!(t_stat(-8.8012), "−8.80");
        assert_eq!((dof(6.0), dof(23.44)), ("6".to_string(), "23.4".to_string()));
    }

    #[test]
    fn p_values_never_round_to_zero() {
        assert_eq!(p_value(0.000_669_06), "0.0007");
        assert_eq!(p_value(0.000_06), "0.0001");
        assert_eq!(p_value(4.9e-12), "4.9e−12");
        assert_eq!(p_value(0.0), "0.0000");
        assert_eq!(p_value(1.0), "1.0000");
    }

    #[test]
    fn plurals() {
        assert_eq!(count(1, "run"), "1 run");
        assert_eq!(count(0, "run"), "0 runs");
        assert_eq!(count(7, "step"), "7 steps");
    }
}
