//! The dense attention stays inside documents, each opened by an EOT token (Act 1, a6): the
//! documents come from eot_docs.rs, and batches.rs hands them to record #1's attention.
use crate::recipe::registry::{act1, Technique};

/// `doc_mask = true`: a switch of the dense attention.
pub const TECHNIQUE: Technique = act1("doc_mask", &[6], &["attn_layers"]);
