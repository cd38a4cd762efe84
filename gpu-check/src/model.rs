//! The records the checks build: a manifest's recipe at a scale, its model in bf16 compute on
//! the device, and random batches for it.
use crate::util::Ctx;
use anyhow::{anyhow, Result};
use tch::{nn, Kind, Tensor};
use trainer::model::params::Param;
use trainer::model::Gpt;
use trainer::recipe::{Recipe, Scale};

/// A record's manifest: its path (for errors) and its text.
pub type Manifest = (&'static str, &'static str);
pub const RECORD_1: Manifest = ("records/01.toml", include_str!("../../records/01.toml"));
pub const RECORD_29: Manifest = ("records/29.toml", include_str!("../../records/29.toml"));
pub const RECORD_38: Manifest = ("records/38.toml", include_str!("../../records/38.toml"));
pub const RECORD_46: Manifest = ("records/46.toml", include_str!("../../records/46.toml"));
pub const RECORD_53: Manifest = ("records/53.toml", include_str!("../../records/53.toml"));
pub const RECORD_54: Manifest = ("records/54.toml", include_str!("../../records/54.toml"));
pub const RECORD_62: Manifest = ("records/62.toml", include_str!("../../records/62.toml"));
pub const RECORD_63: Manifest = ("records/63.toml", include_str!("../../records/63.toml"));
pub const RECORD_84: Manifest = ("records/84.toml", include_str!("../../records/84.toml"));

pub struct Model {
    // Owns the parameters; model and params borrow nothing from it but must not outlive it.
    pub _vs: nn::VarStore,
    pub model: Gpt,
    pub params: Vec<Param>,
    pub recipe: Recipe,
}

pub fn recipe((path, text): Manifest, scale: Scale) -> Result<Recipe> {
    Recipe::from_manifest_str(text, scale, None).map_err(|e| anyhow!("{path}: {e:#}"))
}

pub fn build(ctx: &Ctx, manifest: Manifest, scale: Scale) -> Result<Model> {
    let recipe = recipe(manifest, scale)?;
    tch::manual_seed(recipe.seed as i64);
    let vs = nn::VarStore::new(ctx.dev);
    let (model, params) = Gpt::new(vs.root(), &recipe, Kind::BFloat16);
    Ok(Model { _vs: vs, model, params, recipe })
}

/// Random tokens of `shape` as inputs and targets.
pub fn batch(ctx: &Ctx, r: &Recipe, shape: [i64; 2]) -> (Tensor, Tensor) {
    let vocab = r.vocab_size as i64;
    (
        Tensor::randint(vocab, shape, (Kind::Int64, ctx.dev)),
        Tensor::randint(vocab, shape, (Kind::Int64, ctx.dev)),
    )
}

pub fn zero_grads<'a>(params: impl IntoIterator<Item = &'a Param>) {
    for p in params {
        let mut g = p.tensor.grad();
        if g.defined() {
            let _ = g.zero_();
        }
    }
}
