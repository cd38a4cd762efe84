//! The GPT. `Gpt::new` resolves the recipe once into built parts, each from its own file; the
//! forward reads only those parts. With no technique keys it is record #1: GPT-2 small as llm.c
//! builds it (pre-LN blocks, learned positions, a head tied to the embedding, biases).
use super::attend::Docs;
use super::attention::Attention;
use super::backout::Backout;
use super::bigram_hash::BigramHash;
use super::block::{Attn, Block, BlockIn, Ffn, Residual};
use super::embedding::Embedding;
use super::fp8_head::Fp8Scales;
use super::head::Head;
use super::mlp::Mlp;
use super::norm::Norm;
use super::parallel_residuals::{Inits, ParallelResiduals};
use super::params::{Groups, Param, ParamSet};
use super::relu2_mlp::Relu2Mlp;
use super::rotary::Rotary;
use super::sa_lambdas;
use super::scalars::{Entry, ScalarBank};
use super::single_skip::SingleSkip;
use super::smear::Smear;
use super::unet::UNetSkips;
use super::value_embed::ValueEmbeds;
use super::value_gate::ValueGate;
use super::windowed_attention::{Rope, WindowedAttention, WindowedConfig};
use super::x0_lambdas::{Layout, X0Lambdas};
use super::yarn::Yarn;
use crate::recipe::{Activation, Init, Recipe};
use anyhow::{Context, Result};
use tch::{nn, Kind, Tensor};

