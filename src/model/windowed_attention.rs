//! The attention block of the modern speedrun (as in upstream #29), over one packed sequence of
//! whole documents:
//! - one [4, C, C] weight for q, k, v and the output (upstream #20 merged QKV, #27 added O);
//! - QK-norm, then rotary (upstream #5, #6; rotary in rotary.rs);
//! - v mixed with a value embedding: v <- sa0·v + sa1·ve (upstream #14, #15);
//! - causal attention inside each document, within a sliding window of W tokens before the
//!   query (W + 1 keys with itself), softmax scale from the recipe (upstream #12, #16, #20, #29);
//! - a sparse gate per head and token: y <- y·σ(h[:g]·W_gᵀ) from the first g channels of the
//!   normed input, zero-initialised so it starts at 0.5 (upstream #28).
use super::attend::{attend, Docs, Pattern};
use super::norm::rms_norm;
use super::params::ParamSet;
use super::rotary::Rotary;
use anyhow::Result;
use tch::Tensor;

pub struct WindowedAttention {
    qkvo_w: Tensor,       // [4, C, C]: Wq, Wk, Wv, Wo (each [out, in])
    gate: Option<Tensor>, // [H, g]
    n_head: i64,
    /// QK-norm's eps, or None without it.
    qk_norm: Option<f64>,
    scale: Option<f64>,
}

/// What every layer's attention shares in one forward pass.
pub struct Sequence<'a> {
    pub docs: &'a Docs,
    pub rotary: &'a Rotary,
}

impl WindowedAttention {
    /// `bound`: the uniform init of Wq, Wk, Wv; Wo starts at zero when `zero_proj`.
    pub fn new(
        ps: &mut ParamSet,
        name: &str,
        r: &crate::recipe::Recipe,
        bound: f64,
    ) -> WindowedAttention {
        let c = r.n_embd as i64;
        let qkvo_w = ps.uniform(&format!("{name}.qkvo_w"), &[4, c, c], bound);
        if r.zero_proj {
            let _ = tch::no_grad(|| qkvo_w.get(3).zero_());
        }
        let gate =
            r.attn_gate.map(|g| ps.zeros(&format!("{name}.gate"), &[r.n_head as i64, g as i64]));
        WindowedAttention {
            qkvo_w,
            gate,
            n_head: r.n_head as i64,
            qk_norm: r.qk_norm.then_some(r.ln_eps),
            scale: r.attn_scale,
        }
    }

    /// h: [1, T, C] normed block input; ve: [1, T, C] or None; sa: (sa0, sa1); window in tokens.
    /// -> [1, T, C]
    pub fn forward(
        &self,
        h: &Tensor,
        ve: Option<&Tensor>,
        sa: (Tensor, Tensor),
        window: i64,
        seq: &Sequence,
    ) -> Result<Tensor> {
        let (b, t, c) = h.size3()?;
        let (nh, hd) = (self.n_head, c / self.n_head);
        let w = self.qkvo_w.to_kind(h.kind());
        let qkv = h.linear(&w.narrow(0, 0, 3).reshape([3 * c, c]), None::<Tensor>); // [B, T, 3C]
        let qkv = qkv.view([b, t, 3, nh, hd]);
        let (mut q, mut k, mut v) = (qkv.select(2, 0), qkv.select(2, 1), qkv.select(2, 2)); // [B, T, H, D]
        if let Some(eps) = self.qk_norm {
            (q, k) = (rms_norm(&q, eps), rms_norm(&k, eps));
        }
        let (q, k) = (seq.rotary.apply(&q)?, seq.rotary.apply(&k)?);
        v = match ve {
            Some(ve) => &v * &sa.0 + ve.view([b, t, nh, hd]) * &sa.1,
            None => &v * &sa.0,
        };
        let pattern = Pattern {
            causal: true,
            window: Some(window),
            docs: Some(seq.docs.clone()),
            scale: self.scale,
        };
        let bhtd = |x: &Tensor| x.transpose(1, 2);
        let mut y = attend(&bhtd(&q), &bhtd(&k), &bhtd(&v), &pattern)?.transpose(1, 2); // [B, T, H, D]
        if let Some(g) = &self.gate {
            let n = g.size()[1];
            let gate = h.narrow(2, 0, n).linear(&g.to_kind(h.kind()), None::<Tensor>).sigmoid(); // [B, T, H]
            y = &y * gate.unsqueeze(3);
        }
        Ok(y.contiguous().view([b, t, c]).linear(&w.get(3), None::<Tensor>))
    }
}
