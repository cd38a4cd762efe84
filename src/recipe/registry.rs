//! The registry of recipe keys: one entry per key of [`Recipe`](super::Recipe), with the
//! upstream records that shaped it, what it needs, and how the lab rule maps it. Validation and
//! the lab rule read this table; a test fails when a key has no entry.
//!
//! A technique whose recipe section lives in its own module (`[recipe.bigram_hash]` in
//! `src/model/bigram_hash.rs`) keeps its entry there too, as that module's `TECHNIQUE`; the
//! list below names it in one line.
use super::super::data; // `crate::data` in the trainer, `trainer::data` in the CLI
use crate::{model, optim};

/// How the common lab rule maps a key onto the 2-core CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lab {
    /// Unchanged (a float, a flag, a name).
    Same,
    /// An integer that counts no training steps (a seed, channels, iterations): unchanged.
    Kept,
    /// Set by the common `[lab]` table of every manifest.
    Table,
    /// A step count: mapped onto the lab budget by the ratio of budgets.
    Steps,
    /// A per-layer pattern: resampled to the lab's layer count.
    Layers,
    /// A layer index: the lab layer whose slice of the full layers holds it.
    Layer,
    /// A token length: scaled with seq_len.
    Tokens,
    /// A validation length: scaled with seq_len, capped at the lab's val tokens per rank.
    ValTokens,
    /// A choice of the full run's data that the lab's own corpus has no use for: dropped.
    FullOnly,
    /// A table: the rules of its fields (the others are unchanged).
    Fields(&'static [(&'static str, Lab)]),
}

/// One recipe key.
#[derive(Debug)]
pub struct Technique {
    pub key: &'static str,
    /// Upstream records that introduced or changed it; `[1]` for record #1's base keys; empty
    /// for a key only Act 1 has.
    pub records: &'static [u32],
    /// Act 1's steps (Tyler Romero's nanogpt-speedrun, a1 ... a6) that use it.
    pub act1: &'static [u32],
    /// Keys that must be on when this one is; "a|b": one of them.
    pub needs: &'static [&'static str],
    /// Keys that must be off when this one is on (it replaces them).
    pub excludes: &'static [&'static str],
    pub lab: Lab,
    /// How a tree older than this key's section read it: each older key and where in the
    /// section its value is (the CLI writes a manifest that way for such a tree). Empty when
    /// the section is the older key's own table, or the key has no section.
    pub older: &'static [(&'static str, Older)],
}

/// Where an older key's value is in a section.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Older {
    /// The section's field of this name (`smear = 12` is `[recipe.smear] gate_channels = 12`).
    Field(&'static str),
    /// `true` when the section is there: the older key was the technique's switch.
    On,
    /// `true` when the section's field of this name holds this choice (`bf16_adam_state` is
    /// `[recipe.precision] adam_state = "bf16"`).
    Is(&'static str, &'static str),
}

impl Technique {
    /// A key after record #1: absent (or its default) means off.
    pub fn is_technique(&self) -> bool {
        self.records.first().is_some_and(|&r| r > 1) || !self.act1.is_empty()
    }
}

const fn base(key: &'static str, lab: Lab) -> Technique {
    Technique { key, records: &[1], act1: &[], needs: &[], excludes: &[], lab, older: &[] }
}

pub const fn technique(
    key: &'static str,
    records: &'static [u32],
    needs: &'static [&'static str],
) -> Technique {
    Technique { key, records, act1: &[], needs, excludes: &[], lab: Lab::Same, older: &[] }
}

/// A key Act 1 brought (its steps), which no upstream record of the main track has.
pub const fn act1(
    key: &'static str,
    steps: &'static [u32],
    excludes: &'static [&'static str],
) -> Technique {
    Technique { key, records: &[], act1: steps, needs: &[], excludes, lab: Lab::Same, older: &[] }
}

