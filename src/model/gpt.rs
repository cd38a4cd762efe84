//! The GPT, assembled from the recipe. Record #1 is GPT-2 small as llm.c builds it:
//! pre-LN blocks, learned positions, a head tied to the token embedding, biases everywhere.
use super::attention::Attention;
use super::mlp::Mlp;
use super::norm::LayerNorm;
use super::params::{Param, ParamSet};
use crate::recipe::Recipe;
use tch::{nn, Kind, Tensor};

struct Block {
    ln_1: LayerNorm,
    attn: Attention,
    ln_2: LayerNorm,
    mlp: Mlp,
}

pub struct Gpt {
    wte: Tensor, // [Vp, C]; also the head (tied)
    wpe: Tensor, // [T_max, C]
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    vocab_size: i64,
    /// Matmuls run in this kind (bf16 on CUDA, fp32 on CPU); parameters stay fp32 masters.
    compute: Kind,
}

impl Gpt {
    /// Builds the model under `path` with llm.c's init; returns it and its parameters.
    pub fn new(path: nn::Path, r: &Recipe, compute: Kind) -> (Gpt, Vec<Param>) {
        let mut ps = ParamSet::new(path);
        let c = r.n_embd as i64;
        let std = r.init_std;
        // Residual projections are scaled down so the residual stream's variance stays ~1.
        let proj_std = std / (2.0 * r.n_layer as f64).sqrt();
        let wte = ps.normal("wte", &[r.padded_vocab_size as i64, c], std);
        // llm.c initialises only the first vocab_size rows; the padding rows stay zero.
        tch::no_grad(|| {
            let _ = wte
                .narrow(0, r.vocab_size as i64, (r.padded_vocab_size - r.vocab_size) as i64)
                .zero_();
        });
        let wpe = ps.normal("wpe", &[r.max_seq_len as i64, c], std);
        let blocks = (0..r.n_layer)
            .map(|i| {
                let n = format!("h.{i}");
                Block {
                    ln_1: LayerNorm::new(&mut ps, &format!("{n}.ln_1"), c, r.ln_eps),
                    attn: Attention::new(
                        &mut ps,
                        &format!("{n}.attn"),
                        c,
                        r.n_head as i64,
                        std,
                        proj_std,
                    ),
                    ln_2: LayerNorm::new(&mut ps, &format!("{n}.ln_2"), c, r.ln_eps),
                    mlp: Mlp::new(&mut ps, &format!("{n}.mlp"), c, std, proj_std),
                }
            })
            .collect();
        let ln_f = LayerNorm::new(&mut ps, "ln_f", c, r.ln_eps);
        let gpt = Gpt { wte, wpe, blocks, ln_f, vocab_size: r.vocab_size as i64, compute };
        (gpt, ps.into_params())
    }

    /// idx: [B, T] token ids -> logits [B, T, Vp] (fp32)
    pub fn forward(&self, idx: &Tensor) -> Tensor {
        let t = idx.size()[1];
        let pos = Tensor::arange(t, (Kind::Int64, idx.device()));
        let mut x = (Tensor::embedding(&self.wte, idx, -1, false, false)
            + Tensor::embedding(&self.wpe, &pos, -1, false, false))
        .to_kind(self.compute); // [B, T, C]
        for b in &self.blocks {
            x = &x + b.attn.forward(&b.ln_1.forward(&x));
            x = &x + b.mlp.forward(&b.ln_2.forward(&x));
        }
        let x = self.ln_f.forward(&x);
        x.matmul(&self.wte.to_kind(self.compute).tr()).to_kind(Kind::Float) // [B, T, Vp]
    }

    /// Mean cross-entropy over the real vocabulary; padded logits take no part (as llm.c).
    /// idx, targets: [B, T] -> scalar
    pub fn loss(&self, idx: &Tensor, targets: &Tensor) -> Tensor {
        let logits = self.forward(idx).narrow(-1, 0, self.vocab_size); // [B, T, V]
        logits.reshape([-1, self.vocab_size]).cross_entropy_loss::<Tensor>(
            &targets.reshape([-1]),
            None,
            tch::Reduction::Mean,
            -100,
            0.0,
        )
    }
}
