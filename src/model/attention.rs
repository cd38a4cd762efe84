//! Dense causal self-attention over each row (GPT-2): no document masking, scale 1/sqrt(head_dim).
use super::attend::{attend, Pattern};
use super::params::{Groups, ParamSet};
use tch::Tensor;

pub struct Attention {
    qkv_w: Tensor,
    qkv_b: Tensor,
    proj_w: Tensor,
    proj_b: Tensor,
    n_head: i64,
}

impl Attention {
    pub fn new(
        ps: &mut ParamSet,
        name: &str,
        c: i64,
        n_head: i64,
        (std, proj_std): (f64, f64),
        g: &Groups,
    ) -> Self {
        Attention {
            qkv_w: ps.normal(&format!("{name}.qkv.weight"), &[3 * c, c], std, g.hidden),
            qkv_b: ps.zeros(&format!("{name}.qkv.bias"), &[3 * c], g.vector),
            proj_w: ps.normal(&format!("{name}.proj.weight"), &[c, c], proj_std, g.hidden),
            proj_b: ps.zeros(&format!("{name}.proj.bias"), &[c], g.vector),
            n_head,
        }
    }

    /// x: [B, T, C] -> [B, T, C]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let (b, t, c) = x.size3().expect("attention input is [B, T, C]");
        let k = x.kind();
        let hd = c / self.n_head;
        // [B, T, 3C] -> [B, T, 3, H, D] -> [3, B, H, T, D]
        let qkv = x.linear(&self.qkv_w.to_kind(k), Some(&self.qkv_b.to_kind(k)));
        let qkv = qkv.view([b, t, 3, self.n_head, hd]).permute([2, 0, 3, 1, 4]);
        let (q, key, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
        let y = attend(&q, &key, &v, &Pattern::default()).expect("dense causal attention"); // [B, H, T, D]
        let y = y.transpose(1, 2).contiguous().view([b, t, c]);
        y.linear(&self.proj_w.to_kind(k), Some(&self.proj_b.to_kind(k)))
    }
}
