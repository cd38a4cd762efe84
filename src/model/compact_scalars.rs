//! The compact scalar bank (upstream #49): the learned scalars relaid out by kind, every
//! residual lambda, then every x0 lambda, the attention lambdas, smear's and backout's weights,
//! and one skip lambda last instead of a slot per layer. The values train as before; what
//! changes is where each sits in the one tensor Adam steps (src/model/scalars.rs). Read where
//! the bank is laid out: `Gpt::new` builds the single skip last, and the x0 lambdas take the
//! split layout (x0_lambdas.rs).
use crate::recipe::registry::{technique, Technique};

/// `compact_scalars = true`: a switch.
pub const TECHNIQUE: Technique = technique("compact_scalars", &[49], &[]);
