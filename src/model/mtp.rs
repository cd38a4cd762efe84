//! Multi-token prediction (upstream #53): early in training the same logits are also scored
//! against the tokens two and three ahead, so the trunk learns features that look further than
//! the next token; the extra targets fade out by stages and the last third of training is
//! plain next-token prediction. No extra parameters: the position-t logits serve every offset.
//! ```text
//! CE[t, k] = logsumexp(logits[t]) − logits[t, target[t + k]]     0 where t + k is past the end
//! loss     = Σ_t Σ_k w_k·CE[t, k]                                 a weighted sum, not a mean
//! ```
//! Offsets cross document boundaries; only the end of the rank's buffer is masked. The weights
//! at progress x = step / scheduled steps, for a base of n weights ([1, 0.5, 0.25] upstream):
//! stage k = #{j in 1..n : x ≥ j/n} keeps the first n − k weights, and the last of them (when
//! more than one) falls linearly to 0 over the stage: [1, 0.5, 0.25·(1 − 3x)], then
//! [1, 0.5·(1 − (3x − 1))], then [1] (also through the extension). The weights per step are
//! the step plan's (`optim::schedule::mtp_weights`), which the CLI reads without libtorch.
use crate::recipe::registry::{technique, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use tch::{Device, Kind, Tensor};

/// `[recipe.mtp]`: the base weights of the next tokens' losses (upstream #53: [1, 0.5, 0.25]),
/// each faded within its stage by the step plan.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub weights: Vec<f64>,
}

/// Trees before the section read `mtp = [1.0, 0.5, 0.25]`.
pub const TECHNIQUE: Technique =
    Technique { older: &[("mtp", Older::Field("weights"))], ..technique("mtp", &[53], &[]) };

#[cfg(not(recipe_only))]
/// logits: [N, V], targets: [N] (the next token of each position), w: the weights (two or
/// more) -> Σ_t Σ_k w_k·CE[t, k], fp32 scalar.
pub fn loss(logits: &Tensor, targets: &Tensor, w: &[f64]) -> Tensor {
    let (n, k) = (logits.size()[0], w.len() as i64);
    let dev = logits.device();
    // [N, k]: targets[t + j], 0 past the end (masked below)
    let idx = targets.constant_pad_nd([0, k - 1]).unfold(0, k, 1);
    let ce = logits.logsumexp([-1], true) - logits.gather(1, &idx, false); // [N, k]
                                                                           // keep[t, j] = t + j < N
    let t = Tensor::arange(n, (Kind::Int64, dev)).unsqueeze(1);
    let keep = (t + Tensor::arange(k, (Kind::Int64, dev))).lt(n);
    (ce.to_kind(Kind::Float) * keep.to_kind(Kind::Float) * on_device(w, dev)).sum(Kind::Float)
}

#[cfg(not(recipe_only))]
/// The weights as fp32 on `dev`, written there by one fill each: a fill takes its value as a
/// kernel argument, so no host→device copy (from pageable memory, one that waits for the
/// stream) runs per micro-batch. Each value is the f64 weight rounded to fp32, as a copy's.
pub fn on_device(w: &[f64], dev: Device) -> Tensor {
    let t = Tensor::empty([w.len() as i64], (Kind::Float, dev));
    for (j, &x) in w.iter().enumerate() {
        let _ = t.get(j as i64).fill_(x);
    }
    t
}
