//! Cautious weight decay (upstream #43): decay only the entries where the update already pulls
//! the weight towards zero, so decay never fights the gradient's direction. Lr-coupled as
//! upstream: with Muon's scheduled lr `lr` and the parameter's effective lr `eff_lr`,
//! ```text
//! p ← p − eff_lr·V − eff_lr·(lr·wd)·[V·p ≥ 0]·p          V: the normalized update
//! ```
//! so the decay follows the square of the schedule.
use anyhow::Result;
use tch::Tensor;

/// `p ← p − update − rate·[update·p ≥ 0]·p` in place; `update` is eff_lr·V (same signs as V)
/// and `rate` = eff_lr·lr·wd.
pub fn step(p: &mut Tensor, update: &Tensor, rate: f64) -> Result<()> {
    let agree = (update * &*p).f_ge(0.0)?.to_kind(p.kind());
    let decay = &*p * agree * rate;
    let _ = p.f_sub_(&(update + decay))?;
    Ok(())
}