pub const REGISTRY: &[Technique] = &[
    // Record #1 (llm.c's GPT-2 small).
    base("vocab_size", Lab::Table),
    base("padded_vocab_size", Lab::Table),
    base("n_layer", Lab::Table),
    base("n_head", Lab::Table),
    base("n_embd", Lab::Table),
    base("max_seq_len", Lab::Table),
    base("ln_eps", Lab::Same),
    base("init_std", Lab::Same),
    base("tokenizer", Lab::Table),
    base("seq_len", Lab::Table),
    base("batch_rows", Lab::Table),
    base("batch_tokens", Lab::Table),
    data::batch_schedule::TECHNIQUE,
    data::doc_len_schedule::TECHNIQUE,
    base("reference_ranks", Lab::Table),
    base("steps", Lab::Table),
    base("lr", Lab::Same),
    base("warmup_steps", Lab::Steps),
    base("min_lr_frac", Lab::Same),
    base("beta1", Lab::Same),
    base("beta2", Lab::Same),
    base("eps", Lab::Same),
    base("weight_decay", Lab::Same),
    base("grad_clip", Lab::Same),
    base("val_every", Lab::Table),
    base("val_tokens", Lab::Table),
    base("seed", Lab::Kept),
    // The modern speedrun, upstream #2-#29.
    model::norm::TECHNIQUE,
    model::embed_norm::TECHNIQUE,
    model::qk_norm::TECHNIQUE,
    Technique { act1: &[1, 2, 3, 4, 5, 6], ..technique("activation", &[5], &[]) },
    Technique { act1: &[1, 2, 3, 4, 5, 6], ..technique("init", &[19], &[]) },
    model::zero_proj::TECHNIQUE,
    model::untied_head::TECHNIQUE,
    model::head_embed::TECHNIQUE,
    Technique { act1: &[2, 3, 4, 5, 6], ..technique("rotary", &[2, 17, 58], &[]) },
    model::x0_lambdas::TECHNIQUE,
    model::unet::TECHNIQUE,
    model::skip_gate::TECHNIQUE,
    model::single_skip::TECHNIQUE,
    model::block_lambda_init::TECHNIQUE,
    model::x0_lambdas_apart::TECHNIQUE,
    model::value_embed::TECHNIQUE,
    model::attn_layers::TECHNIQUE,
    model::mlp_layers::TECHNIQUE,
    model::windows::TECHNIQUE,
    model::attn_scale::TECHNIQUE,
    model::yarn::TECHNIQUE,
    model::attn_gate::TECHNIQUE,
    model::value_gate::TECHNIQUE,
    model::sa_lambdas::TECHNIQUE,
    model::tall_matrices::TECHNIQUE,
    model::key_offset::TECHNIQUE,
    model::bigram_hash::TECHNIQUE,
    model::parallel_residuals::TECHNIQUE,
    model::compact_scalars::TECHNIQUE,
    model::qkv_init_mul::TECHNIQUE,
    model::uniform_attn_out::TECHNIQUE,
    model::mtp::TECHNIQUE,
    model::smear::TECHNIQUE,
    model::backout::TECHNIQUE,
    Technique { act1: &[5, 6], ..technique("softcap", &[9, 18, 19, 28, 54], &[]) },
    model::fp8_head::TECHNIQUE,
    model::fp8_mlp::TECHNIQUE,
    model::loss_over_padding::TECHNIQUE,
    model::precision::TECHNIQUE,
    data::loader::TECHNIQUE,
    data::val_seq_len::TECHNIQUE,
    // Act 1 (Tyler Romero's steps from the llm.c baseline): record #1's dense layers and loader
    // as Keller Jordan's first modded-nanogpt script has them.
    data::stream_loader::TECHNIQUE,
    data::stream_micro_reads::TECHNIQUE,
    data::stream_repeat_first::TECHNIQUE,
    model::doc_mask::TECHNIQUE,
    model::attn_window::TECHNIQUE,
    model::no_bias::TECHNIQUE,
    model::attn_branch_scale::TECHNIQUE,
    optim::grad_sum_factor::TECHNIQUE,
    optim::clock_from_step::TECHNIQUE,
    data::train_shards::TECHNIQUE,
    data::val_rank0_rows::TECHNIQUE,
    Technique {
        lab: Lab::Fields(&[("ns_steps", Lab::Kept)]),
        ..act1("muon_classic", &[3, 4, 5, 6], &["muon", "attn_layers"])
    },
    optim::muon::TECHNIQUE,
    optim::lr_mul::TECHNIQUE,
    optim::wd_mul::TECHNIQUE,
    optim::gates_in_adam::TECHNIQUE,
    optim::adam_betas::TECHNIQUE,
    optim::adam_every::TECHNIQUE,
    optim::cautious_adam::TECHNIQUE,
    optim::scalar_adam::TECHNIQUE,
    optim::lr_schedule::TECHNIQUE,
    optim::loss_sum::TECHNIQUE,
    optim::untimed_warmup::TECHNIQUE,
    optim::iteration_extension::TECHNIQUE,
    optim::extension_final::TECHNIQUE,
    optim::rounded_stages::TECHNIQUE,
];

/// The entry of `key`.
pub fn entry(key: &str) -> Option<&'static Technique> {
    REGISTRY.iter().find(|t| t.key == key)
}
