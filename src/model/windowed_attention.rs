//! The attention block of the modern speedrun (as in upstream #29), over one packed sequence of
//! whole documents:
//! - one [4, C, C] weight for q, k, v and the output (upstream #20 merged QKV, #27 added O);
//! - QK-norm, then rotary (upstream #5, #6; rotary in rotary.rs);
//! - v mixed with a value embedding, scaled by the layer's lambdas (upstream #14, #15; where
//!   they act moved in #47 and #48: sa_lambdas.rs);
//! - causal attention inside each document, within a sliding window of W tokens before the
//!   query (W + 1 keys with itself), softmax scale from the recipe (upstream #12, #16, #20, #29);
//! - from upstream #55 the value embedding gated per head and token (value_gate.rs);
//! - from upstream #58 paired heads on some layers (paired_heads.rs);
//! - a sparse gate per head and token (upstream #28; attn_gate.rs).
use super::attend::{attend, Docs, Pattern};
use super::attn_gate::AttnGate;
use super::attn_scale;
use super::builder::Builder;
use super::key_offset;
use super::paired_heads;
use super::params::{Group, ParamSet};
use super::precision;
use super::qk_norm;
use super::qkv_init_mul;
use super::rotary::Rotary;
use super::sa_lambdas::LayerLambdas;
use super::uniform_attn_out::zero_attn_out;
use super::value_gate::ValueGate;
use super::yarn::Yarn;
use anyhow::Result;
use tch::{Kind, Tensor};

pub struct WindowedAttention {
    qkvo_w: Tensor, // [4, C, C]: Wq, Wk, Wv, Wo (each [out, in]); tall: [4C, C]
    gate: Option<AttnGate>,
    n_head: i64,
    /// QK-norm's eps, or None without it.
    qk_norm: Option<f64>,
    rope: Rope,
    /// (sa0, sa1) of this layer in the scalar bank.
    lambdas: LayerLambdas,
    /// The long window of the step, or the short one.
    long: bool,
    /// Paired heads over a doubled sequence (upstream #58; short-window layers).
    paired: bool,
    /// Partial key offset (key_offset.rs), on long-window layers only.
    key_offset: bool,
    /// The offset shifts the second half of the dims (upstream #62), not two quarters.
    key_offset_half: bool,
    /// The value embedding's gate (upstream #55), on the layers that have one.
    ve_gate: Option<ValueGate>,
}

/// How a layer's windowed attention is built (resolved from the recipe once).
pub struct WindowedConfig {
    pub n_embd: i64,
    pub n_head: i64,
    /// Uniform init bound of Wq, Wk, Wv; Wo starts at zero when `zero_proj`.
    pub bound: f64,
    pub zero_proj: bool,
    /// Stored as [4C, C] (upstream #48) instead of [4, C, C]: the same rows.
    pub tall: bool,
    /// The long-window layers shift their keys' unrotated dims by one position (upstream #49).
    pub key_offset: bool,
    /// Those dims are the second half (upstream #62), not the second quarter of each half.
    pub key_offset_half: bool,
    /// Channels the sparse gate reads (upstream #28) and the gate's group, or None.
    pub gate: Option<(i64, Group)>,
    pub qk_norm: Option<f64>,
}

/// Rotary tables and softmax scale: fixed (upstream #29), or following the long window (YaRN,
/// upstream #31). Every layer holds the same.
#[derive(Clone)]
pub enum Rope {
    Fixed(Rotary, Option<f64>),
    Yarn(Yarn),
}

impl Rope {
    /// The recipe's rotary: fixed tables (and scale) for the longest sequence a step or an
    /// evaluation sees, or YaRN from the first window on.
    pub fn build(b: &Builder) -> Option<Rope> {
        let r = b.r;
        let rot = r.rotary.as_ref()?;
        let longest = (r.batch_rows * r.seq_len).max(r.val_seq_len.unwrap_or(0)) as i64;
        // Paired heads (upstream #58) place each token at two positions.
        let paired = r.attn_layers.as_ref().is_some_and(|a| a.contains('P'));
        let longest = if paired { 2 * longest } else { longest };
        let head_dim = b.c / r.n_head as i64;
        let kind = if precision::of(r).rotary { b.compute } else { Kind::Float };
        Some(match (&r.yarn, &r.windows) {
            (Some(y), Some(w)) => {
                let first = (w.schedule[0] * w.block) as i64;
                let start = (first, attn_scale::softmax_scale(r, head_dim));
                let freqs = Rotary::freqs(rot, head_dim);
                let yarn = Yarn::new(y, freqs, start, (longest, b.dev, kind));
                Rope::Yarn(yarn.with_interleaved(rot.interleaved))
            }
            _ => {
                Rope::Fixed(Rotary::new(rot, head_dim, longest, b.dev).to_kind(kind), r.attn_scale)
            }
        })
    }

    /// The fixed tables, for the dense attention (Act 1's a2); None with YaRN.
    pub fn fixed(&self) -> Option<Rotary> {
        match self {
            Rope::Fixed(r, _) => Some(r.clone()),
            Rope::Yarn(_) => None,
        }
    }

    /// The tables and scale for a step whose long window YaRN is tuned for is `window` tokens.
    fn at(&self, window: i64) -> (Rotary, Option<f64>) {
        match self {
            Rope::Fixed(r, scale) => (r.clone(), *scale),
            Rope::Yarn(y) => {
                let (r, scale) = y.at(window);
                (r, Some(scale))
            }
        }
    }
}

