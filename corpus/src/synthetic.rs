//! A seeded order-1 Markov chain corpus whose entropy rate is known exactly: the floor a
//! correct trainer's validation loss approaches and can never beat. The PRNG and samplers are
//! in-repo so the generated tokens never change with a dependency update.

/// `vocab` token ids `0..vocab`; each row moves to `successors` distinct ids with
/// Dirichlet(`alpha`) weights; everything derives from `seed`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MarkovSpec {
    pub vocab: usize,
    pub successors: usize,
    pub alpha: f64,
    pub seed: u64,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SyntheticError {
    #[error("markov vocab {0} must be in 2..=65536 (tokens are u16)")]
    Vocab(usize),
    #[error("markov successors {successors} must be in 1..=vocab ({vocab})")]
    Successors { successors: usize, vocab: usize },
    #[error("markov alpha {0} must be a positive finite number")]
    Alpha(f64),
}

impl MarkovSpec {
    pub fn check(&self) -> Result<(), SyntheticError> {
        if !(2..=65536).contains(&self.vocab) {
            return Err(SyntheticError::Vocab(self.vocab));
        }
        if !(1..=self.vocab).contains(&self.successors) {
            return Err(SyntheticError::Successors {
                successors: self.successors,
                vocab: self.vocab,
            });
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(SyntheticError::Alpha(self.alpha));
        }
        Ok(())
    }
}

/// splitmix64: tiny, fast, and fully specified, so streams are stable forever.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (multiply-shift; the bias is below 2^-32 for the sizes used here).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// Standard normal by the Marsaglia polar method.
    fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.uniform() - 1.0;
            let v = 2.0 * self.uniform() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }

    /// Gamma(shape, 1) by Marsaglia–Tsang; shape < 1 uses the boost Gamma(shape+1)·U^(1/shape).
    fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let u = 1.0 - self.uniform(); // (0, 1]
            return self.gamma(shape + 1.0) * u.powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = 1.0 - self.uniform();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }
}

/// The transition table: row `i` lists its successors and their probabilities.
struct Chain {
    k: usize,
    next: Vec<u16>,
    prob: Vec<f64>,
}

impl Chain {
    fn new(spec: &MarkovSpec) -> Chain {
        if let Err(e) = spec.check() {
            panic!("invalid MarkovSpec: {e}");
        }
        let (v, k) = (spec.vocab, spec.successors);
        let mut rng = SplitMix64(spec.seed);
        let mut next = Vec::with_capacity(v * k);
        let mut prob = Vec::with_capacity(v * k);
        let mut ids: Vec<usize> = (0..v).collect();
        for i in 0..v {
            // Successor i+1 (mod V) is always present, so the chain is irreducible and its
            // stationary distribution unique; the other k-1 are a partial Fisher–Yates draw.
            let ring = (i + 1) % v;
            ids.swap(0, ring);
            for j in 1..k {
                let r = j + rng.below(v - j);
                ids.swap(j, r);
            }
            let weights: Vec<f64> = (0..k).map(|_| rng.gamma(spec.alpha)).collect();
            let total: f64 = weights.iter().sum();
            for j in 0..k {
                next.push(ids[j] as u16);
                prob.push(weights[j] / total);
            }
        }
        Chain { k, next, prob }
    }

    fn row(&self, i: usize) -> (&[u16], &[f64]) {
        let r = i * self.k..(i + 1) * self.k;
        (&self.next[r.clone()], &self.prob[r])
    }

    /// The stationary distribution by lazy power iteration, π ← (π + πP)/2, which converges
    /// for any irreducible chain, periodic or not.
    fn stationary(&self, v: usize) -> Vec<f64> {
        let mut pi = vec![1.0 / v as f64; v];
        for _ in 0..100_000 {
            let mut step = vec![0.0; v];
            for (i, &p) in pi.iter().enumerate() {
                let (succ, pr) = self.row(i);
                for (&s, &q) in succ.iter().zip(pr) {
                    step[s as usize] += p * q;
                }
            }
            let mut delta = 0.0;
            for (a, b) in pi.iter_mut().zip(&step) {
                let new = 0.5 * (*a + b);
                delta += (new - *a).abs();
                *a = new;
            }
            if delta < 1e-13 {
                break;
            }
        }
        pi
    }
}

fn entropy(p: &[f64]) -> f64 {
    p.iter().filter(|&&q| q > 0.0).map(|&q| -q * q.ln()).sum()
}

