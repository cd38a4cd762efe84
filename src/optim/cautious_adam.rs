//! Cautious weight decay on Adam (upstream #50), as on Muon since #43: decay only where Adam's
//! update already pulls the weight towards zero, by lr²·wd (with lr the parameter's effective
//! lr, schedule included), so the decay follows the square of the schedule:
//! ```text
//! u = lr·bias·m/(√v + eps)
//! p ← p − u − (lr·wd·lr)·[u·p ≥ 0]·p        upstream #53: [u·p > 0]
//! ```
use crate::recipe::CautiousMask;
use tch::Tensor;

/// p (fp32) minus Adam's update `u` and the cautious decay at `rate` = lr·wd·lr.
pub fn step(p: &Tensor, u: &Tensor, rate: f64, mask: CautiousMask) -> Tensor {
    let agree = match mask {
        CautiousMask::AtLeastZero => (u * p).ge(0.0),
        CautiousMask::AboveZero => (u * p).gt(0.0),
    };
    p - u - p * agree.to_kind(p.kind()) * rate
}
