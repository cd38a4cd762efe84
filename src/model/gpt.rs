//! The GPT, assembled from the recipe. With no technique keys it is record #1: GPT-2 small as
//! llm.c builds it (pre-LN blocks, learned positions, a head tied to the embedding, biases).
//! The keys of recipe/techniques.rs switch in the modern speedrun's parts, each in its own file.
use super::attend::Docs;
use super::attention::Attention;
use super::fp8_head::{fp8_linear, Fp8Scales};
use super::mlp::Mlp;
use super::norm::{rms_norm, Norm};
use super::params::{Param, ParamSet};
use super::relu2_mlp::Relu2Mlp;
use super::rotary::Rotary;
use super::scalars::Scalars;
use super::softcap::softcap;
use super::value_embed::ValueEmbeds;
use super::windowed_attention::{Sequence, WindowedAttention};
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
    /// Training uses the FP8 head; evaluation the plain one (as upstream).
    pub training: bool,
}

enum Attn {
    Dense(Attention),
    Windowed { attn: WindowedAttention, long: bool },
    None,
}

enum Ffn {
    Gelu(Mlp),
    Relu2(Relu2Mlp),
}

struct Block {
    norm_1: Norm,
    attn: Attn,
    norm_2: Norm,
    mlp: Ffn,
}

pub struct Gpt {
    embed: Tensor,        // [Vp, C]; also the head when tied
    wpe: Option<Tensor>,  // [T_max, C] learned positions; None with rotary
    head: Option<Tensor>, // [Vp, C] untied head
    value_embeds: Option<ValueEmbeds>,
    scalars: Option<Scalars>,
    rotary: Option<Rotary>,
    blocks: Vec<Block>,
    norm_f: Norm,
    fp8: Option<Fp8Scales>,
    r: Recipe,
    /// Matmuls run in this kind (bf16 on CUDA, fp32 on CPU).
    compute: Kind,
}

