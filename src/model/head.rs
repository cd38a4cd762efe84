//! The head: the final norm, the output matrix (the tied embedding, or its own zero-initialised
//! lm_head from upstream #8), FP8 in training (upstream #19), the softcap (#19's sigmoid form),
//! and the cross-entropy over the vocabulary (record #1) or over every padded logit (#5 on).
//!
//! Upstream #60 computes the softcap and the (multi-token) cross-entropy in one Triton kernel
//! per row: it reads the bf16 logits once, softcaps and takes the log-sum-exp in fp32, and its
//! backward recomputes the sigmoid instead of saving the [N, V] softcapped logits. Before it
//! (from #37) training's softcap and cross-entropy ran in bf16. Ours is the same math in libtorch
//! ops: with `precision.loss` off the logits go to fp32 before the softcap.
//!
//! Upstream #75 reorders the kernel's arithmetic: the same values up to rounding.
//! Upstream #79 computes the loss and the logits' gradient in one pass in the forward, with two
//! departures ours does not copy: the sigmoid's values rounded to bf16, and the gradient's
//! softmax term weighted by the sum of all MTP weights even on the last rows, whose later
//! targets are past the buffer.
use super::builder::Builder;
use super::embedding::Embedding;
use super::fp8_head::{fp8_linear, Fp8Scales};
use super::loss_over_padding;
use super::mtp;
use super::norm::Norm;
use super::precision;
use super::softcap::{softcap, softcap_in};
use super::untied_head;
use crate::recipe::Softcap;
use anyhow::Result;
use tch::{Kind, Tensor};

pub struct Head {
    pub norm: Norm,
    weight: Tensor, // [Vp, C]
    fp8: Option<Fp8Scales>,
    softcap: Option<Softcap>,
    /// The softmax runs over the first `vocab` logits; None: over all of them.
    vocab: Option<i64>,
    compute: Kind,
    /// Training's softcap and cross-entropy stay in the compute kind (upstream #37: bf16).
    low_precision_loss: bool,
}

impl Head {
    /// The head: the final norm and the output matrix (`shared`, upstream #51's; its own, #8's;
    /// or the embedding's table), with the recipe's FP8, softcap and loss precision.
    pub fn build(b: &mut Builder, shared: Option<Tensor>, embed: &Embedding) -> Head {
        let r = b.r;
        let norm = Norm::new(&mut b.ps, "ln_f", b.c, (r.norm, r.ln_eps), b.g.vector);
        let weight = match (shared, r.untied_head) {
            (Some(w), _) => w,
            (None, true) => untied_head::weight(b),
            (None, false) => embed.table(),
        };
        let vocab = loss_over_padding::softmax_width(r);
        let mut head = Head::new(norm, weight, vocab, b.compute);
        if let Some(f) = &r.fp8_head {
            let mut scales = Fp8Scales::for_width(r.n_embd, f.w_scale, f.grad_scale);
            scales.x = f.x_scale.unwrap_or(scales.x);
            head = head.with_fp8(scales);
        }
        if let Some(s) = &r.softcap {
            head = head.with_softcap(s.clone());
        }
        if precision::of(r).loss {
            head = head.with_low_precision_loss();
        }
        head
    }

    pub fn new(norm: Norm, weight: Tensor, vocab: Option<i64>, compute: Kind) -> Head {
        Head { norm, weight, fp8: None, softcap: None, vocab, compute, low_precision_loss: false }
    }

    pub fn with_fp8(mut self, scales: Fp8Scales) -> Self {
        self.fp8 = Some(scales);
        self
    }

    pub fn with_softcap(mut self, s: Softcap) -> Self {
        self.softcap = Some(s);
        self
    }

    pub fn with_low_precision_loss(mut self) -> Self {
        self.low_precision_loss = true;
        self
    }

    /// x: [N, C] normed -> logits [N, Vp] (fp32, or the compute kind in training with a low
    /// precision loss): FP8 in training when built with it, then the softcap.
    pub fn logits(&self, x: &Tensor, training: bool) -> Result<Tensor> {
        let logits = match (&self.fp8, training) {
            (Some(s), true) => fp8_linear(x, &self.weight, s)?,
            _ => x.matmul(&self.weight.to_kind(self.compute).tr()),
        };
        let keep = training && self.low_precision_loss;
        Ok(match (&self.softcap, keep) {
            (Some(s), true) => softcap_in(&logits, s),
            (Some(s), false) => softcap(&logits, s),
            (None, true) => logits,
            (None, false) => logits.to_kind(Kind::Float),
        })
    }

    /// Mean cross-entropy. x: [N, C] normed, targets: [N] -> scalar. In training with two or
    /// more `mtp` weights, the multi-token objective (mtp.rs) over N instead.
    pub fn loss(
        &self,
        x: &Tensor,
        targets: &Tensor,
        training: bool,
        mtp: &[f64],
    ) -> Result<Tensor> {
        let n = x.size()[0];
        if training && mtp.len() > 1 {
            let mut logits = self.logits(x, training)?;
            if let Some(v) = self.vocab {
                logits = logits.narrow(-1, 0, v); // [N, V]
            }
            return Ok(mtp::loss(&logits, targets, mtp) / n as f64);
        }
        let ce = |x: &Tensor, t: &Tensor, reduction| -> Result<Tensor> {
            let mut logits = self.logits(x, training)?;
            if let Some(v) = self.vocab {
                logits = logits.narrow(-1, 0, v); // [N, V]
            }
            Ok(logits.cross_entropy_loss::<Tensor>(t, None, reduction, -100, 0.0))
        };
        if training || n <= EVAL_SLICE {
            return ce(x, targets, tch::Reduction::Mean);
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
