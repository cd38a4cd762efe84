//! The x0 lambdas apart (upstream #52): each block's λ1 (x = λ0·x + λ1·x0) leaves the scalar
//! bank and becomes its own parameter, [L], in the main Adam with its own betas (from #57),
//! while the scalar bank keeps the rest. Read where the x0 lambdas are laid out
//! (x0_lambdas.rs).
use crate::recipe::registry::{technique, Technique};

/// `x0_lambdas_apart = true`: a switch.
pub const TECHNIQUE: Technique = technique("x0_lambdas_apart", &[52], &["x0_lambdas"]);