/// What a forward pass runs on besides the tokens.
#[derive(Default)]
pub struct Ctx {
    /// Documents of the packed sequence (BOS loader); None: every row is one sequence.
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
    /// Builds the model under `path` with the recipe's init; returns it and its parameters in
    /// creation order (the order fixes the random draws and the optimizers' layout).
    pub fn new(path: nn::Path, r: &Recipe, compute: Kind) -> (Gpt, Vec<Param>) {
        let dev = path.device();
        let mut ps = ParamSet::new(path);
        let g = Groups::new(r);
        let (l, c, vp) = (r.n_layer, r.n_embd as i64, r.padded_vocab_size as i64);
        let uniform = r.init == Init::Uniform;
        // llm.c: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)); upstream #19: U with
        // std 0.5/sqrt(fan_in) for block matrices, N(0, 1) for embeddings.
        let std = r.init_std;
        let stds = (std, std / (2.0 * l as f64).sqrt());
        let bound = 3f64.sqrt() * 0.5 / (c as f64).sqrt();
        // Upstream #53's QKV init is twice that bound (its README says halved; the code wins).
        let qkv_bound = bound * r.qkv_init_mul.unwrap_or(1.0);
        let embed_init = nn::Init::Randn { mean: 0.0, stdev: if uniform { 1.0 } else { std } };
        // llm.c initialises only the first vocab_size rows; the padding rows stay zero.
        let sizes = (r.vocab_size as i64, vp, c);
        // Upstream #51: the input embedding is the head's weight, N(0, init_std).
        let head_embed =
            r.head_embed.as_ref().map(|h| ps.normal("lm_head", &[vp, c], h.init_std, g.head));
        let mut embed = match &head_embed {
            Some(w) => Embedding::from_table(w.shallow_clone()),
            None => Embedding::new(&mut ps, sizes, embed_init, !uniform, g.embed),
        };
        // Upstream #53: a table of its own from the untie on, overwritten then by the head's.
        if r.head_embed.as_ref().is_some_and(|h| h.untie_at.is_some()) {
            embed = embed.with_untied(ps.add("embed", &[vp, c], embed_init, g.late_embed));
        }
        if r.rotary.is_none() {
            embed = embed.with_positions(&mut ps, r.max_seq_len as i64, std, g.embed);
        }
        if r.embed_norm {
            embed = embed.with_norm(r.ln_eps);
        }
        // Upstream #49 starts the value embeddings at zero, #70 at N(0, 0.01).
        let ve_init = match (r.value_embed_std, r.zero_value_embeds) {
            (Some(stdev), _) => nn::Init::Randn { mean: 0.0, stdev },
            (None, true) => nn::Init::Const(0.0),
            (None, false) => embed_init,
        };
        let value_embeds = (r.value_embed_layers.as_ref())
            .map(|p| ValueEmbeds::new(&mut ps, p, vp, c, ve_init, g.value_embeds));

        // The scalar bank in upstream's order: skips, block lambdas, value lambdas, smear,
        // backout; from upstream #49 (compact_scalars) the one skip lambda comes last.
        let mut scalars = ScalarBank::default();
        let running = (0..l).filter(|&i| !r.skips_layer(i)).count();
        let unet = r.unet.then(|| UNetSkips::new(&mut scalars, (l, running), r.skip_gate));
        let single_skip = |bank: &mut ScalarBank| {
            (r.single_skip.zip(r.skip_gate)).map(|([from, to], gate)| {
                SingleSkip::new(bank, l, (from, to), gate, r.compact_scalars)
            })
        };
        let mut skip = if r.compact_scalars { None } else { single_skip(&mut scalars) };
        let lambda0 = r.block_lambda_init.unwrap_or(1.0) as f32;
        let layout = match (r.x0_lambdas_apart, r.compact_scalars) {
            (true, _) => Layout::Apart(ps.zeros("x0_lambdas", &[l as i64], g.x0)),
            (false, true) => Layout::Split,
            (false, false) => Layout::Pairs,
        };
        let x0_lambdas = r.x0_lambdas.then(|| X0Lambdas::new(&mut scalars, l, lambda0, layout));
        let value_lambdas =
            (r.attn_layers.as_ref()).map(|_| sa_lambdas::reserve(&mut scalars, l, r.sa_lambdas));
        let bigram = r.bigram_hash.as_ref().map(|b| {
            let table =
                BigramHash::new(&mut ps, ((b.rows_per_vocab as i64) * vp, c), g.value_embeds);
            match r.parallel_residuals {
                Some(_) => table,
                None => table.with_bank_lambdas(&mut scalars, l, b.lambda as f32),
            }
        });
        // Upstream #73: the residual, output, x0 and bigram lambdas per sublayer.
        let residual = match &r.parallel_residuals {
            Some(_) => {
                let resid = r.block_lambda_init.unwrap_or(1.0).sqrt();
                let bigram = r.bigram_hash.as_ref().map_or(0.0, |b| b.lambda);
                let lambdas = (g.lambdas, g.resid_lambdas);
                Residual::Lambdas(ParallelResiduals::new(
                    &mut ps,
                    l as i64,
                    Inits { resid, bigram },
                    lambdas,
                ))
            }
            None => Residual::Add,
        };
        let longest = (r.batch_rows * r.seq_len).max(r.val_seq_len.unwrap_or(0)) as i64;
        // Paired heads (upstream #58) place each token at two positions.
        let paired = r.attn_layers.as_ref().is_some_and(|a| a.contains('P'));
        let longest = if paired { 2 * longest } else { longest };
        let head_dim = c / r.n_head as i64;
        let rope_kind = if r.bf16_rotary { compute } else { Kind::Float };
        if let Some(n) = r.smear {
            // Upstream reserved a slot per layer for smear's one lambda until #40 gave the
            // spare slots back, keeping one for smear and one for backout.
            let slots = if r.backout.is_some() { 1 } else { l };
            embed = embed.with_smear(Smear::new(&mut ps, &mut scalars, n as i64, slots, g.smear));
        }
        let backout = r.backout.map(|layer| Backout::new(&mut scalars, layer));
        if r.compact_scalars {
            skip = single_skip(&mut scalars);
        }
        if let Some(n) = r.skip_gate_x0 {
            skip = skip.map(|s| s.with_x0_gate(&mut ps, n as i64, g.skip_gate));
        }
        let rope = r.rotary.as_ref().map(|rot| match (&r.yarn, &r.windows) {
            (Some(y), Some(w)) => {
                let first = (w.schedule[0] * w.block) as i64;
                let start = (first, r.attn_scale.unwrap_or(1.0 / (head_dim as f64).sqrt()));
                let freqs = Rotary::freqs(rot, head_dim);
                let yarn = Yarn::new(y, freqs, start, (longest, dev, rope_kind));
                Rope::Yarn(yarn.with_interleaved(rot.interleaved))
            }
            _ => Rope::Fixed(
                Rotary::new(rot, head_dim, longest, dev).to_kind(rope_kind),
                r.attn_scale,
            ),
        });
        let windowed = WindowedConfig {
            n_embd: c,
            n_head: r.n_head as i64,
            bound: qkv_bound,
            // Upstream #64 draws W_O with Q, K and V.
            zero_proj: r.zero_proj && !r.uniform_attn_out,
            tall: r.tall_matrices,
            key_offset: r.key_offset,
            key_offset_half: r.key_offset_half,
            gate: r.attn_gate.map(|n| (n as i64, g.gate)),
            qk_norm: r.qk_norm.then_some(r.ln_eps),
        };
        let attn_layers: Vec<char> = r.attn_layers.as_deref().unwrap_or("").chars().collect();
        let ve_layers: Vec<char> = r.value_embed_layers.as_deref().unwrap_or("").chars().collect();
        let mlp_layers: Vec<char> = r.mlp_layers.as_deref().unwrap_or("").chars().collect();
        let blocks = (0..l)
            .map(|i| {
                let n = format!("blocks.{i}");
                let attn = match attn_layers.get(i) {
                    None => Attn::Dense(Attention::new(
                        &mut ps,
                        &format!("{n}.attn"),
                        c,
                        r.n_head as i64,
                        stds,
                        &g,
                    )),
                    Some('-') => Attn::None,
                    Some(&w) => {
                        // Recipe::validate: attn_layers needs rotary; it reserved the lambdas.
                        let (rot, sa) = (rope.clone().zip(value_lambdas.as_ref()))
                            .expect("a validated recipe has rotary with attn_layers");
                        let a = WindowedAttention::new(
                            &mut ps,
                            &format!("{n}.attn"),
                            &windowed,
                            (rot, sa[i], w == 'L'),
                            g.qkvo,
                        );
                        let a = if w == 'P' { a.paired() } else { a };
                        Attn::Windowed(match r.ve_gate {
                            Some(k) if ve_layers.get(i).is_some_and(char::is_ascii_digit) => {
                                let name = format!("{n}.attn.ve_gate");
                                let shape = (r.n_head as i64, k as i64);
                                let gate = ValueGate::new(&mut ps, &name, shape, g.gate);
                                // Upstream #70: not on the paired layers.
                                let mixed = r.ve_gate_mixed && w != 'P';
                                a.with_value_gate(if mixed { gate.mixed() } else { gate })
                            }
                            _ => a,
                        })
                    }
                };
                let mlp = match (mlp_layers.get(i), r.activation) {
                    (Some('-'), _) => Ffn::None,
                    (_, Activation::Gelu) => {
                        Ffn::Gelu(Mlp::new(&mut ps, &format!("{n}.mlp"), c, stds, &g))
                    }
                    (_, Activation::Relu2) => {
                        let m = Relu2Mlp::new(
                            &mut ps,
                            &format!("{n}.mlp"),
                            c,
                            bound,
                            (r.zero_proj, r.tall_matrices),
                            (g.c_fc, g.c_proj),
                        );
                        Ffn::Relu2(if r.fp8_mlp_up { m.with_fp8_up() } else { m })
                    }
                };
                let norm = (r.norm, r.ln_eps);
                Block {
                    norm_1: Norm::new(&mut ps, &format!("{n}.ln_1"), c, norm, g.vector),
                    attn,
                    norm_2: Norm::new(&mut ps, &format!("{n}.ln_2"), c, norm, g.vector),
                    mlp,
                }
            })
            .collect();
        let norm_f = Norm::new(&mut ps, "ln_f", c, (r.norm, r.ln_eps), g.vector);
        let weight = match (head_embed, r.untied_head) {
            (Some(w), _) => w,
            (None, true) => ps.zeros("lm_head", &[vp, c], g.head),
            (None, false) => embed.table(),
        };
        let vocab = (!r.loss_over_padding).then_some(r.vocab_size as i64);
        let mut head = Head::new(norm_f, weight, vocab, compute);
        if let Some(f) = &r.fp8_head {
            let mut scales = Fp8Scales::for_width(r.n_embd, f.w_scale, f.grad_scale);
            scales.x = f.x_scale.unwrap_or(scales.x);
            head = head.with_fp8(scales);
        }
        if let Some(s) = &r.softcap {
            head = head.with_softcap(s.clone());
        }
        if r.bf16_loss {
            head = head.with_low_precision_loss();
        }
        scalars.create(&mut ps, g.scalars);
        let params = ps.into_params(compute);
        let gpt = Gpt {
            embed,
            value_embeds,
            unet,
            skip,
            x0_lambdas,
            bigram,
            residual,
            attend_backout: r.attend_backout,
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
                docs: ctx.docs.as_ref(),
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
