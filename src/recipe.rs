//! Every hyperparameter and flag of a record, read from `[recipe]` of `records/NN.toml`.
//!
//! Record #1's keys have no defaults: a manifest spells them out, so a typo or a missing key is
//! an error naming the file, line and key instead of a silent default. Every key after #1 (here
//! and in `recipe/techniques.rs`) defaults to off, which is record #1's behaviour.
//!
//! A technique with a section of its own (`[recipe.bigram_hash]`) declares it in its module
//! (`bigram_hash::Section`, with its registry entry); its field here is one line, absent = off.
use crate::model::{
    attn_gate, backout, bigram_hash, fp8_head, fp8_mlp, head_embed, key_offset, mtp, norm,
    parallel_residuals, precision, sa_lambdas, single_skip, smear, value_embed, value_gate,
    windows, yarn,
};
use crate::optim::{
    adam_betas, cautious_adam, grad_sum_factor, lr_mul, lr_schedule, muon, scalar_adam, wd_mul,
};
use anyhow::{bail, ensure, Context, Result};
use lab::LabRule;
use serde::{Deserialize, Serialize};
use std::path::Path;
// The CLI mounts these files as `trainer::data`, beside a `data` module of its own, so the path
// goes through this module's parent, which is the crate in the trainer and `trainer` in the CLI.
use super::data::{batch_schedule, doc_len_schedule, loader};

pub mod lab;
pub mod registry;
pub mod techniques;