impl Gpt {
    /// Builds the model under `path` with the recipe's init; returns it and its parameters.
    pub fn new(path: nn::Path, r: &Recipe, compute: Kind) -> (Gpt, Vec<Param>) {
        let dev = path.device();
        let mut ps = ParamSet::new(path);
        let (c, vp) = (r.n_embd as i64, r.padded_vocab_size as i64);
        let uniform = r.init == Init::Uniform;
        // llm.c: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)); upstream #19: U with
        // std 0.5/sqrt(fan_in) for block matrices, N(0, 1) for embeddings.
        let std = r.init_std;
        let proj_std = std / (2.0 * r.n_layer as f64).sqrt();
        let bound = 3f64.sqrt() * 0.5 / (c as f64).sqrt();
        let embed_init = nn::Init::Randn { mean: 0.0, stdev: if uniform { 1.0 } else { std } };
        let embed_mul = r.lr_mul.as_ref().map_or(1.0, |m| m.embed);
        let embed = ps.add("embed", &[vp, c], embed_init);
        ps.lr_mul(embed_mul);
        if !uniform {
            // llm.c initialises only the first vocab_size rows; the padding rows stay zero.
            tch::no_grad(|| {
                let _ = embed.narrow(0, r.vocab_size as i64, vp - r.vocab_size as i64).zero_();
            });
        }
        let wpe = r.rotary.is_none().then(|| ps.normal("wpe", &[r.max_seq_len as i64, c], std));
        let value_embeds = r
            .value_embed_layers
            .as_ref()
            .map(|p| ValueEmbeds::new(&mut ps, p, vp, c, embed_init, embed_mul));
        let attn_layers: Vec<char> = r.attn_layers.as_deref().unwrap_or("").chars().collect();
        let blocks = (0..r.n_layer)
            .map(|i| {
                let n = format!("blocks.{i}");
                let attn = match attn_layers.get(i) {
                    None => Attn::Dense(Attention::new(
                        &mut ps,
                        &format!("{n}.attn"),
                        c,
                        r.n_head as i64,
                        std,
                        proj_std,
                    )),
                    Some('-') => Attn::None,
                    Some(&w) => Attn::Windowed {
                        attn: WindowedAttention::new(&mut ps, &format!("{n}.attn"), r, bound),
                        long: w == 'L',
                    },
                };
                let mlp = match r.activation {
                    Activation::Gelu => {
                        Ffn::Gelu(Mlp::new(&mut ps, &format!("{n}.mlp"), c, std, proj_std))
                    }
                    Activation::Relu2 => Ffn::Relu2(Relu2Mlp::new(
                        &mut ps,
                        &format!("{n}.mlp"),
                        c,
                        bound,
                        r.zero_proj,
                    )),
                };
                Block {
                    norm_1: Norm::new(&mut ps, &format!("{n}.ln_1"), c, r.norm, r.ln_eps),
                    attn,
                    norm_2: Norm::new(&mut ps, &format!("{n}.ln_2"), c, r.norm, r.ln_eps),
                    mlp,
                }
            })
            .collect();
        let norm_f = Norm::new(&mut ps, "ln_f", c, r.norm, r.ln_eps);
        let head = r.untied_head.then(|| {
            let h = ps.zeros("lm_head", &[vp, c]);
            ps.lr_mul(r.lr_mul.as_ref().map_or(1.0, |m| m.head));
            h
        });
        // The windowed attention always scales v by its lambda (value embeddings ride on it).
        let needs_scalars = r.x0_lambdas || r.unet || r.attn_layers.is_some();
        let scalars = needs_scalars.then(|| {
            Scalars::new(&mut ps, r.n_layer, r.lr_mul.as_ref().map_or(1.0, |m| m.scalars))
        });
        let rotary = r.rotary.as_ref().map(|rot| {
            let longest = (r.batch_rows * r.seq_len).max(r.val_seq_len.unwrap_or(0));
            Rotary::new(rot, c / r.n_head as i64, longest as i64, dev)
        });
        let fp8 =
            r.fp8_head.as_ref().map(|f| Fp8Scales::for_width(r.n_embd, f.w_scale, f.grad_scale));
        let mut params = ps.into_params();
        if r.bf16_embeddings && compute == Kind::BFloat16 {
            // Upstream #18 stores the embedding tables in bf16 (their Adam state follows).
            for p in params.iter_mut().filter(|p| p.name.contains("embed")) {
                tch::no_grad(|| p.tensor.set_data(&p.tensor.to_kind(Kind::BFloat16)));
            }
        }
        let gpt = Gpt {
            embed,
            wpe,
            head,
            value_embeds,
            scalars,
            rotary,
            blocks,
            norm_f,
            fp8,
            r: r.clone(),
            compute,
        };
        (gpt, params)
    }

    /// idx: [B, T] token ids -> logits [B, T, Vp] (fp32)
    pub fn forward(&self, idx: &Tensor, ctx: &Ctx) -> Result<Tensor> {
        let (b, t) = idx.size2().context("model input is [B, T] token ids")?;
        let x = self.trunk(idx, ctx)?;
        Ok(self.logits(&x, ctx.training)?.view([b, t, -1])) // [B, T, Vp]
    }

