//! The softmax over the padded vocabulary (upstream #5, with its 50,304-row table): the
//! cross-entropy normalises over every logit the head computes, the padding rows included,
//! instead of llm.c's first vocab_size (record #1). The padding logits' probabilities then
//! train down; the loss over the real tokens is what validation reports either way.
use crate::recipe::registry::{technique, Technique};
use crate::recipe::Recipe;

/// `loss_over_padding = true`: a switch; Act 1's steps have it too.
pub const TECHNIQUE: Technique =
    Technique { act1: &[1, 2, 3, 4, 5, 6], ..technique("loss_over_padding", &[5], &[]) };

/// The logits the softmax runs over: the first vocab_size, or None for all of them.
pub fn softmax_width(r: &Recipe) -> Option<i64> {
    (!r.loss_over_padding).then_some(r.vocab_size as i64)
}
