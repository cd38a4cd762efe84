//! Validation averages only the rows reference rank 0 reads (Act 1's a1: its script prints rank
//! 0's own mean, never all-reduced, over half of val_tokens). batches.rs narrows the rows loader's
//! validation (loader.rs `ValLoader::reference_rank0`).
use crate::recipe::registry::{act1, Technique};

/// `val_rank0_rows = true`: a switch of record #1's rows validation.
pub const TECHNIQUE: Technique = act1("val_rank0_rows", &[1], &["loader"]);
