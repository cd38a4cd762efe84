//! One transformer block: pre-norm attention, then pre-norm MLP, each added to the residual
//! stream. Which attention and MLP a layer has is decided once, when the model is built.
use super::attend::Docs;
use super::attention::Attention;
use super::builder::Builder;
use super::mlp::Mlp;
use super::norm::Norm;
use super::parallel_residuals::ParallelResiduals;
use super::relu2_mlp::Relu2Mlp;
use super::sa_lambdas::LayerLambdas;
use super::windowed_attention::{Rope, WindowedAttention};
use crate::recipe::Activation;
use anyhow::{Context, Result};
use tch::Tensor;

pub enum Attn {
    /// Record #1: dense causal attention over each row.
    Dense(Attention),
    /// Upstream #29's attention over packed documents in a sliding window.
    Windowed(WindowedAttention),
    /// No attention in this layer (upstream #20: layer 7).
    None,
}

impl Attn {
    /// Record #1's dense attention, none ('-' in `attn_layers`), or windowed attention.
    fn build(
        b: &mut Builder,
        i: usize,
        name: &str,
        rope: Option<&Rope>,
        sa: Option<&[LayerLambdas]>,
    ) -> Attn {
        match b.r.attn_layers.as_deref().and_then(|p| p.chars().nth(i)) {
            None => {
                let rotary =
                    rope.map(|r| r.fixed().expect("validated: dense attention has no YaRN"));
                let sizes = (b.c, b.r.n_head as i64);
                Attn::Dense(Attention::new(&mut b.ps, name, sizes, (&b.dense, rotary), &b.g))
            }
            Some('-') => Attn::None,
            Some(w) => {
                // Recipe::validate: attn_layers needs rotary; it reserved the lambdas.
                let (rot, sa) =
                    rope.zip(sa).expect("a validated recipe has rotary with attn_layers");
                Attn::Windowed(WindowedAttention::build(b, name, (i, w), (rot.clone(), sa[i])))
            }
        }
    }
}

pub enum Ffn {
    /// Record #1's MLP, with Act 1's changes (`Dense`).
    Dense(Mlp),
    Relu2(Relu2Mlp),
    /// No MLP in this layer (upstream #30: layer 0).
    None,
}

impl Ffn {
    /// None ('-' in `mlp_layers`), record #1's GELU MLP, or upstream's ReLU² one.
    fn build(b: &mut Builder, i: usize, name: &str) -> Ffn {
        let r = b.r;
        match (r.mlp_layers.as_deref().and_then(|p| p.chars().nth(i)), r.activation) {
            (Some('-'), _) => Ffn::None,
            (_, Activation::Relu2) if !r.init.is_torch() => Ffn::Relu2(Relu2Mlp::build(b, name)),
            _ => Ffn::Dense(Mlp::new(&mut b.ps, name, b.c, &b.dense, &b.g)),
        }
    }
}

pub struct Block {
    pub norm_1: Norm,
    pub attn: Attn,
    pub norm_2: Norm,
    pub mlp: Ffn,
}

/// How each sublayer's output joins the residual stream, handed to every block.
pub enum Residual {
    /// x ← x + f(norm(x)) (record #1 on).
    Add,
    /// Lambdas per sublayer, x0 and the bigram row joining after attention (upstream #73).
    Lambdas(ParallelResiduals),
}

impl Residual {
    /// The stream entering the first layer. x0, x0b: [B, T, C]
    pub fn start(&self, x0: &Tensor, x0b: Option<&Tensor>) -> Tensor {
        match self {
            Residual::Add => x0.shallow_clone(),
            Residual::Lambdas(p) => p.start(x0, x0b),
        }
    }
}

/// What a block reads besides its input: its layer, this layer's value embedding, the scalar
/// bank, the documents, the step's (long, short) windows and the window YaRN is tuned for, and
/// the embeddings the residual rule may inject (x0, the bigram row).
pub struct BlockIn<'a> {
    pub layer: usize,
    pub ve: Option<&'a Tensor>,
    pub bank: &'a Tensor,
    pub docs: Option<&'a Docs>,
    pub windows: ((i64, i64), i64),
    pub x0: &'a Tensor,
    pub x0b: Option<&'a Tensor>,
    /// What attention reads instead of the stream (upstream #77: the backout's saved output).
    pub attend_over: Option<&'a Tensor>,
    /// Training (FP8 paths on) or evaluation.
    pub training: bool,
}

impl Block {
    /// Layer `i` as the recipe has it: its attention (dense, windowed or none) and MLP, then
    /// their norms. `rope` and `sa` are what every windowed layer shares.
    pub fn build(
        b: &mut Builder,
        i: usize,
        rope: Option<&Rope>,
        sa: Option<&[LayerLambdas]>,
    ) -> Block {
        let n = format!("blocks.{i}");
        let attn = Attn::build(b, i, &format!("{n}.attn"), rope, sa);
        let mlp = Ffn::build(b, i, &format!("{n}.mlp"));
        let norm = (b.r.norm, b.r.ln_eps);
        Block {
            norm_1: Norm::new(&mut b.ps, &format!("{n}.ln_1"), b.c, norm, b.g.vector),
            attn,
            norm_2: Norm::new(&mut b.ps, &format!("{n}.ln_2"), b.c, norm, b.g.vector),
            mlp,
        }
    }

    /// Neither attention nor MLP: the layer is skipped whole (upstream #35's layer 0).
    pub fn is_empty(&self) -> bool {
        matches!((&self.attn, &self.mlp), (Attn::None, Ffn::None))
    }

    /// x: [B, T, C] -> [B, T, C], each sublayer's output joined to the stream by `rule`.
    pub fn forward(&self, x: Tensor, i: &BlockIn, rule: &Residual) -> Result<Tensor> {
        let x = match (self.attention(i.attend_over.unwrap_or(&x), i)?, rule) {
            (Some(a), Residual::Add) => &x + a,
            (Some(a), Residual::Lambdas(p)) => p.after_attention(i.layer, &x, &a, i.x0, i.x0b),
            (None, _) => x,
        };
        Ok(match (self.mlp(&x, i.training)?, rule) {
            (Some(m), Residual::Add) => &x + m,
            (Some(m), Residual::Lambdas(p)) => p.after_mlp(i.layer, &x, &m),
            (None, _) => x,
        })
    }

    /// The attention sublayer's output on x: [B, T, C] (normed here), or None without one.
    fn attention(&self, x: &Tensor, i: &BlockIn) -> Result<Option<Tensor>> {
        let h = self.norm_1.forward(x);
        Ok(match &self.attn {
            Attn::Dense(a) => Some(a.forward(&h, i.docs)),
            Attn::Windowed(a) => {
                let docs = i.docs.context("windowed attention runs on packed documents")?;
                Some(a.forward(&h, i.ve, i.bank, (docs, i.windows))?)
            }
            Attn::None => None,
        })
    }

    /// The MLP sublayer's output on x: [B, T, C] (normed here), or None without one.
    fn mlp(&self, x: &Tensor, training: bool) -> Result<Option<Tensor>> {
        Ok(match &self.mlp {
            Ffn::Dense(m) => Some(m.forward(&self.norm_2.forward(x))),
            Ffn::Relu2(m) => Some(m.forward(&self.norm_2.forward(x), training)?),
            Ffn::None => None,
        })
    }
}
