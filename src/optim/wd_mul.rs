//! Weight-decay multipliers on Adam's rate (upstream #55): the value embeddings decay 5x and the
//! head 150x (the input embedding shares the head's), so the large tables cannot grow without
//! bound while the rest keeps the base decay. The groups that take them are in
//! src/model/params.rs.
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};

/// `[recipe.wd_mul]`: the value embeddings' and the head's multipliers.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub value_embeds: f64,
    pub head: f64,
}

pub const TECHNIQUE: Technique = technique("wd_mul", &[55], &["muon"]);
