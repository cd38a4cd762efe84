//! The common lab rule: how a full-scale recipe shrinks onto a 2-core CPU. The `[lab]` table of
//! every manifest sets the shapes and the step budget; every other key is mapped by its rule in
//! the registry (src/recipe/registry.rs).
use super::registry::Lab;

/// The lab rule's numbers for one recipe: full-scale values and their lab counterparts.
pub struct LabRule {
    pub ratio: f64,
    /// (full, lab) layer counts.
    pub layers: (usize, usize),
    /// (full, lab) row lengths.
    pub seq_len: (usize, usize),
    pub val_per_rank: usize,
}

impl LabRule {
    /// Maps `v` by `lab`; values of the wrong type are left for deserialization to reject.
    pub fn apply(&self, lab: Lab, v: &mut toml::Value) {
        let tokens = |n: i64| (n * self.seq_len.1 as i64 / self.seq_len.0 as i64).max(1);
        match (lab, v) {
            (Lab::Same | Lab::Kept | Lab::Table | Lab::FullOnly, _) => {}
            (Lab::Steps, toml::Value::Integer(n)) => *n = map_steps(*n as u64, self.ratio) as i64,
            (Lab::Layers, toml::Value::String(p)) if p.chars().count() == self.layers.0 => {
                *p = resample(p, self.layers.1)
            }
            (Lab::Layer, toml::Value::Integer(n)) => {
                *n = *n * self.layers.1 as i64 / self.layers.0 as i64
            }
            (Lab::Layer, toml::Value::Array(a)) => a.iter_mut().for_each(|v| self.apply(lab, v)),
            (Lab::Tokens, toml::Value::Integer(n)) => *n = tokens(*n),
            (Lab::Tokens, toml::Value::Array(a)) => a.iter_mut().for_each(|v| self.apply(lab, v)),
            (Lab::ValTokens, toml::Value::Integer(n)) => {
                *n = tokens(*n).min(self.val_per_rank as i64)
            }
            (Lab::Fields(fields), toml::Value::Table(t)) => {
                for (k, lab) in fields {
                    if let Some(v) = t.get_mut(*k) {
                        self.apply(*lab, v);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A step count on another budget: rounded, and never mapped to 0 unless it was 0.
pub fn map_steps(steps: u64, ratio: f64) -> u64 {
    ((steps as f64 * ratio).round() as u64).max(u64::from(steps > 0))
}

/// Resamples a per-layer pattern (one character per layer) to `n` layers by taking the layer at
/// the centre of each of `n` equal slices (12 -> 4 takes layers 1, 4, 7, 10), so a symmetric
/// pattern stays symmetric.
pub fn resample(pattern: &str, n: usize) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let l = chars.len();
    (0..n).map(|j| chars[((2 * j + 1) * l) / (2 * n)]).collect()
}
