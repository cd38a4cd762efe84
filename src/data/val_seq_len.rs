//! Packed validation (upstream #29: 262,144 tokens per sequence per reference rank): the BOS
//! loader's validation reads whole documents in sequences of this length, with their boundaries,
//! instead of record #1's rows of seq_len (batches.rs). At lab scale it scales with seq_len,
//! capped at the lab's validation tokens per rank.
use crate::recipe::registry::{technique, Lab, Technique};

/// `val_seq_len = 262144`: a token length.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::ValTokens, ..technique("val_seq_len", &[29], &["loader"]) };
