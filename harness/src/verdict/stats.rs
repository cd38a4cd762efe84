//! The statistics behind a verdict: summary figures, the one-sided one-sample t-test of the
//! speedrun's loss rule (`scipy.stats.ttest_1samp(x, 3.28, alternative="less")`) and Welch's
//! two-sample t-test for time deltas, over `statrs`'s Student t distribution.
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Arithmetic mean; `None` for an empty sample.
pub fn mean(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

/// Sample standard deviation (divisor n-1, as `torch.std` and statistics.md use); `None` below
/// two values.
pub fn std(x: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    let m = mean(x)?;
    let ss: f64 = x.iter().map(|v| (v - m) * (v - m)).sum();
    Some((ss / (x.len() - 1) as f64).sqrt())
}

/// Median (mean of the two middle values for an even count); `None` for an empty sample.
pub fn median(x: &[f64]) -> Option<f64> {
    if x.is_empty() {
        return None;
    }
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// The figures statistics.md reports for one list of values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample std; `None` for a single value.
    pub std: Option<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// `None` for an empty sample.
    pub fn of(x: &[f64]) -> Option<Summary> {
        Some(Summary {
            n: x.len(),
            mean: mean(x)?,
            std: std(x),
            median: median(x)?,
            min: x.iter().copied().fold(f64::INFINITY, f64::min),
            max: x.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// A t statistic, its degrees of freedom and a p-value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TTest {
    pub t: f64,
    pub df: f64,
    pub p: f64,
}

/// One-sided one-sample t-test of "the mean of `x` is less than `mu`": the same `t` and `p` as
/// `scipy.stats.ttest_1samp(x, mu, alternative="less")`. `None` below two values. Identical
/// values give `t = ±inf` (p 0 or 1), or NaN when they all equal `mu`, as scipy does.
pub fn ttest_1samp_less(x: &[f64], mu: f64) -> Option<TTest> {
    let (m, s) = (mean(x)?, std(x)?);
    let n = x.len() as f64;
    let t = (m - mu) / (s / n.sqrt());
    let df = n - 1.0;
    Some(TTest { t, df, p: student_t_cdf(t, df) })
}

/// Welch's unequal-variance t-test of candidate `b` against baseline `a`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// `mean(b) - mean(a)`: negative when the candidate is smaller (faster, lower loss).
    pub delta_mean: f64,
    /// `delta_mean / sqrt(var_a/n_a + var_b/n_b)`.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// One-sided p of "mean(b) < mean(a)" (`scipy.stats.ttest_ind(b, a, equal_var=False,
    /// alternative="less")`): the figure for "the candidate is faster".
    pub p_less: f64,
    /// Two-sided p of "mean(b) != mean(a)" (`alternative="two-sided"`).
    pub p_two_sided: f64,
}

/// Welch's t-test; `None` unless both samples have two or more values and not both are constant
/// (the test is undefined there).
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    let (ma, sa) = (mean(a)?, std(a)?);
    let (mb, sb) = (mean(b)?, std(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (sa * sa / na, sb * sb / nb);
    let se2 = va + vb;
    if se2 == 0.0 {
        return None;
    }
    let delta_mean = mb - ma;
    let t = delta_mean / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    let p_less = student_t_cdf(t, df);
    let p_two_sided = (2.0 * p_less.min(1.0 - p_less)).min(1.0);
    Some(Welch { delta_mean, t, df, p_less, p_two_sided })
}

/// P(T <= t) for Student's t with `df` degrees of freedom (`df > 0`, may be fractional), by
/// `statrs`; NaN where the distribution is undefined.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) if !t.is_nan() => dist.cdf(t),
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol, "{a} vs {b} (tol {tol})");
    }

    const TS: [f64; 9] = [-30.0, -4.2, -1.5, -0.3, 0.0, 0.01, 0.7, 2.5, 12.0];

    #[test]
    fn one_dof_is_cauchy() {
        for t in TS {
            close(student_t_cdf(t, 1.0), 0.5 + t.atan() / PI, 1e-13);
        }
    }

    #[test]
    fn two_dof_closed_form() {
        for t in TS {
            close(student_t_cdf(t, 2.0), 0.5 + t / (2.0 * (2.0 + t * t).sqrt()), 1e-13);
        }
    }

    #[test]
    fn three_and_four_dof_closed_forms() {
        for t in TS {
            let s3 = 3f64.sqrt();
            let f3 = 0.5 + (t / (s3 * (1.0 + t * t / 3.0)) + (t / s3).atan()) / PI;
            close(student_t_cdf(t, 3.0), f3, 1e-13);
            let u = 1.0 + t * t / 4.0;
            let f4 = 0.5 + 0.375 * (t / u.sqrt()) * (1.0 - t * t / (12.0 * u));
            close(student_t_cdf(t, 4.0), f4, 1e-13);
        }
    }

    #[test]
    fn large_dof_tends_to_normal() {
        // Φ at known quantiles; the t-vs-normal gap at df = 1e6 is below 1e-6.
        for (z, phi) in [
            (1.0, 0.841_344_746_068_542_9),
            (1.959_963_984_540_054, 0.975),
            (-2.326_347_874_040_840_8, 0.01),
            (3.0, 0.998_650_101_968_369_9),
        ] {
            close(student_t_cdf(z, 1e6), phi, 1e-6);
        }
    }

    #[test]
    fn summary_figures() {
        let x = [3.0, 1.0, 2.0, 10.0];
        assert_eq!(mean(&x), Some(4.0));
        close(std(&x).unwrap(), (50.0f64 / 3.0).sqrt(), 1e-15);
        assert_eq!(median(&x), Some(2.5));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!((mean(&[]), std(&[1.0]), median(&[])), (None, None, None));
        let s = Summary::of(&x).unwrap();
        assert_eq!((s.n, s.min, s.max), (4, 1.0, 10.0));
    }

    #[test]
    fn one_sample_test_uses_n_minus_one_dof() {
        // Three values → 2 dof, where the CDF has a closed form.
        let x = [3.270, 3.275, 3.278];
        let m = (3.270 + 3.275 + 3.278) / 3.0;
        let t = (m - 3.28) / (std(&x).unwrap() / 3f64.sqrt());
        let r = ttest_1samp_less(&x, 3.28).unwrap();
        close(r.t, t, 1e-9);
        assert_eq!(r.df, 2.0);
        close(r.p, 0.5 + t / (2.0 * (2.0 + t * t).sqrt()), 1e-12);
        assert!(ttest_1samp_less(&[3.27], 3.28).is_none());
    }

    #[test]
    fn constant_samples_follow_scipy() {
        let below = ttest_1samp_less(&[3.27, 3.27], 3.28).unwrap();
        assert_eq!((below.t, below.p), (f64::NEG_INFINITY, 0.0));
        let above = ttest_1samp_less(&[3.29, 3.29], 3.28).unwrap();
        assert_eq!(above.p, 1.0);
        assert!(ttest_1samp_less(&[3.28, 3.28], 3.28).unwrap().p.is_nan());
    }

    #[test]
    fn welch_with_equal_sizes_and_spreads() {
        // Equal n and variance: df = 2(n-1) = 4 and t = delta / sqrt(2 s²/n).
        let a = [10.0, 11.0, 12.0];
        let b = [8.0, 9.0, 10.0];
        let w = welch(&a, &b).unwrap();
        assert_eq!(w.delta_mean, -2.0);
        close(w.t, -2.0 / (2.0f64 / 3.0).sqrt(), 1e-12);
        close(w.df, 4.0, 1e-12);
        let u = 1.0 + w.t * w.t / 4.0;
        let f4 = 0.5 + 0.375 * (w.t / u.sqrt()) * (1.0 - w.t * w.t / (12.0 * u));
        close(w.p_less, f4, 1e-12);
        close(w.p_two_sided, 2.0 * f4, 1e-12);
        assert!(welch(&a, &[1.0]).is_none());
        assert!(welch(&[1.0, 1.0], &[2.0, 2.0]).is_none());
    }
}