/// The most weights multi-token prediction takes (a plan holds them in a fixed array).
pub const MTP_MAX: usize = 4;
pub use techniques::*;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    // ---- model
    /// Tokens that take part in the loss; logits past it (padding) are left out.
    pub vocab_size: usize,
    /// Rows of the token embedding (a multiple of 64 or 128 for fast matmuls).
    pub padded_vocab_size: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_embd: usize,
    /// Rows of the learned position embedding.
    pub max_seq_len: usize,
    pub ln_eps: f64,
    pub init_std: f64,
    // ---- data
    pub tokenizer: Tokenizer,
    pub seq_len: usize,
    /// Rows per rank per micro-batch.
    pub batch_rows: usize,
    /// Tokens per optimizer step over all ranks; the rest is gradient accumulation.
    pub batch_tokens: usize,
    #[serde(default)]
    pub batch_schedule: Option<Vec<usize>>, // src/data/batch_schedule.rs
    #[serde(default)]
    pub doc_len_schedule: Option<Vec<usize>>, // src/data/doc_len_schedule.rs
    /// Ranks of the official run; fewer ranks keep its batch by accumulation.
    pub reference_ranks: usize,
    // ---- optimizer and schedule
    pub steps: u64,
    pub lr: f64,
    pub warmup_steps: u64,
    pub min_lr_frac: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub grad_clip: f64,
    // ---- evaluation
    pub val_every: u64,
    pub val_tokens: usize,
    pub seed: u64,
    // ---- techniques after #1 (recipe/techniques.rs); absent = off = record #1
    #[serde(default)]
    pub norm: norm::Kind, // src/model/norm.rs
    #[serde(default)]
    pub embed_norm: bool, // src/model/embed_norm.rs
    #[serde(default)]
    pub qk_norm: bool, // src/model/qk_norm.rs
    #[serde(default)]
    pub activation: Activation,
    #[serde(default)]
    pub init: Init,
    #[serde(default)]
    pub zero_proj: bool, // src/model/zero_proj.rs
    #[serde(default)]
    pub untied_head: bool, // src/model/untied_head.rs
    pub head_embed: Option<head_embed::Section>, // src/model/head_embed.rs
    #[serde(default)]
    pub rotary: Option<Rotary>,
    #[serde(default)]
    pub x0_lambdas: bool, // src/model/x0_lambdas.rs
    #[serde(default)]
    pub unet: bool, // src/model/unet.rs
    #[serde(default)]
    pub skip_gate: Option<f64>, // src/model/skip_gate.rs
    pub single_skip: Option<single_skip::Section>, // src/model/single_skip.rs
    #[serde(default)]
    pub x0_lambdas_apart: bool, // src/model/x0_lambdas_apart.rs
    #[serde(default)]
    pub block_lambda_init: Option<f64>, // src/model/block_lambda_init.rs
    pub precision: Option<precision::Section>,     // src/model/precision.rs
    #[serde(default)]
    pub attn_layers: Option<String>, // src/model/attn_layers.rs
    #[serde(default)]
    pub mlp_layers: Option<String>, // src/model/mlp_layers.rs
    pub windows: Option<windows::Section>,         // src/model/windows.rs
    #[serde(default)]
    pub attn_scale: Option<f64>, // src/model/attn_scale.rs
    pub yarn: Option<yarn::Section>,               // src/model/yarn.rs
    #[serde(default)]
    pub tall_matrices: bool,  // src/model/tall_matrices.rs
    pub key_offset: Option<key_offset::Section>,   // src/model/key_offset.rs
    #[serde(default)]
    pub compact_scalars: bool, // src/model/compact_scalars.rs
    #[serde(default)]
    pub uniform_attn_out: bool, // src/model/uniform_attn_out.rs
    #[serde(default)]
    pub qkv_init_mul: Option<f64>, // src/model/qkv_init_mul.rs
    #[serde(default)]
    pub sa_lambdas: sa_lambdas::Place, // src/model/sa_lambdas.rs
    pub smear: Option<smear::Section>,             // src/model/smear.rs
    pub attn_gate: Option<attn_gate::Section>,     // src/model/attn_gate.rs
    pub value_embed: Option<value_embed::Section>, // src/model/value_embed.rs
    pub value_gate: Option<value_gate::Section>,   // src/model/value_gate.rs
    pub parallel_residuals: Option<parallel_residuals::Section>, // src/model/parallel_residuals.rs
    pub bigram_hash: Option<bigram_hash::Section>, // src/model/bigram_hash.rs
    pub backout: Option<backout::Section>,         // src/model/backout.rs
    #[serde(default)]
    pub softcap: Option<Softcap>,
    pub fp8_head: Option<fp8_head::Section>, // src/model/fp8_head.rs
    pub fp8_mlp: Option<fp8_mlp::Section>,   // src/model/fp8_mlp.rs
    #[serde(default)]
    pub loss_over_padding: bool, // src/model/loss_over_padding.rs
    #[serde(default)]
    pub loader: loader::Loader, // src/data/loader.rs
    #[serde(default)]
    pub stream_loader: bool, // src/data/stream_loader.rs
    #[serde(default)]
    pub stream_micro_reads: bool, // src/data/stream_micro_reads.rs
    #[serde(default)]
    pub stream_repeat_first: bool, // src/data/stream_repeat_first.rs
    #[serde(default)]
    pub doc_mask: bool, // src/model/doc_mask.rs
    #[serde(default)]
    pub attn_window: Option<usize>, // src/model/attn_window.rs
    #[serde(default)]
    pub no_bias: bool,  // src/model/no_bias.rs
    #[serde(default)]
    pub attn_branch_scale: bool, // src/model/attn_branch_scale.rs
    #[serde(default)]
    pub grad_sum_factor: Option<f64>, // src/optim/grad_sum_factor.rs
    #[serde(default)]
    pub clock_from_step: Option<u64>, // src/optim/clock_from_step.rs
    #[serde(default)]
    pub train_shards: Option<usize>, // src/data/train_shards.rs
    #[serde(default)]
    pub val_rank0_rows: bool, // src/data/val_rank0_rows.rs
    #[serde(default)]
    pub val_seq_len: Option<usize>, // src/data/val_seq_len.rs
    pub muon: Option<muon::Section>,         // src/optim/muon.rs
    #[serde(default)]
    pub muon_classic: Option<MuonClassic>,
    pub lr_mul: Option<lr_mul::Section>, // src/optim/lr_mul.rs
    pub wd_mul: Option<wd_mul::Section>, // src/optim/wd_mul.rs
    #[serde(default)]
    pub gates_in_adam: bool, // src/optim/gates_in_adam.rs
    pub adam_betas: Option<adam_betas::Section>, // src/optim/adam_betas.rs
    #[serde(default)]
    pub adam_every: Option<u64>, // src/optim/adam_every.rs
    pub scalar_adam: Option<scalar_adam::Section>, // src/optim/scalar_adam.rs
    pub mtp: Option<mtp::Section>,       // src/model/mtp.rs
    pub cautious_adam: Option<cautious_adam::Section>, // src/optim/cautious_adam.rs
    #[serde(default)]
    pub lr_schedule: lr_schedule::Curve, // src/optim/lr_schedule.rs
    #[serde(default)]
    pub loss_sum: bool, // src/optim/loss_sum.rs
    #[serde(default)]
    pub iteration_extension: u64, // src/optim/iteration_extension.rs
    #[serde(default)]
    pub extension_final: bool, // src/optim/extension_final.rs
    #[serde(default)]
    pub rounded_stages: bool, // src/optim/rounded_stages.rs
    #[serde(default)]
    pub untimed_warmup: u64, // src/optim/untimed_warmup.rs
}

