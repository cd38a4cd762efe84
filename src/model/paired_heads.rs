//! Paired-head attention (upstream #58), on a few short-window layers: each token becomes two
//! rows of a sequence twice as long, the first carrying heads 0..H/2 and the second heads
//! H/2..H, and H/2 heads attend over that sequence. Head slot s thus reads both heads s and
//! s + H/2 of earlier tokens (and of its own token), a wider view at the same cost:
//! ```text
//! q, k, v: [B, T, H, D] -> [B, 2T, H/2, D]      row 2t + h/(H/2), slot h mod H/2 holds head h of token t
//! rotary:  head h of token t at position 2t + h mod 2       (upstream rotates pairs of heads
//!          (2g, 2g + 1) as one 2D-wide head at 2t and 2t + 1, before the view)
//! documents: every boundary doubled; the window stays W rows (W/2 tokens)
//! ```
//! The value embedding and both gates act per head, before and after, as in the other layers.
use super::attend::{attend, Docs, Pattern};
use super::rotary::Rotary;
use anyhow::{ensure, Result};
use tch::Tensor;

/// q, k (normed, not rotated), v: [B, T, H, D] -> [B, T, H, D]; `window` in rows of the doubled
/// sequence.
pub fn attention(
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    rotary: &Rotary,
    docs: &Docs,
    (window, scale): (i64, Option<f64>),
) -> Result<Tensor> {
    let (b, t, h, d) = q.size4()?;
    ensure!(h % 2 == 0, "paired heads: {h} heads do not pair");
    let (q, k) = (rotary.apply_paired(q)?, rotary.apply_paired(k)?);
    // [B, T, H, D] -> [B, H/2, 2T, D]: the row-major view, then attention's layout.
    let paired = |x: &Tensor| x.contiguous().view([b, 2 * t, h / 2, d]).transpose(1, 2);
    let docs = Some(docs.doubled()?);
    let pattern = Pattern { causal: true, window: Some(window), docs, scale };
    let y = attend(&paired(&q), &paired(&k), &paired(v), &pattern)?; // [B, H/2, 2T, D]
    Ok(y.transpose(1, 2).contiguous().view([b, t, h, d]))
}
