//! The GPT. `Gpt::new` resolves the recipe once into built parts, each from its own file; the
//! forward reads only those parts. With no technique keys it is record #1: GPT-2 small as llm.c
//! builds it (pre-LN blocks, learned positions, a head tied to the embedding, biases).
use super::attend::Docs;
use super::backout::Backout;
use super::bigram_hash::BigramHash;
use super::block::{Block, BlockIn, Residual};
use super::builder::Builder;
use super::embedding::Embedding;
use super::head::Head;
use super::head_embed;
use super::parallel_residuals::ParallelResiduals;
use super::params::Param;
use super::sa_lambdas;
use super::scalars::{Entry, ScalarBank};
use super::single_skip::SingleSkip;
use super::smear::Smear;
use super::unet::UNetSkips;
use super::value_embed::ValueEmbeds;
use super::windowed_attention::Rope;
use super::x0_lambdas::X0Lambdas;
use crate::recipe::Recipe;
use anyhow::{Context, Result};
use tch::{nn, Kind, Tensor};

/// What a forward pass runs on besides the tokens.
#[derive(Default)]
pub struct Ctx {
    /// Documents of the packed sequence (BOS loader) or of a6's rows; None: every row is one
    /// sequence.
    pub docs: Option<Docs>,
    /// (long, short) attention windows in tokens at this step.
    pub windows: (i64, i64),
    /// The long window YaRN is tuned for (the plan's); 0 means `windows.0`.
    pub yarn_window: i64,
    /// Training uses the FP8 head; evaluation the plain one (as upstream).
    pub training: bool,
    /// Multi-token prediction's weights at this step (upstream #53); fewer than two: plain.
    pub mtp: Vec<f64>,
    /// The input embedding is its own table from this step on (upstream #53's untie).
    pub split_embed: bool,
}

pub struct Gpt {
    embed: Embedding,
    value_embeds: Option<ValueEmbeds>,
    unet: Option<UNetSkips>,
    skip: Option<SingleSkip>,
    x0_lambdas: Option<X0Lambdas>,
    bigram: Option<BigramHash>,
    /// How sublayers join the stream (upstream #73 changes the rule).
    residual: Residual,
    /// Layers after the backout's attend over its output (upstream #77).
    attend_backout: bool,
    blocks: Vec<Block>,
    backout: Option<Backout>,
    head: Head,
    scalars: ScalarBank,
    /// Matmuls run in this kind (bf16 on CUDA, fp32 on CPU).
    compute: Kind,
}

impl Gpt {
    /// Builds the model under `path`, each part from the recipe in its own file; returns it and
    /// its parameters in creation order (the order fixes the random draws and the optimizers'
    /// layout, so parts are built where upstream's code made them).
    pub fn new(path: nn::Path, r: &Recipe, compute: Kind) -> (Gpt, Vec<Param>) {
        let mut b = Builder::new(path, r, compute);
        let shared = head_embed::shared_weight(&mut b); // upstream #51: the input embedding reads it
        let mut embed = Embedding::build(&mut b, shared.as_ref());
        let value_embeds = ValueEmbeds::build(&mut b);
        // The scalar bank in upstream's order: skips, block lambdas, value lambdas, smear,
        // backout; from upstream #49 (compact_scalars) the one skip lambda comes last.
        let unet = UNetSkips::build(&mut b);
        let early_skip = if r.compact_scalars { None } else { SingleSkip::build(&mut b) };
        let x0_lambdas = X0Lambdas::build(&mut b);
        let value_lambdas = sa_lambdas::build(&mut b);
        let bigram = BigramHash::build(&mut b);
        // Upstream #73: the residual, output, x0 and bigram lambdas per sublayer.
        let residual = ParallelResiduals::build(&mut b).map_or(Residual::Add, Residual::Lambdas);
        let rope = Rope::build(&b);
        if let Some(smear) = Smear::build(&mut b) {
            embed = embed.with_smear(smear);
        }
        let backout = Backout::build(&mut b);
        let skip = early_skip.or_else(|| SingleSkip::build(&mut b));
        let skip = skip.map(|s| s.build_x0_gate(&mut b));
        let blocks = (0..r.n_layer)
            .map(|i| Block::build(&mut b, i, rope.as_ref(), value_lambdas.as_deref()))
            .collect();
        let head = Head::build(&mut b, shared, &embed);
        let (scalars, params) = b.finish();
        let gpt = Gpt {
            embed,
            value_embeds,
            unet,
            skip,
            x0_lambdas,
            bigram,
            residual,
            attend_backout: r.backout.as_ref().is_some_and(|b| b.attend),
            blocks,
            backout,
            head,
            scalars,
            compute,
        };
        (gpt, params)
    }

