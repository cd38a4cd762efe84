//! The block lambdas' init (upstream #45: 1.1): each block's (λ0, λ1), x = λ0·x + λ1·x0,
//! starts at (this, 0) instead of (1, 0), so the residual stream grows a little at each layer
//! from the start. With parallel residuals (upstream #73) each of the two sublayers' residual
//! lambdas starts at its square root, √1.1, which gives the same 1.1 over the block.
use crate::recipe::registry::{technique, Technique};
use crate::recipe::Recipe;

/// `block_lambda_init = 1.1`: a number.
pub const TECHNIQUE: Technique =
    technique("block_lambda_init", &[45, 73], &["x0_lambdas|parallel_residuals"]);

/// λ0's init: the key's value, or 1.
pub fn lambda0(r: &Recipe) -> f64 {
    r.block_lambda_init.unwrap_or(1.0)
}
