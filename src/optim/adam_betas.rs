//! Adam's betas per kind of parameter (upstream #57), replacing the recipe's beta1 and beta2
//! where set: a fast first moment for the head (0.5), slower ones for the value embeddings and
//! the x0 lambdas, the gates' (0.9, 0.99). The embedding shares the head's. The scalars keep
//! `[recipe.scalar_adam]`'s betas: upstream #57 folds their Adam into the main one, which with
//! the same lr, eps, decay and steps is the same update. The groups that take them are in
//! src/model/params.rs.
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};

/// `[recipe.adam_betas]`: (β1, β2) of each kind.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub head: [f64; 2],
    pub value_embeds: [f64; 2],
    pub x0_lambdas: [f64; 2],
    /// The smear, skip, attention and value-embedding gates.
    pub gates: [f64; 2],
}

pub const TECHNIQUE: Technique = technique("adam_betas", &[57], &["muon"]);
