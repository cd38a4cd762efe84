//! Adam on every n-th step (upstream #39: 2): Adam steps on odd steps only, on the sum of the
//! gradients of the steps between, while Muon steps every step. The embeddings and the head
//! are the big Adam tensors; halving their optimizer steps halves the bytes Adam moves per
//! step (the time model counts it, harness/src/cost/count.rs). The step loop's wait is in
//! src/optim/optimizer.rs.
use crate::recipe::registry::{technique, Lab, Technique};
use crate::recipe::Recipe;

/// `adam_every = 2`: a count of steps that is not a schedule, so the lab keeps it.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::Kept, ..technique("adam_every", &[39], &["muon"]) };

/// Adam steps on every this-many-th step (1 without the key).
pub fn every(r: &Recipe) -> u64 {
    r.adam_every.unwrap_or(1).max(1)
}