impl WindowedAttention {
    /// Layer `i`'s attention named `name`, of kind `w` ('L' long window, 'S' short, 'P' short
    /// with paired heads), with its value embedding's gate when the recipe has one.
    pub fn build(
        b: &mut Builder,
        name: &str,
        (i, w): (usize, char),
        (rope, lambdas): (Rope, LayerLambdas),
    ) -> WindowedAttention {
        let r = b.r;
        let cfg = WindowedConfig {
            n_embd: b.c,
            n_head: r.n_head as i64,
            bound: qkv_init_mul::bound(r, b.bound),
            zero_proj: zero_attn_out(r),
            tall: r.tall_matrices,
            key_offset: r.key_offset.is_some(),
            key_offset_half: r.key_offset.as_ref().is_some_and(|k| k.half),
            gate: r.attn_gate.as_ref().map(|s| (s.channels as i64, b.g.gate)),
            qk_norm: r.qk_norm.then_some(r.ln_eps),
        };
        let a = WindowedAttention::new(&mut b.ps, name, &cfg, (rope, lambdas, w == 'L'), b.g.qkvo);
        let a = if w == 'P' { a.paired() } else { a };
        match ValueGate::build(b, name, i, w) {
            Some(gate) => a.with_value_gate(gate),
            None => a,
        }
    }

    pub fn new(
        ps: &mut ParamSet,
        name: &str,
        cfg: &WindowedConfig,
        (rope, lambdas, long): (Rope, LayerLambdas, bool),
        g: Group,
    ) -> WindowedAttention {
        let c = cfg.n_embd;
        let shape: &[i64] = if cfg.tall { &[4 * c, c] } else { &[4, c, c] };
        let qkvo_w = ps.uniform(&format!("{name}.qkvo_w"), shape, cfg.bound, g);
        if cfg.zero_proj {
            let _ = tch::no_grad(|| qkvo_w.view([4 * c, c]).narrow(0, 3 * c, c).zero_());
        }
        let gate =
            cfg.gate.map(|(n, g)| AttnGate::new(ps, &format!("{name}.gate"), (cfg.n_head, n), g));
        WindowedAttention {
            qkvo_w,
            gate,
            n_head: cfg.n_head,
            qk_norm: cfg.qk_norm,
            rope,
            lambdas,
            long,
            paired: false,
            key_offset: cfg.key_offset && long,
            key_offset_half: cfg.key_offset_half,
            ve_gate: None,
        }
    }

    /// The layer attends with paired heads (upstream #58).
    pub fn paired(self) -> WindowedAttention {
        WindowedAttention { paired: true, key_offset: false, ..self }
    }

    /// The layer's value embedding passes `gate` first (upstream #55).
    pub fn with_value_gate(self, gate: ValueGate) -> WindowedAttention {
        WindowedAttention { ve_gate: Some(gate), ..self }
    }

    /// h: [1, T, C] normed block input; ve: [1, T, C] or None; bank: the scalar bank;
    /// windows: the step's (long, short) in tokens and YaRN's window. -> [1, T, C]
    pub fn forward(
        &self,
        h: &Tensor,
        ve: Option<&Tensor>,
        bank: &Tensor,
        (docs, (windows, yarn_window)): (&Docs, ((i64, i64), i64)),
    ) -> Result<Tensor> {
        let (b, t, c) = h.size3()?;
        let (nh, hd) = (self.n_head, c / self.n_head);
        let w = self.qkvo_w.to_kind(h.kind()).view([4 * c, c]); // either layout's rows
        let w_qkv = self.lambdas.qkv_weight(&w.narrow(0, 0, 3 * c), bank);
        let qkv = h.linear(&w_qkv, None::<Tensor>); // [B, T, 3C]
        let qkv = qkv.view([b, t, 3, nh, hd]);
        let (mut q, mut k, mut v) = (qkv.select(2, 0), qkv.select(2, 1), qkv.select(2, 2)); // [B, T, H, D]
        if let Some(eps) = self.qk_norm {
            (q, k) = qk_norm::apply(&q, &k, eps);
        }
        let ve = ve.map(|ve| ve.view([b, t, nh, hd])); // [B, T, H, D]
        let ve = match (&self.ve_gate, ve) {
            (Some(g), Some(ve)) => Some(g.apply(h, &ve)),
            (_, ve) => ve,
        };
        v = self.lambdas.values(&v, ve.as_ref(), bank);
        let (rotary, scale) = self.rope.at(yarn_window);
        let window = if self.long { windows.0 } else { windows.1 };
        let mut y = match self.paired {
            true => paired_heads::attention((&q, &k, &v), &rotary, docs, (window, scale))?,
            false => {
                let (q, mut k) = (rotary.apply(&q)?, rotary.apply(&k)?);
                if self.key_offset {
                    k = match self.key_offset_half {
                        true => key_offset::shift_second_half(&k),
                        false => key_offset::shift_stationary(&k),
                    };
                }
                let pattern =
                    Pattern { causal: true, window: Some(window), docs: Some(docs.clone()), scale };
                let bhtd = |x: &Tensor| x.transpose(1, 2);
                attend(&bhtd(&q), &bhtd(&k), &bhtd(&v), &pattern)?.transpose(1, 2)
                // [B, T, H, D]
            }
        };
        if let Some(g) = &self.gate {
            y = g.apply(h, &y);
        }
        let w_o = self.lambdas.out_weight(&w.narrow(0, 3 * c, c), bank);
        Ok(y.contiguous().view([b, t, c]).linear(&w_o, None::<Tensor>))
    }
}
