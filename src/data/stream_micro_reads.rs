//! The stream read one micro-batch of every reference rank at a time (batch_rows ×
//! reference_ranks rows), not a whole step, so a shard's skipped tail is shorter (Act 1, from
//! a4). stream.rs's `Reads` carries it.
use crate::recipe::registry::{act1, Technique};

/// `stream_micro_reads = true`: a switch of the stream.
pub const TECHNIQUE: Technique =
    Technique { needs: &["stream_loader"], ..act1("stream_micro_reads", &[4, 5, 6], &[]) };