/// `n_tokens` tokens of the chain, starting from a seeded uniform state.
///
/// Panics if `spec.check()` fails.
pub fn generate(spec: &MarkovSpec, n_tokens: usize) -> Vec<u16> {
    let chain = Chain::new(spec);
    // A separate stream from the one that built the table.
    let mut rng = SplitMix64(spec.seed ^ 0xD1B5_4A32_D192_ED03);
    let mut out = Vec::with_capacity(n_tokens);
    let mut state = rng.below(spec.vocab);
    for _ in 0..n_tokens {
        out.push(state as u16);
        let (succ, pr) = chain.row(state);
        let u = rng.uniform();
        let mut acc = 0.0;
        // Falls back to the last successor if rounding leaves the sum just under u.
        state = succ[succ.len() - 1] as usize;
        for (&s, &q) in succ.iter().zip(pr) {
            acc += q;
            if u < acc {
                state = s as usize;
                break;
            }
        }
    }
    out
}

/// The entropy rate `Σ_i π_i H(P_i)` in nats/token: the best achievable cross-entropy.
///
/// Panics if `spec.check()` fails.
pub fn entropy_rate(spec: &MarkovSpec) -> f64 {
    let chain = Chain::new(spec);
    let pi = chain.stationary(spec.vocab);
    pi.iter().enumerate().map(|(i, &p)| p * entropy(chain.row(i).1)).sum()
}

/// The entropy of the stationary distribution in nats: the loss of a unigram model.
///
/// Panics if `spec.check()` fails.
pub fn unigram_entropy(spec: &MarkovSpec) -> f64 {
    let chain = Chain::new(spec);
    entropy(&chain.stationary(spec.vocab))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const SMALL: MarkovSpec = MarkovSpec { vocab: 64, successors: 8, alpha: 0.5, seed: 7 };

    #[test]
    fn entropy_rate_below_unigram() {
        let h = entropy_rate(&SMALL);
        let u = unigram_entropy(&SMALL);
        assert!(h > 0.0 && h < (8f64).ln(), "h = {h}");
        assert!(h < u, "h = {h}, unigram = {u}");
        assert!(u <= (64f64).ln() + 1e-9);
    }

    #[test]
    fn empirical_conditional_entropy_matches() {
        let toks = generate(&SMALL, 400_000);
        let mut pair: HashMap<(u16, u16), f64> = HashMap::new();
        let mut first: HashMap<u16, f64> = HashMap::new();
        for w in toks.windows(2) {
            *pair.entry((w[0], w[1])).or_default() += 1.0;
            *first.entry(w[0]).or_default() += 1.0;
        }
        let n = (toks.len() - 1) as f64;
        let emp: f64 = pair.iter().map(|(&(a, _), &c)| -(c / n) * (c / first[&a]).ln()).sum();
        let h = entropy_rate(&SMALL);
        assert!((emp - h).abs() < 0.02, "empirical {emp} vs exact {h}");
        // Every transition must be one the table allows: at most k successors per token.
        let mut succ: HashMap<u16, usize> = HashMap::new();
        for &(a, _) in pair.keys() {
            *succ.entry(a).or_default() += 1;
        }
        assert!(succ.values().all(|&c| c <= SMALL.successors));
    }

    #[test]
    fn deterministic_for_a_seed() {
        let a = generate(&SMALL, 1000);
        assert_eq!(a, generate(&SMALL, 1000));
        let other = MarkovSpec { seed: 8, ..SMALL };
        assert_ne!(a, generate(&other, 1000));
        assert!(a.iter().all(|&t| (t as usize) < SMALL.vocab));
        // Pinned so a change to the PRNG or the samplers is noticed.
        assert_eq!(&a[..8], &PINNED_PREFIX);
    }

    const PINNED_PREFIX: [u16; 8] = [24, 7, 62, 55, 49, 37, 42, 4];

    #[test]
    fn uniform_rows_have_entropy_log_k() {
        // A huge alpha makes the Dirichlet weights nearly equal.
        let spec = MarkovSpec { vocab: 32, successors: 4, alpha: 1e6, seed: 1 };
        assert!((entropy_rate(&spec) - (4f64).ln()).abs() < 1e-3);
    }

    #[test]
    fn gamma_mean_is_shape() {
        let mut rng = SplitMix64(3);
        for shape in [0.3, 1.0, 4.0] {
            let n = 200_000;
            let mean: f64 = (0..n).map(|_| rng.gamma(shape)).sum::<f64>() / n as f64;
            assert!((mean - shape).abs() < 0.03 * shape.max(1.0), "{shape}: {mean}");
        }
    }

    #[test]
    fn bad_specs_are_named() {
        let bad = MarkovSpec { successors: 65, ..SMALL };
        assert_eq!(
            bad.check().unwrap_err().to_string(),
            "markov successors 65 must be in 1..=vocab (64)"
        );
        assert!(MarkovSpec { alpha: 0.0, ..SMALL }.check().is_err());
        assert!(MarkovSpec { vocab: 1, ..SMALL }.check().is_err());
    }
}