/// How text becomes token ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tokenizer {
    /// GPT-2's BPE (FineWeb shards): 50,257 tokens, BOS 50256.
    Gpt2,
    /// One token per byte plus a document separator (the lab corpus).
    Byte,
}

/// The two sizes a record runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Upstream's recipe as logged.
    Full,
    /// Shrunk by the common `[lab]` rule to a 2-core CPU.
    Lab,
}

/// The parts of a manifest the trainer reads; the harness owns the rest.
#[derive(Deserialize)]
struct ManifestView {
    recipe: Recipe,
    lab: toml::Table,
}

impl Recipe {
    /// Reads record `path`'s recipe at `scale`. At lab scale the `[lab]` table overrides keys,
    /// and step-based schedules are mapped proportionally onto the lab budget of `steps`.
    /// `steps` overrides the step budget of that scale.
    pub fn from_manifest(path: &Path, scale: Scale, steps: Option<u64>) -> Result<Recipe> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::from_manifest_str(&text, scale, steps)
            .map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))
    }

    /// Errors carry the manifest's line and column (toml's spans) or name `lab.<key>`.
    pub fn from_manifest_str(text: &str, scale: Scale, steps: Option<u64>) -> Result<Recipe> {
        let view: ManifestView = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(0, |s| text[..s.start].matches('\n').count() + 1);
            anyhow::anyhow!("line {line}: {}", e.message().trim())
        })?;
        let mut overrides = match scale {
            Scale::Full => toml::Table::new(),
            Scale::Lab => view.lab,
        };
        if let Some(steps) = steps {
            overrides.insert("steps".into(), toml::Value::Integer(steps as i64));
        }
        let recipe = view.recipe.shrink(&overrides, scale)?;
        recipe.validate()?;
        Ok(recipe)
    }

    /// The lab rule: take the override keys (`[lab]`, a step budget), then map every other key
    /// by its rule in the registry: step counts by the ratio of budgets, per-layer patterns to
    /// the lab's layers, token lengths with seq_len; at lab scale, drop the full run's data
    /// choices.
    fn shrink(&self, lab: &toml::Table, scale: Scale) -> Result<Recipe> {
        let base = toml::Table::try_from(self)?;
        let mut merged = base.clone();
        for (k, v) in lab {
            if !base.contains_key(k) {
                bail!("lab.{k}: not a recipe key");
            }
            let mut one = base.clone();
            one.insert(k.clone(), v.clone());
            if let Err(e) = Recipe::deserialize(toml::Value::Table(one)) {
                bail!("lab.{k}: {}", e.to_string().trim());
            }
            merged.insert(k.clone(), v.clone());
        }
        let out = Recipe::deserialize(toml::Value::Table(merged.clone()))?;
        let rule = LabRule {
            ratio: out.steps as f64 / self.steps as f64,
            layers: (self.n_layer, out.n_layer),
            seq_len: (self.seq_len, out.seq_len),
            val_per_rank: out.val_tokens / out.reference_ranks.max(1),
        };
        for t in registry::REGISTRY {
            if matches!(t.lab, registry::Lab::FullOnly) && scale == Scale::Lab {
                merged.remove(t.key);
            } else if let Some(v) = merged.get_mut(t.key) {
                rule.apply(t.lab, v);
            }
        }
        Ok(Recipe::deserialize(toml::Value::Table(merged))?)
    }

    /// Rows per micro-batch and micro-batches per optimizer step for one of `ranks` ranks. Fewer
    /// ranks than the official run keep its batch by accumulation; more ranks split it into
    /// smaller micro-batches. Either way a step sees the same `batch_tokens`.
    pub fn micro_batch(&self, ranks: usize) -> Result<(usize, usize)> {
        let rows = self.batch_tokens / self.seq_len.max(1);
        if ranks == 0
            || !self.batch_tokens.is_multiple_of(self.seq_len)
            || !rows.is_multiple_of(ranks)
        {
            bail!(
                "recipe.batch_tokens = {} does not split into rows of seq_len = {} over {ranks} ranks",
                self.batch_tokens,
                self.seq_len
            );
        }
        let per_rank = rows / ranks;
        let micro = self.batch_rows.min(per_rank);
        if micro == 0 || !per_rank.is_multiple_of(micro) {
            bail!(
                "recipe: {per_rank} rows per rank is not a multiple of batch_rows = {}",
                self.batch_rows
            );
        }
        Ok((micro, per_rank / micro))
    }

    fn validate(&self) -> Result<()> {
        let checks: [(bool, &str); 9] = [
            (self.n_embd.is_multiple_of(self.n_head), "n_embd must be a multiple of n_head"),
            (self.padded_vocab_size >= self.vocab_size, "padded_vocab_size must be >= vocab_size"),
            (self.seq_len <= self.max_seq_len, "seq_len must be <= max_seq_len"),
            (self.steps > 0, "steps must be positive"),
            (self.warmup_steps <= self.steps, "warmup_steps must be <= steps"),
            (self.lr > 0.0 && self.lr.is_finite(), "lr must be positive"),
            (
                (0.0..1.0).contains(&self.beta1) && (0.0..1.0).contains(&self.beta2),
                "betas must be in [0, 1)",
            ),
            ((0.0..=1.0).contains(&self.min_lr_frac), "min_lr_frac must be in [0, 1]"),
            (self.val_every > 0, "val_every must be positive"),
        ];
        for (ok, msg) in checks {
            if !ok {
                bail!("recipe: {msg}");
            }
        }
        if self.val_tokens < self.batch_rows * self.seq_len {
            bail!("recipe: val_tokens must cover at least one batch of batch_rows x seq_len");
        }
        self.validate_techniques()
    }

    /// Layer `i` has neither attention nor MLP, so it is skipped whole (upstream #35).
    pub fn skips_layer(&self, i: usize) -> bool {
        let none = |p: &Option<String>| p.as_ref().is_some_and(|p| p.chars().nth(i) == Some('-'));
        none(&self.attn_layers) && none(&self.mlp_layers)
    }

    /// The keys after record #1 that are on: present, and not their default.
    pub fn techniques_on(&self) -> Result<Vec<&'static str>> {
        let all = toml::Table::try_from(self)?;
        let mut off = all.clone();
        off.retain(|k, _| registry::entry(k).is_none_or(|t| !t.is_technique()));
        let off = toml::Table::try_from(Recipe::deserialize(toml::Value::Table(off))?)?;
        Ok(registry::REGISTRY
            .iter()
            .filter(|t| t.is_technique() && all.get(t.key) != off.get(t.key))
            .map(|t| t.key)
            .collect())
    }

    /// The combinations the model supports: each key on has the keys it needs (the registry),
    /// and its values fit the model. Checked once, when the recipe is read.
    fn validate_techniques(&self) -> Result<()> {
        self.validate_registry()?;
        precision::of(self).validate(self)?;
        self.validate_layers()?;
        self.validate_attention()?;
        self.validate_schedules()
    }

    /// Each key on has the keys it needs and none it replaces (the registry's data).
    fn validate_registry(&self) -> Result<()> {
        let on = self.techniques_on()?;
        for t in registry::REGISTRY.iter().filter(|t| on.contains(&t.key)) {
            if let Some(need) = t.needs.iter().find(|n| !n.split('|').any(|k| on.contains(&k))) {
                let need = need.replace('|', " or ");
                bail!("recipe: {} needs {need} (see src/recipe/registry.rs)", t.key);
            }
            if let Some(x) = t.excludes.iter().find(|x| on.contains(x)) {
                bail!("recipe: {} replaces {x}; turn {x} off (see src/recipe/registry.rs)", t.key);
            }
        }
        Ok(())
    }

    /// The per-layer patterns and what names a layer: they fit the model's layers.
    fn validate_layers(&self) -> Result<()> {
        let l = self.n_layer;
        for (key, p, ok) in [
            ("attn_layers", self.attn_layers.as_deref(), "LSP-"),
            ("mlp_layers", self.mlp_layers.as_deref(), "M-"),
            (
                "value_embed.layers",
                self.value_embed.as_ref().map(|v| v.layers.as_str()),
                ".0123456789",
            ),
        ] {
            if let Some(p) = p {
                ensure!(
                    p.chars().count() == l && p.chars().all(|c| ok.contains(c)),
                    "recipe: {key} = {p:?} needs one of {ok:?} per layer ({l} layers)"
                );
            }
        }
        let running = (0..l).filter(|&i| !self.skips_layer(i)).count();
        ensure!(!self.unet || running >= 2, "recipe: unet needs two layers that run");
        if let Some([from, to]) = self.single_skip.as_ref().map(|s| s.layers) {
            ensure!(
                from < to && to < l && l / 2 <= to && !self.skips_layer(from),
                "recipe: single_skip.layers = [{from}, {to}] needs from < to, a running from, and to in the second half of the {l} layers"
            );
        }
        ensure!(
            !self.attn_layers.as_ref().is_some_and(|a| a.contains('P'))
                || self.n_head.is_multiple_of(2),
            "recipe: paired heads ('P' in attn_layers) need an even n_head, got {}",
            self.n_head
        );
        for (key, n) in [
            ("attn_gate.channels", self.attn_gate.as_ref().map(|g| g.channels)),
            ("value_gate.channels", self.value_gate.as_ref().map(|g| g.channels)),
            ("single_skip.x0_gate", self.single_skip.as_ref().and_then(|s| s.x0_gate)),
        ] {
            ensure!(
                n.is_none_or(|n| n <= self.n_embd),
                "recipe: {key} reads more channels than n_embd"
            );
        }
        if let Some(b) = &self.backout {
            let k = b.layer;
            ensure!(
                k < l && !self.skips_layer(k),
                "recipe: backout.layer = {k} is not a layer that runs"
            );
            ensure!(
                !b.attend || self.parallel_residuals.is_some(),
                "recipe: backout.attend hands layer {k}'s output to the parallel sublayers; it needs parallel_residuals"
            );
        }
        Ok(())
    }

    /// The attention's and the dense model's settings go together.
    fn validate_attention(&self) -> Result<()> {
        ensure!(
            self.key_offset.is_none() || self.rotary.as_ref().is_some_and(|r| r.truncated),
            "recipe: key_offset shifts the dims a truncated rotary leaves unrotated; it needs rotary.truncated"
        );
        // Act 1's changes to record #1's dense layers have nothing to act on in the windowed
        // attention, which makes its own parameters and rotary.
        ensure!(
            !(self.init.is_torch() && self.attn_layers.is_some()),
            "recipe: init = {:?} is for record #1's dense attention and MLP; turn attn_layers off",
            self.init
        );
        ensure!(
            self.attn_layers.is_some()
                || self.rotary.is_none()
                || self.yarn.is_none() && self.attn_scale.is_none(),
            "recipe: rotary on the dense attention takes no yarn or attn_scale"
        );
        Ok(())
    }

    /// The step-dependent lists: one entry per windows stage, weights in range.
    fn validate_schedules(&self) -> Result<()> {
        if let Some(w) = self.mtp.as_ref().map(|m| &m.weights) {
            ensure!(
                (2..=MTP_MAX).contains(&w.len()) && w.iter().all(|&x| x > 0.0),
                "recipe: mtp = {w:?} needs 2 to {MTP_MAX} positive weights"
            );
        }
        if let Some(w) = &self.windows {
            ensure!(
                w.block > 0 && !w.schedule.is_empty(),
                "recipe: windows needs a block and a schedule"
            );
        }
        doc_len_schedule::validate(self)?;
        batch_schedule::validate(self)?;
        grad_sum_factor::validate(self)?;
        if let lr_schedule::Curve::StagedDecay { stage_at, stage_max, .. } = &self.lr_schedule {
            ensure!(
                stage_max.len() == stage_at.len() + 1,
                "recipe: lr_schedule's stage_max needs one more entry than stage_at"
            );
        }
        Ok(())
    }
}