    /// The scalar bank's named slices, in order.
    pub fn scalar_layout(&self) -> &[Entry] {
        self.scalars.layout()
    }

    /// idx: [B, T] token ids -> logits [B, T, Vp] (fp32)
    pub fn forward(&self, idx: &Tensor, ctx: &Ctx) -> Result<Tensor> {
        let (b, t) = idx.size2().context("model input is [B, T] token ids")?;
        let x = self.trunk(idx, ctx)?;
        Ok(self.head.logits(&x, ctx.training)?.view([b, t, -1])) // [B, T, Vp]
    }

    /// Mean cross-entropy over the head's vocabulary. idx, targets: [B, T] -> scalar
    pub fn loss(&self, idx: &Tensor, targets: &Tensor, ctx: &Ctx) -> Result<Tensor> {
        let x = self.trunk(idx, ctx)?; // [N, C]
        self.head.loss(&x, &targets.reshape([-1]), ctx.training, &ctx.mtp)
    }

    /// idx: [B, T] -> the final hidden state [B*T, C], normed. One loop for every record (upstream
    /// #74 flattens its forward into one function like this one).
    fn trunk(&self, idx: &Tensor, ctx: &Ctx) -> Result<Tensor> {
        idx.size2().context("model input is [B, T] token ids")?;
        let bank = self.scalars.tensor(); // [n] learned scalars
        let x0 = self.embed.forward(idx, self.compute, &bank, ctx.split_embed); // [B, T, C]
        let ve = self.value_embeds.as_ref().map(|v| v.lookup(idx, self.compute));
        let x0b = self.bigram.as_ref().map(|b| b.lookup(idx, self.compute)); // [B, T, C]
        let mut x = self.residual.start(&x0, x0b.as_ref());
        let mut skips = Vec::new();
        // Backout's and the single skip's kept layer outputs.
        let (mut kept, mut skipped) = (None, None);
        let windows =
            (ctx.windows, if ctx.yarn_window > 0 { ctx.yarn_window } else { ctx.windows.0 });
        let docs = ctx.docs.as_ref();
        // k counts the layers that run: an empty one (upstream #35's layer 0) is skipped whole.
        let running = self.blocks.iter().enumerate().filter(|(_, b)| !b.is_empty());
        for (k, (i, block)) in running.enumerate() {
            if let Some(u) = &self.unet {
                x = u.enter(k, x, &mut skips, &bank)?;
            }
            if let (Some(s), Some(from)) = (&self.skip, &skipped) {
                if s.to == i {
                    x = s.add(&x, from, &x0, &bank);
                }
            }
            if let Some(l) = &self.x0_lambdas {
                x = l.mix(i, &x, &x0, &bank);
            }
            if let (Some(b), Some(x0b)) = (&self.bigram, &x0b) {
                x = b.add(i, &x, x0b, &bank); // with the bank's lambdas; #73's join in `residual`
            }
            let input = BlockIn {
                layer: i,
                ve: ve.as_ref().and_then(|v| v[i].as_ref()),
                bank: &bank,
                docs,
                windows,
                training: ctx.training,
                x0: &x0,
                x0b: x0b.as_ref(),
                // Upstream #77: the layers after the backout's attend over its layer's output.
                attend_over: kept.as_ref().filter(|_| self.attend_backout),
            };
            x = block.forward(x, &input, &self.residual)?;
            if let Some(u) = &self.unet {
                u.leave(k, &x, &mut skips);
            }
            self.keep(i, &x, &mut skipped, &mut kept);
        }
        Ok(self.finish(x, kept.as_ref(), &bank))
    }

    /// Keeps layer `i`'s output `x` where the single skip or the backout reads it later.
    fn keep(&self, i: usize, x: &Tensor, skipped: &mut Option<Tensor>, kept: &mut Option<Tensor>) {
        if self.skip.as_ref().is_some_and(|s| s.from == i) {
            *skipped = Some(x.shallow_clone());
        }
        if self.backout.as_ref().is_some_and(|o| o.layer == i) {
            *kept = Some(x.shallow_clone());
        }
    }

    /// The trunk's end: the backout, then the final norm. x: [B, T, C] -> [B*T, C]
    fn finish(&self, x: Tensor, kept: Option<&Tensor>, bank: &Tensor) -> Tensor {
        let x = match (&self.backout, kept) {
            (Some(o), Some(kept)) => o.apply(&x, kept, bank),
            _ => x,
        };
        self.head.norm.forward(&x).flatten(0, 1)
    }
}
