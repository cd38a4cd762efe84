//! The stream's first read handed out twice, shifting all later ones by a read (Act 1's a4: its
//! script fetches a batch, then resets the loader). stream.rs's `Reads` carries it.
use crate::recipe::registry::{act1, Technique};

/// `stream_repeat_first = true`: a switch of the stream.
pub const TECHNIQUE: Technique =
    Technique { needs: &["stream_loader"], ..act1("stream_repeat_first", &[4], &[]) };