    /// idx: [B, T] -> the final hidden state [B*T, C], normed.
    fn trunk(&self, idx: &Tensor, ctx: &Ctx) -> Result<Tensor> {
        let (b, t) = idx.size2().context("model input is [B, T] token ids")?;
        let mut x = Tensor::embedding(&self.embed, idx, -1, false, false);
        if let Some(wpe) = &self.wpe {
            let pos = Tensor::arange(t, (Kind::Int64, idx.device()));
            x = &x + Tensor::embedding(wpe, &pos, -1, false, false);
        }
        let mut x = x.to_kind(self.compute); // [B, T, C]
        if self.r.embed_norm {
            x = rms_norm(&x, self.r.ln_eps);
        }
        let x0 = x.shallow_clone();
        let ve = self.value_embeds.as_ref().map(|v| v.lookup(idx, self.compute));
        let half = self.blocks.len() / 2;
        let mut skips = Vec::new();
        for (i, blk) in self.blocks.iter().enumerate() {
            if let Some(s) = self.scalars.as_ref() {
                if self.r.unet && i >= half {
                    let skip = skips.pop().context("U-net skip stack is empty")?;
                    x = &x + skip * s.skip(i - half);
                }
                if self.r.x0_lambdas {
                    let (l0, l1) = s.block_lambdas(i);
                    x = &x * l0 + &x0 * l1;
                }
            }
            let h = blk.norm_1.forward(&x);
            x = match &blk.attn {
                Attn::Dense(a) => &x + a.forward(&h),
                Attn::Windowed { attn, long } => {
                    let seq = Sequence {
                        docs: ctx.docs.as_ref().context("windowed attention needs documents")?,
                        rotary: self.rotary.as_ref().context("windowed attention needs rotary")?,
                    };
                    let window = if *long { ctx.windows.0 } else { ctx.windows.1 };
                    let ve_i = ve.as_ref().and_then(|v| v[i].as_ref());
                    let sa = self.scalars.as_ref().context("value lambdas")?.value_lambdas(i);
                    &x + attn.forward(&h, ve_i, sa, window, &seq)?
                }
                Attn::None => x,
            };
            let h = blk.norm_2.forward(&x);
            x = &x
                + match &blk.mlp {
                    Ffn::Gelu(m) => m.forward(&h),
                    Ffn::Relu2(m) => m.forward(&h),
                };
            if self.r.unet && i < half {
                skips.push(x.shallow_clone());
            }
        }
        Ok(self.norm_f.forward(&x).view([b * t, -1])) // [B*T, C]
    }

    /// x: [N, C] -> logits [N, Vp] (fp32): the head (FP8 in training when the recipe says so),
    /// then the softcap.
    fn logits(&self, x: &Tensor, training: bool) -> Result<Tensor> {
        let w = self.head.as_ref().unwrap_or(&self.embed);
        let logits = match (&self.fp8, training) {
            (Some(s), true) => fp8_linear(x, w, s)?,
            _ => x.matmul(&w.to_kind(self.compute).tr()),
        };
        Ok(match &self.r.softcap {
            Some(s) => softcap(&logits, s),
            None => logits.to_kind(Kind::Float),
        })
    }

    /// Mean cross-entropy over the vocabulary (record #1 leaves the padded logits out, as llm.c;
    /// upstream's later records take the softmax over all of them).
    /// idx, targets: [B, T] -> scalar
    pub fn loss(&self, idx: &Tensor, targets: &Tensor, ctx: &Ctx) -> Result<Tensor> {
        let x = self.trunk(idx, ctx)?; // [N, C]
        let targets = targets.reshape([-1]);
        let n = x.size()[0];
        let ce = |x: &Tensor, t: &Tensor, reduction| -> Result<Tensor> {
            let mut logits = self.logits(x, ctx.training)?;
            if !self.r.loss_over_padding {
                logits = logits.narrow(-1, 0, self.r.vocab_size as i64); // [N, V]
            }
            Ok(logits.cross_entropy_loss::<Tensor>(t, None, reduction, -100, 0.0))
        };
        if ctx.training || n <= EVAL_SLICE {
            return ce(&x, &targets, tch::Reduction::Mean);
        }
        // Upstream's 262,144-token validation sequence would hold several fp32 [N, 50304]
        // temporaries at once (upstream's compiler fuses them away); evaluate in slices.
        let mut sum = Tensor::zeros([], (Kind::Float, x.device()));
        for s in (0..n).step_by(EVAL_SLICE as usize) {
            let len = EVAL_SLICE.min(n - s);
            sum += ce(&x.narrow(0, s, len), &targets.narrow(0, s, len), tch::Reduction::Sum)?;
        }
        Ok(sum / n as f64)
    }
}

/// Tokens per slice of the head in evaluation: one full-scale val batch of record #1 (64 rows
/// of 1,024), so record #1 never slices.
const EVAL_SLICE: i64 = 65_536;
