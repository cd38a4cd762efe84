//! Act 1's loader (a1; Keller Jordan's first modded-nanogpt script): the train shards read in
//! order as one stream, each step taking the next batch_tokens + 1 tokens as its rows; a shard's
//! tail too short for a step is skipped. The stream is stream.rs; batches.rs picks it when the
//! key is on, in place of record #1's shuffled rows (loader.rs).
use crate::recipe::registry::{act1, Technique};

/// `stream_loader = true`: a switch, never with `loader = "bos"`.
pub const TECHNIQUE: Technique = act1("stream_loader", &[1, 2, 3, 4, 5, 6], &["loader"]);
