//! Dense causal self-attention over each row (GPT-2): no document masking, scale 1/sqrt(head_dim).
//! Its biases, init and output scale are `Dense`'s (Act 1 changes them); Act 1's a2 rotates q and
//! k (rotary.rs) in place of learned positions, its a6 keeps each query within its document
//! (eot_docs.rs) and a window.
use super::attend::{attend, Docs, Pattern};
use super::dense::Dense;
use super::params::{Groups, ParamSet};
use super::rotary::Rotary;
use tch::Tensor;

pub struct Attention {
    qkv_w: Tensor,
    qkv_b: Option<Tensor>,
    proj_w: Tensor,
    proj_b: Option<Tensor>,
    n_head: i64,
    /// Act 1: the output times 1/sqrt(2L).
    out_scale: Option<f64>,
    rotary: Option<Rotary>,
    /// a6: keys at most this many tokens before the query.
    window: Option<i64>,
}

impl Attention {
    pub fn new(
        ps: &mut ParamSet,
        name: &str,
        (c, n_head): (i64, i64),
        (d, rotary): (&Dense, Option<Rotary>),
        g: &Groups,
    ) -> Self {
        Attention {
            qkv_w: d.weight(ps, &format!("{name}.qkv"), [3 * c, c], false, g.hidden),
            qkv_b: d.bias(ps, &format!("{name}.qkv"), 3 * c, g.vector),
            proj_w: d.weight(ps, &format!("{name}.proj"), [c, c], true, g.hidden),
            proj_b: d.bias(ps, &format!("{name}.proj"), c, g.vector),
            n_head,
            out_scale: d.attn_scale,
            rotary,
            window: d.window,
        }
    }

    /// x: [B, T, C] -> [B, T, C]; `docs`: the flattened batch's documents (a6), else each row
    /// is one sequence.
    pub fn forward(&self, x: &Tensor, docs: Option<&Docs>) -> Tensor {
        let (b, t, c) = x.size3().expect("attention input is [B, T, C]");
        let k = x.kind();
        let hd = c / self.n_head;
        let bias = |b: &Option<Tensor>| b.as_ref().map(|b| b.to_kind(k));
        // [B, T, 3C] -> [B, T, 3, H, D] -> [3, B, H, T, D]
        let qkv = x.linear(&self.qkv_w.to_kind(k), bias(&self.qkv_b).as_ref());
        let qkv = qkv.view([b, t, 3, self.n_head, hd]);
        let (q, key, v) = match &self.rotary {
            None => {
                let qkv = qkv.permute([2, 0, 3, 1, 4]);
                (qkv.get(0), qkv.get(1), qkv.get(2))
            }
            // [B, T, H, D] rotated (in fp32), then [B, H, T, D].
            Some(rot) => {
                let rotated = |i| rot.apply(&qkv.select(2, i)).expect("rows fit the rotary table");
                (
                    rotated(0).transpose(1, 2),
                    rotated(1).transpose(1, 2),
                    qkv.select(2, 2).transpose(1, 2),
                )
            }
        };
        let pattern = Pattern { window: self.window, docs: docs.cloned(), ..Pattern::default() };
        let y = attend(&q, &key, &v, &pattern).expect("dense causal attention"); // [B, H, T, D]
        let y = y.transpose(1, 2).contiguous().view([b, t, c]);
        let y = y.linear(&self.proj_w.to_kind(k), bias(&self.proj_b).as_ref());
        match self.out_scale {
            Some(s) => y * s,
            None => y,
        }
    }
}
