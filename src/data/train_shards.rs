//! The run reads only the first this many train shards by name, the loader wrapping round them
//! (Act 1's logs: 12, "1,200,000,000 across 12 files"). Full scale only: the lab reads its own
//! corpus whole, so the lab rule drops the key. stream.rs's `first_shards` takes them.
use crate::recipe::registry::{act1, Lab, Technique};

/// `train_shards = 12`: a count of files, for the full run only.
pub const TECHNIQUE: Technique =
    Technique { lab: Lab::FullOnly, ..act1("train_shards", &[1, 2, 3, 4, 5, 6], &[]) };
