//! What upstream's GPU run keeps in bf16, record by record: the storage of each kind of
//! parameter, the kind rotary and the loss compute in, and Adam's moments. On CUDA the compute
//! kind is bf16; the CPU lab computes in fp32, so there these choices change no value (the walk
//! compares recipes without them). Each one is read where its value is made: a parameter's
//! `Storage` (src/model/params.rs), the rotary tables, the head's loss, the optimizers' state.
//! ```text
//! #18  embeddings   embed, value_embeds: bf16 tables
//! #32  linears      lm_head and the gates (every nn.Linear): bf16
//! #32  rotary       cos/sin tables and the rotation in bf16
//! #32  adam_state   "bf16": every Adam moment in bf16
//! #37  loss         training's softcap and cross-entropy on bf16 logits (#60: fp32 again)
//! #56  adam_state   "fp32": every Adam moment in fp32, the bf16 parameters' too
//! #57  matrices     QKVO, c_fc, c_proj in bf16, Muon updating them through a mantissa buffer
//! ```
use crate::recipe::registry::{technique, Older, Technique};
use crate::recipe::Recipe;
use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

/// `[recipe.precision]`: each switch off (absent) keeps fp32, as record #1 does.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// The embedding tables stored in bf16 (upstream #18).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub embeddings: bool,
    /// The lm_head and the attention gates stored in bf16, as every nn.Linear is from upstream
    /// #32 (the block matrices stay fp32 master weights until `matrices`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub linears: bool,
    /// Rotary's tables and the rotation in the compute kind (upstream #32).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rotary: bool,
    /// Adam's moments in one kind for every parameter; absent: each in its parameter's kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adam_state: Option<AdamState>,
    /// Training's softcap and cross-entropy on the compute kind's logits instead of fp32 ones
    /// (upstream #37; #60's fused kernel is fp32 again); evaluation stays fp32.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loss: bool,
    /// The block matrices (QKVO, c_fc, c_proj) stored in bf16, Muon updating their fp32 value
    /// through a 16-bit mantissa buffer (upstream #57; src/optim/mantissa.rs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub matrices: bool,
}

/// The one kind Adam keeps its moments in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AdamState {
    /// bf16 on CUDA, whatever the parameter's kind (upstream #32; the CPU lab keeps fp32).
    Bf16,
    /// fp32, the bf16 parameters' moments too (upstream #56).
    Fp32,
}

/// Trees before the section read one switch per choice: `bf16_embeddings = true`, ...,
/// `bf16_adam_state` or `adam_fp32_state`.
pub const TECHNIQUE: Technique = Technique {
    older: &[
        ("bf16_embeddings", Older::Field("embeddings")),
        ("bf16_linears", Older::Field("linears")),
        ("bf16_rotary", Older::Field("rotary")),
        ("bf16_adam_state", Older::Is("adam_state", "bf16")),
        ("adam_fp32_state", Older::Is("adam_state", "fp32")),
        ("bf16_loss", Older::Field("loss")),
        ("bf16_matrices", Older::Field("matrices")),
    ],
    ..technique("precision", &[18, 32, 37, 56, 57, 60], &[])
};

/// The recipe's choices; all off without the section.
pub fn of(r: &Recipe) -> Section {
    r.precision.clone().unwrap_or_default()
}

impl Section {
    /// Each choice has what it acts on: rotary's tables, Muon's state and mantissas.
    pub fn validate(&self, r: &Recipe) -> Result<()> {
        ensure!(!self.rotary || r.rotary.is_some(), "recipe: precision.rotary needs rotary");
        for (on, key) in [(self.adam_state.is_some(), "adam_state"), (self.matrices, "matrices")] {
            ensure!(!on || r.muon.is_some(), "recipe: precision.{key} needs muon");
        }
        Ok(())
    }
}
